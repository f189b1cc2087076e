"""The main process's essential threads and loops: a death or a stall stops the broker.

A broker whose control thread has died keeps its listeners, its processors and its
ZooKeeper session, so the cluster goes on sending it clients, yet nothing that needs
the control plane is ever answered: a zombie, worse than a crash, which systemd
restarts and the cluster routes around. So a failure inside the main process is
either contained where it happens (each task, op and timer of the control thread
runs under a net that logs it) or fatal, and this module is how it becomes fatal:

- every thread the broker cannot serve without (the control thread, the topic
  worker, the transaction marker sender, the web server) is registered with
  `thread`; one that is no longer alive while the broker runs is a failure;
- any thread of the process that ends with an uncaught exception (ours, or a
  library's such as kazoo's) is a failure, named with its exception
  (`threading.excepthook`);
- a loop registered with `loop` (the control thread's) stamps each turn; one that
  has not turned for `stall_s` is a failure (a task that never returns, a blocking
  call with no deadline). A pause of the whole process (SIGSTOP, a frozen machine)
  is not a stall: the supervisor sees its own loop's gap and times every loop afresh.

A processor's loop that stalls is not fatal but contained: the supervisor kills it and
replaces it, as it replaces a processor that died (`ipc/heartbeats.py`).

The supervisor's loop asks `failure()` on every turn (at least once a second) and
stops the broker with exit code 1 and one line naming what failed; systemd's
Restart=on-failure then restarts it. The supervisor also feeds systemd's watchdog
(WATCHDOG=1, when the unit sets WatchdogSec) only while `healthy(window)` holds: the
watchdog is what catches a main thread too stuck to ask.

Faults can be injected for tests: with MMLOG_FAULT_INJECTION=1 in the environment,
SIGUSR2 makes the supervisor read the file `inject-fault` in the first log dir and
raise `InjectedFault` in the thread it names (`inject`), or, for `stall:<loop>`,
block that loop. Without the variable SIGUSR2 keeps its default action.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
import time
from typing import Callable

log = logging.getLogger("mmlog.broker")

FAULT_INJECTION_ENV = "MMLOG_FAULT_INJECTION"
FAULT_FILE = "inject-fault"


class InjectedFault(BaseException):
    """Raised in a thread by a test's fault injection. A BaseException, so that no `except Exception`
    net contains it: it stands for the failure that no net caught."""


class Liveness:
    """The registry of essential threads and loops, and the first failure seen among them."""

    def __init__(self, stall_s: float, wake: Callable[[], None] = lambda: None) -> None:
        self.stall_s = stall_s
        self.wake = wake  # ends the supervisor's wait, so a failure is acted on at once (the supervisor sets it)
        self._threads: dict[str, threading.Thread] = {}
        self._turns: dict[str, float] = {}  # loop name -> monotonic time of its last turn
        self._stalls: dict[str, Callable[[Callable[[], None]], None]] = {}  # loop -> runs a task on it
        self._failure: str | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------ registration

    def thread(self, name: str, thread: threading.Thread) -> None:
        """Watch a started thread: its end, while the broker runs, is a failure."""
        self._threads[name] = thread

    def loop(self, name: str, run_on: Callable[[Callable[[], None]], None] | None = None) -> Callable[[], None]:
        """Watch a loop for stalls; returns the function it calls on each turn. `run_on(fn)` runs fn on
        the loop's thread (fault injection's `stall:` uses it)."""
        self._turns[name] = time.monotonic()
        if run_on is not None:
            self._stalls[name] = run_on

        def turn() -> None:
            self._turns[name] = time.monotonic()

        return turn

    def resumed(self) -> None:
        """The whole process was stopped (SIGSTOP, a frozen machine) and runs again: every loop turned now,
        so that a pause is not taken for a stall."""
        now = time.monotonic()
        for name in list(self._turns):
            self._turns[name] = now

    def forget(self, name: str) -> None:
        """Stop watching a thread or loop (it is being stopped on purpose)."""
        self._threads.pop(name, None)
        self._turns.pop(name, None)

    # ------------------------------------------------------------ failures

    def fail(self, why: str) -> None:
        """Record a failure (the first one is the one reported) and wake the supervisor."""
        with self._lock:
            if self._failure is None:
                self._failure = why
        self.wake()

    def excepthook(self, args: threading.ExceptHookArgs) -> None:
        """threading.excepthook: a thread that ends with an uncaught exception is a failure."""
        if args.exc_type is SystemExit:
            return
        name = args.thread.name if args.thread is not None else "a thread"
        log.critical("thread %s died", name, exc_info=(args.exc_type, args.exc_value, args.exc_traceback))
        self.fail(f"thread {name} died: {args.exc_type.__name__}: {args.exc_value}")

    def failure(self, now: float | None = None) -> str | None:
        """Why the broker must stop, or None while every essential thread lives and every loop turns."""
        if self._failure is not None:
            return self._failure
        for name, thread in list(self._threads.items()):
            if not thread.is_alive():
                self.fail(f"thread {name} ended")
                return self._failure
        stalled = self._stalled(self.stall_s, now)
        if stalled:
            name, quiet = stalled
            self.fail(f"{name} has not turned for {quiet:.1f} s (broker.stall.timeout.ms {self.stall_s * 1000:.0f})")
        return self._failure

    def healthy(self, window_s: float, now: float | None = None) -> bool:
        """No failure, and every loop turned within the last window_s: systemd's watchdog may be fed."""
        return self.failure(now) is None and self._stalled(window_s, now) is None

    def _stalled(self, window_s: float, now: float | None) -> tuple[str, float] | None:
        now = time.monotonic() if now is None else now
        for name, last in list(self._turns.items()):
            if now - last > window_s:
                return name, now - last
        return None

    # ------------------------------------------------------------ fault injection (tests)

    def inject(self, what: str) -> None:
        """Raise InjectedFault in the thread named `what` (`main` is the supervisor's), or block the loop
        named by `stall:<loop>` for good."""
        if what.startswith("stall:"):
            name = what.split(":", 1)[1]
            run_on = self._stalls.get(name)
            if run_on is None:
                log.error("fault injection: no loop %r to stall (%s)", name, ", ".join(self._stalls))
                return
            log.warning("fault injection: stalling %s", name)
            run_on(lambda: threading.Event().wait())
            return
        thread = threading.main_thread() if what == "main" else self._threads.get(what)
        if thread is None or thread.ident is None:
            log.error("fault injection: no thread %r (%s)", what, ", ".join(["main", *self._threads]))
            return
        log.warning("fault injection: raising InjectedFault in thread %s", what)
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(InjectedFault))


def fault_injection_enabled() -> bool:
    return os.environ.get(FAULT_INJECTION_ENV) == "1"
