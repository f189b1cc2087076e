"""Arrays that hold no reference: compiled code's own views of arrays its caller keeps alive.

An array numba receives from Python carries a meminfo, and every copy of it inside compiled code
(an argument passed on, a tuple's member read, a variable assigned) takes and drops a reference:
an atomic increment and decrement of a count shared with the interpreter. The compiled request
loop passes some forty arrays (its buffers, scratch tables, the partition table, the shared
blocks) down five calls for every request, which came to about 280 atomic operations a request.
`unowned` gives compiled code the same arrays with no meminfo: the reference counting calls see
NULL and do nothing. It is safe only where the caller holds the arrays for as long as compiled
code uses them, as the processor's Python loop does for the whole of a `serve` call.
"""

from __future__ import annotations

from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


def _strip(context, builder, ty, value):
    """`value` of type `ty` with every array in it (nested tuples too) rebuilt without its meminfo and parent."""
    if isinstance(ty, types.Array):
        ary = context.make_array(ty)(context, builder, value)
        ary.meminfo = cgutils.get_null_value(ary.meminfo.type)
        ary.parent = cgutils.get_null_value(ary.parent.type)
        return ary._getvalue()
    if isinstance(ty, types.BaseTuple):
        members = [_strip(context, builder, t, builder.extract_value(value, i)) for i, t in enumerate(ty)]
        return context.make_tuple(builder, ty, members)
    return value


@intrinsic
def unowned(typingctx, value):
    """`value` (an array, or a tuple of arrays and tuples of them) as views holding no reference."""

    def codegen(context, builder, signature, args):
        return _strip(context, builder, signature.args[0], args[0])

    return value(value), codegen
