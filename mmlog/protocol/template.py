"""Frame templates: a frame the codec encoded once, re-used with a few fixed-width fields changed.

A producer sends thousands of Produce requests a second that differ only in their
size, correlation id and records; a broker answers them with responses that differ
only in the correlation id, base offset and log start offset. Encoding each one
field by field costs 3-4 µs; copying a template and patching three integers, 1 µs.

A `FrameTemplate` is made by encoding a message whose chosen fields hold *marker
values* (`MARKS`: integers made of one byte value 0xD1-0xF4 repeated, which the
lengths, counts and names of a small frame do not contain), then finding where each
marker landed. It refuses to be made (`TemplateError`) if a marker is not found
exactly once: the caller then keeps using the codec. So the layout is always the
codec's own; nothing here knows any message's fields. A frame of a non-flexible
version has exactly one encoding, so a frame that equals the template outside its
fields is that message with other values in them.

- `fill(*values)` copies the frame and writes the values at the fields' positions.
- `read(frame)` is the reverse for received frames: if the frame has the template's
  length and equals it outside the fields, it returns the fields' values; otherwise
  None, and the caller decodes the frame with the codec (an error message, a record
  error, anything unusual). Adjacent fields are read with one struct.

Fields at positions known without a marker (the size prefix, the correlation id)
are given as (struct, position) instead.
"""

from __future__ import annotations

import struct

I16, I32, I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")


def _marks(first: int, width: int) -> tuple:
    """Four marker values of `width` bytes: each one byte value repeated, different per marker."""
    return tuple(int.from_bytes(bytes([first + i]) * width, "big", signed=True) for i in range(4))


# Markers: bytes 0xF1-0xF4 (int16), 0xE1-0xE4 (int32), 0xD1-0xD4 (int64), one value per field of a
# template; no marker is a substring of another, and small frames have no such runs of bytes.
MARKS = {I16: _marks(0xF1, 2), I32: _marks(0xE1, 4), I64: _marks(0xD1, 8)}


class TemplateError(ValueError):
    """A marker is missing or ambiguous in the encoded frame: encode with the codec instead."""


class FrameTemplate:
    """An encoded frame and the positions of its variable fixed-width fields."""

    __slots__ = ("frame", "size", "fields", "skip", "_same", "_runs", "fill")

    def __init__(self, frame, fields: list, skip: int = 0) -> None:
        """frame: the encoded bytes; fields: per variable field, in the order they lie in the frame,
        (struct, marker value) to find or (struct, position) for a known place (a marker value
        is negative, a position not). skip: how many leading bytes of the template the frames
        given to `read` lack (4: the size prefix, which a framer strips); fields there read as None."""
        frame = bytes(frame)
        located = []
        for packer, where in fields:
            if where < 0:
                mark = packer.pack(where)
                at = frame.find(mark)
                if at < 0 or frame.find(mark, at + 1) >= 0:
                    raise TemplateError(f"marker {mark.hex()} found {frame.count(mark)} times")
                where = at
            located.append((where, packer))
        if [at for at, _ in located] != sorted(at for at, _ in located):
            raise ValueError("fields must be given in the order they lie in the frame")
        spans = [(at, at + packer.size) for at, packer in located]
        if any(a[1] > b[0] for a, b in zip(spans, spans[1:])):
            raise TemplateError("fields overlap")
        self.frame = frame
        self.size = len(frame)
        self.skip = skip
        self.fields = tuple((packer, at) for at, packer in located)
        # The bytes between fields, as positions in a received frame: what `read` finds equal.
        bounds = [0] + [x for span in spans for x in span] + [len(frame)]
        self._same = tuple((max(a, skip) - skip, b - skip, frame[max(a, skip):b])
                           for a, b in zip(bounds[::2], bounds[1::2]) if b > max(a, skip))
        # Adjacent fields are read with one struct: (struct, position in a received frame or -1).
        # A run never spans the skipped prefix: the fields after it would read as None too.
        runs: list = []  # [struct format, position in the template, size]
        for at, packer in located:
            if runs and runs[-1][1] + runs[-1][2] == at and runs[-1][1] >= skip:
                runs[-1][0] += packer.format[1:]
                runs[-1][2] += packer.size
            else:
                runs.append([">" + packer.format[1:], at, packer.size])
        self._runs = tuple((struct.Struct(fmt), at - skip if at >= skip else -1) for fmt, at, _ in runs)
        self.fill = _filler(frame, located)

    # fill(*values) -> bytearray: a copy of the frame with the fields set to values (in frame order;
    # values past the last field are ignored: one call serves versions with and without a field). An attribute, made by `_filler`: one struct call per answer instead of one per field.

    def read(self, frame) -> tuple | None:
        """The fields' values (in frame order) if the frame (lacking the first `skip` bytes)
        matches the template outside them, else None."""
        if len(frame) != self.size - self.skip:
            return None
        for a, b, same in self._same:
            if frame[a:b] != same:
                return None
        values = []
        for packer, at in self._runs:
            if at >= 0:
                values += packer.unpack_from(frame, at)
            else:
                values += (None,) * (len(packer.format) - 1)
        return tuple(values)


def _filler(frame: bytes, located: list):
    """fill(*values) for fields at `located` [(position, struct)]: the frame copied, then every field
    written by one struct whose format spans them, the constant bytes between them given back as
    `Ns` items. Generated straight-line code (as the codec's, protocol/schema.py): no loop per answer."""
    fmt, items, names = ">", [], {"frame": frame}
    pos = located[0][0] if located else 0
    for k, (at, packer) in enumerate(located):
        if at > pos:
            names[f"gap{k}"] = frame[pos:at]
            fmt += f"{at - pos}s"
            items.append(f"gap{k}")
        fmt += packer.format[1:]
        items.append(f"v{k}")
        pos = at + packer.size
    names["pack_into"] = struct.Struct(fmt).pack_into
    args = ", ".join([f"v{k}" for k in range(len(located))] + ["*_"])  # values past the fields are ignored
    write = f"    pack_into(out, {located[0][0]}, {', '.join(items)})\n" if located else ""
    exec(f"def fill({args}):\n    out = bytearray(frame)\n{write}    return out\n", names)
    return names["fill"]
