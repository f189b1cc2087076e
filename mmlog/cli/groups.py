"""List consumer groups, describe one (members, partitions, committed offsets, lag), reset or delete them.

    mmlog groups list
    mmlog groups describe GROUP
    mmlog groups reset-offsets GROUP (--topic T[:P,P...] ... | --all-topics)
                               (--to-earliest | --to-latest | --to-offset N | --to-datetime DT | --shift-by N)
                               [--execute]
    mmlog groups delete-offsets GROUP --topic T[:P,P...] ...
    mmlog groups delete GROUP ...

`list` prints one line per group: its name, state and member count. `describe`
prints the group's state and assignor, one line per member (client id, host,
partitions), then one row per partition the group has committed or has assigned:
the committed offset, the partition's latest offset, the lag between them
(latest - committed; "-" where nothing is committed) and the member holding it.

`reset-offsets` works as kafka-consumer-groups.sh does: it shows the new offset
of each partition and changes nothing unless `--execute` is given (a dry run by
default); only a group without members can be reset. New offsets are kept within
each partition's [earliest, latest]; `--to-datetime` (ISO 8601, local time unless
it names a zone) takes the first offset at or after that time (the latest if
there is none); `--shift-by` moves the committed offset by N (negative: back).
`delete-offsets` deletes a group's committed offsets of some topics (refused for
topics its members consume now); `delete` deletes groups without members, with
their committed offsets.
"""

from __future__ import annotations

import argparse
from datetime import datetime

from mmlog.cli import BOOTSTRAP, COMMAND_CONFIG, TIMEOUT, CommandError, add_subcommands, client_security


def add_arguments(parser: argparse.ArgumentParser) -> None:
    command = add_subcommands(parser, [BOOTSTRAP, TIMEOUT, COMMAND_CONFIG], dest="action",
                              metavar="list|describe|reset-offsets|delete-offsets|delete", required=True)
    command("list", help="list the groups with their state and member count")
    describe = command("describe", help="members, partitions, committed offsets and lag of a group")
    describe.add_argument("group", metavar="GROUP")
    reset = command("reset-offsets", help="show, or with --execute commit, new offsets for a group")
    reset.add_argument("group", metavar="GROUP")
    which = reset.add_mutually_exclusive_group()
    which.add_argument("--topic", action="append", metavar="T[:P,P...]", help="a topic, or some of its partitions")
    which.add_argument("--all-topics", action="store_true", help="every topic the group has committed offsets for")
    to = reset.add_mutually_exclusive_group()
    to.add_argument("--to-earliest", action="store_true", help="each partition's earliest offset")
    to.add_argument("--to-latest", action="store_true", help="each partition's latest offset")
    to.add_argument("--to-offset", type=int, metavar="N", help="this offset")
    to.add_argument("--to-datetime", metavar="DT", help="the first offset at or after this time (ISO 8601)")
    to.add_argument("--shift-by", type=int, metavar="N", help="the committed offset plus N")
    reset.add_argument("--execute", action="store_true", help="commit the new offsets (default: a dry run)")
    reset.add_argument("--dry-run", action="store_true", help="only show the new offsets (the default)")
    forget = command("delete-offsets", help="delete a group's committed offsets of some topics")
    forget.add_argument("group", metavar="GROUP")
    forget.add_argument("--topic", action="append", required=True, metavar="T[:P,P...]")
    delete = command("delete", help="delete groups without members, with their committed offsets")
    delete.add_argument("groups", nargs="+", metavar="GROUP")


def run(args: argparse.Namespace) -> int:
    from mmlog.client.admin import Admin

    with Admin(args.bootstrap, timeout=args.timeout, **client_security(args)) as admin:
        if args.action == "list":
            for group in admin.list_groups():
                d = admin.describe_group(group)
                print(f"{group}\t{d.state}\t{len(d.members)} member(s)")
        elif args.action == "describe":
            describe(admin, args.group)
        elif args.action == "reset-offsets":
            reset_offsets(admin, args)
        elif args.action == "delete-offsets":
            admin.delete_group_offsets(args.group, _partitions(admin, args.topic))
            print(f"deleted the committed offsets of group {args.group} for {', '.join(args.topic)}")
        else:
            admin.delete_groups(args.groups)
            for group in args.groups:
                print(f"deleted group {group}")
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
    _table(rows)
    total = sum(o.lag for o in offsets.values() if o.lag is not None)
    print(f"Total lag: {total}")


def reset_offsets(admin, args) -> None:
    """Compute each partition's new offset, print the plan, and commit it with --execute."""
    if args.execute and args.dry_run:
        raise CommandError("--execute and --dry-run exclude each other", 2)
    if not (args.topic or args.all_topics):
        raise CommandError("reset-offsets wants --topic T or --all-topics", 2)
    if not (args.to_earliest or args.to_latest or args.to_datetime is not None
            or args.to_offset is not None or args.shift_by is not None):
        raise CommandError("reset-offsets wants one of --to-earliest, --to-latest, --to-offset, --to-datetime, "
                           "--shift-by", 2)
    d = admin.describe_group(args.group)
    if d.members:
        raise CommandError(f"Assignments can only be reset if the group '{args.group}' is inactive, but the "
                           f"current state is {d.state}.")
    committed = {tp: o.committed for tp, o in admin.group_offsets(args.group, d).items()}
    if args.all_topics:
        partitions = sorted(tp for tp, offset in committed.items() if offset is not None)
        if not partitions:
            raise CommandError(f"group {args.group!r} has no committed offsets: name topics with --topic")
    else:
        partitions = _partitions(admin, args.topic)
    plan = _new_offsets(admin, args, partitions, committed)
    _table([("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")]
           + [(args.group, tp.topic, str(tp.partition), str(offset)) for tp, offset in plan.items()])
    if args.execute:
        admin.alter_group_offsets(args.group, plan)
    else:
        print("dry run: nothing changed (add --execute to commit these offsets)")


def _new_offsets(admin, args, partitions, committed) -> dict:
    from mmlog.client.admin import EARLIEST, LATEST

    topics = sorted({tp.topic for tp in partitions})
    earliest = {t: admin.offsets(t, EARLIEST) for t in topics}
    latest = {t: admin.offsets(t, LATEST) for t in topics}
    at_time = {}
    if args.to_datetime is not None:
        when = _timestamp_ms(args.to_datetime)
        at_time = {t: admin.offsets(t, when) for t in topics}
    plan = {}
    for tp in partitions:
        low, high = earliest[tp.topic][tp.partition], latest[tp.topic][tp.partition]
        if args.to_earliest:
            offset = low
        elif args.to_latest:
            offset = high
        elif args.to_offset is not None:
            offset = args.to_offset
        elif args.to_datetime is not None:
            found = at_time[tp.topic][tp.partition]
            offset = high if found < 0 else found
        else:
            if committed.get(tp) is None:
                raise CommandError(f"--shift-by: group {args.group!r} has no committed offset for "
                                   f"{tp.topic}-{tp.partition}")
            offset = committed[tp] + args.shift_by
        plan[tp] = min(max(offset, low), high)  # Kafka's tool keeps them within the log
    return plan


def _partitions(admin, specs: list[str]) -> list:
    """`T` (every partition of T) or `T:P,P...`, as kafka-consumer-groups.sh takes them."""
    from mmlog.client.records import TopicPartition

    out = []
    for spec in specs:
        topic, colon, numbers = spec.partition(":")
        count = admin.list_topics().get(topic)
        if count is None:
            raise CommandError(f"topic {topic!r} does not exist")
        try:
            chosen = [int(p) for p in numbers.split(",")] if colon else list(range(count))
        except ValueError:
            raise CommandError(f"--topic wants T or T:P,P..., got {spec!r}", 2) from None
        bad = [p for p in chosen if not 0 <= p < count]
        if bad:
            raise CommandError(f"topic {topic!r} has {count} partition(s): no partition {bad[0]}")
        out += [TopicPartition(topic, p) for p in chosen]
    return sorted(set(out))


def _timestamp_ms(text: str) -> int:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise CommandError(f"--to-datetime wants an ISO 8601 time (2024-05-01T12:00:00.000), got {text!r}",
                           2) from None
    return int(when.timestamp() * 1000)  # a time without a zone is local time, as Kafka's tool reads it


def _table(rows) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())


def _dash(value) -> str:
    return "-" if value is None else str(value)
