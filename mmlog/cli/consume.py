"""Print the records of a topic, one value per line, as they arrive.

Reads every partition of TOPIC (or only --partition N) from the end, or from the
beginning with --from-beginning, and waits for new records until interrupted,
until --max-messages records were printed, or until none arrived for
--timeout-ms. Values (and keys, with --print-key) are written as raw bytes; a
null prints as "null". At the end, "Processed a total of N messages" goes to
stderr, as Kafka's console consumer does.

With --group G the command joins consumer group G and reads the share of TOPIC's
partitions the group gives it (several `mmlog consume --group G` share the
partitions), starting from the group's committed offsets (--from-beginning or the
end only where there are none). It commits what it has printed every few
seconds and when it exits, so the next consumer of the group continues after
the last record printed. The first assignment waits for the broker's
group.initial.rebalance.delay.ms (3 s by default).
"""

from __future__ import annotations

import argparse
import sys
import time

from mmlog.cli import BOOTSTRAP, COMMAND_CONFIG, CommandError, client_security


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("topic", metavar="TOPIC", help="the topic to read")
    BOOTSTRAP.add(parser)
    COMMAND_CONFIG.add(parser)
    parser.add_argument("--from-beginning", action="store_true",
                        help="start at the oldest record instead of the end")
    parser.add_argument("--partition", type=int, metavar="N", help="read only this partition")
    parser.add_argument("--max-messages", type=int, metavar="N", help="exit after printing N records")
    parser.add_argument("--group", metavar="G",
                        help="join consumer group G: share the partitions with its other members, resume from "
                             "its committed offsets, commit what was printed")
    parser.add_argument("--print-key", action="store_true", help="print each record's key before its value")
    parser.add_argument("--key-separator", default="\t", metavar="SEP",
                        help="between key and value with --print-key (default: a tab)")
    parser.add_argument("--timeout-ms", type=int, metavar="MS",
                        help="exit when no record arrived for MS milliseconds")
    parser.add_argument("--request-timeout-ms", type=int, default=10_000, metavar="MS",
                        help="give up when no broker answers for MS milliseconds (default 10000)")


def run(args: argparse.Namespace) -> int:
    if args.group is not None and args.partition is not None:
        raise CommandError("--group and --partition do not mix: the group decides who reads which partition", 2)
    if args.group is not None and not args.group:
        raise CommandError("--group must not be empty", 2)
    for name in ("partition", "max_messages", "timeout_ms"):
        value = getattr(args, name)
        if value is not None and value < 0:
            raise CommandError(f"--{name.replace('_', '-')} must be >= 0", 2)
    if args.request_timeout_ms < 1:
        raise CommandError("--request-timeout-ms must be >= 1", 2)
    try:
        from mmlog.client.connection import parse_bootstrap

        parse_bootstrap(args.bootstrap)
    except ValueError as exc:
        raise CommandError(str(exc), 2) from None

    from mmlog.client.consumer import Consumer

    separator = args.key_separator.encode()
    out = sys.stdout.buffer
    printed = 0
    consumer = Consumer(args.bootstrap, auto_offset_reset="earliest" if args.from_beginning else "latest",
                        client_id="mmlog-consume", request_timeout_ms=args.request_timeout_ms, group_id=args.group,
                        **client_security(args))
    try:
        partitions = consumer.partitions_for(args.topic)
        if args.group is not None:
            consumer.subscribe([args.topic])
        else:
            if args.partition is not None:
                if args.partition not in partitions:
                    raise CommandError(f"topic {args.topic!r} has no partition {args.partition} "
                                       f"(it has {len(partitions)})")
                partitions = {args.partition}
            consumer.assign([(args.topic, p) for p in sorted(partitions)])
        limit = args.max_messages
        idle = None if args.timeout_ms is None else args.timeout_ms / 1000
        last = time.monotonic()
        while limit is None or printed < limit:
            wait = None if idle is None else max(0.0, last + idle - time.monotonic())
            records = consumer.poll(1.0 if wait is None else min(wait, 1.0))
            if not records:
                if idle is not None and time.monotonic() - last >= idle:
                    break
                continue
            last = time.monotonic()
            if limit is not None and len(records) > limit - printed:
                records, unprinted = records[: limit - printed], records[limit - printed:]
                _rewind(consumer, unprinted)  # the group's commit at exit must not pass what was not printed
            try:
                out.write(b"".join(_line(r, args.print_key, separator) for r in records))
                out.flush()
            except BaseException:  # interrupted or a closed pipe: count none of them as printed
                _rewind(consumer, records)
                raise
            printed += len(records)
    except KeyboardInterrupt:
        status = 130
    else:
        status = 0
    finally:
        consumer.close()
    print(f"Processed a total of {printed} messages", file=sys.stderr)
    return status


def _rewind(consumer, unprinted) -> None:
    """Seek each partition back to its first record that was handed over but not printed."""
    first: dict = {}
    for r in unprinted:
        tp = (r.topic, r.partition)
        first[tp] = min(first.get(tp, r.offset), r.offset)
    for tp, offset in first.items():
        consumer.seek(tp, offset)


def _line(record, print_key: bool, separator: bytes) -> bytes:
    value = b"null" if record.value is None else record.value
    if print_key:
        key = b"null" if record.key is None else record.key
        return key + separator + value + b"\n"
    return value + b"\n"
