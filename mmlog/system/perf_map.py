"""A perf map of the compiled kernels, so that `perf report` names numba's functions (MMLOG_PERF_MAP=1).

perf resolves an address in code a process made at run time through `/tmp/perf-<pid>.map`, one
"start size name" line (hex) a function. numba writes none: its code is LLVM object code, compiled or
read from the kernel cache, that the JIT loads at addresses of its own. With the variable set, the
broker keeps each object numba hands the JIT from the start on (`install`: numba's object-cache hooks,
wrapped) and, once its kernels are loaded, writes every function symbol of them at the address the
process has it (`write`: an ELF symbol's offset in its section, plus where the JIT put that section,
known from any global symbol of it). A forked processor has its parent's code at the same addresses
and writes the same lines under its own pid. The files stay after the process exits, as perf expects
(it reads them at `perf report` time); nothing is written unless the variable is set.
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path
from typing import NamedTuple

log = logging.getLogger(__name__)

ENV = "MMLOG_PERF_MAP"
_objects: list[tuple[object, bytes]] = []  # (numba code library, its ELF object), in load order

# ELF64, little-endian: section header fields, symbol table entries
_SHDR = struct.Struct("<IIQQQQIIQQ")  # name, type, flags, addr, offset, size, link, info, addralign, entsize
_SYM = struct.Struct("<IBBHQQ")  # name, info, other, section index, value, size
_SHT_SYMTAB, _STT_FUNC, _STB_GLOBAL = 2, 2, 1


class Symbol(NamedTuple):
    name: str
    section: int
    offset: int
    size: int
    is_global: bool


def enabled() -> bool:
    return os.environ.get(ENV, "") not in ("", "0")


def install() -> bool:
    """From now on, keep the object code numba loads or compiles in this process (call before the kernels
    load). False, with a warning, if this numba's JIT does not take the hooks (a version that moved them)."""
    try:
        engine, library_class = _jit()

        def compiled(ll_module, buf):
            library_class._object_compiled_hook(ll_module, buf)
            _keep(ll_module, buf)

        def loaded(ll_module):
            buf = library_class._object_getbuffer_hook(ll_module)
            if buf:
                _keep(ll_module, buf)
            return buf

        engine.set_object_cache(compiled, loaded)
    except Exception as exc:  # noqa: BLE001 - a profiling aid: the broker runs on without it
        log.warning("%s: numba's object hooks are not where this version expects them (%s): no perf map", ENV, exc)
        return False
    return True


def uninstall() -> None:
    """numba's own hooks back, and the kept objects dropped (a test's process compiles on afterwards)."""
    engine, library_class = _jit()
    engine.set_object_cache(library_class._object_compiled_hook, library_class._object_getbuffer_hook)
    _objects.clear()


def _jit():
    """numba's JIT engine for CPU code and its code library class, whose hooks the engine calls."""
    from numba.core import codegen, registry

    return registry.cpu_target.target_context.codegen()._engine, codegen.JITCodeLibrary


def _keep(ll_module, buf) -> None:
    library = getattr(ll_module, "_CPUCodeLibrary__library", None)  # numba's private back-reference
    if library is not None:
        _objects.append((library, bytes(buf)))


def write(pid: int | None = None, directory: Path = Path("/tmp")) -> Path:
    """Write `<directory>/perf-<pid>.map` (this process's pid by default) for every object kept; its path."""
    lines = []
    for library, obj in _objects:
        symbols = functions(obj)
        sections = _section_addresses(library, symbols)
        lines += [f"{sections[s.section] + s.offset:x} {s.size:x} {s.name}\n" for s in symbols if s.section in sections]
    path = Path(directory) / f"perf-{pid or os.getpid()}.map"
    path.write_text("".join(lines))
    return path


def _section_addresses(library, symbols: list[Symbol]) -> dict[int, int]:
    """Where the JIT loaded each section that holds a global function: its address less the symbol's offset."""
    found: dict[int, int] = {}
    for s in symbols:
        if s.is_global and s.section not in found:
            try:
                address = library._codegen._engine.get_function_address(s.name)
            except Exception:  # noqa: BLE001 - a symbol the JIT does not export: another one may
                address = 0
            if address:
                found[s.section] = address - s.offset
    return found


def functions(obj: bytes) -> list[Symbol]:
    """The function symbols of an ELF64 little-endian relocatable object (what LLVM emits for numba)."""
    if obj[:4] != b"\x7fELF" or obj[4] != 2 or obj[5] != 1:
        raise ValueError("not an ELF64 little-endian object")
    (shoff,) = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
    sections = [_SHDR.unpack_from(obj, shoff + i * shentsize) for i in range(shnum)]
    out = []
    for sh in sections:
        if sh[1] != _SHT_SYMTAB:
            continue
        strings = sections[sh[6]][4]  # the linked string table's file offset
        for at in range(sh[4], sh[4] + sh[5], _SYM.size):
            name_at, info, _, section, value, size = _SYM.unpack_from(obj, at)
            if info & 0xF == _STT_FUNC and size:
                start = strings + name_at
                name = obj[start:obj.index(b"\0", start)].decode()
                out.append(Symbol(name, section, value, size, info >> 4 == _STB_GLOBAL))
    return out
