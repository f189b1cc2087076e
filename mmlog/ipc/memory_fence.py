"""A full memory fence between processes sharing a page: `full_fence()`.

x86-64 keeps stores in order with stores and loads with loads, which the seqlocks
rely on (log/state.py), but lets a load overtake an earlier store to another
address while that store waits in the core's store buffer. Two processes that each
store one word and then load the other's (Dekker's pattern: the wake board's
"I parked a fetch" against "I appended records") can then both miss the other's
store. A fence between the store and the load forbids that. Python has none, so
this is LLVM's `fence seq_cst` compiled by numba (on x86-64 a locked `or` to the
stack, as good as mfence; dmb ish on arm64); a call from Python costs about 0.3 µs.
"""

from __future__ import annotations

from numba import njit, types
from numba.extending import intrinsic


@intrinsic
def _fence(typingctx):
    def codegen(context, builder, signature, args):
        builder.fence("seq_cst")
        return context.get_dummy_value()

    return types.void(), codegen


@njit(cache=True, nogil=True)
def full_fence() -> None:
    """No load after this call is served before every store made before it is visible to other processes."""
    _fence()


def warm() -> None:
    """Compile it (before forking: processors inherit it)."""
    full_fence()
