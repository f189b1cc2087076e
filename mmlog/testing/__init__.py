"""A real mmlog broker for tests: `EmbeddedBroker`, and the `mmlog_broker` pytest fixture.

Projects that test against Kafka usually need Java, a download or Docker; with
mmlog they need `pip install`. `EmbeddedBroker` starts `mmlog broker` as a child
process on a free loopback port in a temporary data directory, waits until it is
ready, and stops it (SIGTERM, then SIGKILL if it hangs) on exit::

    with EmbeddedBroker() as broker:
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})

The pytest plugin (registered through the `pytest11` entry point) provides the
`mmlog_broker` fixture: one broker per test, yielding the same object.

`ZooKeeperServer` starts a standalone ZooKeeper on a free loopback port, for testing
brokers in cluster mode. It needs a Java runtime and ZooKeeper's server jars: Debian's
`zookeeper` package when installed, otherwise the jars the pyspark wheel ships (the
`spark` and `test` extras install it), so `pip install` is the only setup.

The package's modules hold what mmlog's own tests and the soaks and benchmarks in tools/ share:
`cluster` (three brokers on a ZooKeeper, and what to ask of them), `connections` (raw requests),
`load` (a steady librdkafka load), `network` (links cut with nftables), `lazyfs` (a file system
that loses power), `security` (a PKI and SCRAM users), `scrape` (the metrics endpoint) and
`ctp_worker` (a transactional copy, run as a process).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Self

_READY = re.compile(r"msg=ready listening=(?P<host>\S+):(?P<port>\d+)")
_LISTENERS = re.compile(r" listeners=(?P<listeners>\S+)")
_REGISTRY = re.compile(r"msg=schema registry listeners=(?P<urls>\S+)")
_CONSOLE = re.compile(r"msg=console listeners=(?P<urls>\S+)")


class BrokerFailed(RuntimeError):
    """The broker exited or did not become ready."""


class _ScratchProcess:
    """A server process for a `with` block: `start()` on entry, `stop()` on exit, then its data dir
    removed if it was made here (a temp dir, when none was given)."""

    def __init__(self, data_dir: str | os.PathLike | None, prefix: str) -> None:
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir is not None else Path(tempfile.mkdtemp(prefix=prefix))

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)


CLEANER_PROCESS_NAME = "mmlog-cleaner"  # mmlog/log/cleaner/manager.py's PROCESS_NAME (a test checks they agree)
FETCHER_PROCESS_NAME = "mmlog-fetcher"  # mmlog/replication/fetcher.py's PROCESS_NAME (cluster mode only)


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


class EmbeddedBroker(_ScratchProcess):
    """A broker process on 127.0.0.1 with its own data directory."""

    # Every broker started in this interpreter, oldest first: a test run's failure report shows the logs of
    # those a failed test started (tests/conftest.py).
    started: list["EmbeddedBroker"] = []

    def __init__(self, data_dir: str | os.PathLike | None = None, *, processors: int = 2, port: int = 0,
                 host: str = "127.0.0.1", config: dict | None = None, ready_timeout: float = 60.0,
                 user: str | None = None) -> None:
        """`user`: run the broker's processes as this system user (root only; see `command`)."""
        super().__init__(data_dir, "mmlog-")
        self.user = user
        self.processors = processors
        self.host = host
        self.port = port
        self.config = dict(config or {})
        self.ready_timeout = ready_timeout
        self.proc: subprocess.Popen | None = None
        self.log_lines: list[str] = []
        self.listener_ports: dict[str, int] = {}
        self.registry_urls: list[str] = []  # where its schema registry listens (schema.registry.listeners)
        self.console_urls: list[str] = []  # its web console's pages (console.listeners), ending in /console/
        self._ready = threading.Event()

    @property
    def bootstrap(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def broker_id(self) -> int:
        return int(self.config.get("broker.id", 0))

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "mmlog", "broker", "--data-dir", str(self.data_dir),
               "--processors", str(self.processors), "--exit-with-parent"]
        if "listeners" not in self.config:  # several listeners come in the config
            cmd += ["--listen", self.bootstrap]
        for key, value in self.config.items():
            cmd += ["--override", f"{key}={value}"]
        return as_user(self.user, cmd) if self.user else cmd

    def start(self) -> "EmbeddedBroker":
        """Start the broker and wait for its ready line."""
        self._ready.clear()
        EmbeddedBroker.started.append(self)
        if self.user:  # its data dir is its own, as under a systemd unit's User=
            self.data_dir.mkdir(parents=True, exist_ok=True)
            for path in [self.data_dir, *self.data_dir.rglob("*")]:
                shutil.chown(path, self.user, self.user)
        # A session of its own: kill() reaches the processors through the process group.
        self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, bufsize=1, start_new_session=True)
        pump = threading.Thread(target=self._pump, args=(self.proc,), daemon=True)
        pump.start()
        deadline = time.monotonic() + self.ready_timeout
        while not self._ready.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                code = self.proc.poll()
                self.kill()
                pump.join(2.0)  # what it wrote last (a traceback) is read before it is quoted
                why = f"exit code {code}" if code is not None else f"no ready line within {self.ready_timeout:g} s"
                raise BrokerFailed(f"broker did not start ({why}):\n" + "\n".join(self.log_lines[-30:]))
        # The log cleaner is forked before the ready line but names itself just after: until it has,
        # processor_pids() cannot tell it from a processor.
        if str(self.config.get("log.cleaner.enable", "true")).lower() != "false":
            while self.cleaner_pid() is None and time.monotonic() < deadline and self.proc.poll() is None:
                time.sleep(0.01)
        return self

    def _pump(self, proc: subprocess.Popen) -> None:
        for line in proc.stderr:
            line = line.rstrip("\n")
            self.log_lines.append(line)
            registry = _REGISTRY.search(line)
            if registry:
                self.registry_urls = registry["urls"].split(",")
            console = _CONSOLE.search(line)
            if console:
                self.console_urls = console["urls"].split(",")
            m = _READY.search(line)
            if m:
                self.port = int(m["port"])
                found = _LISTENERS.search(line)
                if found:  # NAME://host:port,... as bound: the ports tests connect to
                    self.listener_ports = {url.split("://")[0]: int(url.rpartition(":")[2])
                                           for url in found["listeners"].split(",")}
                self._ready.set()

    def processor_pids(self) -> list[int]:
        """The broker's processor processes (its children but the log cleaner and the replica fetcher)."""
        return [pid for pid in self._children() if _comm(pid) not in (CLEANER_PROCESS_NAME, FETCHER_PROCESS_NAME)]

    def fetcher_pid(self) -> int | None:
        """The broker's replica fetcher process (cluster mode), if it runs."""
        return next((pid for pid in self._children() if _comm(pid) == FETCHER_PROCESS_NAME), None)

    def cleaner_pid(self) -> int | None:
        """The broker's log cleaner process, if it runs."""
        return next((pid for pid in self._children() if _comm(pid) == CLEANER_PROCESS_NAME), None)

    def _children(self) -> list[int]:
        path = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        try:
            return [int(p) for p in path.read_text().split()]
        except FileNotFoundError:
            return []

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait; SIGKILL if it does not exit in time. Returns the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL the broker and its processors (as a machine-less crash would)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()

    def pause(self) -> None:
        """SIGSTOP the broker and its children (a hung machine: its sockets stay open, nothing answers)."""
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.killpg(self.proc.pid, signal.SIGCONT)

    def restart(self) -> "EmbeddedBroker":
        """Stop (if running) and start again on the same port and data directory."""
        self.stop()
        return self.start()


def as_user(user: str, cmd: list[str]) -> list[str]:
    """`cmd` run as `user` (uid and gid, no supplementary groups), through util-linux's setpriv.

    A process of its own user is what lets a test match its sockets (nftables' `meta skuid`) to cut its
    links. It keeps root's file access (CAP_DAC_READ_SEARCH and CAP_DAC_OVERRIDE, ambient, so they survive
    the exec and go to the broker's children): the interpreter may sit in a root-only home (pyenv's
    /root/.pyenv), and numba refuses to load a cache it cannot also write (the kernels' `__pycache__`, owned
    by whoever filled it). The data dir is chowned to the user all the same."""
    caps = "+dac_read_search,+dac_override"
    return ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", f"--inh-caps={caps}",
            f"--ambient-caps={caps}", "--", *cmd]


ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")


def zookeeper_classpath() -> str | None:
    """The classpath of a ZooKeeper server: Debian's jar (its manifest carries the rest), or
    pyspark's jar directory (ZooKeeper 3.9 with its dependencies), or None when neither is here."""
    if ZOOKEEPER_JAR.exists():
        return str(ZOOKEEPER_JAR)
    try:
        import pyspark
    except ImportError:
        return None
    jars = Path(pyspark.__file__).parent / "jars"
    return f"{jars}/*" if any(jars.glob("zookeeper-[0-9]*.jar")) else None


# Runs argv[2:] in place of itself once the kernel will SIGTERM it when its parent goes (Linux's
# PR_SET_PDEATHSIG, kept across exec): a ZooKeeper JVM started by a test process that then crashes
# (a segfault leaves no fixture teardown) ends with it instead of running on for hours. argv[1] is
# the parent's pid: a parent gone before the prctl took effect is noticed, and nothing starts.
_EXIT_WITH_PARENT = [sys.executable, "-c", "import ctypes, os, signal, sys; "
                     "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM); "
                     "os.getppid() == int(sys.argv[1]) or sys.exit(1); os.execv(sys.argv[2], sys.argv[2:])"]


class ZooKeeperServer(_ScratchProcess):
    """A standalone ZooKeeper on a free 127.0.0.1 port in a temp dir; `.connect` is its address.

    Runs `zookeeper_classpath()` with `java`; ready once `srvr` answers `Mode: standalone`
    (about 0.8 s with pyspark's jars). Stopped with SIGTERM to its pid.
    """

    def __init__(self, data_dir: str | os.PathLike | None = None, ready_timeout: float = 60.0) -> None:
        super().__init__(data_dir, "mmlog-zk-")
        self.ready_timeout = ready_timeout
        self.port = 0
        self.proc: subprocess.Popen | None = None

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "ZooKeeperServer":
        java, classpath = shutil.which("java"), zookeeper_classpath()
        if java is None or classpath is None:
            raise BrokerFailed("ZooKeeper needs a Java runtime and its jars: `pip install 'mmlog[spark]'` "
                               "(pyspark ships them) or `apt-get install -y zookeeper`")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        (self.data_dir / "data").mkdir(parents=True, exist_ok=True)
        cfg = self.data_dir / "zoo.cfg"
        cfg.write_text(
            f"tickTime=500\ndataDir={self.data_dir / 'data'}\nclientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\nadmin.enableServer=false\nmaxSessionTimeout=60000\n"
            "4lw.commands.whitelist=ruok,srvr,stat,mntr,conf\n"
        )
        env = {**os.environ, "ZOO_LOG_DIR": str(self.data_dir), "ZOO_LOG4J_PROP": "WARN,CONSOLE"}
        with open(self.data_dir / "zookeeper.out", "wb") as out:
            self.proc = subprocess.Popen(
                [*_EXIT_WITH_PARENT, str(os.getpid()), java, "-Xmx256m", "-XX:+UseSerialGC", "-cp", classpath,
                 "org.apache.zookeeper.server.ZooKeeperServerMain", str(cfg)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + self.ready_timeout
        while b"Mode: standalone" not in self.four_letter(b"srvr"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise BrokerFailed("ZooKeeper did not start:\n" + (self.data_dir / "zookeeper.out").read_text()[-3000:])
            time.sleep(0.1)
        return self

    def four_letter(self, word: bytes) -> bytes:
        """A four-letter-word command's answer, or b"" if the server does not answer."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
                s.sendall(word)
                chunks = []
                while chunk := s.recv(4096):
                    chunks.append(chunk)
                return b"".join(chunks)
        except OSError:
            return b""

    def stop(self, timeout: float = 20.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _fixture():
    import pytest

    @pytest.fixture
    def mmlog_broker(tmp_path):
        """A fresh mmlog broker on a free loopback port; `.bootstrap` is its address."""
        with EmbeddedBroker(tmp_path / "mmlog-data") as broker:
            yield broker

    return mmlog_broker


try:  # the pytest plugin: `pytest11 = mmlog = mmlog.testing` in the entry points
    mmlog_broker = _fixture()
except ImportError:  # pytest is not installed: the context manager still works
    pass


class LocalHandlerContext:
    """A processor as its handlers see it (`mmlog.processors.handler_context.HandlerContext`), without a
    loop, to drive dispatch and the handlers in one process (tests and the in-process benchmarks): a log
    manager, a metrics region (the null one: metrics off), default broker settings, no client quotas,
    no authoriser, no control plane (what is forwarded fails at once, as with one gone), timers and
    offloaded work run at once, and a count of appends."""

    def __init__(self, manager, metrics=None) -> None:
        from mmlog.config.broker import BrokerConfig
        from mmlog.ipc.cluster_view import ClusterView, Endpoint, ViewReader
        from mmlog.ipc.metrics_block import NULL_REGION
        from mmlog.processors.handlers import advertised_versions
        from mmlog.processors.metadata_cache import TopicEntries
        from mmlog.processors.purgatory import Purgatory
        from mmlog.processors.quotas import ClientQuotas
        from mmlog.replication.leader_throttle import LeaderThrottle
        from mmlog.security import credentials
        from mmlog.security.authorizer import Authorizer

        data_dir = manager.log_dirs[0]
        self.config = BrokerConfig.load(overrides={"log.dirs": str(data_dir)})
        self.broker_id = self.config["broker.id"]
        self.cluster_id = "local"
        self.advertised_versions = advertised_versions()
        self.manager = manager
        self.views = ViewReader(data_dir, ClusterView.standalone(Endpoint.of(self.config)))
        self.metadata_entries = TopicEntries()
        self.control = _NoControlPlane()
        self.purgatory = Purgatory(lambda parked: None)
        self.metrics = NULL_REGION if metrics is None else metrics
        self.quotas = ClientQuotas(None, 0, manager)  # no quota block: no client has a quota
        self.leader_throttle = LeaderThrottle(None, 0, manager, 0)  # nor is replication throttled
        self.authorizer = Authorizer()  # off: every request allowed
        self.credentials = credentials.CredentialReader(credentials.path_in(data_dir))
        self.sasl_mechanisms: dict[str, list[str]] = {}
        self.reauth_ms = self.config["connections.max.reauth.ms"]
        self.auth_failure_delay_s = 0.0
        self.appends = 0

    def wants_write(self, conn) -> None:
        pass  # the caller flushes the connection itself

    def throttle(self, conn, ms: int) -> None:
        pass  # no loop to mute the connection in: the throttle time is in the response only

    def appended(self) -> None:
        self.appends += 1

    def later(self, delay_s: float, fn) -> None:
        fn()  # no loop to wait in

    def offload(self, fn, done) -> None:
        try:
            result = fn()
        except Exception as exc:  # noqa: BLE001 - handed to done, as the processor's helper thread does
            done(None, exc)
            return
        done(result, None)


class _NoControlPlane:
    """`LocalHandlerContext.control`: every call fails at once, as on a channel whose control plane went."""

    def call(self, op, args, callback, timeout_s=None, fallback=None) -> None:
        from mmlog.ipc.control_channel import ControlUnavailable

        try:
            callback(False, ControlUnavailable(f"no control plane to serve {op}"))
        except Exception as exc:  # noqa: BLE001 - as ControlClient: the request is answered another way
            if fallback is None:
                raise
            fallback(exc)
