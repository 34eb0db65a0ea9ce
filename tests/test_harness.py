"""The suite's own harness: a test that hangs fails itself and the run goes on; the processes a
test starts end with it, whether it passes, fails or hangs (tests/conftest.py).

A scratch run shows it: pytest under xdist, as scripts/test runs it, on a copy of
tests/conftest.py and three tests -- one starts a process that escapes (it leaves the test's
session and outlives its parent) and fails, one starts another and hangs (it waits on an event
nothing sets, past a short wall-clock bound), one passes after them.  The run must report both
failures and the pass in its summary, and both escaped processes must be gone when it returns
(no sleep: the harness waited on each; ``/proc`` is read once).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

# The scratch tests.  The module's name puts it among conftest's BOUNDED suites.
SCRATCH = '''
import os
import subprocess
import sys
import threading

ESCAPE = """
import os, signal, sys
ready_r, ready_w = os.pipe()
if os.fork():  # the parent: waits until the grandchild is set up, says its pid, exits
    os.close(ready_w)
    print(os.read(ready_r, 16).decode())
    os._exit(0)
os.setsid()
if os.fork():
    os._exit(0)
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
os.write(ready_w, str(os.getpid()).encode())
while True:
    signal.pause()  # only a signal that kills ends it
"""


def escape(record):
    out = subprocess.run([sys.executable, "-c", ESCAPE], capture_output=True, text=True,
                         timeout=120, check=True)
    with open(os.environ[record], "w") as f:
        f.write(out.stdout.strip())


def test_escapes_then_fails():
    escape("ESCAPED_FAILING")
    assert False, "this test fails on purpose"


def test_escapes_then_hangs():
    escape("ESCAPED_HUNG")
    threading.Event().wait()


def test_runs_after_them():
    pass
'''


@pytest.mark.skipif(sys.platform != "linux", reason="subreapers, pidfds and /proc")
@pytest.mark.timeout(600, method="signal")
def test_a_hung_test_fails_itself_the_run_goes_on_and_no_process_outlives_its_test(
    tmp_path: Path,
) -> None:
    shutil.copy(HERE / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_binding_scratch.py").write_text(SCRATCH, encoding="utf-8")
    failing, hung = tmp_path / "failing.pid", tmp_path / "hung.pid"
    env = {
        **os.environ,
        "TOOLCANCEL_WALL_CLOCK_BOUND": "2",  # the hung test's only way out: a bound, not a race
        "ESCAPED_FAILING": str(failing),
        "ESCAPED_HUNG": str(hung),
    }
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "1", "-p", "no:cacheprovider", "-q",
         "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300, check=False,
    )  # fmt: skip
    summary = run.stdout.strip().splitlines()[-1]
    assert run.returncode == 1 and re.search(r"\b2 failed, 1 passed\b", summary), run.stdout
    assert "test_escapes_then_fails" in run.stdout and "test_escapes_then_hangs" in run.stdout
    pids = [int(failing.read_text()), int(hung.read_text())]
    assert [pid for pid in pids if os.path.exists(f"/proc/{pid}")] == [], run.stdout  # nor zombies
