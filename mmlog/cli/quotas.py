"""Describe and alter client quotas, and dynamic broker configs (as kafka-configs.sh does).

    mmlog quotas describe [--client-id ID] [--user USER]
    mmlog quotas alter (--client-id ID | --client-id-default) [--user USER | --user-default]
                       [--set KEY=VALUE ...] [--remove KEY ...] [--validate-only]
    mmlog quotas broker (--broker ID | --cluster-default) [--set KEY=VALUE ...] [--remove KEY ...]

Quota keys are Kafka's: producer_byte_rate, consumer_byte_rate (bytes a second) and
request_percentage (percent of one processor's time). Every broker enforces them within
half a second. `broker` sets or removes dynamic broker configs (log.retention.ms,
log.segment.bytes, ...: the table in docs/admin.md) of one broker or of the whole
cluster; a setting read only at start is refused.
"""

from __future__ import annotations

import argparse

from mmlog.cli import BOOTSTRAP, TIMEOUT, CommandError, add_subcommands, key_values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    command = add_subcommands(parser, [BOOTSTRAP, TIMEOUT], dest="action", metavar="describe|alter|broker",
                              required=True)
    describe = command("describe", help="list the quotas set (of one client id or user)")
    describe.add_argument("--client-id")
    describe.add_argument("--user")
    alter = command("alter", help="set or remove quotas of a client id, a user, or both")
    alter.add_argument("--client-id")
    alter.add_argument("--client-id-default", action="store_true", help="every client id without its own quota")
    alter.add_argument("--user")
    alter.add_argument("--user-default", action="store_true", help="every user without its own quota")
    alter.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    alter.add_argument("--remove", action="append", default=[], metavar="KEY")
    alter.add_argument("--validate-only", action="store_true")
    broker = command("broker", help="set or remove dynamic broker configs")
    broker.add_argument("--broker", type=int, help="this broker's id")
    broker.add_argument("--cluster-default", action="store_true", help="every broker of the cluster")
    broker.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    broker.add_argument("--remove", action="append", default=[], metavar="KEY")


def run(args: argparse.Namespace) -> int:
    from mmlog.client.admin import Admin

    with Admin(args.bootstrap, timeout=args.timeout) as admin:
        if args.action == "describe":
            filters = [(kind, 0, name) for kind, name in (("client-id", args.client_id), ("user", args.user)) if name]
            for entity, values in admin.describe_client_quotas(filters).items():
                name = ",".join(f"{k}={'<default>' if v is None else v}" for k, v in entity)
                print(f"{name}\t" + " ".join(f"{k}={_number(v)}" for k, v in sorted(values.items())))
        elif args.action == "alter":
            entity = _entity(args)
            ops = {**{k: _float(k, v) for k, v in key_values(args.set, "--set").items()},
                   **{k: None for k in args.remove}}
            if not ops:
                raise CommandError("nothing to alter: give --set KEY=VALUE or --remove KEY", 2)
            admin.alter_client_quotas({entity: ops}, validate_only=args.validate_only)
            print(("validated" if args.validate_only else "altered") + " quotas of " +
                  ",".join(f"{k}={'<default>' if v is None else v}" for k, v in entity))
        else:
            if (args.broker is None) == (not args.cluster_default):
                raise CommandError("give --broker ID or --cluster-default", 2)
            admin.alter_broker_config(args.broker, set=key_values(args.set, "--set"), delete=args.remove)
            level = "the cluster default" if args.broker is None else f"broker {args.broker}"
            print(f"altered dynamic configs of {level}")
    return 0


def _entity(args) -> tuple:
    out = []
    if args.user is not None or args.user_default:
        out.append(("user", None if args.user_default else args.user))
    if args.client_id is not None or args.client_id_default:
        out.append(("client-id", None if args.client_id_default else args.client_id))
    if not out:
        raise CommandError("give --client-id, --client-id-default, --user or --user-default", 2)
    return tuple(out)


def _float(key: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise CommandError(f"--set {key}: {text!r} is not a number", 2) from None


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
