"""The registry of APIs mmlog speaks: api_key -> request and response schemas.

The version ranges here are what the broker advertises in ApiVersions: every
range starts at the lowest version a client may
still send. The core APIs stop at what a Kafka 2.6-2.8 broker serves, flexible
(KIP-482) versions included, but below the versions by which kafka-python infers
Kafka 2.7 (Fetch v12), 2.8 (Produce v9) or 3.0 (ListOffsets v7): a kafka-python
pinned to a release below the inferred one sends that release's versions
(docs/protocol-versions.md). Adding an API is adding a module and a line below.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from ..errors import UnsupportedVersionError
from ..codegen import CODE
from ..schema import Message
from . import (api_versions, create_topics, delete_topics, describe_configs, describe_groups,
               fetch, find_coordinator, heartbeat, init_producer_id, join_group, leave_group,
               list_groups, list_offsets, metadata, offset_commit, offset_fetch,
               offset_for_leader_epoch, produce, sync_group)
from . import (add_offsets_to_txn, add_partitions_to_txn, describe_transactions, end_txn,  # transactions
               list_transactions, txn_offset_commit, write_txn_markers)
from . import (alter_configs, create_partitions, delete_groups, delete_records, describe_cluster,  # admin
               describe_log_dirs, incremental_alter_configs, offset_delete)
from . import (alter_user_scram_credentials, describe_user_scram_credentials, sasl_authenticate,  # security
               sasl_handshake)
from . import alter_client_quotas, describe_client_quotas  # quotas
from . import alter_partition_reassignments, elect_leaders, list_partition_reassignments  # replicas
from . import create_acls, delete_acls, describe_acls  # ACLs


@dataclass(frozen=True)
class Api:
    """One API: its key, name and the request and response schemas."""

    key: int
    name: str
    request: Message
    response: Message

    @property
    def min_version(self) -> int:
        return self.request.min_version

    @property
    def max_version(self) -> int:
        return self.request.max_version

    def supports(self, version: int) -> bool:
        return self.request.supports(version)

    def is_flexible(self, version: int) -> bool:
        """Kafka's flexibleVersions, also for versions beyond our maximum."""
        return self.request.is_flexible(version)


def _api(module: ModuleType) -> Api:
    name = module.REQUEST.name.removesuffix("Request")
    return Api(module.API_KEY, name, module.REQUEST, module.RESPONSE)


APIS: dict[int, Api] = {api.key: api for api in map(_api, [
    produce, fetch, list_offsets, metadata, offset_commit, offset_fetch, find_coordinator,
    join_group, heartbeat, leave_group, sync_group, describe_groups, list_groups,
    api_versions, create_topics, delete_topics, init_producer_id, offset_for_leader_epoch,
    describe_configs, write_txn_markers, add_partitions_to_txn, add_offsets_to_txn, end_txn,
    txn_offset_commit, describe_transactions, list_transactions,
    create_partitions, delete_records, delete_groups, offset_delete, incremental_alter_configs, alter_configs,
    describe_cluster, describe_log_dirs,
    sasl_handshake, sasl_authenticate, describe_user_scram_credentials, alter_user_scram_credentials,
    describe_client_quotas, alter_client_quotas,
    elect_leaders, alter_partition_reassignments, list_partition_reassignments,
    describe_acls, create_acls, delete_acls,
])}


def get_api(api_key: int, api_version: int) -> Api:
    """Return the Api for a request we can decode, else raise UnsupportedVersionError."""
    api = APIS.get(api_key)
    if api is None or not api.supports(api_version):
        raise UnsupportedVersionError(api_key, api_version)
    return api


def supported_versions() -> list[tuple[int, int, int]]:
    """(api_key, min_version, max_version) of every API, by key: the ApiVersions answer."""
    return [(key, api.min_version, api.max_version) for key, api in sorted(APIS.items())]


def precompile() -> None:
    """Compile every codec now (call before forking, so processors inherit them), and keep their code on disk
    for the next process if any of it was not there (`codegen.CODE`, code_cache.py)."""
    for api in APIS.values():
        api.request.precompile()
        api.response.precompile()
    CODE.save()


__all__ = ["APIS", "Api", "get_api", "precompile", "supported_versions"]
