"""Network partitions on one machine: brokers as users of their own, links cut by nftables.

Every broker of a partitioned cluster runs as its own system user (`mmlog-b0`, `mmlog-b1`, ...;
`EmbeddedBroker(user=...)`), ZooKeeper and the clients as root, all on 127.0.0.1. A `Network` owns an
nftables table of this process's own (`inet mmlog_test_<pid>_<start>`, deleted when it closes, whatever
happened) with one output chain; on loopback every packet passes the output hook, both ways:

- Marking: a packet of a connection to a server port (ZooKeeper's, a broker's listener) sent by a
  party's socket (`meta skuid`) sets the connection's conntrack mark to that party's. Only the
  connecting side sends to a server port, so the mark names who opened the connection, and replies
  (from the server port) carry it too: the mark is how replies, sent by a socket of another user
  (ZooKeeper's replies are root's), are told apart.
- Cutting a link between a connecting party and a server drops every packet whose connection has
  the party's mark and whose destination or source port is the server's: both directions of the
  connections it has open, and the SYNs of new ones. Nothing is reset: as in a real partition, the
  two ends learn it only from their own timeouts.

Links are named by the two parties ("zk", "clients", or a broker id): a broker and ZooKeeper (its
session), two brokers (replica fetches and transaction markers, both ways), a broker and the clients
(the test's root-owned sockets to its listener: the test's own admin connections go too).

A process killed before it closes its Network (a test run stopped with SIGKILL) cannot delete its table,
and a table left behind is not harmless: its cuts keep dropping a broker user's packets to ports a later
run may be given, and its conntrack marks cost every loopback packet of the machine. The table's name
carries its owner's pid and start time, so the next Network deletes the tables of processes that are gone.

Needs root (nft, useradd, setpriv); `skip_unless_root()` says why not otherwise.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
from pathlib import Path

ZK, CLIENTS = "zk", "clients"
PREFIXES = ("mmlog_test_", "mmlog_probe_")  # the tables this module makes, each named <prefix><pid>_<start>


def skip_unless_root() -> None:
    """Skip the calling test, with the reason, where partitions cannot be made."""
    import pytest  # here: the soaks use the rest without pytest

    reason = unavailable()
    if reason:
        pytest.skip(reason)


def unavailable() -> str | None:
    """Why partitions cannot be made here (None if they can): they need root, nft, setpriv and useradd."""
    if os.geteuid() != 0:
        return "network partitions need root (nftables, system users, setpriv)"
    for tool in ("nft", "setpriv", "useradd"):
        if shutil.which(tool) is None:
            return f"network partitions need `{tool}` (nftables, util-linux, passwd)"
    probe = owned_name("mmlog_probe_")  # root in a container may still lack CAP_NET_ADMIN
    made = subprocess.run(["nft", "add", "table", "inet", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"nftables refuses a table here: {made.stderr.strip()}"
    subprocess.run(["nft", "delete", "table", "inet", probe], capture_output=True)
    return None


def broker_user(broker_id: int) -> str:
    """The system user broker `broker_id` runs as, created (no home, no login) if missing."""
    name = f"mmlog-b{broker_id}"
    try:
        pwd.getpwnam(name)
    except KeyError:
        made = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                              capture_output=True, text=True)
        if made.returncode:  # another test process may have made it meanwhile
            try:
                pwd.getpwnam(name)
            except KeyError:
                raise RuntimeError(f"useradd {name}: {made.stderr.strip()}") from None
    return name


def nft(script: str) -> None:
    subprocess.run(["nft", "-f", "-"], input=script, text=True, check=True, capture_output=True)


def start_time(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot, /proc/<pid>/stat's 22nd field); None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rpartition(")")[2].split()[19])  # after the command's name, which may hold spaces


def owned_name(prefix: str, pid: int | None = None) -> str:
    """The name of a table of process `pid` (this one unless given): its pid and start time, so that a
    table outliving its process is told from one of a process that reuses the pid."""
    pid = os.getpid() if pid is None else pid
    return f"{prefix}{pid}_{start_time(pid)}"


def remove_orphan_tables() -> list[str]:
    """Delete the tables this module made for processes that are gone; their names."""
    listed = subprocess.run(["nft", "list", "tables", "inet"], capture_output=True, text=True).stdout
    orphans = []
    for line in listed.splitlines():
        if not line.startswith("table inet "):
            continue
        name = line.split()[-1]
        prefix = next((p for p in PREFIXES if name.startswith(p)), None)
        pid, _, start = name[len(prefix):].partition("_") if prefix else ("", "", "")
        if not pid.isdigit():  # not one of ours, or not named for a process
            continue
        now = start_time(int(pid))
        if now is None or (start and start != str(now)):  # gone, or its pid reused (an older name: pid alone)
            subprocess.run(["nft", "delete", "table", "inet", name], capture_output=True)
            orphans.append(name)
    return orphans


class Network:
    """The links among ZooKeeper, the brokers and the clients, and which of them are cut.

    `parties`: party -> (uid of its sockets or None, its server ports); uid 0 is root's (the clients)."""

    def __init__(self, zk_port: int, brokers) -> None:
        self.table = owned_name("mmlog_test_")
        self.parties: dict[object, tuple[int | None, tuple[int, ...]]] = {ZK: (None, (zk_port,)), CLIENTS: (0, ())}
        for b in brokers:
            ports = tuple(b.listener_ports.values()) or (b.port,)
            self.parties[b.broker_id] = (pwd.getpwnam(b.user).pw_uid, ports)
        self.cut_links: set[frozenset] = set()
        self._open = False

    def __enter__(self) -> "Network":
        servers = sorted({p for _, ports in self.parties.values() for p in ports})
        ports = ", ".join(map(str, servers))
        marks = "\n".join(f"add rule inet {self.table} out meta skuid {uid} tcp dport {{ {ports} }} "
                          f"ct mark set {self._mark(uid)}" for uid, _ in self.parties.values() if uid is not None)
        remove_orphan_tables()  # of runs killed before they could delete theirs
        self.close()  # one this process left (an __enter__ that failed half-way)
        nft(f"add table inet {self.table}\n"
            f"add chain inet {self.table} out {{ type filter hook output priority 0; policy accept; }}\n"
            f"add chain inet {self.table} cuts\n{marks}\nadd rule inet {self.table} out jump cuts\n")
        self._open = True
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Delete the table (every cut heals with it); a no-op if there is none."""
        subprocess.run(["nft", "delete", "table", "inet", self.table], capture_output=True)
        self._open = False

    @staticmethod
    def _mark(uid: int) -> int:
        return 0x4D000000 | uid  # never 0 (no mark), root's included

    def _drops(self, a, b) -> list[str]:
        """The rules cutting every connection one of a and b opened to the other's server ports."""
        rules = []
        for client, server in ((a, b), (b, a)):
            uid, ports = self.parties[client][0], self.parties[server][1]
            for port in ports if uid is not None else ():
                for way in ("dport", "sport"):
                    rules.append(f"add rule inet {self.table} cuts ct mark {self._mark(uid)} tcp {way} {port} drop")
        return rules

    def _apply(self) -> None:
        rules = [r for link in sorted(map(sorted_link, self.cut_links), key=str) for r in self._drops(*link)]
        nft("\n".join([f"flush chain inet {self.table} cuts", *rules]) + "\n")  # one transaction

    def cut(self, *links: tuple) -> None:
        """Cut each link (a, b), both ways."""
        self.cut_links |= {frozenset(link) for link in links}
        self._apply()

    def heal(self, *links: tuple) -> None:
        """Heal the given links, or every link when none is given."""
        self.cut_links -= {frozenset(link) for link in links} if links else set(self.cut_links)
        self._apply()

    def isolate(self, party, *others) -> list[tuple]:
        """Cut `party` from each of `others`; returns the links cut."""
        links = [(party, o) for o in others]
        self.cut(*links)
        return links

    @contextlib.contextmanager
    def partitioned(self, *links: tuple):
        self.cut(*links)
        try:
            yield
        finally:
            self.heal(*links)


def sorted_link(link: frozenset) -> tuple:
    return tuple(sorted(link, key=str))
