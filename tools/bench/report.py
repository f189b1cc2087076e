"""What a run leaves behind: the table on stdout, the paper-style figures, results.json and its section of
docs/benchmarks.md (between the markers of SECTION; the other benchmarks' sections on the page are kept).

Ratios are each row's msg/s over its mmlog baseline's in the same run and test:
`send()` at the same batch size for the producer, the record-by-record
iterator for the consumer. The figures follow the paper's Figures 4 and 5:
throughput (messages a second, in 30 bins of equal MB per run) against the MB
sent or consumed so far.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import time
from pathlib import Path

import numpy as np

from tools.bench.common import MB, MESSAGE_SIZE, Result
from tools.bench.page import write_section

TESTS = (("produce", "Producer"), ("consume", "Consumer"), ("ceiling", "Machine ceilings"))
SECTION = "bench"  # its markers on the page: the top of docs/benchmarks.md, up to the other benchmarks' sections
COLORS = {"mmlog": "tab:blue", "redis": "tab:red", "rabbitmq": "tab:orange", "machine": "tab:gray"}


def baseline(results: list[Result], row: Result) -> Result | None:
    """The mmlog row `row` is compared with (None for the ceilings)."""
    for r in results:
        if r.baseline and r.test == row.test and (row.test == "consume" or r.batch == row.batch):
            return r
    return None


def ratio(results: list[Result], row: Result) -> float | None:
    base = baseline(results, row)
    return row.rate / base.rate if base is not None and base.rate > 0 else None


def rows(results: list[Result]) -> list[tuple[str, str, str, str, str, str]]:
    """(system, test, variant, msg/s, MB/s, x mmlog) as text, in table order."""
    out = []
    for test, _ in TESTS:
        for r in (r for r in results if r.test == test):
            x = ratio(results, r)
            out.append((r.system, test, r.variant, f"{r.rate:,.0f}", f"{r.mb_rate:,.1f}",
                        "1 (baseline)" if r.baseline else "-" if x is None else f"{x:.2f}"))
    return out


def table(results: list[Result], latencies) -> str:
    """The plain-text table printed at the end of a run."""
    header = ("system", "test", "variant", "msg/s", "MB/s", "x mmlog")
    body = rows(results)
    widths = [max(len(str(c)) for c in col) for col in zip(header, *body)]
    right = {3, 4, 5}
    fmt = lambda row: "  ".join(c.rjust(w) if i in right else c.ljust(w)  # noqa: E731
                                for i, (c, w) in enumerate(zip(row, widths)))
    lines = [fmt(header), "  ".join("-" * w for w in widths)] + [fmt(r) for r in body]
    lat = [x for x in latencies if x is not None]
    if lat:
        lines += ["", "end-to-end latency (ms)  p50  p99  p99.9  max:"]
        lines += [f"  {x.system:<9} {x.achieved:>8,.0f} msg/s  {x.p50:7.2f} {x.p99:7.2f} {x.p999:7.2f} {x.max:8.2f}"
                  f"   ({x.variant})" for x in lat]
    checks = targets(results)
    if checks:
        lines += ["", "the paper benchmark's targets (in this run):"]
        lines += [f"  [{'x' if ok else ' '}] {text}: {got}" for text, got, ok in checks]
    return "\n".join(lines)


def targets(results: list[Result]) -> list[tuple[str, str, bool]]:
    """The paper benchmark's goals, each as (goal, measured, met) — only those whose rows this run has."""
    def find(system, test, batch=None, has=""):
        for r in results:
            if r.system == system and r.test == test and (batch is None or r.batch == batch) and has in r.variant:
                return r
        return None

    # mmlog's producer with acks=1 against Redis (whose clients wait for every reply) and for the
    # batch-50 goals; batch 1 against RabbitMQ without confirms, like for like: acks=0, the paper's.
    mm_p1 = find("mmlog", "produce", 1, "send(), batch 1, acks=0")
    mm_p50 = find("mmlog", "produce", 50, "send(), batch 50, acks=1")
    mm_iter, mm_bulk = find("mmlog", "consume", has="iterator"), find("mmlog", "consume", has="bulk")
    goals = [
        ("mmlog batch 50 (acks=1) >= 2x Redis redis-py pipeline", mm_p50, find("redis", "produce", 50, "redis-py"), 2),
        ("mmlog batch 50 (acks=1) >= raw-protocol Redis bound", mm_p50, find("redis", "produce", 50, "raw"), 1),
        ("mmlog batch 50 (acks=1) >= 5x RabbitMQ batch 50", mm_p50, find("rabbitmq", "produce", 50), 5),
        ("mmlog consumer bulk >= 3x Redis XREAD", mm_bulk, find("redis", "consume"), 3),
        ("mmlog consumer iterator >= Redis XREAD", mm_iter, find("redis", "consume"), 1),
        ("mmlog batch 1 (acks=0, as the paper) >= 2x RabbitMQ batch 1 (no confirms)", mm_p1,
         find("rabbitmq", "produce", 1), 2),
    ]
    out = []
    for text, ours, theirs, factor in goals:
        if ours is not None and theirs is not None and theirs.rate > 0:
            x = ours.rate / theirs.rate
            out.append((text, f"{x:.2f}x ({ours.rate:,.0f} vs {theirs.rate:,.0f} msg/s)", x >= factor))
    return out


# ------------------------------------------------------------------ figures


def curve(r: Result, points: int = 30) -> tuple[np.ndarray, np.ndarray]:
    """(MB so far, msg/s over the bin ending there) from a run's samples, in `points` bins of equal MB."""
    s = np.asarray(r.samples, dtype=np.float64).reshape(-1, 2)
    if len(s) < 2 or s[-1, 1] <= 0:
        return np.zeros(0), np.zeros(0)
    t, m = s[:, 0], s[:, 1]
    edges = np.linspace(0, m[-1], points + 1)
    at = np.interp(edges, m, t)  # when the run got to each bin edge
    dt = np.diff(at)
    keep = dt > 0
    size = r.nbytes / r.messages if r.messages else MESSAGE_SIZE
    return (edges[1:] * size / MB)[keep], (np.diff(edges)[keep] / dt[keep])


def plot(results: list[Result], test: str, path: Path, title: str, xlabel: str) -> Path | None:
    """One figure in the style of the paper's: a line per client run, throughput against MB moved."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [r for r in results if r.test == test and len(r.samples) > 1]
    if not runs:
        return None
    fig, ax = plt.subplots(figsize=(11, 4.8), dpi=110)
    styles = ["-", "--", ":", "-."]
    seen: dict[str, int] = {}
    for r in runs:
        x, y = curve(r)
        k = seen[r.system] = seen.get(r.system, -1) + 1
        ax.plot(x, y, styles[k % len(styles)], color=COLORS.get(r.system), marker="os^dv"[k % 5], markersize=3,
                linewidth=1.4, label=f"{r.system}: {r.variant} ({r.rate:,.0f}/s)")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("throughput (messages/s)")
    ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    ax.grid(True, alpha=0.3)
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def figures(results: list[Result], out: Path) -> list[Path]:
    return [p for p in (
        plot(results, "produce", out / "producer.png", "Producer performance (200-byte messages)", "MB sent"),
        plot(results, "consume", out / "consumer.png", "Consumer performance (200-byte messages)", "MB consumed"),
    ) if p is not None]


# ------------------------------------------------------------------ files


def save_json(path: Path, results, latencies, facts: dict, command: str) -> None:
    """Everything the table, figures and page are made of (samples rounded to 0.1 ms), to redraw them later."""
    rows = [dict(dataclasses.asdict(r), samples=[(round(t, 4), int(m)) for t, m in r.samples]) for r in results]
    path.write_text(json.dumps({
        "command": command, "facts": facts,
        "results": rows,
        "latency": [dataclasses.asdict(x) for x in latencies if x is not None],
    }, separators=(",", ":")))


def md_table(header, body, right=()) -> str:
    align = ["---:" if i in right else "---" for i in range(len(header))]
    return "\n".join("| " + " | ".join(map(str, row)) + " |" for row in [header, align, *body])


def _method(module) -> str:
    """A driver's module docstring as one paragraph, its first line in bold."""
    first, _, rest = (inspect.getdoc(module) or "").partition("\n\n")
    return f"**{first.strip()}** " + " ".join(rest.split())


def _body(module) -> str:
    """A module docstring without its first line, as written (its lists stay lists)."""
    return (inspect.getdoc(module) or "").partition("\n\n")[2].strip()


def markdown(path: Path, out: Path, results, latencies, facts: dict, command: str, cfg, seconds: float) -> None:
    """Its section of docs/benchmarks.md: the run's figures, the machine, and how to reproduce them."""
    from tools.bench import ceilings, latency, mmlog_driver, rabbitmq_driver, redis_driver

    rel = lambda p: os.path.relpath(p, path.parent)  # noqa: E731
    body = rows(results)
    lines = [
        "# Benchmarks: the Kafka paper's section 5 on one machine",
        "",
        "The producer and consumer tests of the paper (Kreps, Narkhede, Rao, *Kafka: a Distributed",
        "Messaging System for Log Processing*, NetDB 2011, section 5), run by `tools/bench` against mmlog",
        "and, in the same run, against the peers a user would otherwise pick: Redis Streams and RabbitMQ,",
        "from the Debian packages, started on loopback by the benchmark itself. Every client runs in a",
        "process of its own; every message is 200 bytes. This part of the page, up to the sections of the other",
        "benchmarks, is written by the benchmark: the figures in it are from the run of",
        f"{facts['date']} (`{command}`, {seconds / 60:.1f} minutes).",
        "",
        "## Reproduce",
        "",
        "```sh",
        "apt-get install -y redis-server rabbitmq-server   # or run the benchmark as root with --install",
        "pip install -e '.[bench]'                          # redis (+hiredis), pika, matplotlib, py-spy",
        "python -m tools.bench --quick                      # every system, a few minutes",
        "python -m tools.bench                              # the paper's 10 million messages",
        "python -m tools.bench --systems mmlog --messages 1000000 --profile   # py-spy profiles of mmlog",
        "```",
        "",
        "`--out DIR` (default `docs/bench/`) receives the figures, `results.json` and the profiles;",
        "`--markdown PATH` (default `docs/benchmarks.md`) this section. Nothing is left running: each server",
        "is a child of the benchmark in its own process group and data directory, stopped at the end.",
        "",
        "## The machine",
        "",
        md_table(("", ""), [(k, v) for k, v in facts.items() if k != "date"]),
        "",
        "The machine is shared and has few cores: single figures are noisy, the ratios within one run are",
        "what counts.",
        "",
    ]
    for test, title in TESTS:
        sub = [row for row in body if row[1] == test]
        if not sub:
            continue
        lines += [f"## {title}", ""]
        if test == "produce":
            lines += [f"{cfg.messages:,} messages at batch 50, {cfg.batch1_messages:,} at batch 1; `x mmlog` is",
                      "the row's msg/s over mmlog `send()`'s at the same batch size.", ""]
        elif test == "consume":
            lines += [f"{cfg.messages:,} messages, read back from the batch-50 run; `x mmlog` is over mmlog's",
                      "record-by-record iterator.", ""]
        else:
            lines += [_body(ceilings), ""]
        if test == "ceiling":
            lines.append(md_table(("what", "msg/s", "MB/s"), [(v, m, mb) for _, _, v, m, mb, _ in sub], right={1, 2}))
        else:
            lines.append(md_table(("system", "variant", "msg/s", "MB/s", "x mmlog"),
                                  [(s, v, m, mb, x) for s, _, v, m, mb, x in sub], right={2, 3, 4}))
        png = out / ("producer.png" if test == "produce" else "consumer.png")
        if test != "ceiling" and png.exists():
            lines += ["", f"![{title} throughput against MB moved]({rel(png)})"]
        lines.append("")
    lat = [x for x in latencies if x is not None]
    if lat:
        lines += ["## End-to-end latency", "", _body(latency), "",
                  md_table(("system", "how", "msg/s sent", "messages", "p50 ms", "p99 ms", "p99.9 ms", "max ms"),
                           [(x.system, x.variant, f"{x.achieved:,.0f}", f"{x.count:,}", f"{x.p50:.2f}",
                             f"{x.p99:.2f}", f"{x.p999:.2f}", f"{x.max:.2f}") for x in lat], right={2, 3, 4, 5, 6, 7}),
                  ""]
    checks = targets(results)
    if checks:
        lines += ["## The paper benchmark's targets in this run", "",
                  md_table(("target", "measured", "met"), [(t, g, "yes" if ok else "**no**") for t, g, ok in checks]),
                  ""]
    profiles = sorted(Path(out, "profiles").glob("*.summary.txt")) if cfg.profile else []
    if profiles:
        lines += ["## Profiles (py-spy)", "", "Top frames by own time, in % of the samples of each process "
                  f"(full raw stacks in `{rel(Path(out, 'profiles'))}/`).", ""]
        for p in profiles:
            lines += [f"`{p.name.removesuffix('.summary.txt')}`:", "", "```", p.read_text().rstrip(), "```", ""]
    lines += ["## How each system is run", ""]
    for module in (mmlog_driver, redis_driver, rabbitmq_driver):
        lines += [f"- {_method(module)}", ""]
    lines += [
        "## Reading the results",
        "",
        "- The paper's Kafka producer did not wait for acknowledgements; mmlog runs both ways: acks=0",
        "  (the paper's, and RabbitMQ's without confirms) and acks=1 (answered after the append, as",
        "  Redis's replies). Every producer run ends only when the server has taken every message",
        "  (mmlog acks=1: `flush()`; mmlog acks=0: ListOffsets shows them all; Redis: every reply",
        "  read; RabbitMQ: the queue holds them all), so msg/s is end to end.",
        "- At batch 1 with acks=1 and 5 requests in flight, producer and broker take turns: each",
        "  round trip carries 5 records, so the rate is bound by the round trip, not by either side.",
        "- Redis keeps its stream in memory and its AOF rewrites fork in the background (Redis's",
        "  defaults); RabbitMQ pages persistent messages to its message store; mmlog appends to its",
        "  segment files and fsyncs every second.",
        "- The ceilings bound everything above them: no producer can beat the raw appends, no consumer",
        "  the loopback sendfile.",
        "- Clients and servers are separate processes and are not pinned: the kernel gives each a core",
        "  when the machine is otherwise idle, the same for every system.",
        "- For scale, the paper's own figures (Kafka, 2011 hardware, producer and broker on two machines):",
        "  about 50,000 msg/s at batch 1 and 400,000 at batch 50; 22,000 msg/s consumed.",
        "",
    ]
    write_section(path, SECTION, "\n".join(lines))


def machine_facts(systems: list[str]) -> dict:
    """What the figures depend on: CPU, memory, kernel, versions."""
    import platform
    import subprocess

    from tools.bench.servers import RabbitServer, RedisServer

    def first(path, key):
        try:
            for line in open(path):
                if line.startswith(key):
                    return line.split(":", 1)[1].strip() if ":" in line else line.split("=", 1)[1].strip('"\n ')
        except OSError:
            pass
        return "?"

    def version(module):
        try:
            return __import__(module).__version__
        except Exception:  # noqa: BLE001 - not installed, or no version
            return "not installed"

    def git(*args):
        return subprocess.run(["git", *args], capture_output=True, text=True,
                               cwd=Path(__file__).resolve().parents[2]).stdout.strip()

    mem = first("/proc/meminfo", "MemTotal")
    facts = {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "CPU": f"{first('/proc/cpuinfo', 'model name')}, {os.cpu_count()} logical cores",
        "memory": f"{int(mem.split()[0]) / 1e6:.1f} GB" if mem != "?" else "?",
        "system": f"{first('/etc/os-release', 'PRETTY_NAME')}, Linux {platform.release()}",
        "load average at start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "Python": platform.python_version(),
        "mmlog": git("rev-parse", "--short", "HEAD") + (" (with local changes)" if git("status", "--porcelain", "mmlog")
                                                        else ""),
    }
    if "redis" in systems:
        facts["Redis"] = (f"redis-server {RedisServer.version()}, redis-py {version('redis')}, "
                          f"hiredis {version('hiredis')}")
    if "rabbitmq" in systems:
        facts["RabbitMQ"] = f"rabbitmq-server {RabbitServer.version()}, pika {version('pika')}"
    return facts
