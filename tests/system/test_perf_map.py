"""With MMLOG_PERF_MAP set, perf can name the compiled kernels: each function numba loads is written to
/tmp/perf-<pid>.map at the address the process has it, by the broker's main process and by each processor."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from numba import njit

from mmlog.client import Admin, Producer
from mmlog.system import perf_map
from mmlog.testing import EmbeddedBroker


def mapped(path: Path) -> dict[str, tuple[int, int]]:
    """name -> (start, size) of a perf map."""
    out = {}
    for line in path.read_text().splitlines():
        start, size, name = line.split(" ", 2)
        out[name] = (int(start, 16), int(size, 16))
    return out


@pytest.fixture
def installed():
    assert perf_map.install()
    yield
    perf_map.uninstall()


def test_a_function_compiled_after_install_is_mapped_where_numba_put_it(tmp_path, installed):
    @njit(cache=False)
    def squares_below(n):
        total = 0
        for i in range(n):
            total += i * i
        return total

    assert squares_below(4) == 14
    result = squares_below.overloads[squares_below.signatures[0]]
    entry = result.library.get_pointer_to_function(result.fndesc.llvm_func_name)
    functions = mapped(perf_map.write(directory=tmp_path))
    assert functions[result.fndesc.llvm_func_name][0] == entry
    assert functions[result.fndesc.llvm_func_name][1] > 0
    assert (tmp_path / f"perf-{os.getpid()}.map").exists()


def test_what_is_not_an_elf_object_is_refused():
    with pytest.raises(ValueError):
        perf_map.functions(b"not an object file")


def test_the_broker_and_each_processor_write_a_map_naming_the_compiled_loop(tmp_path, monkeypatch):
    monkeypatch.setenv(perf_map.ENV, "1")
    maps = []
    try:
        with EmbeddedBroker(tmp_path / "data", processors=1) as broker:
            Admin(broker.bootstrap).create_topic("mapped", 1)
            with Producer(broker.bootstrap) as producer:
                producer.send("mapped", b"v").get(timeout=20)
            maps = [Path(f"/tmp/perf-{pid}.map") for pid in (broker.pid, *broker.processor_pids())]
            for path in maps:
                names = mapped(path)
                assert any("compiled4loop5serve" in name for name in names), path
                assert any("crc32c" in name for name in names), path
    finally:
        for path in maps:
            path.unlink(missing_ok=True)


def test_after_uninstall_nothing_more_is_kept():
    assert perf_map.install()
    perf_map.uninstall()

    @njit(cache=False)
    def halves(n):
        return n // 2

    assert halves(8) == 4
    assert perf_map._objects == []
