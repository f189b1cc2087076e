"""One command for the paper benchmark: every test, every system, the table, the figures and the page.

    python -m tools.bench [--quick] [--messages N] [--systems mmlog,redis,rabbitmq] [--out DIR]
    python tools/bench/run.py ...          (the same)

Order of a run: check that what the systems need is installed (or install it:
--install, as root); the machine's ceilings; then each system in turn, its
server started, measured (producer, consumer, latency) and stopped; then the
report. Everything lives in a temporary directory removed at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # `python tools/bench/run.py`: make `tools.bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tools.bench import ceilings, report  # noqa: E402
from tools.bench.common import Result  # noqa: E402
from tools.bench.servers import Missing, check_installed  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SYSTEMS = ("mmlog", "redis", "rabbitmq")
PAPER_MESSAGES = 10_000_000
# --quick: about 4 minutes for every system on 2 shared cores (RabbitMQ's boot and pika's batch 1 dominate)
QUICK = dict(messages=1_000_000, batch1_messages=100_000, latency_seconds=5.0)


@dataclass
class Config:
    messages: int  # per batch-50 producer run, and per consumer run
    batch1_messages: int  # per batch-1 producer run
    systems: list[str]
    out: Path
    markdown: Path
    fetch_bytes: int = 200_000  # the consumer test's pull: about 1,000 messages
    latency_rate: float = 10_000
    latency_seconds: float = 10.0
    profile: bool = False

    def timeout(self, messages: int) -> float:
        """How long a client may take for `messages` before it counts as hung: 500 msg/s and two minutes."""
        return 120 + messages / 500


def parse(argv: list[str] | None) -> tuple[Config, argparse.Namespace]:
    p = argparse.ArgumentParser(prog="python -m tools.bench", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help=f"{QUICK['messages']:,} messages ({QUICK['batch1_messages']:,} at batch 1), "
                        f"{QUICK['latency_seconds']:g} s of latency: a few minutes")
    p.add_argument("--messages", type=int, metavar="N",
                   help=f"messages per batch-50 producer and per consumer run (default {PAPER_MESSAGES:,})")
    p.add_argument("--batch1-messages", type=int, metavar="N", help="messages per batch-1 run (default: --messages)")
    p.add_argument("--systems", default=",".join(SYSTEMS),
                   help=f"comma-separated, of {', '.join(SYSTEMS)} (default all)")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "bench",
                   help="figures, results.json and profiles (default docs/bench/)")
    p.add_argument("--markdown", type=Path, default=ROOT / "docs" / "benchmarks.md",
                   help="the page to write (default docs/benchmarks.md)")
    p.add_argument("--latency-rate", type=float, default=10_000, metavar="MSG/S",
                   help="latency test rate (default 10,000)")
    p.add_argument("--latency-seconds", type=float, metavar="S", help="latency test length (default 10; --quick 5)")
    p.add_argument("--fetch-bytes", type=int, default=200_000, metavar="BYTES",
                   help="consumer pull size for mmlog (default 200,000: about 1,000 messages)")
    p.add_argument("--no-figures", dest="figures", action="store_false", help="no PNGs (nor matplotlib needed)")
    p.add_argument("--profile", action="store_true", help="py-spy mmlog's producer client and broker processors")
    p.add_argument("--install", action="store_true", help="apt-get install missing Debian packages (as root)")
    p.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()),
                   help="where the servers' temporary data directories go (default: the temp dir)")
    a = p.parse_args(argv)
    systems = [s.strip() for s in a.systems.split(",") if s.strip()]
    if not systems or any(s not in SYSTEMS for s in systems):
        p.error(f"--systems: choose among {', '.join(SYSTEMS)}")
    messages = a.messages or (QUICK["messages"] if a.quick else PAPER_MESSAGES)
    batch1 = a.batch1_messages or (min(QUICK["batch1_messages"], messages) if a.quick and not a.messages else messages)
    seconds = a.latency_seconds or (QUICK["latency_seconds"] if a.quick else 10.0)
    if messages < 1 or batch1 < 1 or seconds <= 0 or a.latency_rate <= 0:
        p.error("sizes and rates must be positive")
    cfg = Config(messages, batch1, systems, a.out.resolve(), a.markdown.resolve(), fetch_bytes=a.fetch_bytes,
                 latency_rate=a.latency_rate, latency_seconds=seconds, profile=a.profile)
    return cfg, a


def log(item) -> None:
    """Progress on stderr: a finished row, or a message."""
    if isinstance(item, Result):
        item = (f"{item.system} {item.test} [{item.variant}]: {item.messages:,} messages in {item.seconds:.1f} s: "
                f"{item.rate:,.0f} msg/s, {item.mb_rate:,.1f} MB/s")
    print(f"[{time.strftime('%H:%M:%S')}] {item}", file=sys.stderr, flush=True)


def _stop(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")  # unwinds through every server's stop()


def main(argv: list[str] | None = None) -> int:
    cfg, args = parse(argv)
    signal.signal(signal.SIGTERM, _stop)
    try:
        check_installed(cfg.systems, install=args.install, figures=args.figures)
    except Missing as exc:
        print(exc, file=sys.stderr)
        return 2
    from tools.bench import mmlog_driver, rabbitmq_driver, redis_driver

    drivers = {"mmlog": mmlog_driver, "redis": redis_driver, "rabbitmq": rabbitmq_driver}
    command = "python -m tools.bench " + " ".join(sys.argv[1:] if argv is None else argv)
    facts = report.machine_facts(cfg.systems)
    cfg.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    results: list[Result] = []
    latencies: list = []
    failed = []
    args.workdir.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="mmlog-bench-", dir=args.workdir))
    log(f"{command}: {cfg.messages:,} messages ({cfg.batch1_messages:,} at batch 1), systems "
        f"{', '.join(cfg.systems)}; data in {workdir}")
    try:
        results += ceilings.bench(cfg, workdir, log)
        for name in cfg.systems:
            log(f"{name}: starting")
            try:
                rows, lat = drivers[name].bench(cfg, workdir, log)
            except Exception:  # noqa: BLE001 - one system failing does not lose the others' figures
                log(f"{name}: FAILED\n{traceback.format_exc()}")
                failed.append(name)
                continue
            results += rows
            latencies += lat
    except KeyboardInterrupt as exc:
        log(f"interrupted ({str(exc) or 'SIGINT'}): every server stopped, nothing written")
        return 130
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    seconds = time.monotonic() - started
    facts["load average at end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    if failed:
        facts["failed in this run"] = ", ".join(failed)
    if args.figures:
        report.figures(results, cfg.out)
    report.save_json(cfg.out / "results.json", results, latencies, facts, command)
    cfg.markdown.parent.mkdir(parents=True, exist_ok=True)
    report.markdown(cfg.markdown, cfg.out, results, latencies, facts, command, cfg, seconds)
    print(report.table(results, latencies))
    log(f"done in {seconds / 60:.1f} min: {cfg.markdown}, {cfg.out}/producer.png, consumer.png, results.json"
        + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
