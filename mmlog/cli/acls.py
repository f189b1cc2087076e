"""Add, list and remove ACLs through a broker (kafka-acls.sh's options; CreateAcls, DescribeAcls, DeleteAcls).

    mmlog acls add --allow-principal User:alice --operation Read --operation Describe --topic orders
    mmlog acls add --deny-principal User:bob --operation Write --topic tmp. --resource-pattern-type prefixed
    mmlog acls list [--topic orders] [--principal User:alice]
    mmlog acls remove --allow-principal User:alice --operation Read --topic orders

A resource is `--topic NAME`, `--group NAME`, `--transactional-id NAME` or `--cluster`
(each may repeat; `*` names every one). `add` makes one ACL per principal, host,
operation and resource (operation All when none is given; hosts `*` unless
--allow-host/--deny-host say). `list` and `remove` take the same options as a filter:
what is not given matches anything, and --resource-pattern-type also takes `match`
(every pattern that applies to the named resource) and `any`. The broker must run an
authoriser (`authorizer.class.name`), and the caller needs ALTER on the cluster to
change ACLs, DESCRIBE to list them (a super user has both).
"""

from __future__ import annotations

import argparse

from mmlog.cli import BOOTSTRAP, COMMAND_CONFIG, TIMEOUT, CommandError, add_subcommands, client_security

OPERATIONS = ("All", "Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction", "DescribeConfigs",
              "AlterConfigs", "IdempotentWrite")
PATTERNS = ("literal", "prefixed", "match", "any")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    command = add_subcommands(parser, [BOOTSTRAP, TIMEOUT, COMMAND_CONFIG], dest="action",
                              metavar="add|list|remove", required=True)
    for sub in (command("add", help="create ACLs"), command("list", help="show the ACLs matching a filter"),
                command("remove", help="delete the ACLs matching a filter")):
        sub.add_argument("--topic", action="append", default=[], metavar="NAME")
        sub.add_argument("--group", action="append", default=[], metavar="NAME")
        sub.add_argument("--transactional-id", action="append", default=[], metavar="NAME")
        sub.add_argument("--cluster", action="store_true", help="the cluster resource (kafka-cluster)")
        sub.add_argument("--resource-pattern-type", type=str.lower, metavar="TYPE",
                         choices=PATTERNS if not sub.prog.endswith("add") else PATTERNS[:2],
                         default="literal" if sub.prog.endswith("add") else "any",
                         help="literal or prefixed" + ("" if sub.prog.endswith("add") else " (or match, any)"))
        if sub.prog.endswith("list"):
            sub.add_argument("--principal", action="append", default=[], metavar="TYPE:NAME")
            continue
        sub.add_argument("--allow-principal", action="append", default=[], metavar="TYPE:NAME")
        sub.add_argument("--deny-principal", action="append", default=[], metavar="TYPE:NAME")
        sub.add_argument("--allow-host", action="append", default=[], metavar="HOST")
        sub.add_argument("--deny-host", action="append", default=[], metavar="HOST")
        sub.add_argument("--operation", action="append", default=[], type=_operation, metavar="OP",
                         help="|".join(OPERATIONS) + " (repeatable)")


def run(args: argparse.Namespace) -> int:
    from mmlog.client import Admin
    from mmlog.security import acls

    resources = _resources(args, acls)
    with Admin(args.bootstrap, timeout=args.timeout, **client_security(args)) as admin:
        if args.action == "add":
            bindings = _bindings(args, resources, acls)
            try:
                bindings = [b.check() for b in bindings]
            except acls.InvalidAcl as exc:
                raise CommandError(str(exc), 2) from exc
            admin.create_acls(bindings)
            for b in bindings:
                print(f"added {_show(b, acls)}")
        elif args.action == "list":
            principals = args.principal or [None]
            for flt in _filters(args, resources, acls, [(p, None, acls.ANY) for p in principals]):
                for b in sorted(admin.describe_acls(flt)):
                    print(_show(b, acls))
        else:
            entries = _entries(args, acls, default_operation=acls.ANY) or [(None, None, acls.ANY)]
            filters = _filters(args, resources, acls, entries)
            for removed in admin.delete_acls(filters):
                for b in removed:
                    print(f"removed {_show(b, acls)}")
    return 0


def _operation(text: str) -> str:
    for op in OPERATIONS:
        if op.lower() == text.replace("-", "").replace("_", "").lower():
            return op
    raise argparse.ArgumentTypeError(f"unknown operation {text!r} ({'|'.join(OPERATIONS)})")


def _resources(args, acls) -> list[tuple[int, str]]:
    found = ([(acls.TOPIC, n) for n in args.topic] + [(acls.GROUP, n) for n in args.group]
             + [(acls.TRANSACTIONAL_ID, n) for n in args.transactional_id])
    if args.cluster:
        found.append((acls.CLUSTER, acls.CLUSTER_NAME))
    if not found and args.action != "list":
        raise CommandError("name a resource: --topic, --group, --transactional-id or --cluster", 2)
    return found


def _entries(args, acls, default_operation: int) -> list[tuple[str, str | None, int]]:
    """(principal, host or None, permission) per principal option and host."""
    out = []
    for principals, hosts, permission in ((args.allow_principal, args.allow_host, acls.ALLOW),
                                          (args.deny_principal, args.deny_host, acls.DENY)):
        for principal in principals:
            for host in hosts or ([None] if args.action == "remove" else ["*"]):
                out.append((principal, host, permission))
    return out


def _operations(args, acls, default: int) -> list[int]:
    codes = {name: code for code, name in acls.OPERATION_NAMES.items()}
    return [codes[o] for o in args.operation] or [default]


def _bindings(args, resources, acls) -> list:
    entries = _entries(args, acls, acls.ALL)
    if not entries:
        raise CommandError("name a principal: --allow-principal or --deny-principal", 2)
    pattern = acls.PREFIXED if args.resource_pattern_type == "prefixed" else acls.LITERAL
    return [acls.Binding(kind, name, pattern, principal, host, op, permission)
            for kind, name in resources for principal, host, permission in entries
            for op in _operations(args, acls, acls.ALL)]


def _filters(args, resources, acls, entries) -> list:
    pattern = {"literal": acls.LITERAL, "prefixed": acls.PREFIXED, "match": acls.MATCH, "any": acls.ANY}[
        args.resource_pattern_type]
    operations = _operations(args, acls, acls.ANY) if hasattr(args, "operation") else [acls.ANY]
    return [acls.Filter(kind, name, pattern, principal, host, op, permission)
            for kind, name in (resources or [(acls.ANY, None)]) for principal, host, permission in entries
            for op in operations]


def _show(b, acls) -> str:
    d = b.to_json()
    return (f"{d['resourceType']}:{d['patternType']}:{d['name']}\t{d['principal']}\t{d['permissionType']}\t"
            f"{d['operation']}\tfrom host {d['host']}")
