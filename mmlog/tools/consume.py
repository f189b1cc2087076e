"""Print the records of a topic, one value per line, as they arrive.

Reads every partition of TOPIC (or only --partition N) from the end, or from the
beginning with --from-beginning, and waits for new records until interrupted,
until --max-messages records were printed, or until none arrived for
--timeout-ms. Values (and keys, with --print-key) are written as raw bytes; a
null prints as "null". At the end, "Processed a total of N messages" goes to
stderr, as Kafka's console consumer does.

Consumer groups (--group) need the group coordinator, which is not available yet.
"""

from __future__ import annotations

import argparse
import sys
import time

from mmlog.tools import CommandError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("topic", metavar="TOPIC", help="the topic to read")
    parser.add_argument("--bootstrap", "--bootstrap-server", default="127.0.0.1:9092", metavar="HOST:PORT",
                        help="a broker to start from (default 127.0.0.1:9092)")
    parser.add_argument("--from-beginning", action="store_true",
                        help="start at the oldest record instead of the end")
    parser.add_argument("--partition", type=int, metavar="N", help="read only this partition")
    parser.add_argument("--max-messages", type=int, metavar="N", help="exit after printing N records")
    parser.add_argument("--group", metavar="G", help="consumer group (not available yet)")
    parser.add_argument("--print-key", action="store_true", help="print each record's key before its value")
    parser.add_argument("--key-separator", default="\t", metavar="SEP",
                        help="between key and value with --print-key (default: a tab)")
    parser.add_argument("--timeout-ms", type=int, metavar="MS",
                        help="exit when no record arrived for MS milliseconds")
    parser.add_argument("--request-timeout-ms", type=int, default=10_000, metavar="MS",
                        help="give up when no broker answers for MS milliseconds (default 10000)")


def run(args: argparse.Namespace) -> int:
    if args.group is not None:
        raise CommandError("--group needs consumer groups (the group coordinator), which are not available yet; "
                           "leave it out to read the partitions directly", 2)
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
                        client_id="mmlog-consume", request_timeout_ms=args.request_timeout_ms)
    try:
        partitions = consumer.partitions_for(args.topic)
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
            if limit is not None:
                records = records[: limit - printed]
            out.write(b"".join(_line(r, args.print_key, separator) for r in records))
            out.flush()
            printed += len(records)
    except KeyboardInterrupt:
        status = 130
    else:
        status = 0
    finally:
        consumer.close()
    print(f"Processed a total of {printed} messages", file=sys.stderr)
    return status


def _line(record, print_key: bool, separator: bytes) -> bytes:
    value = b"null" if record.value is None else record.value
    if print_key:
        key = b"null" if record.key is None else record.key
        return key + separator + value + b"\n"
    return value + b"\n"
