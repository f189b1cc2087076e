"""tools/bench_pipelined.py at a tiny size, on this tree alone (a baseline tree compiles its numba kernels afresh:
about a minute): the broker's CPU per record is measured, and the ratio is the rounds' own."""

from __future__ import annotations

import os
import shutil

import pytest

from tools import bench_pipelined
from tools.bench import syscalls


def test_this_trees_round_measures_the_processors_cpu_within_the_whole_brokers(capsys):
    assert bench_pipelined.main(["--records", "50000", "--rounds", "1"]) == 0
    rows = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines() if line.startswith("| after")]
    assert len(rows) == 1
    code, rounds, processors, broker, rate = (cell.strip() for cell in rows[0])
    assert rounds == "1"
    assert 0 < float(processors.split()[0]) <= float(broker.split()[0])  # the processors are part of the broker
    assert float(rate.split()[0].replace(",", "")) > 0


def test_the_ratio_pairs_each_round_of_this_tree_with_the_baselines_of_the_same_round():
    before = [{"processors_us": us, "broker_us": us, "rate": 1.0} for us in (1.0, 2.0, 4.0)]
    after = [{"processors_us": us, "broker_us": us, "rate": 1.0} for us in (0.5, 2.0, 5.0)]
    lines = bench_pipelined.table({"before": before, "after": after}, {"before": "before: a", "after": "after: b"})
    assert lines[-1] == ("After over before, processors' CPU per record, round by round: median 1.00 "
                         "(from 0.50 to 1.25; 1 of 3 rounds lower).")


def perf_counts_syscalls() -> str | None:
    """Why `perf stat` cannot count the syscall tracepoints here, or None."""
    if shutil.which("perf") is None:
        return "perf is not installed (.ci/run installs linux-perf)"
    if os.geteuid() != 0:
        return "the syscall tracepoints need root"
    return None


@pytest.mark.skipif(perf_counts_syscalls() is not None, reason=str(perf_counts_syscalls()))
def test_syscalls_counts_the_processors_data_path_calls_per_thousand_records(capsys):
    assert bench_pipelined.main(["--records", "50000", "--rounds", "1", "--syscalls"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.startswith("| code | times on a CPU"))
    row = next(line for line in lines[lines.index(header):] if line.startswith("| after"))
    cells = dict(zip((c.strip() for c in header.split("|")[2:-1]), (float(c) for c in row.split("|")[2:-1])))
    assert cells["times on a CPU"] > 0
    for call in ("epoll_wait", "recvfrom", "sendto", "pwrite64"):  # the wait, the request, the answer, the append
        assert cells[call] > 0, call
    data_path = sum(cells[call] for call in ("epoll_wait", "recvfrom", "sendto", "pwrite64"))
    assert data_path >= 0.9 * cells["total"], cells  # a processor under load makes little else (a roll's walk did)


def test_perf_stat_lines_become_counts_and_uncounted_events_are_left_out():
    stderr = ("1234,,raw_syscalls:sys_enter,2001,100.00,,\n"
              "400,,syscalls:sys_enter_pwrite64,2001,100.00,,\n"
              "<not counted>,,syscalls:sys_enter_futex,0,100.00,,\n"
              "\n # started on Mon\n")
    assert syscalls.parse(stderr) == {"total": 1234, "pwrite64": 400}
