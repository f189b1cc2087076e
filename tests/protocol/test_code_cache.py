"""The codecs' compiled code: one code object for every codec with the same source, kept in a file between
processes; any damage to the file, or a directory that cannot be written, only means compiling again."""

from __future__ import annotations

import importlib.util
import marshal
import os
import subprocess
import sys
import time
import traceback
import zlib

import pytest

from mmlog.protocol import codegen
from mmlog.protocol.code_cache import ENV, FORMAT, HEADER, CodeCache, cache_file, default_directory, load, store
from mmlog.protocol.errors import TruncatedError
from mmlog.protocol.messages import APIS
from mmlog.protocol.codegen import compile_struct
from mmlog.protocol.structs import Struct
from .protocol_samples import every_api_version, sample

CASES = [(api, version, kind) for api, version in every_api_version() for kind in ("request", "response")]
IDS = [f"{api.name}-v{version}-{kind}" for api, version, kind in CASES]


def _message(api, kind):
    return api.request if kind == "request" else api.response


class _Alone:
    """Every source compiled by itself, as the codec did before code was shared: the baseline."""

    def __init__(self) -> None:
        self.compiled = 0
        self.sources = set()

    def code(self, source: str):
        self.compiled += 1
        self.sources.add(source)
        return compile(source, "<mmlog codec>", "exec", dont_inherit=True)


def _build(codes, apis=APIS.values()) -> dict:
    """Fresh (read, write) of every request and response version of `apis`, by (message, version), their code
    taken from `codes`."""
    messages = [m for api in apis for m in (api.request, api.response)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(codegen, "CODE", codes)
        return {(m, v): compile_struct(m, v, m.is_flexible(v))
                for m in messages for v in range(m.min_version, m.max_version + 1)}


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """The codecs compiled three ways: each source alone, shared in a process, loaded from a cache file."""
    path = cache_file(tmp_path_factory.mktemp("codec-cache"))
    writer = CodeCache(path)
    _build(writer)
    assert writer.save()
    loaded = CodeCache(path)
    builds = {"alone": _build(_Alone()), "shared": _build(CodeCache(None)), "loaded": _build(loaded)}
    assert loaded.compiled == 0, "the cache file lacked sources the first build wrote"
    return builds


def _as_dicts(value):
    """The value with every struct in it a plain dict, as handlers build them (the generated dict writers)."""
    if isinstance(value, Struct):
        return {name: _as_dicts(getattr(value, name)) for name in value.__slots__}
    if isinstance(value, list):
        return [_as_dicts(item) for item in value]
    return value


@pytest.mark.parametrize("api, version, kind", CASES, ids=IDS)
@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
def test_shared_and_loaded_code_encode_and_decode_as_code_compiled_alone(builds, api, version, kind, nulls):
    message = _message(api, kind)
    value = sample(message, version, nulls=nulls)
    encodings, decodings = {}, {}
    for how, codecs in builds.items():
        read, write = codecs[message, version]
        for form, given in (("instance", value), ("dicts", _as_dicts(value))):
            out = bytearray()
            write(out, given)
            encodings[how, form] = bytes(out)
        decodings[how], end = read(memoryview(encodings[how, "instance"]), 0)
        assert end == len(encodings[how, "instance"])
    assert len(set(encodings.values())) == 1, encodings
    assert decodings["shared"] == decodings["alone"] == decodings["loaded"] == value


def test_versions_with_the_same_source_share_one_code_object():
    alone, shared = _Alone(), CodeCache(None)
    _build(alone)
    _build(shared)
    assert shared.compiled == len(shared.used) == len(alone.sources) < alone.compiled


def test_a_traceback_through_shared_code_names_the_codec_and_version_it_ran():
    api, first = next((api, v) for api, v in every_api_version()
                      if api.request.supports(v + 1)
                      and api.request.codec(v)[0].source == api.request.codec(v + 1)[0].source)
    for version in (first, first + 1):
        with pytest.raises(TruncatedError) as raised:
            api.request.decode(b"", version)
        frames = [frame.filename for frame in traceback.extract_tb(raised.value.__traceback__)]
        assert f"<mmlog codec {api.request.name} v{version} read>" in frames


def test_a_process_after_the_first_compiles_no_codec(tmp_path):
    script = ("from mmlog.protocol import codegen, precompile; precompile(); "
              "print(codegen.CODE.compiled, len(codegen.CODE.used))")
    env = {**os.environ, ENV: str(tmp_path / "cache")}
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True,
                           timeout=120).stdout.split() for _ in range(2)]
    (compiled_first, used), (compiled_second, used_second) = map(lambda r: map(int, r), runs)
    assert compiled_first == used == used_second > 0
    assert compiled_second == 0


# --- the file --------------------------------------------------------------------------------------------------------

def _framed(payload: bytes) -> bytes:
    """A payload under a header that is right for it (this layout, this Python, its length and CRC)."""
    return HEADER.pack(FORMAT, importlib.util.MAGIC_NUMBER, zlib.crc32(payload), len(payload)) + payload


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1:]


DAMAGE = {
    "empty": lambda good: b"",
    "only the header": lambda good: good[:HEADER.size],
    "cut in half": lambda good: good[:len(good) // 2],
    "one bit flipped in the code": lambda good: _flip(good, len(good) - 100),
    "one bit flipped in the length": lambda good: _flip(good, 16),
    "another layout": lambda good: b"mmlogcc0" + good[8:],
    "another python's magic": lambda good: good[:8] + b"\x00\x00\r\n" + good[12:],
    "not a dict": lambda good: _framed(marshal.dumps([1, 2, 3])),
    "a dict of other things": lambda good: _framed(marshal.dumps({"def read(): pass\n": b"not code"})),
    "garbage under a good checksum": lambda good: _framed(b"\xff" * 64),
}


def _some_codecs(codes: CodeCache) -> dict:
    """Produce's and Fetch's codecs of every version, their code taken from `codes`."""
    return _build(codes, (APIS[0], APIS[1]))


def _assert_they_work(codecs: dict) -> None:
    for (message, version), (read, write) in codecs.items():
        value = sample(message, version)
        out = bytearray()
        write(out, value)
        assert read(memoryview(bytes(out)), 0) == (value, len(out))


@pytest.mark.parametrize("damage", DAMAGE, ids=list(DAMAGE))
def test_a_damaged_cache_file_is_an_empty_cache_and_is_then_rewritten_whole(tmp_path, damage):
    path = cache_file(tmp_path)
    first = CodeCache(path)
    _some_codecs(first)
    first.save()
    good = path.read_bytes()
    path.write_bytes(DAMAGE[damage](good))
    assert load(path) == {}
    again = CodeCache(path)
    _assert_they_work(_some_codecs(again))
    assert again.compiled == len(again.used) > 0
    assert again.save()
    assert load(path).keys() == again.used.keys()


def test_an_unreadable_cache_file_is_an_empty_cache(tmp_path):
    path = cache_file(tmp_path)
    path.mkdir()  # a directory where the file should be: reading it fails, and so does replacing it
    codes = CodeCache(path)
    _assert_they_work(_some_codecs(codes))
    assert codes.compiled > 0
    assert not codes.save()
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left behind


def test_a_cache_directory_that_cannot_be_made_leaves_the_codecs_compiled(tmp_path):
    (tmp_path / "a-file").write_text("")
    path = cache_file(tmp_path / "a-file" / "cache")  # as a read-only install would: mkdir fails
    codes = CodeCache(path)
    _assert_they_work(_some_codecs(codes))
    assert not codes.save()
    assert load(path) == {}


def test_a_directory_others_may_write_is_neither_read_nor_written(tmp_path):
    directory = tmp_path / "shared"
    directory.mkdir(mode=0o700)
    path = cache_file(directory)
    codes = CodeCache(path)
    _some_codecs(codes)
    assert codes.save() and load(path)
    directory.chmod(0o777)
    assert load(path) == {}
    assert not store(path, codes.used)


def test_nothing_is_written_when_every_source_came_from_the_file(tmp_path):
    path = cache_file(tmp_path)
    first = CodeCache(path)
    _some_codecs(first)
    assert first.save()
    stamp = path.stat().st_mtime_ns, path.stat().st_ino
    second = CodeCache(path)
    _some_codecs(second)
    assert second.compiled == 0
    assert not second.save()
    assert (path.stat().st_mtime_ns, path.stat().st_ino) == stamp


def test_the_file_keeps_a_few_sources_of_another_generator_but_not_a_whole_other_one(tmp_path):
    path = cache_file(tmp_path)
    ours = CodeCache(None)
    _some_codecs(ours)
    few = {f"x = {i}\n": compile(f"x = {i}\n", "<x>", "exec") for i in range(3)}
    store(path, few)
    codes = CodeCache(path)
    _some_codecs(codes)
    assert codes.save()
    assert load(path).keys() == few.keys() | ours.used.keys()
    many = {f"x = {i}\n": compile(f"x = {i}\n", "<x>", "exec") for i in range(3 * len(ours.used))}
    store(path, many)
    codes = CodeCache(path)
    _some_codecs(codes)
    assert codes.save()
    assert load(path).keys() == ours.used.keys()


def test_readers_see_a_whole_file_while_several_processes_write_it(tmp_path):
    path = cache_file(tmp_path)
    codes = CodeCache(path)
    _some_codecs(codes)
    codes.save()
    expected = load(path).keys()
    script = (f"from pathlib import Path; from mmlog.protocol.code_cache import load, store; "
              f"path = Path({str(path)!r}); codes = load(path); assert codes\n"
              f"for _ in range(40): assert store(path, codes)")
    writers = [subprocess.Popen([sys.executable, "-c", script]) for _ in range(3)]
    try:
        loads = 0
        while any(w.poll() is None for w in writers) or loads == 0:
            assert load(path).keys() == expected
            loads += 1
    finally:
        codes_returned = [w.wait(timeout=60) for w in writers]
    assert codes_returned == [0, 0, 0]
    assert not list(tmp_path.glob("*.tmp"))


def test_a_crashed_writers_old_temporary_file_is_removed_by_the_next_write(tmp_path):
    path = cache_file(tmp_path)
    old, recent = tmp_path / f".{path.name}.crashed.tmp", tmp_path / f".{path.name}.writing.tmp"
    old.write_bytes(b"half")
    recent.write_bytes(b"half")
    an_hour_ago = time.time() - 3700
    os.utime(old, (an_hour_ago, an_hour_ago))
    assert store(path, {})
    assert not old.exists() and recent.exists()


def test_the_directory_is_the_environments_or_the_users_cache(monkeypatch, tmp_path):
    monkeypatch.setenv(ENV, str(tmp_path))
    assert default_directory() == tmp_path
    monkeypatch.setenv(ENV, "")
    assert default_directory() is None
    monkeypatch.delenv(ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_directory() == tmp_path / "xdg" / "mmlog"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_directory() == tmp_path / "home" / ".cache" / "mmlog"
    assert cache_file(tmp_path).name == f"codecs-{sys.implementation.cache_tag}.bin"
