"""SIGTERM while a capture is recorded by a training thread, outside --dynamic (docs/architecture.md,
"Signals"). Only the main thread may install a signal handler: a capture that began on another thread had
none, and a SIGTERM (torchrun, Slurm, Kubernetes) killed the job at once, the capture "incomplete", "the
process ended before the capture was finalised". The main thread now installs it at its next bytecode
boundary, woken from a wait of the standard library (Thread.join), and puts it down once the capture ends.

Plain Python: the controller drives a profiler of the test's, and the guard is told of each profiler's
start and stop as the agent tells it (agent/entry.py, _on_profiling)."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from _standin_jobs import with_controller_pieces
from conftest import clean_env

from npuprof.agent import main_thread
from npuprof.agent.log import AgentLog
from npuprof.agent.signals import SigtermGuard

_THREAD_TRAINS = with_controller_pieces("""\
import gc, os, signal, sys, threading, time
from npuprof.agent import signals
from npuprof.agent.controller import CaptureController
from npuprof.agent.schedule import SchedulePlan
from npuprof.config import ProfileConfig

out, term_at, scripts_own = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "own-handler"
main_in_c = sys.argv[3] == "main-in-c"  # once the capture began, the main thread blocks in C code for good
signals.HANDLER_GRACE_S = 0.2  # the 1 s the watcher gives the main thread, made short
began = threading.Event()

# (CONTROLLER_LOG)
class Schedule:  # steps 1-3 recorded, then none
    off, skip_first, wait, warmup, active, repeat = False, 1, 0, 0, 3, 1

class Profiler:
    def __init__(self, on_trace_ready):
        self.on_trace_ready = on_trace_ready
    def start(self):
        pass
    def step(self):
        pass
    def stop(self):
        self.on_trace_ready(self)

# (CONTROLLER_BACKEND)

# (CONTROLLER_SINK)
def on_term():
    controller.finish_on_sigterm()
    print("handed over", file=sys.stderr, flush=True)

guard = signals.SigtermGuard(
    on_term, Log(), recorded_off_main=lambda: controller.recorded_off_the_main_thread()
)
settling = []  # non-empty while the main thread makes the call the training thread asked of it
settle = guard._settle
def settled_on_the_main_thread():
    settling.append(True)
    try:
        settle()
    finally:
        settling.clear()
guard._settle = settled_on_the_main_thread

def on_profiling(active):  # as the agent does (agent/entry.py, _on_profiling)
    if active:
        print("install asked:", guard.install(), file=sys.stderr, flush=True)
    else:
        guard.capture_ended(None)

controller = CaptureController(
    ProfileConfig(), SchedulePlan(Schedule()), backend_factory=Backend, sink_factory=lambda backend: Sink(),
    log=Log(), rank_fn=lambda: 0, on_profiling=on_profiling,
)

if scripts_own:
    def own(signum, frame):
        print("the script's handler", file=sys.stderr, flush=True)
        os._exit(3)
    signal.signal(signal.SIGTERM, own)

def train():  # the main thread only joins this one, as a server's or a GUI's would
    controller.arm()
    for step in range(8):  # step 0 begins at arm(), each boundary begins the next
        time.sleep(0.05)  # the step's work
        if step == term_at:
            # once the main thread has made the install (or put-down) asked of it: a fixed step or two after
            # the ask was a bet on how soon a loaded host runs the main thread, lost by one run 0.3 s late
            # (injected: SIGTERM at its default action killed the job, nothing finalised)
            asked_within = time.monotonic() + 30
            while (guard._settle_asked or settling) and time.monotonic() < asked_within:
                time.sleep(0.01)
            print("handler at the signal:", signal.getsignal(signal.SIGTERM), file=sys.stderr, flush=True)
            os.kill(os.getpid(), signal.SIGTERM)
            # the rest of this step: until the handler (or the watcher, past its grace) asks for the finish,
            # not a fixed time that a loaded host's late handler outlasts
            asked_within = time.monotonic() + 30
            while controller._finish_requested is None and time.monotonic() < asked_within:
                time.sleep(0.01)
        controller.on_boundary()
        began.set()
        if step == term_at:
            # the job dies of the signal now, once the main thread (or the watcher) has handed the capture
            # over: the rest of the training outlasts that however late a loaded host runs it (a fixed 0.05 s
            # a step ended the training first when the handler came back 0.3 s late: "trained on")
            time.sleep(30)
    print("trained on", file=sys.stderr, flush=True)

def block_in_c():  # a normal mutex locked twice: the second lock never returns, the GIL released
    import ctypes
    libc, mutex = ctypes.CDLL(None), ctypes.create_string_buffer(64)  # zeroed: PTHREAD_MUTEX_INITIALIZER
    libc.pthread_mutex_lock(mutex)
    libc.pthread_mutex_lock(mutex)

gc.freeze()
thread = threading.Thread(target=train)
thread.start()
if main_in_c:
    began.wait()  # the handler is installed here
    block_in_c()
if sys.argv[3] != "falls-off":  # else the main thread runs to the script's end and waits there
    thread.join()
""")


def _job(tmp_path: Path, term_at: int, own: str = "") -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "capture"
    script = tmp_path / "thread_trains.py"
    script.write_text(_THREAD_TRAINS)
    proc = subprocess.run(
        [sys.executable, str(script), str(out), str(term_at), own or "-"],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    # dead of the signal as the capture was handed over, not 20 s later by the watcher's cut (HANDLER_LIMIT_S)
    # while the training, which outlasts that (see train), went on
    assert "took too long" not in proc.stderr, proc.stderr
    return proc, out


def test_sigterm_during_a_capture_of_a_training_thread_finalises_it_and_the_job_dies_of_it(
    tmp_path: Path,
) -> None:
    """Step 2 of the capture (steps 1-3) is in flight at the signal: the thread finishes the capture at
    its boundary, that step whole and its last, and the process dies of SIGTERM (exit 143 in a shell)."""
    proc, out = _job(tmp_path, term_at=2)
    assert proc.returncode == -signal.SIGTERM, proc.stderr
    assert out.read_text() == "2 stopped by SIGTERM", proc.stderr
    assert "handed over" in proc.stderr
    assert "trained on" not in proc.stderr


def test_sigterm_while_the_main_thread_is_blocked_in_c_still_finalises_a_training_threads_capture(
    tmp_path: Path,
) -> None:
    """The main thread installed the handler, then blocked in C code (a C++ wait, a GUI's loop): it never
    runs the handler, and the watcher said the capture lost after the 1 s grace (0.2 s here). The capture
    belongs to the training thread, which finishes it: the watcher asks it, as the handler would have."""
    proc, out = _job(tmp_path, term_at=2, own="main-in-c")
    assert proc.returncode == -signal.SIGTERM, proc.stderr
    assert out.read_text() == "2 stopped by SIGTERM", proc.stderr
    assert "handed over" in proc.stderr
    assert "the capture in flight is lost" not in proc.stderr


def test_sigterm_while_the_main_thread_waits_at_the_scripts_end_finalises_a_training_threads_capture(
    tmp_path: Path,
) -> None:
    """The script starts its training thread and ends (no join): the main thread waits for the thread in
    the interpreter's exit (threading._shutdown) and still runs handlers there. It was not asked to
    install one (taken for an exit under way) and SIGTERM killed the job at once, the capture lost."""
    proc, out = _job(tmp_path, term_at=2, own="falls-off")
    assert proc.returncode == -signal.SIGTERM, proc.stderr
    assert out.read_text() == "2 stopped by SIGTERM", proc.stderr
    assert "handed over" in proc.stderr


def test_sigterm_after_a_training_threads_capture_ends_the_job_at_once_as_without_npuprof(
    tmp_path: Path,
) -> None:
    """The capture ended at step 3: the main thread put the handler down, SIGTERM has its default action."""
    proc, out = _job(tmp_path, term_at=5)
    assert proc.returncode == -signal.SIGTERM, proc.stderr
    assert f"handler at the signal: {signal.SIG_DFL!s}" in proc.stderr
    assert out.read_text() == "3 ", proc.stderr  # finished where its schedule ends, before the signal
    assert "handed over" not in proc.stderr


def test_the_scripts_own_sigterm_handler_set_before_a_training_threads_capture_is_called(
    tmp_path: Path,
) -> None:
    proc, _out = _job(tmp_path, term_at=2, own="own-handler")
    assert proc.returncode == 3, proc.stderr
    assert "the script's handler" in proc.stderr
    assert "SIGTERM handler left out by the main thread" in proc.stderr  # the run's summary reads it
    assert "handed over" not in proc.stderr


def _signal_handler_within(seconds: float, default: bool = False) -> object:
    """SIGTERM's handler once it is not the default (``default``: once it is), or the one it has after
    ``seconds``."""
    deadline = time.monotonic() + seconds
    while (signal.getsignal(signal.SIGTERM) == signal.SIG_DFL) is not default:
        if time.monotonic() > deadline:
            break
        time.sleep(0.01)
    return signal.getsignal(signal.SIGTERM)


@pytest.mark.parametrize("waits_in", ["join", "event", "queue"])
def test_a_main_thread_that_waits_installs_the_handler_a_training_thread_asks_for(waits_in: str) -> None:
    """In-process: the test's own main thread waits (Thread.join, Event.wait, queue.get) while a thread
    begins a capture; the main thread is woken and installs the handler, then puts it down at the capture's
    end."""
    guard = SigtermGuard(lambda: None, AgentLog(None, "test"))
    seen: dict[str, object] = {}
    ended = threading.Event()
    results: queue.Queue[str] = queue.Queue()

    def training_thread() -> None:
        seen["asked"] = guard.install()
        seen["during"] = _signal_handler_within(30.0)
        guard.capture_ended(None)
        ended.set()
        results.put("trained")

    thread = threading.Thread(target=training_thread)
    try:
        thread.start()
        if waits_in == "event":
            ended.wait(30)
        elif waits_in == "queue":
            results.get(timeout=30)
        thread.join(30)
        assert seen == {"asked": True, "during": guard._handle}
        assert _signal_handler_within(30.0, default=True) == signal.SIG_DFL  # put down after the end
    finally:
        guard.uninstall()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)


class _ScriptsError(Exception):
    pass


def test_a_scripts_handler_raising_during_the_main_threads_install_raises_in_the_scripts_code() -> None:
    """A signal of the script's that comes while the main thread makes the call a training thread asked
    for (agent/main_thread.py, a C callback) has its handler run after it, in the script's code: raised
    inside the callback, what the handler raised (sys.exit, torch's DataLoader check) was dropped there."""

    def scripts_handler(signum: int, frame: object) -> None:
        raise _ScriptsError(f"signal {signum}")

    previous = signal.signal(signal.SIGUSR1, scripts_handler)
    asked = threading.Event()

    def training_thread() -> None:
        main_thread.call_soon(lambda: signal.raise_signal(signal.SIGUSR1))  # it comes during the call
        asked.set()
        time.sleep(0.5)

    thread = threading.Thread(target=training_thread)
    try:
        with pytest.raises(_ScriptsError, match=f"signal {int(signal.SIGUSR1)}"):
            thread.start()
            thread.join(30)
        assert asked.wait(30)  # the training thread may not have run on since the main thread made the call
    finally:
        thread.join(30)
        signal.signal(signal.SIGUSR1, previous)


_WAKE_SIGNAL_TAKEN = """\
import signal, sys, threading, time
from npuprof.agent import main_thread

def main_thread_waits_in_join():  # (Thread.start waits on a lock too: not there)
    frame = sys._current_frames().get(threading.main_thread().ident)
    innermost, names = frame, []
    while frame is not None:
        names.append(frame.f_code.co_name)
        frame = frame.f_back
    return "join" in names and main_thread._waits_on_a_lock(innermost)

def ask_once_the_main_thread_joins():  # a fixed 0.3 s, past which a loaded host may not have got it there
    deadline = time.monotonic() + 30
    while not main_thread_waits_in_join():
        assert time.monotonic() < deadline, "the main thread never joined"
        time.sleep(0.01)
    main_thread.call_soon(lambda: None)

def ask_while_the_main_thread_joins():
    thread = threading.Thread(target=ask_once_the_main_thread_joins)
    thread.start()
    thread.join()

ask_while_the_main_thread_joins()  # npuprof's no-op handler for SIGRTMIN+8 set, the main thread woken
signal.signal(signal.SIGRTMIN + 8, lambda signum, frame: print("the script's handler ran", flush=True))
ask_while_the_main_thread_joins()
signal.signal(signal.SIGRTMIN + 8, signal.SIG_DFL)  # as Python's table showed it: a save-and-restore's
ask_while_the_main_thread_joins()
print("the job went on", flush=True)
"""


def test_a_wake_signal_the_script_took_or_set_back_to_its_default_is_never_sent(tmp_path: Path) -> None:
    """SIGRTMIN+8 (agent/main_thread.py) once the script set its own handler, or its default action back:
    npuprof sent it all the same, running the script's handler for nothing, or killing the job."""
    script = tmp_path / "wake_signal_taken.py"
    script.write_text(_WAKE_SIGNAL_TAKEN)
    proc = subprocess.run(
        [sys.executable, str(script)], env=clean_env(), capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "the job went on\n"


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")  # 3.12+
def test_a_child_forked_while_a_thread_asked_for_a_call_on_the_main_thread_is_not_hung_by_it() -> None:
    """A fork (a DataLoader worker) while a training thread of the parent's held agent/main_thread.py's
    lock, asking for the SIGTERM handler: the child's copy of the lock stayed taken, and its main thread
    hung at its next pending call (or any call a thread of its own asked for)."""
    held, forked = threading.Event(), threading.Event()

    def training_thread() -> None:
        with main_thread._lock:  # as call_soon holds it
            held.set()
            forked.wait(30)

    thread = threading.Thread(target=training_thread)
    thread.start()
    try:
        assert held.wait(30)
        pid = os.fork()
        if pid == 0:  # the child: a call asked for by a thread of its own
            asked = threading.Thread(target=main_thread.call_soon, args=(lambda: None,), daemon=True)
            asked.start()
            asked.join(20)
            os._exit(1 if asked.is_alive() else 0)
    finally:
        forked.set()
        thread.join(30)
    assert _exit_code_within(pid, 30) == 0


def _exit_code_within(pid: int, seconds: float) -> int | None:
    """The exit code of child ``pid`` once it ends, or None (the child killed) when it has not within
    ``seconds``: a child hung by what it inherited fails the test, never hangs the suite."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


class _ErrorLog:
    def __init__(self) -> None:
        self.errors: list[str] = []

    def error(self, message: str) -> None:
        self.errors.append(message)


def test_calls_asked_by_a_thread_are_made_on_the_main_thread_in_order_and_a_failing_one_is_said(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """agent/main_thread.py: each call a thread asks for is made on the main thread, in the order asked; one
    that raises is said in the log, and the calls after it are made all the same."""
    log = _ErrorLog()
    monkeypatch.setattr(main_thread, "get_log", lambda: log)
    made: list[tuple[str, int]] = []

    def failing() -> None:
        raise ValueError("the call failed")

    def asking() -> None:
        main_thread.call_soon(lambda: made.append(("first", threading.get_ident())))
        main_thread.call_soon(failing)
        main_thread.call_soon(lambda: made.append(("third", threading.get_ident())))

    thread = threading.Thread(target=asking)
    thread.start()
    thread.join(30)
    deadline = time.monotonic() + 30
    while len(made) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    main = threading.main_thread().ident
    assert made == [("first", main), ("third", main)]
    assert log.errors == ["a call on the main thread failed: ValueError('the call failed')"]


def test_a_ctrl_c_during_a_call_on_the_main_thread_is_raised_in_the_scripts_code() -> None:
    """A Ctrl-C that comes while the main thread makes a call another thread asked for (a C callback, where
    what it raises reaches no code of the script's) is raised after it, in the script's code: dropped
    there, the job went on as if it had never been asked to stop."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # a worker of xdist may ignore it
    asked = threading.Event()

    def training_thread() -> None:
        main_thread.call_soon(lambda: signal.raise_signal(signal.SIGINT))  # it comes during the call
        asked.set()
        time.sleep(0.5)

    thread = threading.Thread(target=training_thread)
    try:
        with pytest.raises(KeyboardInterrupt):
            thread.start()
            thread.join(30)
        assert asked.wait(30)
    finally:
        thread.join(30)
        signal.signal(signal.SIGINT, previous)


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")  # 3.12+
def test_a_child_forked_while_a_call_waited_for_the_main_thread_makes_its_own_calls_only() -> None:
    """A fork while a call another thread asked for waits for the parent's main thread (queued, as call_soon
    leaves it until the main thread's next boundary): the child made the parent's call, and no call its
    own threads asked for (none was asked of Python while one seemed to wait already)."""
    made: list[str] = []
    with main_thread._lock:
        main_thread._queued.append(lambda: made.append("the parent's"))
    try:
        pid = os.fork()
        if pid == 0:  # the child: a call asked for by a thread of its own
            asked = threading.Thread(target=main_thread.call_soon, args=(lambda: made.append("own"),))
            asked.start()
            asked.join(20)
            deadline = time.monotonic() + 20
            while not made and time.monotonic() < deadline:
                time.sleep(0.01)
            os._exit(0 if made == ["own"] else 1)
    finally:
        with main_thread._lock:
            main_thread._queued.clear()
    assert _exit_code_within(pid, 60) == 0


def test_only_a_wait_on_a_lock_of_the_standard_librarys_is_woken_by_the_wake_signal() -> None:
    """agent/main_thread.py: WAKE_SIGNAL is sent to a main thread waiting on a lock (Event.wait,
    Thread.join, queue.get), whose retry makes the pending calls; the other waits CPython retries (a
    selector's, here) run no pending call there, and get no signal."""
    import selectors

    release = threading.Event()
    read_end, write_end = os.pipe()
    selector = selectors.DefaultSelector()
    selector.register(read_end, selectors.EVENT_READ)
    waiters = {
        "lock": threading.Thread(target=release.wait, args=(30,), daemon=True),
        "select": threading.Thread(target=selector.select, args=(30,), daemon=True),
    }

    def innermost(thread: threading.Thread, file_name: str) -> object:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            frame = sys._current_frames().get(thread.ident)  # type: ignore[arg-type]
            if frame is not None and os.path.basename(frame.f_code.co_filename) == file_name:
                return frame
            time.sleep(0.01)
        raise AssertionError(f"{thread.name} never waited in {file_name}")

    try:
        for thread in waiters.values():
            thread.start()
        assert main_thread._waits_on_a_lock(innermost(waiters["lock"], "threading.py"))
        assert not main_thread._waits_on_a_lock(innermost(waiters["select"], "selectors.py"))
    finally:
        release.set()
        os.write(write_end, b"x")
        for thread in waiters.values():
            thread.join(30)
        selector.close()
        os.close(read_end)
        os.close(write_end)
