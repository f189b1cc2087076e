"""A FUSE file system that loses power: unsynced writes and names live in memory until fsync, as in Jepsen's LazyFS.

What is durable, and when:
- a file's bytes and size once the file is fsynced (fsync, fdatasync, msync: the kernel writes the
  dirty pages of a MAP_SHARED mapping back as WRITE requests, then asks for FSYNC);
- a directory's entries (create, mkdir, rename, unlink, rmdir) once the directory is fsynced.

A power loss forgets the rest. Two choices, made at each loss, give the crash states a real file
system can leave:
- names: `synced` puts each directory's entries back to those of its last fsync (the harshest
  case); `all` keeps every name as it was, as when a journal committed the metadata just before the
  crash but not the data (ext4's delayed allocation: a file renamed before its data was synced comes
  back empty; this is the case Jepsen's LazyFS models);
- data: `empty` gives a file the bytes and size of its last fsync; `zeros` keeps its current size
  with the unsynced pages zeroed, as file systems that log the size but not the data do.
Unsynced writes are never written back on their own, so every loss is as bad as those choices allow.

The kernel's page cache must not serve what the loss forgot: a loss is a sequence of steps the test
drives (`LazyFS.lose_power`): every process using the mount is killed first, then the file system
is unmounted (which drops every cached page and dentry; dirty mmap pages are written back to us
first, and count as unsynced), the unsynced state is dropped, and the same tree is mounted again.
Mounted with `kernel_cache` (no invalidation at open: every change goes through this one kernel,
so its cache is coherent) and without direct_io, so that MAP_SHARED mappings work as on a disk.
Locks (flock, fcntl) are not implemented here, so the kernel keeps them locally, as on a disk.

Run as a daemon process (`python -m mmlog.testing.lazyfs MOUNTPOINT`): it mounts, prints `mounted`,
and reads commands on stdin: `lose NAMES DATA` (unmount, forget, mount again, print `mounted`),
`stats` (one line of JSON: fsyncs, bytes synced, losses) and `stop`.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

from mmlog.system.files import fsync_dir

PAGE = 4096
FALLOC_FL_KEEP_SIZE = 1
HIDDEN = ".fuse_hidden"  # libfuse's names for files unlinked while open (see LazyOperations.hidden)


class Node:
    """An inode: a directory's entries, or a file's pages, each with the state its last fsync made durable."""

    _next_ino = 1

    def __init__(self, is_dir: bool, mode: int) -> None:
        Node._next_ino += 1
        self.ino = Node._next_ino
        self.is_dir = is_dir
        self.mode = mode
        self.mtime_ns = self.ctime_ns = time.time_ns()
        self.entries: dict[str, Node] = {}  # directories: now
        self.durable_entries: dict[str, Node] = {}  # ... as of the last fsync of the directory
        self.pages: dict[int, bytearray] = {}  # files: now (a missing page is a hole)
        self.size = 0
        self.durable_pages: dict[int, bytes] = {}  # ... as of the last fsync of the file
        self.durable_size = 0
        self.dirty: set[int] = set()  # pages changed since the last fsync

    # ------------------------------------------------------------ files

    def read(self, size: int, offset: int) -> bytes:
        end = min(offset + size, self.size)
        out = bytearray()
        pos = offset
        while pos < end:
            page, within = divmod(pos, PAGE)
            n = min(PAGE - within, end - pos)
            data = self.pages.get(page)
            out += data[within:within + n] if data is not None else bytes(n)
            pos += n
        return bytes(out)

    def write(self, data: bytes, offset: int) -> int:
        pos, view = offset, memoryview(data)
        while view:
            page, within = divmod(pos, PAGE)
            n = min(PAGE - within, len(view))
            buf = self.pages.get(page)
            if buf is None:
                buf = self.pages[page] = bytearray(PAGE)
            buf[within:within + n] = view[:n]
            self.dirty.add(page)
            view, pos = view[n:], pos + n
        self.size = max(self.size, offset + len(data))
        self.mtime_ns = time.time_ns()
        return len(data)

    def truncate(self, length: int) -> None:
        if length < self.size:
            last, within = divmod(length, PAGE)
            for page in [p for p in self.pages if p > last or (p == last and within == 0)]:
                del self.pages[page]
            if within and last in self.pages:
                self.pages[last][within:] = bytes(PAGE - within)
            self.dirty.update(range(last, (self.size + PAGE - 1) // PAGE + 1))
        self.size = length
        self.mtime_ns = time.time_ns()

    def sync(self) -> int:
        """fsync: the bytes and size now are what a power loss keeps; returns the bytes written to 'disk'."""
        written = 0
        for page in self.dirty:
            data = self.pages.get(page)
            if data is None or page * PAGE >= self.size:
                self.durable_pages.pop(page, None)
            else:
                self.durable_pages[page] = bytes(data)
                written += PAGE
        self.dirty.clear()
        self.durable_size = self.size
        return written

    # ------------------------------------------------------------ directories

    def sync_entries(self) -> None:
        self.durable_entries = dict(self.entries)


class LazyOperations:
    """The mfusepy operations over an in-memory tree of `Node`s (paths, or handles of unlinked files)."""

    use_ns = True

    def __init__(self) -> None:
        self.root = Node(True, 0o755)
        self.handles: dict[int, Node] = {}
        self._next_fh = 0
        # Files unlinked or replaced while open. libfuse's high-level API reaches a file only by a path, so
        # it renames such a file to `.fuse_hidden...` until its last close; kept here instead, out of every
        # listing and every directory (a broker never sees them, and may remove the directory), they answer
        # fstat and I/O on their open descriptors as a disk would.
        self.hidden: dict[str, Node] = {}
        self.stats = {"fsyncs": 0, "dir_fsyncs": 0, "bytes_synced": 0, "losses": 0}
        self.mounted = threading.Event()

    # ------------------------------------------------------------ power loss

    def lose_power(self, names: str = "synced", data: str = "empty") -> None:
        """Forget everything not fsynced (call between an unmount and the next mount); names, data: as in the
        module docstring."""
        if names not in ("synced", "all") or data not in ("empty", "zeros"):
            raise ValueError(f"lose {names} {data}")
        self.stats["losses"] += 1
        self.handles.clear()
        self.hidden.clear()
        seen: set[int] = set()

        def restore(node: Node) -> None:
            if node.ino in seen:
                return
            seen.add(node.ino)
            if node.is_dir:
                if names == "synced":
                    node.entries = dict(node.durable_entries)
                node.durable_entries = dict(node.entries)
                for child in node.entries.values():
                    restore(child)
                return
            if data == "zeros":  # the size survived, the unsynced data did not
                node.pages = {p: bytearray(d) for p, d in node.durable_pages.items() if p * PAGE < node.size}
            else:
                node.pages = {p: bytearray(d) for p, d in node.durable_pages.items()}
                node.size = node.durable_size
            node.durable_pages = {p: bytes(d) for p, d in node.pages.items()}
            node.durable_size = node.size
            node.dirty.clear()

        restore(self.root)

    # ------------------------------------------------------------ lookup

    def _node(self, path: str | None, fh: int | None = None) -> Node:
        if fh is not None and fh in self.handles:
            return self.handles[fh]
        if path is None:
            raise _error(errno.EBADF)
        name = path.rpartition("/")[2]
        if name.startswith(HIDDEN):
            node = self.hidden.get(name)
            if node is None:
                raise _error(errno.ENOENT)
            return node
        node = self.root
        for part in path.split("/"):
            if not part:
                continue
            if not node.is_dir:
                raise _error(errno.ENOTDIR)
            node = node.entries.get(part)
            if node is None:
                raise _error(errno.ENOENT)
        return node

    def _parent(self, path: str) -> tuple[Node, str]:
        head, _, name = path.rstrip("/").rpartition("/")
        parent = self._node(head or "/")
        if not parent.is_dir:
            raise _error(errno.ENOTDIR)
        return parent, name

    def _handle(self, node: Node) -> int:
        self._next_fh += 1
        self.handles[self._next_fh] = node
        return self._next_fh

    # ------------------------------------------------------------ operations

    def init(self, path):
        self.mounted.set()

    def getattr(self, path, fh=None):
        node = self._node(path, fh)
        kind = stat.S_IFDIR if node.is_dir else stat.S_IFREG
        size = node.size if not node.is_dir else PAGE
        return {"st_mode": kind | node.mode, "st_ino": node.ino, "st_nlink": 2 if node.is_dir else 1,
                "st_size": size, "st_blocks": (len(node.pages) * PAGE) // 512, "st_blksize": PAGE,
                "st_uid": os.getuid(), "st_gid": os.getgid(),
                "st_mtime": node.mtime_ns, "st_ctime": node.ctime_ns, "st_atime": node.mtime_ns}

    def access(self, path, amode):
        self._node(path)
        return 0

    def readdir(self, path, fh):
        """With use_ino an entry needs its inode number: one of 0 is skipped by readdir(3)."""
        node = self._node(path, fh)
        entries = [(".", node), ("..", node), *node.entries.items()]
        return [(name, {"st_mode": (stat.S_IFDIR if n.is_dir else stat.S_IFREG) | n.mode, "st_ino": n.ino}, 0)
                for name, n in entries]

    def opendir(self, path):
        node = self._node(path)
        if not node.is_dir:
            raise _error(errno.ENOTDIR)
        return self._handle(node)

    def releasedir(self, path, fh):
        self.handles.pop(fh, None)
        return 0

    def fsyncdir(self, path, datasync, fh):
        self._node(path, fh).sync_entries()
        self.stats["dir_fsyncs"] += 1
        return 0

    def mkdir(self, path, mode):
        parent, name = self._parent(path)
        if name in parent.entries:
            raise _error(errno.EEXIST)
        parent.entries[name] = Node(True, mode & 0o7777)
        parent.mtime_ns = time.time_ns()
        return 0

    def rmdir(self, path):
        parent, name = self._parent(path)
        node = parent.entries.get(name)
        if node is None:
            raise _error(errno.ENOENT)
        if not node.is_dir:
            raise _error(errno.ENOTDIR)
        if node.entries:
            raise _error(errno.ENOTEMPTY)
        del parent.entries[name]
        return 0

    def create(self, path, mode, fi=None):
        parent, name = self._parent(path)
        node = parent.entries.get(name)
        if node is None:
            node = parent.entries[name] = Node(False, mode & 0o7777)
            parent.mtime_ns = time.time_ns()
        return self._handle(node)

    def open(self, path, flags):
        node = self._node(path)
        if node.is_dir:
            raise _error(errno.EISDIR)
        if flags & os.O_TRUNC:  # libfuse 3 passes O_TRUNC here (atomic_o_trunc) instead of a truncate first
            node.truncate(0)
        return self._handle(node)

    def release(self, path, fh):
        self.handles.pop(fh, None)
        return 0

    def flush(self, path, fh):
        return 0

    def read(self, path, size, offset, fh):
        return self._node(path, fh).read(size, offset)

    def write(self, path, data, offset, fh):
        return self._node(path, fh).write(data, offset)

    def truncate(self, path, length, fh=None):
        self._node(path, fh).truncate(length)
        return 0

    def fallocate(self, path, mode, offset, size, fh):
        if mode & ~FALLOC_FL_KEEP_SIZE:
            raise _error(errno.EOPNOTSUPP)
        node = self._node(path, fh)
        if not mode & FALLOC_FL_KEEP_SIZE and offset + size > node.size:
            node.truncate(offset + size)  # memory is the disk: blocks are always there
        return 0

    def fsync(self, path, datasync, fh):
        self.stats["bytes_synced"] += self._node(path, fh).sync()
        self.stats["fsyncs"] += 1
        return 0

    def unlink(self, path):
        if path.rpartition("/")[2].startswith(HIDDEN):
            if self.hidden.pop(path.rpartition("/")[2], None) is None:
                raise _error(errno.ENOENT)
            return 0
        parent, name = self._parent(path)
        if parent.entries.pop(name, None) is None:
            raise _error(errno.ENOENT)
        parent.mtime_ns = time.time_ns()
        return 0

    def rename(self, old, new):
        old_parent, old_name = self._parent(old)
        new_parent, new_name = self._parent(new)
        node = old_parent.entries.get(old_name) if not old_name.startswith(HIDDEN) else None
        if node is None:
            raise _error(errno.ENOENT)
        target = new_parent.entries.get(new_name)
        if target is not None and target.is_dir and target.entries:
            raise _error(errno.ENOTEMPTY)
        del old_parent.entries[old_name]
        if new_name.startswith(HIDDEN):  # libfuse hiding an open file that is being unlinked or replaced
            self.hidden[new_name] = node
            return 0
        new_parent.entries[new_name] = node
        old_parent.mtime_ns = new_parent.mtime_ns = time.time_ns()
        return 0

    def chmod(self, path, mode, fh=None):
        self._node(path, fh).mode = mode & 0o7777
        return 0

    def chown(self, path, uid, gid, fh=None):
        return 0

    def utimens(self, path, times=None, fh=None):
        node = self._node(path, fh)
        node.mtime_ns = times[1] if times else time.time_ns()
        return 0

    def statfs(self, path):
        return {"f_bsize": PAGE, "f_frsize": PAGE, "f_blocks": 1 << 22, "f_bfree": 1 << 21, "f_bavail": 1 << 21,
                "f_files": 1 << 20, "f_ffree": 1 << 19, "f_favail": 1 << 19, "f_namemax": 255}


def _fuse_class():
    """mfusepy's FUSE, passing the handle to truncate as libfuse 3 gives it (ftruncate of an unlinked file)."""
    from mfusepy import FUSE

    class LazyFUSE(FUSE):
        def truncate_fuse_3(self, path, length, fip):
            fh = fip.contents.fh if fip else None
            return self.operations.truncate(None if path is None else path.decode(self.encoding, self.errors),
                                            length, fh)

    return LazyFUSE


def _error(code: int) -> OSError:
    from mfusepy import FuseOSError

    return FuseOSError(code)


# ---------------------------------------------------------------- the daemon


def unmount(mountpoint: str) -> None:
    """Unmount, waiting for the last user to go (the test killed them; their descriptors close a moment later)."""
    deadline = time.monotonic() + 10
    while True:
        done = subprocess.run(["fusermount3", "-u", mountpoint], capture_output=True, text=True)
        if done.returncode == 0 or time.monotonic() > deadline:
            if done.returncode:
                print(f"lazyfs: unmount failed: {done.stderr.strip()}", file=sys.stderr, flush=True)
            return
        time.sleep(0.05)


def serve(mountpoint: str) -> None:
    """Mount, then serve commands on stdin until `stop` (see the module docstring)."""
    fuse = _fuse_class()
    ops = LazyOperations()
    command: list[list[str]] = []
    wake = threading.Event()

    def read_commands() -> None:
        for line in sys.stdin:
            words = line.split()
            if words == ["stats"]:
                print(json.dumps(ops.stats), flush=True)
                continue
            if words and words[0] in ("lose", "stop"):
                command.append(words)
                ops.mounted.wait()
                unmount(mountpoint)
                wake.set()
        if not command:  # the test went away: unmount and exit
            command.append(["stop"])
            unmount(mountpoint)

    threading.Thread(target=read_commands, daemon=True).start()
    while True:
        ops.mounted.clear()
        threading.Thread(target=lambda: (ops.mounted.wait(), print("mounted", flush=True)), daemon=True).start()
        # allow_other: brokers run as users of their own (partition soaks) use the mount too; the kernel
        # otherwise lets only the mounting user in, whatever its capabilities.
        try:
            fuse(ops, mountpoint, foreground=True, nothreads=True, kernel_cache=True, use_ino=True,
                 default_permissions=False, allow_other=True, fsname="lazyfs")
        except RuntimeError:
            # libfuse ends its loop with an error (8) when the kernel answers its read of /dev/fuse with
            # ECONNABORTED instead of ENODEV as our unmount takes the mount away ("reading device: Software
            # caused connection abort": once in about 90 losses of a soak). After an unmount of ours that is
            # the same end; without one, the file system failed.
            if not command:
                raise
        wake.wait(timeout=10)
        wake.clear()
        words = command.pop(0) if command else ["stop"]
        if words[0] == "stop":
            print("stopped", flush=True)
            return
        ops.lose_power(*words[1:])


def available() -> str | None:
    """Why power-loss tests cannot run here (None if they can): they need root, /dev/fuse, fusermount3, mfusepy."""
    if os.geteuid() != 0:
        return "the power-loss file system needs root (to mount FUSE with kernel_cache for every process)"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse: FUSE is not available in this machine or container"
    if shutil.which("fusermount3") is None:
        return "no fusermount3 (Debian package fuse3)"
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as exc:
        return f"mfusepy cannot load libfuse3: {exc}"
    return None


class LazyFS:
    """A mounted power-loss file system, driven from a test (a daemon process of its own)."""

    def __init__(self, mountpoint: Path) -> None:
        self.mountpoint = Path(mountpoint)
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        args = [sys.executable, "-m", "mmlog.testing.lazyfs", str(self.mountpoint)]
        root = Path(__file__).resolve().parents[2]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                                     cwd=root)
        self._expect("mounted")

    def _expect(self, word: str, timeout: float = 30) -> str:
        result: list[str] = []
        reader = threading.Thread(target=lambda: result.append(self.proc.stdout.readline().strip()), daemon=True)
        reader.start()
        reader.join(timeout)
        if not result or not result[0].startswith(word):
            raise RuntimeError(f"lazyfs did not answer {word!r} (got {result}, exit code {self.proc.poll()})")
        return result[0]

    def _send(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def lose_power(self, names: str = "synced", data: str = "empty") -> None:
        """Everything unsynced is gone (names, data: as in the module docstring). Every process with files
        open under the mount must be dead already."""
        self._send(f"lose {names} {data}")
        self._expect("mounted")

    def stats(self) -> dict:
        self._send("stats")
        return json.loads(self._expect("{"))

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self._send("stop")
                self.proc.wait(timeout=20)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        if _mounted(self.mountpoint):  # still mounted (a user held it, the daemon was killed): detach it
            subprocess.run(["fusermount3", "-u", "-z", str(self.mountpoint)], capture_output=True)


def _mounted(mountpoint: Path) -> bool:
    """Whether a mount is at `mountpoint`, a dead daemon's too (os.path.ismount cannot stat that one)."""
    with open("/proc/self/mounts") as mounts:
        return any(line.split()[1] == str(mountpoint) for line in mounts)


if __name__ == "__main__":
    serve(sys.argv[1])


def broker_machine(mountpoint: Path, broker_id: int) -> LazyFS:
    """A mounted power-loss file system holding broker `broker_id`'s data dir (`broker-<id>`, as
    `cluster_broker` names it), the dir's name synced so that a loss before the broker synced anything keeps
    it. The caller stops it."""
    fs = LazyFS(mountpoint)
    try:
        (fs.mountpoint / f"broker-{broker_id}").mkdir()
        fsync_dir(fs.mountpoint)
    except BaseException:
        fs.stop()
        raise
    return fs


def homes(machines: list[LazyFS]) -> dict[int, Path]:
    """`three_brokers`' homes: each broker's data dir on its own machine."""
    return {i: m.mountpoint for i, m in enumerate(machines)}
