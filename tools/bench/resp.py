"""Just enough of Redis's protocol (RESP2) for a pipelined XADD sender that no Python client limits.

Commands go out as arrays of bulk strings, encoded once before the clock
starts. Replies come back in bulk and are counted, not parsed one by one: every
reply to XADD is a bulk string, `$<n>\\r\\n<id>\\r\\n`, and a stream id holds
no CR or LF, so `k` complete replies are exactly `2k` CRLFs. An error reply
(`-ERR ...\\r\\n`) is the only thing that can start a reply with `-` (an id
starts with a digit), so it is found with one search.
"""

from __future__ import annotations


class RespError(RuntimeError):
    """The server answered a command with an error reply."""


def encode_command(*args: bytes | str | int) -> bytes:
    """One command as a RESP array of bulk strings: `*<argc>\\r\\n` then `$<len>\\r\\n<arg>\\r\\n` per argument."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        if isinstance(arg, str):
            arg = arg.encode()
        elif isinstance(arg, int):
            arg = b"%d" % arg
        parts.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(parts)


def awaited_xadd(sock, command: bytes, buf: bytearray) -> None:
    """Send one XADD and read its reply before returning (RespError unless a bulk string, `$<n>\\r\\n<id>\\r\\n`,
    which arrives in one piece on loopback)."""
    sock.sendall(command)
    n = sock.recv_into(buf)
    if buf[0] != ord("$") or buf[n - 2:n] != b"\r\n":
        raise RespError(f"XADD failed: {bytes(buf[:n])!r}")


class BulkReplyCounter:
    """Counts complete bulk-string replies in a byte stream fed in arbitrary pieces; raises RespError on an
    error reply. `feed(data)` returns how many replies `data` completed; `last` is the last complete one."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self.count = 0
        self.last = b""

    def feed(self, data) -> int:
        buf = self._buf
        buf += data
        if buf.startswith(b"-") or b"\r\n-" in buf:
            at = 0 if buf.startswith(b"-") else buf.index(b"\r\n-") + 2
            end = buf.find(b"\r\n", at)
            if end < 0:
                return 0  # the rest of the error line is on its way
            raise RespError(bytes(buf[at + 1 : end]).decode(errors="replace"))
        crlfs = buf.count(b"\r\n")
        if crlfs < 2:
            return 0
        last = buf.rfind(b"\r\n")
        if crlfs % 2:  # the last CRLF ends the header of a reply still incomplete
            last = buf.rfind(b"\r\n", 0, last)
        header = buf.rfind(b"\r\n", 0, last)  # before the last complete reply's value
        self.last = bytes(buf[header + 2 : last])
        del buf[: last + 2]
        done = crlfs // 2
        self.count += done
        return done
