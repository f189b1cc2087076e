"""Move partitions' replicas between brokers, as kafka-reassign-partitions.sh does.

    mmlog reassign --generate --topics-to-move-json-file F --broker-list 0,1,2
    mmlog reassign --execute --reassignment-json-file F [--throttle BYTES_PER_S]
    mmlog reassign --verify --reassignment-json-file F
    mmlog reassign --cancel --reassignment-json-file F
    mmlog reassign --list

`--generate` reads {"version":1,"topics":[{"topic":"t"}]} and prints the current
assignment and a proposed one spread over the given brokers (each topic's
replication factor kept, leaders round the brokers as for a new topic), both as
the reassignment JSON {"version":1,"partitions":[{"topic":"t","partition":0,
"replicas":[1,2]}]}; it changes nothing. `--execute` prints the current assignment
(keep it to roll back) and starts the moves: replicas added catch up (with
`--throttle`, at most BYTES_PER_S: the brokers' leader and follower
.replication.throttled.rate, applied to the replicas the moving partitions' topics'
leader/follower.replication.throttled.replicas name: the current replicas on the
leader side, the added ones on the follower side), join the ISR, then leadership
moves if needed and removed replicas are deleted. `--verify` shows each partition's
progress and, once every move is done, removes the rates and the topic configs. `--cancel` puts the partitions back on their original replicas.
A file name `-` reads the JSON from stdin.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mmlog.cli import BOOTSTRAP, TIMEOUT, CommandError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for option in (BOOTSTRAP, TIMEOUT):
        option.add(parser)
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--generate", action="store_true", help="propose a balanced assignment (changes nothing)")
    action.add_argument("--execute", action="store_true", help="start the moves of the reassignment file")
    action.add_argument("--verify", action="store_true", help="show progress; remove the throttle when all are done")
    action.add_argument("--cancel", action="store_true", help="put the file's partitions back where they were")
    action.add_argument("--list", action="store_true", help="the reassignments in progress")
    parser.add_argument("--topics-to-move-json-file", metavar="F", help="with --generate: the topics to move")
    parser.add_argument("--broker-list", metavar="IDS", help="with --generate: the brokers to spread over (0,1,2)")
    parser.add_argument("--reassignment-json-file", metavar="F", help="the reassignment (as --generate prints)")
    parser.add_argument("--throttle", type=int, metavar="BYTES_PER_S",
                        help="with --execute: cap the new replicas' catch-up at this rate")


def run(args: argparse.Namespace) -> int:
    from mmlog.client.admin import Admin

    if not (args.generate or args.execute or args.verify or args.cancel or args.list):
        raise CommandError("give one of --generate, --execute, --verify, --cancel, --list", status=2)
    with Admin(args.bootstrap, timeout=args.timeout) as admin:
        if args.generate:
            generate(admin, args)
        elif args.list:
            for tp, r in admin.list_partition_reassignments().items():
                print(f"{tp.topic}-{tp.partition}\treplicas {_ids(r.replicas)}\tadding {_ids(r.adding)}"
                      f"\tremoving {_ids(r.removing)}")
        else:
            plan = _read_plan(_need(args.reassignment_json_file, "--reassignment-json-file"))
            if args.execute:
                execute(admin, plan, args.throttle)
            elif args.verify:
                verify(admin, plan)
            else:
                admin.alter_partition_reassignments({tp: None for tp in plan})
                print(f"Cancelled the reassignment of {len(plan)} partition(s).")
    return 0


def generate(admin, args) -> None:
    from mmlog.cluster.assignment import assign_replicas

    doc = _read_json(_need(args.topics_to_move_json_file, "--topics-to-move-json-file"))
    try:
        topics = [t["topic"] for t in doc["topics"]]
        brokers = sorted({int(b) for b in _need(args.broker_list, "--broker-list").split(",")})
    except (KeyError, TypeError, ValueError) as exc:
        raise CommandError(f"bad topics file or broker list: {exc}") from None
    current, proposed = {}, {}
    for topic in topics:
        replicas = admin.describe_topic(topic).partitions
        for p in replicas:
            current[topic, p.partition] = list(p.replicas)
        factor = len(replicas[0].replicas)
        try:
            spread = assign_replicas(brokers, len(replicas), factor)
        except Exception as exc:  # noqa: BLE001 - InvalidReplicationFactor: more replicas than brokers
            raise CommandError(f"topic {topic}: {exc}") from None
        for p, r in enumerate(spread):
            proposed[topic, p] = r
    print("Current partition replica assignment")
    print(_plan_json(current))
    print("\nProposed partition reassignment configuration")
    print(_plan_json(proposed))


def execute(admin, plan: dict, throttle: int | None) -> None:
    current = {(tp.topic, tp.partition): list(admin_replicas(admin, tp)) for tp in plan}
    print("Current partition replica assignment (save it to roll back)")
    print(_plan_json(current))
    if throttle is not None:
        if throttle <= 0:
            raise CommandError("--throttle must be a positive number of bytes per second")
        admin.set_replication_throttle(throttle)
        admin.throttle_moves({tp: (current[tp.topic, tp.partition], list(target)) for tp, target in plan.items()})
        print(f"The inter-broker throttle is {throttle} B/s on the moving replicas; run --verify to remove it "
              "once the moves are done.")
    admin.alter_partition_reassignments(plan)
    print(f"Started the reassignment of {len(plan)} partition(s).")


def verify(admin, plan: dict) -> None:
    ongoing = admin.list_partition_reassignments(list(plan))
    done = True
    for tp, target in plan.items():
        if tp in ongoing:
            r = ongoing[tp]
            print(f"Reassignment of partition {tp.topic}-{tp.partition} is still in progress "
                  f"(adding {_ids(r.adding)}, removing {_ids(r.removing)}).")
            done = False
        elif list(admin_replicas(admin, tp)) == list(target):
            print(f"Reassignment of partition {tp.topic}-{tp.partition} is completed.")
        else:
            print(f"Reassignment of partition {tp.topic}-{tp.partition} is not in progress and its replicas are "
                  f"{_ids(admin_replicas(admin, tp))}, not {_ids(target)} (cancelled or replaced).")
    if done:
        admin.set_replication_throttle(None)
        admin.clear_throttled_replicas(tp.topic for tp in plan)
        print("Throttle was removed.")


def admin_replicas(admin, tp) -> tuple[int, ...]:
    admin.cluster.refresh([tp.topic], allow_auto_create=False)
    info = admin.cluster.topics.get(tp.topic)
    if info is None or tp.partition >= len(info.replicas):
        raise CommandError(f"unknown partition {tp.topic}-{tp.partition}")
    return tuple(info.replicas[tp.partition])


def _read_plan(path: str) -> dict:
    from mmlog.client.records import TopicPartition

    doc = _read_json(path)
    try:
        return {TopicPartition(e["topic"], int(e["partition"])): [int(r) for r in e["replicas"]]
                for e in doc["partitions"]}
    except (KeyError, TypeError, ValueError) as exc:
        raise CommandError(f"{path}: not a reassignment ({{\"partitions\": [{{\"topic\", \"partition\", "
                           f"\"replicas\"}}]}}): {exc!r}") from None


def _read_json(path: str):
    """A JSON file, or stdin for "-"."""
    try:
        return json.loads(sys.stdin.read() if path == "-" else Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise CommandError(f"{path}: {exc}") from None


def _plan_json(assignment: dict) -> str:
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())]}, separators=(",", ":"))


def _need(value, flag: str):
    if value is None:
        raise CommandError(f"{flag} is required here")
    return value


def _ids(ids) -> str:
    return ",".join(map(str, ids)) or "-"
