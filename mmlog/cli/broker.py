"""Run a broker: one acceptor/supervisor process and N processor processes.

Settings use Kafka's `server.properties` names: give a file with --config, and/or
single settings with --override NAME=VALUE; the flags below are shorthands for the
most common ones and win over the file. An unknown or invalid setting stops the
broker at start with one line naming it. SIGTERM or SIGINT stops it cleanly
(exit 0, and the next start skips recovery).
"""

from __future__ import annotations

import argparse

from mmlog.config.broker import BROKER_SETTINGS, BrokerConfig
from mmlog.cli import CommandError

# flag dest -> Kafka setting name
FLAGS = {s.flag.lstrip("-").replace("-", "_"): s.name for s in BROKER_SETTINGS.values() if s.flag}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help="a server.properties file")
    for setting in BROKER_SETTINGS.values():
        if setting.flag:
            parser.add_argument(setting.flag, metavar=setting.name.upper().replace(".", "_"),
                                help=f"{setting.doc} ({setting.name})")
    parser.add_argument("--zookeeper", metavar="HOST:PORT[/CHROOT]", help="zookeeper.connect")
    parser.add_argument("--override", "-o", action="append", default=[], metavar="NAME=VALUE",
                        help="any server.properties setting (repeatable)")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.add_argument("--exit-with-parent", action="store_true",
                        help="stop (cleanly) when the process that started the broker exits (tests, tools)")


def run(args: argparse.Namespace) -> int:
    import logging

    from mmlog.acceptor.main import run_broker, setup_logging

    overrides: dict[str, str] = {}
    for item in args.override:
        name, eq, value = item.partition("=")
        if not eq:
            raise CommandError(f"--override wants NAME=VALUE, got {item!r}")
        overrides[name.strip()] = value.strip()
    for dest, name in FLAGS.items():
        value = getattr(args, dest)
        if value is not None:
            overrides[name] = value
    if args.zookeeper:
        overrides["zookeeper.connect"] = args.zookeeper
    config = BrokerConfig.load(args.config, overrides)
    setup_logging(getattr(logging, args.log_level))
    return run_broker(config, exit_with_parent=args.exit_with_parent)
