"""The compiled code of the generated codecs: compiled once per process, and kept on disk between processes.

Theory of operation
-------------------

``codegen`` writes every (struct, version) reader and writer as Python source and execs it (see its
``_Generated``). ``precompile()`` generates 2,266 sources, of which 967 are distinct (a struct whose fields
do not change between two versions has the same text in both), and ``compile()`` of them was most of its
CPU: 0.42 s of a broker's start on a quiet machine (docs/benchmarks.md, ``test-suite-costs``).

*Within a process* each distinct source is compiled once (`CodeCache.code`), and every codec with that
text execs the same code object in its own namespace. That is safe because the generated code names every
object it uses (``r0`` the reader of step 0, ``cls``, ``splice``...) as a global of that namespace: the
text holds no per-codec state but field names and sizes, and the text is the key. A code object is
immutable; its filename, which tracebacks show, is set per function by ``codegen`` after the exec.

*Between processes* the code objects are kept in one file (`load`, `store`): every broker start, and the
several hundred of a test-suite run, would otherwise compile the same 967 sources again (0.2-0.3 s of
CPU each); loading them is a read and a ``marshal.loads`` of 1.8 MB (a few ms).

The key is the whole source text, so a code object is only ever used for exactly the text it was compiled
from: a change to the generator, the schema tables or the primitives that changes a source makes it miss
(it compiles as without a cache), and one that does not change a source cannot change its code. Code is
compiled with ``dont_inherit=True``, so nothing but the text decides it. Marshal's code format belongs to
one bytecode version: the file's name carries ``sys.implementation.cache_tag`` and its header the
interpreter's ``importlib.util.MAGIC_NUMBER`` (what a ``.pyc`` checks).

File layout (``codecs-<cache_tag>.bin``, little-endian)::

    0   8  b"mmlogcc1" (this layout)
    8   4  importlib.util.MAGIC_NUMBER
    12  4  CRC-32 (zlib) of the payload
    16  8  payload length
    24  -  marshal.dumps({source text: code object})

Loading and failures: a file that is missing, unreadable, short, of another magic or layout, fails its
length or CRC, or does not unmarshal to a dict of str -> code is an empty cache, silently: everything
compiles, exactly as without it. The CRC is checked before ``marshal.loads`` sees a byte, as unmarshalled
bytecode that was flipped on disk could crash the interpreter rather than raise.

Writing and its crash points: ``store`` writes a temporary file of a unique name in the cache directory
and renames it over the cache file (``os.replace``). A reader opens either the old file or the new one,
never a part of one; writers at the same moment (several brokers starting in a test, a broker and a
client) each replace a whole file, and the last one stays. A crash before the rename leaves a ``.tmp``
file that no reader opens (the next ``store`` removes those older than an hour); there is no fsync, so a
crash of the machine just after a rename may leave a short or zeroed file: its CRC fails, it is an empty
cache, and the next ``precompile()`` rewrites it. Any OSError (a read-only install, a full disk) leaves
things as they are: the cache is only a saving.

What a file holds: ``CodeCache.save`` (called by ``precompile()``) writes only if the process compiled
sources the file lacked, and writes the sources it used plus those it loaded, unless that is more than
twice what it used (the file then held an older generator's sources: it is rewritten with the current
ones). Two worktrees whose generators differ a little so share one file without rewriting it in turn. A
process holds the whole file's code from its first codec (2.7 MB) until ``save`` lets it go: a client that
uses a few codecs and never calls ``precompile()`` keeps it, the price of compiling nothing.

Where: ``$MMLOG_CODEC_CACHE_DIR`` if set (set empty: no cache on disk), else ``$XDG_CACHE_HOME/mmlog``, else
``~/.cache/mmlog`` (for the systemd unit in tools/systemd, the mmlog user's home, /var/lib/mmlog; a home
the broker cannot write just means no cache). The code loaded from there runs in the broker as a ``.pyc``
would, so a directory that is not the user's own, or that group or others may write (``/tmp``), is not
used at all.
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import struct
import sys
import time
import zlib
from pathlib import Path
from types import CodeType

from mmlog.system import user_cache

ENV = "MMLOG_CODEC_CACHE_DIR"
FORMAT = b"mmlogcc1"
HEADER = struct.Struct("<8s4sIQ")  # format, magic, CRC-32 of the payload, payload length
_STALE_TMP = 3600.0  # seconds after which a .tmp file is a crashed writer's (a write takes milliseconds)


def default_directory() -> Path | None:
    """The cache directory: $MMLOG_CODEC_CACHE_DIR, else $XDG_CACHE_HOME/mmlog, else ~/.cache/mmlog; None for none."""
    if ENV in os.environ:
        return Path(os.environ[ENV]) if os.environ[ENV] else None
    directory = user_cache.directory()
    return Path(directory) if directory is not None else None


def cache_file(directory: Path | None) -> Path | None:
    """The file of this interpreter's bytecode version in `directory`; None if it has none (no cache_tag)."""
    tag = sys.implementation.cache_tag
    return None if directory is None or tag is None else directory / f"codecs-{tag}.bin"


def load(path: Path | None) -> dict[str, CodeType]:
    """The code objects in the cache file by their source text; {} for no file or one that is not whole."""
    if path is None or not user_cache.trusted(path.parent):
        return {}
    try:
        data = path.read_bytes()
    except OSError:
        return {}
    if len(data) < HEADER.size:
        return {}
    layout, magic, crc, size = HEADER.unpack_from(data)
    payload = memoryview(data)[HEADER.size:]
    if (layout, magic) != (FORMAT, importlib.util.MAGIC_NUMBER) or size != len(payload) or crc != zlib.crc32(payload):
        return {}
    try:
        codes = marshal.loads(payload)
    except (EOFError, ValueError, TypeError):
        return {}
    if type(codes) is not dict or not all(type(k) is str and type(v) is CodeType for k, v in codes.items()):
        return {}
    return codes


def store(path: Path | None, codes: dict[str, CodeType]) -> bool:
    """Replace the cache file with `codes` (whole, by rename); False, and nothing changed, if it cannot."""
    if path is None:
        return False
    import tempfile  # here: it costs a client's import of the protocol ~8 ms, and only a writer needs it

    payload = marshal.dumps(codes)
    header = HEADER.pack(FORMAT, importlib.util.MAGIC_NUMBER, zlib.crc32(payload), len(payload))
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not user_cache.trusted(path.parent):
            return False
        _remove_stale_temporaries(path)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(header)
            f.write(payload)
        os.replace(tmp, path)
        return True
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False


def _remove_stale_temporaries(path: Path) -> None:
    """Unlink the .tmp files of writers that crashed before their rename (an hour old: not one writing now)."""
    now = time.time()
    for tmp in path.parent.glob(f".{path.name}.*.tmp"):
        try:
            if now - tmp.stat().st_mtime > _STALE_TMP:
                tmp.unlink()
        except OSError:
            pass


class CodeCache:
    """Code objects of generated sources: each compiled once per process, loaded from one file if it has them."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.used: dict[str, CodeType] = {}  # every source this process execs, by its text
        self.compiled = 0  # sources compiled here (the file did not hold them)
        self._saved = 0  # `compiled` when the file was last written
        self._disk: dict[str, CodeType] | None = None  # the file's code, read at the first source

    def code(self, source: str) -> CodeType:
        """The code object of `source` (a module that defines the codec's functions)."""
        code = self.used.get(source)
        if code is None:
            if self._disk is None:
                self._disk = load(self.path)
            code = self._disk.get(source)
            if code is None:
                code = compile(source, "<mmlog codec>", "exec", dont_inherit=True)
                self.compiled += 1
            self.used[source] = code
        return code

    def save(self) -> bool:
        """Write the file if this process compiled sources it lacked (see the module docstring); True if written."""
        if self.compiled == self._saved:
            return False
        keep = {**(self._disk or {}), **self.used}
        if len(keep) > 2 * len(self.used):
            keep = self.used  # the file held another generator's sources: start it again with ours
        self._saved = self.compiled
        self._disk = {}  # every source in use is in `used` now: the loaded dict need not stay in memory
        return store(self.path, keep)
