"""A SIGTERM while a capture's memory snapshot is still being copied, the main thread blocked outside Python
(a collective whose peer died): npuprof's handler cannot run there, and the watcher that kills the process
after a second (docs/architecture.md, "Signals") lost the copy. It now finishes the copy first, within the
exit's bound. Plain Python: the guard and the hand-over as the agent wires them, a copy that says how it was
run, and a main thread blocked in a mutex locked twice (no Python handler runs until it returns)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import clean_env, wait_until_blocked_in_a_futex

_A_COPY_UNDER_WAY = """\
import ctypes, os, sys, threading, time
from npuprof.agent.memory_snapshot import TASK_KEY
from npuprof.agent.signals import KeptWork, SigtermGuard
from npuprof.owned_fd import OwnedFd
from npuprof.results import postprocess

class Log:
    def __getattr__(self, name):
        return lambda *args: print(name, *args, file=sys.stderr, flush=True)

class PacedCopy:
    \"\"\"A copy of a minute paced, of 2 s hurried (more than the second the handler is given to start);
    run once, whoever comes first.\"\"\"
    left_for_room = ""
    def __init__(self):
        self.hurried, self.lock, self.done = threading.Event(), threading.Lock(), False
    def hurry(self):
        self.hurried.set()
    def run(self, pause=True):
        with self.lock:
            if self.done:
                return
            if pause:
                self.hurried.wait(60)
            time.sleep(2)
            with open(sys.argv[1], "w") as f:
                f.write("copied")
            self.done = True

read_end, write_end = os.pipe()
handover = postprocess._Handover(OwnedFd(write_end))
"""
_BLOCKED = """\
print("blocking", flush=True)
libc = ctypes.CDLL(None)
mutex = ctypes.create_string_buffer(128)
libc.pthread_mutex_lock(mutex)
libc.pthread_mutex_lock(mutex)  # for ever, the GIL released
"""
_BLOCKED_DURING_THE_COPY = f"""\
{_A_COPY_UNDER_WAY}
guard = SigtermGuard(lambda: None, Log())
assert guard.install()
handover.put({{"exports": {{TASK_KEY: PacedCopy()}}, "rank_dir": "/nonexistent", "n": 0}})
guard.capture_ended(KeptWork(handover.copying, handover.finish_copies, postprocess.HANDOVER_DRAIN_S))
{_BLOCKED}"""
# --dynamic: the guard installed when training starts stays between captures, the agent's wiring itself
_BLOCKED_DURING_A_DYNAMIC_CAPTURES_COPY = f"""\
{_A_COPY_UNDER_WAY}
from pathlib import Path
from npuprof.agent import entry

class Plan:
    def at_exit(self, signalled=""):
        print("the process ends", signalled, file=sys.stderr, flush=True)

class Controller:
    prof, plan = None, Plan()
    def replan(self):  # asked by the copier once done: a decision at the next step boundary
        pass

agent = entry.Agent.__new__(entry.Agent)
agent.log, agent.controller = Log(), Controller()
agent.post = postprocess.Postprocessor(Path("/nonexistent"))
agent.post._handover = handover
agent.sigterm = SigtermGuard(
    lambda: None, agent.log, on_term_unhandled=lambda: entry._plans_last_lines(agent.controller, "SIGTERM")
)
assert agent.sigterm.install_for_session()  # training starts
assert agent.sigterm.install()  # a capture
handover.put({{"exports": {{TASK_KEY: PacedCopy()}}, "rank_dir": "/nonexistent", "n": 0}})
agent._on_profiling(False)  # the capture's end, its snapshot still to copy
{_BLOCKED}"""


def test_a_sigterm_while_blocked_during_the_copy_finishes_the_copy_then_dies_of_it(tmp_path: Path) -> None:
    copied, err = _terminated_while_blocked(_BLOCKED_DURING_THE_COPY, tmp_path)
    assert copied.exists(), err  # a minute paced: only the hurried copy is done this soon
    assert "memory snapshot copied first" in err, err


_QUICK_COPY_IN_ONE_RANK_OF_SEVERAL = _BLOCKED_DURING_THE_COPY.replace(
    "time.sleep(2)", "time.sleep(0.2)"
).replace("assert guard.install()", "assert guard.install()\nguard._grace = 5.0  # one rank of several")


def test_a_blocked_rank_dies_once_its_copy_is_done_not_after_the_whole_grace(tmp_path: Path) -> None:
    """One rank of several, blocked in a collective, gives its main thread 5 s to start the handler
    (PEER_GRACE_S): with a copy left and no capture, it waited those 5 s out though the copy took 0.2 s,
    where without npuprof it dies at the signal. It now dies once the copy is done and handed over."""
    copied, err = _terminated_while_blocked(_QUICK_COPY_IN_ONE_RANK_OF_SEVERAL, tmp_path, within_s=3.0)
    assert copied.exists(), err
    assert "memory snapshot copied first" in err, err


def test_a_dynamic_capture_keeps_its_copy_from_a_sigterm_while_blocked(tmp_path: Path) -> None:
    """--dynamic keeps the guard between captures, and its end kept no copy: a main thread blocked
    outside Python was given the idle 50 ms, and the process died with the copy lost. The copy is done
    first as without --dynamic, and the plan's last lines ("the process ends") are still written."""
    copied, err = _terminated_while_blocked(_BLOCKED_DURING_A_DYNAMIC_CAPTURES_COPY, tmp_path)
    assert copied.exists(), err
    assert "memory snapshot copied first" in err, err
    assert "the process ends SIGTERM" in err, err


def _terminated_while_blocked(script: str, tmp_path: Path, within_s: float = 5 + 3) -> tuple[Path, str]:
    """``script`` run until its main thread blocks, then sent SIGTERM: the file its copy writes, stderr.
    It must die of the SIGTERM within ``within_s`` (the exit's bound, and the interpreter's start aside)."""
    copied = tmp_path / "copied"
    job = subprocess.Popen(
        [sys.executable, "-c", script, str(copied)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )
    try:
        assert job.stdout is not None and job.stdout.readline() == "blocking\n", job.communicate(timeout=30)
        wait_until_blocked_in_a_futex(job.pid)
        sent = time.monotonic()
        job.send_signal(signal.SIGTERM)
        _, err = job.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        if job.poll() is None:
            job.kill()
            job.communicate()
    assert job.returncode == -signal.SIGTERM, err
    assert took < within_s, took
    return copied, err
