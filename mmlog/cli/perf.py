"""Load a broker and measure it: `mmlog perf produce` and `mmlog perf consume`.

Both show live progress on stderr while they run (records, MB, rate) and end
with a summary on stdout: msg/s, MB/s and, where it applies, latency
percentiles. The paper's experiments are these commands with 200-byte messages
(`--record-size 200`) and batches of 1 or 50 (`--batch-size` in records).
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mmlog.cli import BOOTSTRAP, COMMAND_CONFIG, add_subcommands, perf_consume, perf_produce

    command = add_subcommands(parser, [BOOTSTRAP, COMMAND_CONFIG], dest="mode", metavar="produce|consume", required=True)
    perf_produce.add_arguments(command("produce", help="produce records as fast as possible, or at a rate"))
    perf_consume.add_arguments(command("consume", help="consume a topic from the beginning"))


def run(args: argparse.Namespace) -> int:
    from mmlog.cli import perf_consume, perf_produce

    return (perf_produce if args.mode == "produce" else perf_consume).run(args)
