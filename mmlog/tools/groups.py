"""List consumer groups, and describe one: its members, their partitions, committed offsets and lag.

    mmlog groups list
    mmlog groups describe GROUP

`list` prints one line per group: its name, state and member count. `describe`
prints the group's state and assignor, one line per member (client id, host,
partitions), then one row per partition the group has committed or has assigned:
the committed offset, the partition's latest offset, the lag between them
(latest - committed; "-" where nothing is committed) and the member holding it.
"""

from __future__ import annotations

import argparse

from mmlog.tools import BOOTSTRAP, TIMEOUT, CommandError, add_subcommands


def add_arguments(parser: argparse.ArgumentParser) -> None:
    command = add_subcommands(parser, [BOOTSTRAP, TIMEOUT], dest="action", metavar="list|describe", required=True)
    command("list", help="list the groups with their state and member count")
    describe = command("describe", help="members, partitions, committed offsets and lag of a group")
    describe.add_argument("group", metavar="GROUP")


def run(args: argparse.Namespace) -> int:
    from mmlog.client.admin import Admin

    with Admin(args.bootstrap, timeout=args.timeout) as admin:
        if args.action == "list":
            for group in admin.list_groups():
                d = admin.describe_group(group)
                print(f"{group}\t{d.state}\t{len(d.members)} member(s)")
        else:
            describe(admin, args.group)
    return 0


def describe(admin, group: str) -> None:
    d = admin.describe_group(group)
    offsets = admin.group_offsets(group, d)
    if d.state == "Dead" and not offsets:
        raise CommandError(f"group {group!r} does not exist")
    protocol = "/".join(p for p in (d.protocol_type, d.protocol) if p) or "-"
    print(f"Group: {d.group_id}\tState: {d.state}\tProtocol: {protocol}\tMembers: {len(d.members)}")
    for m in d.members:
        static = f"\tinstance {m.group_instance_id}" if m.group_instance_id else ""
        parts = ",".join(f"{tp.topic}-{tp.partition}" for tp in m.assignment) or "-"
        print(f"  member {m.member_id}\tclient {m.client_id}\thost {m.client_host}{static}\tpartitions {parts}")
    rows = [("TOPIC", "PARTITION", "COMMITTED", "LATEST", "LAG", "MEMBER")]
    for tp, o in offsets.items():
        rows.append((tp.topic, str(tp.partition), _dash(o.committed), _dash(o.latest), _dash(o.lag),
                     o.member_id or "-"))
    if len(rows) == 1:
        print("no committed offsets and no assigned partitions")
        return
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    total = sum(o.lag for o in offsets.values() if o.lag is not None)
    print(f"Total lag: {total}")


def _dash(value) -> str:
    return "-" if value is None else str(value)
