"""Register, list, read, check and delete schemas, and set compatibility, through a schema registry.

    mmlog schemas register SUBJECT FILE [--type AVRO|JSON|PROTOBUF] [--reference NAME=SUBJECT:VERSION ...]
    mmlog schemas list [SUBJECT] [--deleted]
    mmlog schemas get (SUBJECT [VERSION] | --id ID)
    mmlog schemas check SUBJECT FILE [--type ...] [--version V]
    mmlog schemas delete SUBJECT [VERSION] [--permanent]
    mmlog schemas config [SUBJECT] [--set LEVEL]

FILE is a path, or `-` for stdin. The registry is `--registry URL` (default $MMLOG_SCHEMA_REGISTRY or
http://127.0.0.1:8081), with `--user`/`--password` for basic authentication and `--cafile` for HTTPS.
`check` exits 1 and prints the reasons when the schema may not follow the version.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from mmlog.cli import CommandError, Option, add_subcommands

REGISTRY = Option("--registry", metavar="URL",
                  default=lambda: os.environ.get("MMLOG_SCHEMA_REGISTRY", "http://127.0.0.1:8081"),
                  help="the schema registry (default {default}, or $MMLOG_SCHEMA_REGISTRY)")
USER = Option("--user", help="basic authentication: a user of the brokers")
PASSWORD = Option("--password", help="basic authentication: the user's password (or $MMLOG_SCHEMA_PASSWORD)")
CAFILE = Option("--cafile", metavar="PEM", help="the CA certificates that sign an https registry's")
TYPES = ("AVRO", "JSON", "PROTOBUF")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    command = add_subcommands(parser, [REGISTRY, USER, PASSWORD, CAFILE], dest="action",
                              metavar="register|list|get|check|delete|config", required=True)
    register = command("register", help="register a schema under a subject; print its id and version")
    check = command("check", help="tell whether a schema may follow a subject's version (default latest)")
    for sub in (register, check):
        sub.add_argument("subject")
        sub.add_argument("file", help="the schema's file, or - for stdin")
        sub.add_argument("--type", default=None, choices=TYPES, help="default: from the file's suffix, else AVRO")
        sub.add_argument("--reference", action="append", default=[], metavar="NAME=SUBJECT:VERSION")
    check.add_argument("--version", default="latest")
    listing = command("list", help="list subjects, or one subject's versions")
    listing.add_argument("subject", nargs="?")
    listing.add_argument("--deleted", action="store_true", help="soft-deleted ones too")
    get = command("get", help="print a subject's version (default latest), or the schema with an id")
    get.add_argument("subject", nargs="?")
    get.add_argument("version", nargs="?", default="latest")
    get.add_argument("--id", type=int)
    delete = command("delete", help="delete a subject or one version (soft, then --permanent)")
    delete.add_argument("subject")
    delete.add_argument("version", nargs="?")
    delete.add_argument("--permanent", action="store_true")
    config = command("config", help="print or set the compatibility level (global, or a subject's)")
    config.add_argument("subject", nargs="?")
    config.add_argument("--set", metavar="LEVEL", type=str.upper)


def run(args: argparse.Namespace) -> int:
    from mmlog.client.serde.registry import RegistryError, SchemaRegistry

    password = args.password if args.password is not None else os.environ.get("MMLOG_SCHEMA_PASSWORD")
    try:
        with SchemaRegistry(args.registry, username=args.user, password=password, ssl_cafile=args.cafile) as reg:
            return ACTIONS[args.action](reg, args)
    except RegistryError as exc:
        raise CommandError(f"registry error {exc.error_code}: {exc.message}") from exc
    except ConnectionError as exc:
        raise CommandError(str(exc)) from exc
    except ValueError as exc:
        raise CommandError(str(exc), 2) from exc


def _schema(args):
    from mmlog.client.serde.registry import Reference, Schema

    try:
        text = sys.stdin.read() if args.file == "-" else open(args.file, encoding="utf-8").read()
    except OSError as exc:
        raise CommandError(f"{args.file}: {exc.strerror or exc}") from exc
    kind = args.type or {".json": "JSON", ".proto": "PROTOBUF"}.get(os.path.splitext(args.file)[1], "AVRO")
    if kind == "JSON" and args.type is None and _looks_avro(text):
        kind = "AVRO"  # an .avsc saved as .json
    refs = []
    for item in args.reference:
        name, _, where = item.partition("=")
        subject, _, version = where.rpartition(":")
        if not name or not subject or not version.isdigit():
            raise CommandError(f"--reference {item!r}: want NAME=SUBJECT:VERSION", 2)
        refs.append(Reference(name, subject, int(version)))
    return Schema(text, kind, tuple(refs))


def _looks_avro(text: str) -> bool:
    try:
        doc = json.loads(text)
    except ValueError:
        return False
    return isinstance(doc, dict) and doc.get("type") in ("record", "enum", "fixed") and "$schema" not in doc


def _register(reg, args) -> int:
    schema = _schema(args)
    schema_id = reg.register(args.subject, schema)
    found = reg.lookup(args.subject, schema)
    print(f"id {schema_id}\tversion {found.version}\tsubject {args.subject}")
    return 0


def _check(reg, args) -> int:
    problems = reg.compatibility_problems(args.subject, _schema(args), args.version)
    if not problems:
        print(f"compatible with {args.subject} version {args.version}")
        return 0
    print(f"incompatible with {args.subject} version {args.version}:")
    for problem in problems:
        print(f"  {problem}")
    return 1


def _list(reg, args) -> int:
    items = reg.versions(args.subject, deleted=args.deleted) if args.subject else reg.subjects(deleted=args.deleted)
    for item in items:
        print(item)
    return 0


def _get(reg, args) -> int:
    if args.id is not None:
        schema = reg.schema(args.id)
        print(f"id {args.id}\ttype {schema.schema_type}")
    elif args.subject:
        found = reg.version(args.subject, args.version)
        schema = found.schema
        print(f"id {found.id}\tversion {found.version}\tsubject {found.subject}\ttype {schema.schema_type}")
    else:
        raise CommandError("give a SUBJECT [VERSION] or --id ID", 2)
    for ref in schema.references:
        print(f"reference {ref.name}={ref.subject}:{ref.version}")
    print(_pretty(schema.text))
    return 0


def _pretty(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2)
    except ValueError:
        return text


def _delete(reg, args) -> int:
    if args.version is None:
        versions = reg.delete_subject(args.subject, permanent=args.permanent)
        print(f"deleted {args.subject} versions {', '.join(map(str, versions))}" +
              (" permanently" if args.permanent else ""))
    else:
        version = reg.delete_version(args.subject, args.version, permanent=args.permanent)
        print(f"deleted {args.subject} version {version}" + (" permanently" if args.permanent else ""))
    return 0


def _config(reg, args) -> int:
    if args.set:
        level = reg.set_compatibility(args.set, args.subject)
        print(f"{args.subject or 'global'} compatibility {level}")
    else:
        print(f"{args.subject or 'global'} compatibility {reg.compatibility(args.subject)}")
    return 0


ACTIONS = {"register": _register, "check": _check, "list": _list, "get": _get, "delete": _delete,
           "config": _config}
