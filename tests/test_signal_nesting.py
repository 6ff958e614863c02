"""A script's signal handler running inside npuprof's SIGTERM handler (docs/architecture.md, "Signals"):
torch's DataLoader SIGCHLD check, whose workers the SIGTERM sent to the job's group ended within
microseconds, raised there before the handler had quieted it, and the job died of that RuntimeError
instead of SIGTERM (CI's run of bca2b4f)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import clean_env

from npuprof.agent import signals
from npuprof.agent.child_signal import ChildSignalWrap

_RAISED_INSIDE_THE_HANDLER = """\
import os, signal, sys, time
from npuprof.agent import signals

class Log:
    def __getattr__(self, name):
        return lambda *args: print(name, *args, file=sys.stderr, flush=True)

def on_term():
    with open(sys.argv[1], "w") as f:
        f.write("finalised")

def workers_check(signum, frame):  # as torch's DataLoader SIGCHLD check, the workers dead of the SIGTERM
    raise RuntimeError("DataLoader worker (pid 1) is killed by signal: Terminated.")

signals.HANDLER_GRACE_S = 60.0  # (the watcher's 1 s for a main thread blocked outside Python: none here)
guard = signals.SigtermGuard(on_term, Log())
assert guard.install()
signal.signal(signal.SIGUSR1, workers_check)
owns, came = guard._owns_sigterm, []

def owns_while_a_worker_dies():  # the first call the handler makes: the signal comes just before it
    if not came:
        came.append(signal.SIGUSR1)
        os.kill(os.getpid(), signal.SIGUSR1)
    return owns()

guard._owns_sigterm = owns_while_a_worker_dies
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(5)
print("lived on", file=sys.stderr)
"""


def test_a_scripts_handler_raising_inside_npuprofs_sigterm_handler_keeps_the_capture(tmp_path: Path) -> None:
    """The flake of test_sigterm_to_a_job_with_dataloader_workers_keeps_the_capture, made certain: torch's
    SIGCHLD check ran inside npuprof's SIGTERM handler, before the handler had quieted it, and raised
    "DataLoader worker ... is killed" (the workers died of the same group SIGTERM within microseconds): the
    raise left the handler unstarted, the watcher killed the process a second later, the capture lost. Now
    the raise is dropped, the handlers are quieted, the capture is finalised and the process dies of
    SIGTERM."""
    proc, done = _dies_of_sigterm(tmp_path, _RAISED_INSIDE_THE_HANDLER)
    assert done == "finalised", proc.stderr
    assert "DataLoader worker" not in proc.stderr and "lived on" not in proc.stderr, proc.stderr


_CTRL_C_DURING_THE_FINALISE = """\
import os, signal, sys, time
from npuprof.agent import signals

class Log:
    def __getattr__(self, name):
        return lambda *args: print(name, *args, file=sys.stderr, flush=True)

def on_term():  # the capture stopped, then its hand-over: a Ctrl-C comes in between
    signal.raise_signal(signal.SIGINT)
    with open(sys.argv[1], "w") as f:
        f.write("handed over")

signals.HANDLER_GRACE_S = 60.0  # (the watcher's 1 s for a main thread blocked outside Python: none here)
guard = signals.SigtermGuard(on_term, Log())
assert guard.install()
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(5)
print("lived on", file=sys.stderr)
"""


def test_a_ctrl_c_during_npuprofs_sigterm_finalise_is_dropped_as_the_job_dies(tmp_path: Path) -> None:
    """A Ctrl-C after a `kill` of the job (it seemed slow to go) raised KeyboardInterrupt inside npuprof's
    SIGTERM handler, once the capture was stopped: its hand-over was cut short (a memory snapshot's copy
    lost; --dynamic's "stopped by SIGTERM" unlogged) and the job died of the SIGTERM all the same. The
    Ctrl-C is dropped there, as in the finalise at the job's exit."""
    proc, done = _dies_of_sigterm(tmp_path, _CTRL_C_DURING_THE_FINALISE)
    assert done == "handed over", proc.stderr
    assert "KeyboardInterrupt" not in proc.stderr and "lived on" not in proc.stderr, proc.stderr


def _dies_of_sigterm(tmp_path: Path, source: str) -> tuple[subprocess.CompletedProcess[str], str]:
    """``source`` run as a script, which must die of SIGTERM: its result, and what it wrote into the file
    its first argument names ("" when none)."""
    done, script = tmp_path / "done", tmp_path / "job.py"
    script.write_text(source)
    proc = subprocess.run(
        [sys.executable, str(script), str(done)], env=clean_env(), capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == -signal.SIGTERM, proc.stderr
    return proc, done.read_text() if done.exists() else ""


def test_a_scripts_handler_raising_inside_a_sigterm_not_npuprofs_passes_the_raise_on() -> None:
    """A SIGTERM npuprof does not handle (its guard is not installed; the script chained to its handler):
    the process lives on, so a raise of the script's handler inside it reaches the script as it would
    have, not dropped."""

    guard = signals.SigtermGuard(lambda: None, None)
    raised = RuntimeError("DataLoader worker (pid 1) is killed by signal: Terminated.")
    calls: list[int] = []

    def owns_raising_once() -> bool:
        calls.append(1)
        if len(calls) == 1:
            raise raised
        return False

    guard._owns_sigterm = owns_raising_once  # type: ignore[method-assign]
    with pytest.raises(RuntimeError) as caught:
        guard._quieted_for_term()
    assert caught.value is raised and len(calls) == 2


def _worker_check(signum: int, frame: object) -> None:
    raise RuntimeError("DataLoader worker (pid 1) is killed by signal: Terminated.")


def test_sigchld_at_the_first_instruction_of_npuprofs_sigterm_handler_is_dropped_as_the_job_dies() -> None:
    """Python runs a signal that came as it entered npuprof's SIGTERM handler at that handler's first
    instruction, before any of its code (the traceback of CI's failure ended at `def _handle`): the wrap of
    SIGCHLD's handler drops it there while the SIGTERM is npuprof's, and runs it anywhere else, or when the
    SIGTERM is not npuprof's (the process lives on)."""
    guard = signals.SigtermGuard(lambda: None, None)
    frames: list = []
    guard._quieted_for_term = lambda: frames.append(sys._getframe(1)) or False  # type: ignore[method-assign]
    guard._act_as_previous = lambda signum, frame: None  # type: ignore[method-assign]
    guard._handle(signal.SIGTERM, None)
    (inside,) = frames  # the frame a signal coming at the handler's first instruction is handled in
    dying = [True]
    wrap = ChildSignalWrap(_worker_check, signals.SigtermGuard._handle.__code__, lambda: dying[0])
    assert wrap(signal.SIGCHLD, inside) is None
    with pytest.raises(RuntimeError, match="DataLoader worker"):
        wrap(signal.SIGCHLD, sys._getframe())  # in the script's code: as before
    dying[0] = False
    with pytest.raises(RuntimeError, match="DataLoader worker"):
        wrap(signal.SIGCHLD, inside)


_WRAPPED_WHILE_INSTALLED = """\
import os, signal, sys, time
from npuprof.agent import signals
from npuprof.agent.child_signal import ChildSignalWrap

def reaper(signum, frame):
    raise RuntimeError("worker killed")

signal.signal(signal.SIGCHLD, reaper)
guard = signals.SigtermGuard(lambda: None, None)
assert guard.install()
wrap = signal.getsignal(signal.SIGCHLD)
assert isinstance(wrap, ChildSignalWrap) and wrap.handler is reaper, wrap
try:  # the child's SIGCHLD may come before the fork returns here
    if os.fork() == 0:
        os._exit(0)
    # short sleeps: a SIGCHLD the kernel gives npuprof's watcher thread does not end one sleep of the main
    # thread's, whose handler then ran only once a single 10 s sleep was over
    until = time.monotonic() + 30
    while time.monotonic() < until:
        time.sleep(0.01)
except RuntimeError as exc:
    print("the script's handler ran:", exc)
os.wait()

def later(signum, frame):
    pass

signal.signal(signal.SIGCHLD, later)  # a DataLoader's first iterator, after the capture began
guard.check_pipe()  # the next recorded step boundary
assert signal.getsignal(signal.SIGCHLD).handler is later
guard.uninstall()
assert signal.getsignal(signal.SIGCHLD) is later
print("put back")
"""


def test_sigchlds_handler_is_wrapped_while_npuprofs_sigterm_handler_is_installed_and_put_back_after(
    tmp_path: Path,
) -> None:
    """The wrap runs the script's handler as before (a child's exit raises in the script's sleep), wraps one
    set after the capture began at the next recorded step boundary, and gives it back at the capture's
    end."""
    script = tmp_path / "wrapped.py"
    script.write_text(_WRAPPED_WHILE_INSTALLED)
    proc = subprocess.run(
        [sys.executable, str(script)], env=clean_env(), capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["the script's handler ran: worker killed", "put back"], proc.stdout


def test_what_the_wrapped_sigchld_handler_raises_shows_no_frame_of_npuprofs() -> None:
    """torch's "DataLoader worker ... is killed" (a worker killed mid-capture) reaches the script with the
    traceback it has without npuprof: the script's line, then torch's handler; the wrap's own frame was one
    more entry between them, three lines with its source and carets."""
    wrap = ChildSignalWrap(_worker_check, signals.SigtermGuard._handle.__code__, lambda: False)
    with pytest.raises(RuntimeError, match="DataLoader worker") as caught:
        wrap(signal.SIGCHLD, sys._getframe())
    names = [entry.name for entry in caught.traceback]
    assert names == [sys._getframe().f_code.co_name, "_worker_check"], names
