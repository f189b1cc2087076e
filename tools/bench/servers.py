"""The peers' servers, started by the benchmark on free loopback ports, each in a directory of its own.

Each server runs as a child of the benchmark in a session (process group) of its
own. `stop()` asks it to stop (SIGTERM to the process we started), waits, and
then SIGKILLs whatever is left of *that* process group: never anything found by
name, never the system's services (installing the Debian packages may start
those; they listen on the standard ports and are left alone).

* Redis: `redis-server <dir>/redis.conf` — appendonly, appendfsync everysec,
  no RDB snapshots, bound to 127.0.0.1.
* RabbitMQ: an `epmd` of our own on a free loopback port (so that nothing the
  Erlang VM would start for itself outlives the run), then
  `/usr/lib/rabbitmq/bin/rabbitmq-server` (the Debian wrapper in /usr/sbin would
  `su` to the rabbitmq user and write /var/log) with its node name, AMQP port,
  distribution port, Mnesia and log directories, config and plugins files, and
  Erlang cookie (HOME) all in the run's directory. The start script forwards
  SIGTERM to the VM, which then stops the broker cleanly (about a second).
  `rabbitmqctl -n <node> stop` would do the same ("Stopping and halting node"),
  but it is an Erlang node itself, with its own distribution listener; the
  signal needs neither. Neither stops epmd, which is why the run starts its own.
  `RabbitServer(workdir, streams=True)` also enables the `rabbitmq_stream`
  plugin, its listener on another free loopback port (advertised as 127.0.0.1,
  so that clients asking for a stream's leader connect back to it).
* NATS: `nats-server -js` with its JetStream store in the run's directory, on a
  free loopback port, its monitoring port off.

`cpu_seconds()` is the utime+stime of every process of a server's group (the
shell wrapper, the Erlang VM and its children for RabbitMQ), read from
/proc/<pid>/stat: the server's cost, apart from the clients'.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from tools.bench.common import free_port

RABBITMQ_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"

# system -> (files that must exist or commands on PATH, Debian packages providing them)
DEBIAN = {
    "redis": (["redis-server"], ["redis-server"]),
    "rabbitmq": ([RABBITMQ_SERVER, "epmd"], ["rabbitmq-server"]),
    "rabbitmq-streams": ([RABBITMQ_SERVER, "epmd"], ["rabbitmq-server"]),
    "nats": (["nats-server"], ["nats-server"]),
}
# system -> Python modules its clients need (all in the `bench` extra)
PYTHON = {"redis": ["redis"], "rabbitmq": ["pika"], "rabbitmq-streams": ["rstream"], "nats": ["nats"],
          "confluent": ["confluent_kafka"]}
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class Missing(RuntimeError):
    """Something a system needs is not installed; the message says how to install it."""


def _present(thing: str) -> bool:
    return os.path.exists(thing) if thing.startswith("/") else shutil.which(thing) is not None


def check_installed(systems: list[str], install: bool = False, figures: bool = True) -> None:
    """Raise Missing with the one-line install command for whatever `systems` (and the figures) lack; with
    `install` (as root), apt-get install the missing Debian packages instead."""
    packages = sorted({pkg for s in systems if s in DEBIAN and not all(map(_present, DEBIAN[s][0]))
                       for pkg in DEBIAN[s][1]})
    if packages and install and os.geteuid() == 0:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
        subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages], check=True, env=env)
        packages = []
    modules = []
    for module in (["matplotlib"] if figures else []) + [m for s in systems for m in PYTHON.get(s, [])]:
        if importlib.util.find_spec(module) is None:
            modules.append(module)
    lines = []
    if packages:
        lines.append(f"apt-get install -y {' '.join(packages)}"
                     + ("" if os.geteuid() == 0 else "   (as root; or run the benchmark as root with --install)"))
    if modules:
        lines.append(f"pip install -e '.[bench]'   (missing: {', '.join(modules)})")
    if lines:
        raise Missing("missing for " + ", ".join(systems) + " (or the figures); install with:\n  " + "\n  ".join(lines))


def wait_port(port: int, proc: subprocess.Popen, timeout: float, what: str, log: Path | None = None) -> None:
    """Wait until 127.0.0.1:port accepts a connection; fail early if `proc` exits."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-2000:] if log and log.exists() else ""
            raise RuntimeError(f"{what} did not start (exit code {proc.poll()}):\n{tail}")
        time.sleep(0.1)


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (field 3 on), None if the process is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return raw[raw.rindex(b")") + 2:].decode().split()  # the name may hold spaces and parentheses


def group_pids(pgid: int) -> list[int]:
    """The live processes whose process group is `pgid` (field 5 of /proc/<pid>/stat)."""
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) is not None and int(fields[2]) == pgid:
            pids.append(int(entry.name))
    return pids


def cpu_seconds(pids: list[int]) -> float:
    """utime+stime (fields 14 and 15 of /proc/<pid>/stat) of `pids`, in seconds; gone processes count 0."""
    ticks = 0
    for pid in pids:
        if (fields := _stat(pid)) is not None:
            ticks += int(fields[11]) + int(fields[12])
    return ticks / CLOCK_TICKS


def tree_cpu_seconds(root: int) -> float:
    """utime+stime of `root` and every live descendant, plus the CPU of the children they have reaped
    (cutime+cstime, fields 16 and 17): the cost of a process tree whose workers come and go (Spark's JVM,
    its pyspark.daemon and the workers that daemon forks), in seconds."""
    parents: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) is not None:
            stats[int(entry.name)] = fields
            parents.setdefault(int(fields[1]), []).append(int(entry.name))
    ticks, todo = 0, [root]
    while todo:
        pid = todo.pop()
        if (fields := stats.get(pid)) is not None:
            ticks += sum(int(x) for x in fields[11:15])
            todo += parents.get(pid, [])
    return ticks / CLOCK_TICKS


class ChildServer:
    """A server process started in a new session, its state in `workdir/<name>`, listening on
    127.0.0.1:port; `stop()` ends it and its process group."""

    name = "server"

    def __init__(self, workdir: Path) -> None:
        self.dir = Path(workdir) / self.name
        self.port = 0
        self.proc: subprocess.Popen | None = None

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def _spawn(self, cmd: list[str], log: Path, env: dict | None = None, cwd: Path | None = None) -> subprocess.Popen:
        with open(log, "ab") as out:
            return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    env=env, cwd=cwd, start_new_session=True)

    @staticmethod
    def _end(proc: subprocess.Popen | None, timeout: float) -> None:
        """SIGTERM the process, wait up to `timeout`, then SIGKILL its process group (what is left of it)."""
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the group is ours: its id is the pid we started
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()

    def stop(self) -> None:
        self._end(self.proc, 60)
        self.proc = None

    def pids(self) -> list[int]:
        """The processes of the server's group (the one we started and its children)."""
        return group_pids(self.proc.pid) if self.proc is not None else []

    def cpu_seconds(self) -> float:
        """utime+stime so far of the server's processes."""
        return cpu_seconds(self.pids())

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class RedisServer(ChildServer):
    """redis-server with appendonly everysec (Redis's "asynchronous flush"), on 127.0.0.1:port."""

    name = "redis"

    def start(self) -> "RedisServer":
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        conf = self.dir / "redis.conf"
        conf.write_text("\n".join([
            "bind 127.0.0.1", f"port {self.port}", "protected-mode yes", "daemonize no",
            f'dir "{self.dir}"', 'save ""', "appendonly yes", "appendfsync everysec", f'logfile "{self.dir}/redis.log"',
            "",
        ]))
        self.proc = self._spawn(["redis-server", str(conf)], self.dir / "stdout.log")
        wait_port(self.port, self.proc, 30, "redis-server", self.dir / "redis.log")
        return self

    @staticmethod
    def version() -> str:
        out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout
        return out.split("v=", 1)[1].split()[0] if "v=" in out else "?"


class RabbitServer(ChildServer):
    """rabbitmq-server (and an epmd of its own) on free loopback ports, all state in `workdir/rabbitmq`."""

    name = "rabbitmq"

    def __init__(self, workdir: Path, streams: bool = False) -> None:
        super().__init__(workdir)
        self.node = f"mmlogbench{os.getpid()}@localhost"
        self.epmd: subprocess.Popen | None = None
        self.streams = streams
        self.stream_port = 0

    def env(self) -> dict:
        d = self.dir
        return dict(
            os.environ, HOME=str(d),  # the Erlang cookie goes here, not in the user's home
            RABBITMQ_NODENAME=self.node, RABBITMQ_NODE_IP_ADDRESS="127.0.0.1", RABBITMQ_NODE_PORT=str(self.port),
            RABBITMQ_DIST_PORT=str(self.dist_port), RABBITMQ_MNESIA_BASE=str(d / "mnesia"),
            RABBITMQ_LOG_BASE=str(d / "log"), RABBITMQ_CONFIG_FILE=str(d / "rabbitmq.conf"),
            RABBITMQ_ADVANCED_CONFIG_FILE=str(d / "advanced.config"),
            RABBITMQ_ENABLED_PLUGINS_FILE=str(d / "enabled_plugins"),
            RABBITMQ_CONF_ENV_FILE=str(d / "rabbitmq-env.conf"),
            ERL_EPMD_ADDRESS="127.0.0.1", ERL_EPMD_PORT=str(self.epmd_port),
            RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-start_epmd false -kernel inet_dist_use_interface {127,0,0,1}",
        )

    def start(self) -> "RabbitServer":
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port, self.dist_port, self.epmd_port = free_port(), free_port(), free_port()
        conf = ["log.file.level = warning"]
        if self.streams:
            self.stream_port = free_port()
            conf += [f"stream.listeners.tcp.1 = 127.0.0.1:{self.stream_port}", "stream.advertised_host = 127.0.0.1",
                     f"stream.advertised_port = {self.stream_port}"]
        (self.dir / "enabled_plugins").write_text("[rabbitmq_stream].\n" if self.streams else "[].\n")
        (self.dir / "rabbitmq.conf").write_text("\n".join(conf) + "\n")
        self.epmd = self._spawn(["epmd", "-port", str(self.epmd_port), "-address", "127.0.0.1"],
                                self.dir / "epmd.log")
        wait_port(self.epmd_port, self.epmd, 10, "epmd")
        log = self.dir / "stdout.log"
        self.proc = self._spawn([RABBITMQ_SERVER], log, env=self.env(), cwd=self.dir)
        wait_port(self.port, self.proc, 120, "rabbitmq-server", log)
        deadline = time.monotonic() + 60  # the AMQP listener opens just before the boot ends
        while "completed with" not in log.read_text(errors="replace"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("rabbitmq-server did not finish booting:\n" + log.read_text()[-2000:])
            time.sleep(0.1)
        if self.streams:
            wait_port(self.stream_port, self.proc, 60, "rabbitmq_stream listener", log)
        return self

    def pids(self) -> list[int]:
        return super().pids() + ([self.epmd.pid] if self.epmd is not None else [])

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            self._end(self.epmd, 10)
            self.epmd = None

    @staticmethod
    def version() -> str:
        for base in sorted(Path("/usr/lib/rabbitmq/lib").glob("rabbitmq_server-*")):
            return base.name.split("-", 1)[1]
        return "?"


class NatsServer(ChildServer):
    """nats-server with JetStream (`-js`), its file store in `workdir/nats`, on 127.0.0.1:port."""

    name = "nats"

    def start(self) -> "NatsServer":
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        log = self.dir / "nats.log"
        self.proc = self._spawn(["nats-server", "-js", "-a", "127.0.0.1", "-p", str(self.port),
                                 "-sd", str(self.dir / "jetstream"), "-l", str(log)], self.dir / "stdout.log")
        wait_port(self.port, self.proc, 30, "nats-server", log)
        return self

    @staticmethod
    def version() -> str:
        out = subprocess.run(["nats-server", "--version"], capture_output=True, text=True).stdout
        return out.rsplit("v", 1)[-1].strip() if out else "?"
