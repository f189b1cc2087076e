"""The schema registry's errors, with Confluent Schema Registry's HTTP statuses, error codes and messages."""

from __future__ import annotations

from mmlog.web.responses import HttpError

LEVEL_NAMES = "NONE, BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE"


def subject_not_found(subject: str) -> HttpError:
    return HttpError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(subject: str, version) -> HttpError:
    return HttpError(404, 40402, f"Version {version} not found.")


def schema_not_found(what="") -> HttpError:
    return HttpError(404, 40403, f"Schema {what} not found".replace("  ", " "))


def subject_soft_deleted(subject: str) -> HttpError:
    return HttpError(404, 40404, f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently")


def subject_not_soft_deleted(subject: str) -> HttpError:
    return HttpError(404, 40405, f"Subject '{subject}' was not deleted first before being permanently deleted")


def version_soft_deleted(subject: str, version: int) -> HttpError:
    return HttpError(404, 40406, f"Subject '{subject}' Version {version} was soft deleted.Set permanent=true to "
                     "delete permanently")


def version_not_soft_deleted(subject: str, version: int) -> HttpError:
    return HttpError(404, 40407, f"Subject '{subject}' Version {version} was not deleted first before being "
                     "permanently deleted")


def config_not_set(subject: str) -> HttpError:
    return HttpError(404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured")


def mode_not_set(subject: str) -> HttpError:
    return HttpError(404, 40409, f"Subject '{subject}' does not have subject-level mode configured")


def incompatible(subject: str, messages: list[str]) -> HttpError:
    return HttpError(409, 409, f'Schema being registered is incompatible with an earlier schema for subject '
                     f'"{subject}", details: [{", ".join(messages)}]')


def invalid_schema(reason: str) -> HttpError:
    return HttpError(422, 42201, f"Invalid schema: {reason}")


def invalid_version(version) -> HttpError:
    return HttpError(422, 42202, f"The specified version '{version}' is not a valid version id. Allowed values are "
                     "between [1, 2^31-1] and the string \"latest\"")


def invalid_level(level) -> HttpError:
    return HttpError(422, 42203, f"Invalid compatibility level {level!r}. Valid values are {LEVEL_NAMES}")


def invalid_mode(mode) -> HttpError:
    return HttpError(422, 42204, f"Invalid mode {mode!r}. Valid values are READWRITE, READONLY, IMPORT")


def not_permitted(why: str) -> HttpError:
    return HttpError(422, 42205, why)


def reference_exists(subject: str, version: int) -> HttpError:
    return HttpError(422, 42206, f"One or more references exist to the schema {{subject={subject},version={version}}}")


def id_in_use(schema_id: int) -> HttpError:
    return HttpError(422, 42207, f"Schema id {schema_id} already holds another schema")


def invalid_subject(subject: str) -> HttpError:
    return HttpError(422, 42208, f"Invalid subject {subject!r}")


def schema_too_large(why: str) -> HttpError:
    return HttpError(422, 42209, f"Schema too large for _schemas ({why})")


def store_error(why: str) -> HttpError:
    return HttpError(500, 50001, f"Error in the backend data store: {why}")


def timeout(why: str) -> HttpError:
    return HttpError(500, 50002, f"Operation timed out: {why}")


def forwarding(why: str) -> HttpError:
    return HttpError(500, 50003, f"Error while forwarding the request to the primary: {why}")
