"""Create, list, describe and delete topics.

    mmlog topics create NAME --partitions N [--replication-factor R] [--config KEY=VALUE ...]
    mmlog topics list
    mmlog topics describe NAME [--data-dir DIR]
    mmlog topics alter NAME [--partitions N] [--config KEY=VALUE ...] [--delete-config KEY ...]
    mmlog topics delete-records NAME --before OFFSET [--partition P ...]
    mmlog topics delete NAME

Topic configs use Kafka's names (retention.ms, segment.bytes, cleanup.policy, ...).
`alter --partitions` grows a topic (as kafka-topics.sh --alter does); a count can only grow,
and keyed records written afterwards map to partitions by the new count. `alter --config`
sets topic config overrides and `--delete-config` removes them (as kafka-configs.sh
--alter --add-config / --delete-config); running partitions take them without a restart.
`delete-records` moves the log start of the partitions (all by default) to OFFSET
(-1: the high watermark, i.e. everything written so far), as kafka-delete-records.sh.
`describe --data-dir` (the broker's first log dir, on the broker's machine) adds the
log cleaner's figures of a compacted topic: dirty ratio, first dirty offset and the
last cleaning (from the cleaner's cleaner-status.json).
"""

from __future__ import annotations

import argparse

from mmlog.cli import (BOOTSTRAP, COMMAND_CONFIG, TIMEOUT, CommandError, add_subcommands, client_security,
                         key_values)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    command = add_subcommands(parser, [BOOTSTRAP, TIMEOUT, COMMAND_CONFIG], dest="action", metavar="create|list|describe|alter|delete-records|delete",
                              required=True)
    create = command("create", help="create a topic")
    create.add_argument("name")
    create.add_argument("--partitions", type=int, default=1)
    create.add_argument("--replication-factor", type=int, default=-1,
                        help="replicas per partition (default: the broker's default.replication.factor)")
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    command("list", help="list topics and their partition counts")
    describe = command("describe", help="partitions, offsets and config of a topic")
    describe.add_argument("name")
    describe.add_argument("--data-dir", help="the broker's first log dir: show the log cleaner's figures too")
    alter = command("alter", help="grow a topic's partition count, set or delete its config overrides")
    alter.add_argument("name")
    alter.add_argument("--partitions", type=int, help="the new partition count (larger)")
    alter.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="set an override")
    alter.add_argument("--delete-config", action="append", default=[], metavar="KEY",
                       help="remove an override (back to the broker's default)")
    trim = command("delete-records", help="delete the records of partitions below an offset")
    trim.add_argument("name")
    trim.add_argument("--before", required=True, metavar="OFFSET",
                      help="the new log start offset (-1: the high watermark)")
    trim.add_argument("--partition", type=int, action="append", metavar="P", help="only these partitions")
    delete = command("delete", help="delete a topic")
    delete.add_argument("name")


def run(args: argparse.Namespace) -> int:
    from mmlog.client.admin import Admin

    with Admin(args.bootstrap, timeout=args.timeout, **client_security(args)) as admin:
        if args.action == "create":
            admin.create_topic(args.name, args.partitions, _configs(args.config), args.replication_factor)
            print(f"created topic {args.name} with {args.partitions} partition(s)")
        elif args.action == "list":
            for name, partitions in admin.list_topics().items():
                print(f"{name}\t{partitions}")
        elif args.action == "describe":
            describe(admin.describe_topic(args.name), args.data_dir)
        elif args.action == "alter":
            alter(admin, args)
        elif args.action == "delete-records":
            partitions = args.partition or list(range(admin.cluster.topic(args.name, allow_auto_create=False).partitions))
            before = _offset(args.before)
            for p, low in admin.delete_records(args.name, {p: before for p in partitions}).items():
                print(f"partition {p}\tlow watermark {low}")
        else:
            admin.delete_topic(args.name)
            print(f"deleted topic {args.name}")
    return 0


def alter(admin, args) -> None:
    if args.partitions is None and not args.config and not args.delete_config:
        raise CommandError("alter wants --partitions, --config or --delete-config", 2)
    if args.config or args.delete_config:
        admin.alter_topic_config(args.name, _configs(args.config), args.delete_config)
        print(f"topic {args.name}: config updated")
    if args.partitions is not None:
        admin.create_partitions({args.name: args.partitions})
        print(f"topic {args.name} now has {args.partitions} partition(s)")


def describe(topic, data_dir: str | None = None) -> None:
    print(f"Topic: {topic.name}\tPartitions: {len(topic.partitions)}")
    status = {}
    if data_dir is not None:
        from mmlog.log.cleaner.manager import read_status

        status = read_status(data_dir)
    for p in topic.partitions:
        print(f"  partition {p.partition}\tleader {p.leader}\treplicas {_ids(p.replicas)}\tisr {_ids(p.isr)}"
              f"\tearliest {p.earliest}\tlatest {p.latest}\trecords {p.latest - p.earliest}"
              + ("\tunder-replicated" if p.under_replicated else ""))
        cleaner = status.get(f"{topic.name}-{p.partition}")
        if cleaner is not None:
            print("    " + cleaner_line(cleaner))
    overrides = sorted(topic.overrides)
    print("  config overrides: " + (", ".join(f"{k}={topic.config[k]}" for k in overrides) or "none"))


def _offset(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise CommandError(f"--before wants an offset (-1: the high watermark), got {text!r}", 2) from None


def cleaner_line(entry: dict) -> str:
    """One partition's log cleaner figures, as `describe` prints them."""
    import time

    line = (f"cleaner: dirty ratio {entry.get('dirty_ratio', 0):.2f}\tfirst dirty offset "
            f"{entry.get('first_dirty_offset', 0)}\tcleanable bytes {entry.get('cleanable_bytes', 0)}")
    run = entry.get("last_run")
    if run is None:
        return line + "\tlast run never"
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(entry["last_run_ms"] / 1000))
    rate = run["bytes_read"] / 1e6 / max(run["elapsed_s"], 1e-9)
    return (line + f"\tlast run {when}: offsets [{run['first_dirty']}, {run['end_offset']}), {run['records_kept']} "
            f"of {run['records_read']} records kept, {run['bytes_read']} -> {run['bytes_written']} bytes, "
            f"{rate:.1f} MB/s")


def _ids(nodes) -> str:
    return ",".join(map(str, nodes)) or "-"


def _configs(items: list[str]) -> dict[str, str]:
    return key_values(items, "--config")
