"""A broker started through EmbeddedBroker does not outlive the process that started it."""

import os
import signal
import subprocess
import sys
import time


def test_a_broker_stops_when_its_starting_process_is_killed(tmp_path):
    script = (
        "import sys, time\n"
        "from mmlog.testing import EmbeddedBroker\n"
        f"b = EmbeddedBroker({str(tmp_path / 'data')!r}, processors=1).start()\n"
        "print(b.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    starter = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    broker_pid = int(starter.stdout.readline())
    starter.send_signal(signal.SIGKILL)
    starter.wait()
    deadline = time.monotonic() + 20
    while True:
        try:
            os.kill(broker_pid, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline, "the broker outlived its parent"
        time.sleep(0.1)
