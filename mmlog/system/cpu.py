"""CPU instructions numba code uses directly: SSE4.2's CRC-32C, and unaligned 8-byte loads.

`HAS_SSE42` says whether this CPU has the crc32 instruction (every x86-64 CPU since 2008); kernels
that use it are chosen only then, so a CPU without it never compiles a call to it.
"""

from __future__ import annotations

import platform

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


def _has_sse42() -> bool:
    if platform.machine() not in ("x86_64", "AMD64"):
        return False
    try:
        with open("/proc/cpuinfo") as info:
            return any(line.startswith("flags") and " sse4_2" in line for line in info)
    except OSError:
        return False


HAS_SSE42 = _has_sse42()


@intrinsic
def crc32c_u64(typingctx, crc, word):
    """SSE4.2 crc32 of an 8-byte word into crc (reflected CRC-32C, no final xor)."""
    sig = types.uint64(types.uint64, types.uint64)

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i64, [i64, i64]),
                                            "llvm.x86.sse42.crc32.64.64")
        return builder.call(fn, args)
    return sig, codegen


@intrinsic
def crc32c_u8(typingctx, crc, byte):
    """SSE4.2 crc32 of one byte into crc."""
    sig = types.uint32(types.uint32, types.uint8)

    def codegen(context, builder, signature, args):
        i32, i8 = ir.IntType(32), ir.IntType(8)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i32, [i32, i8]),
                                            "llvm.x86.sse42.crc32.32.8")
        return builder.call(fn, args)
    return sig, codegen


@intrinsic
def load_u64(typingctx, array, p):
    """The 8 bytes at array[p] (a uint8 array) as one little-endian uint64: one unaligned load."""
    sig = types.uint64(array, p)

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        pointer = builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(64).as_pointer())
        return builder.load(pointer, align=1)
    return sig, codegen
