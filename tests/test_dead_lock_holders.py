"""The launcher's wait for this run's post-processors (their lock files: npuprof.results.postprocess) never
waits for one that has died, nor for another run's; in-process, the holders plain-Python processes."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from npuprof import runner
from npuprof.results import postprocess

RUN = "0123456789ab"
PENDING = ".npuprof_pending"

# A stand-in post-processor ("npuprof.results.postprocess" in its command line, as a real one's): it takes
# its lock, writes its pid into it as a real one does, forks a copy of itself when asked (a process forked
# while the lock's descriptor was open: the copy holds the lock too), says "held <copy's pid or 0>", sleeps.
_HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o640)
fcntl.flock(fd, fcntl.LOCK_EX)
os.pwrite(fd, f"{os.getpid()}\\n".encode(), 0)
copy = 0
if sys.argv[2] == "fork":
    copy = os.fork()
    if copy == 0:
        time.sleep(60)
        os._exit(0)
print("held", copy, flush=True)
time.sleep(60)
"""


def _lock_path(out: Path, run_id: str, host: str | None = None) -> Path:
    host = host or os.uname().nodename
    return out / PENDING / f"{run_id}.{host}.{os.getpid()}.{os.urandom(4).hex()}.lock"


@contextlib.contextmanager
def _holder(lock: Path, fork: bool) -> Iterator[tuple[subprocess.Popen, int]]:
    """The stand-in post-processor holding ``lock``, and the pid of its forked copy (0: none)."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    how = "fork" if fork else "alone"
    argv = [sys.executable, "-c", _HOLDER, str(lock), how, "npuprof.results.postprocess"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    copy = 0
    try:
        line = proc.stdout.readline().split() if proc.stdout else []
        assert line[:1] == ["held"], line
        copy = int(line[1])
        yield proc, copy
    finally:
        for pid in (proc.pid, copy):
            if pid:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=30)
        if proc.stdout:
            proc.stdout.close()


def _wait_s(out: Path, within_s: float) -> float:
    """How long wait_for_pending took for RUN's locks under ``out``, given ``within_s`` at most."""
    start = time.monotonic()
    postprocess.wait_for_pending(out, RUN, poll_s=0.02, deadline=start + within_s)
    return time.monotonic() - start


def test_a_live_post_processor_is_waited_for(tmp_path: Path) -> None:
    """The control of the tests below: a holder that lives is busy, and waited for until the deadline."""
    with _holder(_lock_path(tmp_path, RUN), fork=False):
        assert runner._busy_post_processors(tmp_path, RUN) == 1
        with pytest.raises(TimeoutError):
            _wait_s(tmp_path, 0.5)


def test_a_killed_post_processor_ends_the_wait(tmp_path: Path) -> None:
    lock = _lock_path(tmp_path, RUN)
    with _holder(lock, fork=False) as (proc, _copy):
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert runner._busy_post_processors(tmp_path, RUN) == 0
        assert _wait_s(tmp_path, 10.0) < 5.0
    assert not lock.exists()  # its lock was free: the wait removed it


def test_a_killed_post_processor_whose_lock_a_forked_copy_holds_ends_the_wait(tmp_path: Path) -> None:
    """Its lock outlives it (held by a process forked while its descriptor was open): the pid written
    in the lock is no post-processor's any more, and the wait ended only at its deadline (none without a
    stop signal: for ever)."""
    lock = _lock_path(tmp_path, RUN)
    with _holder(lock, fork=True) as (proc, copy):
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        fd = os.open(lock, os.O_RDONLY)
        try:  # the copy holds the lock still
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        finally:
            os.close(fd)
        assert copy > 0 and os.path.exists(f"/proc/{copy}")
        assert runner._busy_post_processors(tmp_path, RUN) == 0
        assert _wait_s(tmp_path, 10.0) < 5.0


def test_another_runs_held_lock_is_neither_busy_nor_waited_for(tmp_path: Path) -> None:
    """Another run's post-processor, busy in the same output directory: the launcher's count of busy ones
    (its 'waiting for N ...' line and its first 2 s) and its wait pass it over, and leave its lock file."""
    other = _lock_path(tmp_path, "ba9876543210", host="otherhost")
    with _holder(other, fork=False):
        assert runner._busy_post_processors(tmp_path, RUN) == 0
        assert _wait_s(tmp_path, 10.0) < 5.0
        assert other.exists()
