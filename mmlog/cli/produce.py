"""Send the lines of stdin to a topic, one record per line.

    mmlog produce TOPIC [--bootstrap HOST:PORT] [--key-separator SEP] [--acks 0|1|all] [--partition N]

Each line, without its line ending, is a record's value (bytes as read: no
decoding). With --key-separator, the text before the first SEP is the record's
key and the rest its value; a line without SEP has a null key. Keys choose the
partition with Kafka's murmur2 unless --partition is given. Exits non-zero with
one line on stderr if a record cannot be delivered or no broker answers within
--timeout seconds.
"""

from __future__ import annotations

import argparse
import sys

from mmlog.cli import BOOTSTRAP, COMMAND_CONFIG, CommandError, client_security


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("topic", help="topic to produce to (auto-created if the broker allows it)")
    BOOTSTRAP.add(parser)
    COMMAND_CONFIG.add(parser)
    parser.add_argument("--key-separator", metavar="SEP", help="split each line into KEY SEP VALUE at the first SEP")
    parser.add_argument("--acks", default="1", choices=["0", "1", "-1", "all"],
                        help="0: no answer, 1: the leader wrote it (default), all/-1: every replica did")
    parser.add_argument("--partition", type=int, metavar="N", help="send every record to partition N")
    parser.add_argument("--linger-ms", type=float, default=5.0, metavar="MS",
                        help="wait up to MS for more lines before sending a batch (default 5)")
    parser.add_argument("--timeout", type=float, default=10.0, metavar="S",
                        help="seconds to wait for a broker or an acknowledgement (default 10)")


def run(args: argparse.Namespace, stdin=None) -> int:
    if args.partition is not None and args.partition < 0:
        raise CommandError(f"--partition must be >= 0, not {args.partition}", 2)
    if args.key_separator == "":
        raise CommandError("--key-separator must not be empty", 2)
    if args.timeout <= 0 or args.linger_ms < 0:
        raise CommandError("--timeout must be > 0 and --linger-ms >= 0", 2)
    from mmlog.client.producer import Producer

    stream = stdin if stdin is not None else sys.stdin.buffer
    sep = args.key_separator.encode() if args.key_separator is not None else None
    failures: list[BaseException] = []

    def check(_metadata, exc) -> None:
        if exc is not None:
            failures.append(exc)

    try:
        producer = Producer(args.bootstrap, acks=args.acks, linger_ms=args.linger_ms,
                            request_timeout_ms=args.timeout * 1000, delivery_timeout_ms=max(args.timeout, 30) * 1000,
                            client_id="mmlog-produce", **client_security(args))
    except ValueError as exc:
        raise CommandError(str(exc), 2) from None
    try:
        for line in stream:
            if line.endswith(b"\n"):
                line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
            key = None
            if sep is not None:
                head, found, tail = line.partition(sep)
                if found:
                    key, line = head, tail
            producer.send(args.topic, line, key=key, partition=args.partition, callback=check)
            if failures:
                break
        producer.flush(args.timeout + max(args.timeout, 30))
    finally:
        producer.close(args.timeout)
    if failures:
        exc = failures[0]
        raise CommandError(f"{len(failures)} batch(es) not delivered: {type(exc).__name__}: {exc}")
    return 0
