"""Elect partition leaders, as kafka-leader-election.sh does.

    mmlog elect-leaders --election-type preferred|unclean (--topic T --partition P | --all-topic-partitions)

preferred: a partition's first replica leads again if it is live and in the ISR.
unclean: a partition whose leader died and whose ISR is all dead is led by a live
replica outside the ISR, losing what only the ISR held. The controller decides;
each partition's outcome is printed.
"""

from __future__ import annotations

import argparse

from mmlog.cli import BOOTSTRAP, TIMEOUT, CommandError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for option in (BOOTSTRAP, TIMEOUT):
        option.add(parser)
    parser.add_argument("--election-type", required=True, metavar="preferred|unclean")
    parser.add_argument("--topic")
    parser.add_argument("--partition", type=int)
    parser.add_argument("--all-topic-partitions", action="store_true", help="every partition of every topic")


def run(args: argparse.Namespace) -> int:
    from mmlog.client.admin import Admin
    from mmlog.client.records import TopicPartition
    from mmlog.errors import ElectionNotNeeded

    if args.election_type not in ("preferred", "unclean"):
        raise CommandError(f"--election-type {args.election_type!r}: choose preferred or unclean", status=2)
    if args.all_topic_partitions == (args.topic is not None):
        raise CommandError("give --topic (with --partition) or --all-topic-partitions", status=2)
    if args.topic is not None and args.partition is None:
        raise CommandError("--topic needs --partition", status=2)
    partitions = None if args.all_topic_partitions else [TopicPartition(args.topic, args.partition)]
    with Admin(args.bootstrap, timeout=args.timeout) as admin:
        results = admin.elect_leaders(args.election_type, partitions)
    failed = 0
    for tp, error in sorted(results.items()):
        if error is None:
            print(f"Successfully completed leader election ({args.election_type}) for partition {tp.topic}-{tp.partition}")
        elif isinstance(error, ElectionNotNeeded):
            print(f"Valid replica already elected for partition {tp.topic}-{tp.partition}")
        else:
            failed += 1
            print(f"Error completing leader election ({args.election_type}) for partition "
                  f"{tp.topic}-{tp.partition}: {type(error).__name__}: {error}")
    return 1 if failed else 0
