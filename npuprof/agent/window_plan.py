"""--delay/--duration: one capture of a time window, as ``nsys profile --delay/--duration``
(docs/architecture.md, "Time windows").

The clock starts when the plan is made: when npuprof's agent wakes in the process (the script's ``import
torch``, which imports ``torch.optim``, or --step-on's function when it comes first). A daemon timer thread
wakes at the window's start and end and calls the controller's ``replan()``, so that the next step boundary
decides. A job without steps never takes one, and torch's profiler must be started and stopped on the thread
it belongs to: the timer then sends a real-time signal to the main thread, whose Python handler runs there
between bytecodes (``CaptureController.tick``). The handler is installed only where the signal has its
default action, and the timer sends it only while the handler is still ours.

``action_at`` answers from a state that only the training thread changes (``refresh``, called before
each decision): torch's profiler asks it again inside ``step()``, and both answers must agree.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Any

from npuprof.agent import window_lateness
from npuprof.agent.frames import (
    PROFILER_UNSAFE,
    another_thread_imports,
    current_frames,
    imported_alone,
    runs_code_of,
)
from npuprof.agent.log import raised_by_a_signal_handler
from npuprof.agent.schedule import Action
from npuprof.config import ProfileConfig
from npuprof.signal_names import signal_name

# A real-time signal the main thread handles; chosen away from SIGRTMIN, which some libraries take. Its
# handler lets interrupted system calls restart (a C extension that does not retry on EINTR would fail),
# so a main thread blocked in a wait would run it only when the wait ends; when the main thread is seen
# waiting in one of the standard library's waits (whose system calls Python retries itself, PEP 475),
# the second signal, whose handler interrupts the wait, is sent instead.
KICK_SIGNAL = signal.SIGRTMIN + 6 if hasattr(signal, "SIGRTMIN") else None
KICK_INTERRUPTING = signal.SIGRTMIN + 7 if hasattr(signal, "SIGRTMIN") else None
# said by the agent when the window's time came and nothing could open it; read by the run's last line
WINDOW_NOT_OPENED = "--delay/--duration: the window could not open"
# logged at the exit of a process whose --delay window had yet to begin; read by the run's last line
WINDOW_DUE_AT_EXIT = "--delay: the process ended before its window began: "
KICK_EVERY_S = 0.2  # a main thread busy in C++ runs the handler once it is back: ask again until then
KICK_FOR_S = 30.0  # after that, the next step boundary (or the exit) decides
TAKEN_GRACE_S = 1.0  # the signal taken over: how long a wait of Python's may be interrupted before it is said
LATE_S = 0.5  # a window the timer could not close that closes this much after its end says so (KICK_EVERY_S+)
# a profiler start this long, of a window the process's end cut short, is said as why it recorded so little
SLOW_START_S = 1.0
ENDED_EARLY = "the process ended before the time window's end"
# what torch's profiler imports as it starts (``hasattr(torch, "_inductor")`` in ``prepare_trace``; it imports
# torch._dynamo too): imported by the kick before it opens the window, with other threads' imports held back
IMPORTED_BY_A_START = ("torch._inductor",)

WAITING, OPEN, DONE = "waiting", "open", "done"


# what else opens a window the timer's signal could not open (the timer goes on sending it): said with
# the reason that it could not
_OR_ONCE = {
    "the job's main thread blocks the timer's signal": ", or once the main thread unblocks the signal",
    "the job took the timer's signal over": ", or once the job gives the signal back",
    "the main thread never ran the timer's signal handler": ", or once the main thread runs it",
}


class WindowPlan:
    timed = True  # the controller stops the window itself: torch's schedule cannot say "stop now"

    def __init__(self, cfg: ProfileConfig, log: Any) -> None:
        self.log = log
        self.woke = time.monotonic()
        self._delay = cfg.delay or 0.0
        self.start_at = self.woke + self._delay
        self.end_at = None if cfg.duration is None else self.start_at + cfg.duration
        self.duration = cfg.duration
        self.state = WAITING
        self.began_step: int | None = None
        self.began_at: float | None = None
        self.opened_at: float | None = None  # when the window opened: its profiler's start begins there
        self.start_imports_s = 0.0  # the kick's imports for that start, before it opened (_start_imported)
        # seconds from the window's start to the first moment the main thread could open it (the step
        # boundary that did, or the timer's signal handler's first run), and why, when LATE_OPEN_S or more
        # (agent/window_lateness.py: the watch the timer and the handler report to)
        self.opened_late_by = 0.0
        self._late_why = ""
        self.opening = window_lateness.OpeningWatch()
        self.controller: Any = None
        self._kicks = False
        self._no_kick_why = ""  # why the timer cannot make the main thread open the window, in words
        self._said_not_opened = False
        self._said_not_closed = False
        self._said_not_begun = False

    # ---- CapturePlan -------------------------------------------------------------------------------
    def action_at(self, step: int) -> Action:
        return Action.RECORD if self.state == OPEN else Action.NONE

    def next_busy_step(self, after: int) -> int | None:
        # The window's step is not known in advance: the timer's replan() makes a boundary decide. -1
        # asks whether anything will ever record (the post-processor is started then).
        if self.state == DONE:
            return None
        return 0 if after < 0 else None

    def next_window_start(self, after: int) -> int | None:
        return None  # one window

    def config_at(self, step: int) -> ProfileConfig | None:
        return None

    def refresh(self, step: int) -> None:
        """On the training thread, before each decision: the clock says whether the window is open."""
        now = time.monotonic()
        if self.state == WAITING and now >= self.start_at:
            if starts_workers():  # known only once `python -m torch.distributed.run` runs its __main__
                self.state = DONE  # torchrun's own process imports torch too: its workers record, not it
                self.log.info("--delay/--duration: no window in the process that starts the workers")
                return
            code = _main_thread_code()
            if spawned_child_starting(code):  # what it is (a DataLoader worker?) is known once it runs
                return
            if in_dataloader_worker(code):  # it imports torch too, and only loads data for the training
                self.state = DONE
                self.log.info("--delay/--duration: no window in a DataLoader worker")
                return
            self.state = OPEN
            self.opened_at = now
            self._time_the_opening(now)
            if self.duration is not None:  # a window opened late (no boundary came sooner) keeps its length
                self.end_at = now + self.duration
        # the duration counts once recording has begun: a window asked shorter than the time between two
        # looks at the clock (--duration 0.001) was closed before its profiler started
        ends = self.end_at if self.began_at is not None else None
        if self.state == OPEN and ends is not None and now >= ends:
            self.state = DONE

    def recording_started(self) -> None:
        """The profiler records now: the duration counts from here, not from the request to start (the
        first profiler start of a process takes a second or more)."""
        self.began_at = time.monotonic()
        if self.duration is not None:
            self.end_at = self.began_at + self.duration
        if self.opened_late_by >= window_lateness.LATE_OPEN_S and self.controller is not None:
            late = f"the window opened {self.opened_late_by:.1f} s after its start: {self._late_why}"
            self.controller.note_for_capture(late)

    def _time_the_opening(self, now: float) -> None:
        """How late the window opens, and why (agent/window_lateness.py)."""
        self.opened_late_by, self._late_why = self.opening.lateness(self.start_at, now, self._no_kick_why)

    def hear(self, kind: str, step: int, detail: str) -> None:
        if kind == "began":
            self.began_step = step
        elif kind in ("ended", "skipped"):
            self.state = DONE

    # ---- the timer ---------------------------------------------------------------------------------
    def bind(self, controller: Any) -> None:
        self.controller = controller
        if starts_workers():  # torchrun run by name (-m, its script): no window, no signal, no timer in it
            self.state = DONE
            name = module_run(sys.orig_argv) or os.path.basename(sys.argv[0] if sys.argv else "")
            self.log.info(f"--delay/--duration: no window in the process that starts the workers ({name})")
            if hasattr(os, "register_at_fork"):  # a worker it forks (torchrun --run-path) decides anew
                os.register_at_fork(after_in_child=self._forked_from_a_launcher)
            return
        self._kicks = self._install_handler()
        if not self._kicks:
            why = self._no_kick_why
            self.log.info(f"--delay/--duration: the window opens and closes at step boundaries only ({why})")
        from npuprof.agent import threads

        threads.start(self._timer, "npuprof-window")

    def _forked_from_a_launcher(self) -> None:
        """A child forked by a process that starts workers may be one of them (``torchrun --run-path
        --start-method fork`` runs the script in it): its window waits again, for its first step boundary
        (it has no timer), where ``starts_workers`` looks at this process, not at the command line it kept.
        Its clock starts at the fork, as npuprof's agent wakes in every other process: the launcher's (a
        second or more of its own start earlier) would open the window that much sooner."""
        if self.state == DONE and self.began_at is None:
            self.state = WAITING
            self.woke = time.monotonic()
            self.start_at = self.woke + self._delay
            self.end_at = None if self.duration is None else self.start_at + self.duration

    def _install_handler(self) -> bool:
        from npuprof.agent import threads

        if KICK_SIGNAL is None:
            self._no_kick_why = "no real-time signals here"
            return False
        if not threads.on_main_thread():
            self._no_kick_why = "npuprof started off the main thread, where no signal handler can be set"
            return False
        try:
            if signal.getsignal(KICK_SIGNAL) != signal.SIG_DFL:
                # someone uses this signal: leave it to them
                self._no_kick_why = f"the job handles signal {signal_name(KICK_SIGNAL)} itself"
                return False
            signal.signal(KICK_SIGNAL, self._on_kick)
            signal.siginterrupt(KICK_SIGNAL, False)  # C calls in the job restart rather than fail with EINTR
            if KICK_INTERRUPTING is not None and signal.getsignal(KICK_INTERRUPTING) == signal.SIG_DFL:
                signal.signal(KICK_INTERRUPTING, self._on_kick)  # interrupts: sent only into Python's waits
            return True
        except (OSError, ValueError) as exc:
            self._no_kick_why = f"no timer signal ({exc!r})"
            return False

    def _start_imported(self) -> bool:
        """``imported_alone`` of what the profiler's start imports, its time counted into the start's."""
        importing = time.monotonic()
        try:
            return imported_alone(IMPORTED_BY_A_START)
        finally:
            self.start_imports_s += time.monotonic() - importing

    def _on_kick(self, signum: int, frame: Any) -> None:
        try:
            unsafe = _unsafe_moment(frame) or another_thread_imports()
            self.opening.handler_runs(in_an_import=unsafe)
            if unsafe:
                return  # kicked again a moment later
            # torch's imports for a profiler start (seconds of CPU), not in a process that opens no window:
            # one that shows only now that it starts workers (torchrun's code run in a script) decides so
            opens = self.state != WAITING or not starts_workers()
            if opens and self.controller.prof is None and not self._start_imported():
                return  # another thread began an import meanwhile
            self.opening.deciding = threading.get_ident()
            try:
                self.controller.tick()
            finally:
                self.opening.deciding = None
        except Exception as exc:  # never into the job, but what the script's own handler raised in it
            if raised_by_a_signal_handler(exc, caught_in_a_handler=True):
                raise
            self.log.error(f"--delay/--duration: the timed window failed: {exc!r}")
        finally:
            self.opening.handler_ran()

    def _timer(self) -> None:
        from npuprof.agent.untraced import leave_trace

        try:
            self._sleep_until(self.start_at)
            leave_trace()
            self.controller.replan()
            if self.controller.armed:  # steps are taken: the window opens at the next one, if it comes
                self._wait_for(lambda: self.began_at is not None or self.state == DONE, self._step_grace)
            if not self._kicks:
                self._say_not_opened()
            self._kick_until(lambda: self.began_at is not None or self.state == DONE)
            self._wait_for(lambda: self.began_at is not None or self.state == DONE, KICK_FOR_S)
            self._say_not_opened()
            if self.end_at is None or self.state == DONE:
                return
            self._sleep_until(self.end_at)
            leave_trace()  # the window's own capture hooked this thread too
            self.controller.replan()
            if self.controller.counts_steps or self.controller.step != self.began_step:
                # Steps are counted: the window ends at the next boundary, unless none comes in time (a step
                # longer than the window too: helper-125's 0.8 s steps in a 0.5 s window were cut in half).
                self._wait_for(lambda: self.state == DONE, self._step_grace)
            self._kick_until(lambda: self.state == DONE and self.controller.prof is None)
        except Exception as exc:
            self.log.error(f"--delay/--duration: the window's timer failed: {exc!r}")

    def _say_not_opened(self) -> None:
        """Once, when the window's time has come and it is still shut with no step counted: the main
        thread could not be made to open it (a job that blocks or takes the timer's signal). In the log
        now, and in the run's last line."""
        if self._said_not_opened or self.began_at is not None or self.state == DONE or self.controller.armed:
            return
        self._said_not_opened = True
        why = self._no_kick_why or "the main thread never ran the timer's signal handler"
        self.log.warning(
            f"{WINDOW_NOT_OPENED} at its time: {why}, and no step npuprof counts has come (it opens at the "
            f"next step boundary{_OR_ONCE.get(why, '')}; in a job without optimizer steps, --step-on names "
            "the job's step function)"
        )

    def _say_not_closed(self) -> None:
        """Once, when the window's end has come and the timer cannot make the main thread close it."""
        if self._said_not_closed or self.began_at is None or self.state == DONE:
            return
        self._said_not_closed = True
        self.log.warn_once(
            "window-not-closed",
            f"--delay/--duration: the window could not close at its time: {self._no_kick_why}; it records "
            "until the next step boundary npuprof counts, or the job's end",
        )

    def late_by(self) -> str:
        """Said of a window that closes now: how long after its end, when the timer could not close it at
        its time (helper-108: a 0.5 s window closed 2 s late reads as the window asked), else nothing."""
        if self.end_at is None or self.began_at is None or not self._no_kick_why:
            return ""
        late = time.monotonic() - self.end_at
        if late < LATE_S:
            return ""
        return f"the window closed {late:.1f} s after its end: {self._no_kick_why}"

    def ended_early(self) -> str:
        """Said of a window the process's end cut short; with the profiler's start when it took SLOW_START_S
        or more (README, "Time windows": a 3 s inference job's window of 0.5 s recorded 60 ms, its first
        start having taken 2.5 s, and said only that the process ended first)."""
        if self.opened_at is None or self.began_at is None:
            return ENDED_EARLY
        took = self.start_imports_s + self.began_at - self.opened_at
        if took < SLOW_START_S:
            return ENDED_EARLY
        return (
            f"{ENDED_EARLY}: the profiler's start took {took:.1f} s of the "
            "process's time before the window recorded (a process's first start may take seconds: torch "
            "imports torch._dynamo then, unless an optimizer was made)"
        )

    def not_begun_at_exit(self) -> str:
        """The exit's log line of a window whose delay had not passed (how long the process ran since the
        clock started, the --delay to give); "" for one that began."""
        if self.state != WAITING or self.opened_at is not None or self._said_not_begun:
            return ""
        self._said_not_begun = True  # an exit's finalise may run twice (atexit, multiprocessing's finalizers)
        ran = time.monotonic() - self.woke
        return f"{WINDOW_DUE_AT_EXIT}due {self._delay:g} s after the agent woke, it ended {ran:.1f} s after"

    def process_ends(self) -> None:
        """The job's end finalises the window now: the timer has nothing more to say of it."""
        self._said_not_closed = True

    @property
    def _step_grace(self) -> float:
        """How long a boundary may take to come before the timer opens or closes the window itself."""
        return max(self.duration, 1.0) if self.duration is not None else 1.0

    @staticmethod
    def _sleep_until(moment: float) -> None:
        while (left := moment - time.monotonic()) > 0:
            time.sleep(left)

    @staticmethod
    def _wait_for(done: Any, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not done() and time.monotonic() < deadline:
            time.sleep(0.02)

    def _kick_until(self, done: Any) -> None:
        if not self._kicks:
            return
        deadline = time.monotonic() + KICK_FOR_S
        main = threading.main_thread()
        said: set[str] = set()
        taken_at = 0.0  # when the script was seen to have taken the signal over
        while not done() and time.monotonic() < deadline and main.is_alive():
            if signal.getsignal(KICK_SIGNAL) != self._on_kick:  # type: ignore[arg-type]
                # The script took the signal over (and may give it back): said now, not after KICK_FOR_S,
                # when a short job has ended; only a wait of Python's may still be interrupted meanwhile.
                self._no_kick_why = "the job took the timer's signal over"
                taken_at = taken_at or time.monotonic()
                if time.monotonic() - taken_at >= TAKEN_GRACE_S:
                    self._say_not_opened()
                    self._say_not_closed()
                assert main.ident is not None
                if self._kick_signal_for(main.ident) == KICK_INTERRUPTING:
                    signal.pthread_kill(main.ident, KICK_INTERRUPTING)
                self._wait_for(done, KICK_EVERY_S)
                continue
            if main.native_id is not None and _blocks(main.native_id, KICK_SIGNAL):
                self._no_kick_why = "the job's main thread blocks the timer's signal"
                self.opening.signal_blocked(window_waits=self.state == WAITING)
                self._say_not_opened()
            waiting = in_a_wait_a_signal_breaks(_main_thread_code())
            if waiting:
                if waiting not in said:
                    said.add(waiting)
                    self.log.info(f"--delay/--duration: the window waits: {waiting}")
                self.opening.signal_held_back(waiting, window_waits=self.state == WAITING)
                self._wait_for(done, KICK_EVERY_S)
                continue
            assert main.ident is not None and KICK_SIGNAL is not None
            signal.pthread_kill(main.ident, self._kick_signal_for(main.ident))
            self.opening.signal_sent(steps_armed=self.controller.armed)
            self._wait_for(done, KICK_EVERY_S)

    def _kick_signal_for(self, main_ident: int) -> int:
        """KICK_INTERRUPTING when the main thread waits in the standard library and that signal is still
        ours; else KICK_SIGNAL."""
        assert KICK_SIGNAL is not None
        if KICK_INTERRUPTING is None or signal.getsignal(KICK_INTERRUPTING) != self._on_kick:  # type: ignore[arg-type]
            return KICK_SIGNAL
        frame = current_frames().get(main_ident)
        return KICK_INTERRUPTING if in_python_wait(frame) else KICK_SIGNAL


def _blocks(native_id: int, signum: int | None) -> bool:
    """Whether thread ``native_id`` of this process blocks ``signum`` (its SigBlk in /proc)."""
    if signum is None:
        return False
    try:
        with open(f"/proc/self/task/{native_id}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("SigBlk:"):
                    return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def _unsafe_moment(frame: Any) -> bool:
    """Whether the main thread was interrupted somewhere a profiler must not start or stop."""
    return runs_code_of(frame, PROFILER_UNSAFE)


# The standard library's functions that block in a system call Python itself retries after a signal
# (PEP 475): lock and condition waits, child processes, selectors, pipes and sockets.
_STDLIB_DIR = os.path.dirname(threading.__file__)
PYTHON_WAITS = {
    "threading.py": {"wait", "join", "_wait_for_tstate_lock", "acquire"},
    "subprocess.py": {"wait", "_wait", "_try_wait", "communicate", "_communicate"},
    "selectors.py": {"select"},
    "connection.py": {"_recv", "_recv_bytes", "recv_bytes", "recv", "_poll", "poll", "wait"},
    "popen_fork.py": {"poll", "wait"},
    "queue.py": {"get", "put"},
    "socket.py": {"accept", "readinto"},
}


def in_python_wait(frame: Any) -> bool:
    """Whether ``frame`` (a thread's innermost) is one of the standard library's waits."""
    if frame is None:
        return False
    code = frame.f_code
    directory, name = os.path.split(code.co_filename)
    if not directory.startswith(_STDLIB_DIR) or "site-packages" in directory:
        return False
    return code.co_name in PYTHON_WAITS.get(name, ())


# Waits a signal must not reach: torch.distributed's set-up connects with poll(), which no signal flag
# restarts (c10d then retries its connection with a growing back-off: seconds), and a
# torch.multiprocessing.spawn parent only waits for its ranks (a window there records none of their work).
_DISTRIBUTED = os.sep + os.path.join("torch", "distributed") + os.sep
_DISTRIBUTED_SETUP = {
    "init_process_group",
    "new_group",
    "_new_process_group_helper",
    "_create_c10d_store",
    "rendezvous",
    "_store_based_barrier",
    "init_device_mesh",
}
_MP_SPAWN = os.path.join("torch", "multiprocessing", "spawn.py")
_MP_SPAWN_WAITS = {"spawn", "start_processes", "join"}


def in_a_wait_a_signal_breaks(code: list[tuple[str, str]]) -> str:
    """Why the main thread must not be signalled now ("" when it may be): it is inside torch.distributed's
    set-up, or it is a torch.multiprocessing.spawn parent waiting for its ranks. ``code``:
    :func:`_main_thread_code`."""
    for filename, name in code:
        if filename.endswith(_MP_SPAWN) and name in _MP_SPAWN_WAITS:  # (a rank runs in its _wrap)
            return "this process waits in torch.multiprocessing.spawn for its ranks, which record their own"
        if _DISTRIBUTED in filename and name in _DISTRIBUTED_SETUP:
            return f"the main thread is in torch.distributed's {name} (a signal would break its connect)"
    return ""


WORKER_STARTERS = (
    *("torch.distributed.run", "torch.distributed.launch", "accelerate.commands.launch"),
    *("deepspeed.launcher.launch", "deepspeed.launcher.runner"),  # `deepspeed`, and its launcher on each node
)
# their console scripts (accelerate-launch: `accelerate launch`'s own)
_STARTER_SCRIPTS = ("torchrun", "accelerate", "accelerate-launch", "deepspeed")
# torchrun's launcher API (elastic_launch, launch_agent), imported by a process that runs torchrun's code in
# itself (accelerate launch, a script calling torch.distributed.run or elastic_launch); its workers have
# TORCHELASTIC_RUN_ID. Not the elastic agent's module: every DeepSpeed worker imports that (its config loads
# deepspeed.elasticity) without starting any worker, and no window opened in it (helper-136).
_LAUNCHER_API = "torch.distributed.launcher.api"


_WORKER_LOOP = os.path.join("torch", "utils", "data", "_utils", "worker.py")


_SPAWN_MAIN = (os.path.join("multiprocessing", "spawn.py"), "_main")
_BOOTSTRAP = (os.path.join("multiprocessing", "process.py"), "_bootstrap")


def _main_thread_code() -> list[tuple[str, str]]:
    """(file, function) of the main thread's frames, innermost first."""
    frame = current_frames().get(threading.main_thread().ident or -1)
    found = []
    while frame is not None:
        found.append((frame.f_code.co_filename, frame.f_code.co_name))
        frame = frame.f_back
    return found


def in_dataloader_worker(code: list[tuple[str, str]]) -> bool:
    """Whether this process is a DataLoader worker: torch's worker loop has set its worker info, or runs
    in the main thread (``code``: :func:`_main_thread_code`; about to set it)."""
    worker = sys.modules.get("torch.utils.data._utils.worker")
    if worker is not None and getattr(worker, "_worker_info", None) is not None:
        return True
    return any(filename.endswith(_WORKER_LOOP) for filename, _name in code)


def a_dataloader_worker() -> bool:
    """Whether this process is a DataLoader worker (:func:`in_dataloader_worker`), asked from any thread."""
    return in_dataloader_worker(_main_thread_code())


def spawned_child_starting(code: list[tuple[str, str]]) -> bool:
    """Whether this is a spawned multiprocessing child still unpickling what it will run (its process
    object, with a DataLoader's dataset: seconds for a large one): it imported torch already, but whether
    it is a DataLoader worker or a training process (torch.multiprocessing.spawn) shows only once it runs.
    ``code``: :func:`_main_thread_code`."""

    def seen(where: tuple[str, str]) -> bool:
        return any(filename.endswith(where[0]) and name == where[1] for filename, name in code)

    return seen(_SPAWN_MAIN) and not seen(_BOOTSTRAP)


def starts_workers() -> bool:
    """Whether this process is torchrun (or torch.distributed.launch, accelerate launch, DeepSpeed's
    launchers, a script running torchrun's code), not one of its workers. A multiprocessing child's command
    line and ``__main__`` are its parent's: they name the launcher in a worker it started that way."""
    if not a_multiprocessing_child():
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        if getattr(spec, "name", None) in WORKER_STARTERS or module_run(sys.orig_argv) in WORKER_STARTERS:
            return True
        if os.path.basename(sys.argv[0] if sys.argv else "") in _STARTER_SCRIPTS:
            return True
    return _LAUNCHER_API in sys.modules and "TORCHELASTIC_RUN_ID" not in os.environ


_LOADED_IN = os.getpid()  # the process this module was imported in: a forked child has another pid


def a_multiprocessing_child() -> bool:
    """Whether this process was started by multiprocessing (forked, spawned, or forked by a forkserver):
    ``sys.orig_argv`` and ``__main__`` are then its parent's, or the start method's, and so is ``sys.argv``
    (spawn gives the child its parent's). ``torchrun --run-path`` starts its workers so (spawn by default):
    the worker, which runs the script, was taken for torchrun by its ``sys.argv[0]`` and lost its window."""
    if os.getpid() != _LOADED_IN:
        return True
    argv = sys.orig_argv
    if "--multiprocessing-fork" in argv:  # spawn's command line: python -c 'from multiprocessing.spawn ...'
        return True
    return any(word.startswith("from multiprocessing.forkserver import") for word in argv)


# Python's options that take the next word as their value (python -X importtime -m torch.distributed.run)
_OPTIONS_WITH_A_VALUE = ("-X", "-W", "--check-hash-based-pycs")


def module_run(argv: list[str]) -> str | None:
    """The module ``python -m NAME`` runs, from the interpreter's own command line (``sys.orig_argv``):
    known when the agent wakes, inside ``import torch``, while runpy is still importing the module's
    packages (``__main__`` is not that module yet, and ``sys.argv[0]`` is ``-m``). None for a script,
    ``-c`` or the interactive interpreter."""
    words = iter(argv[1:])
    for word in words:
        if word in _OPTIONS_WITH_A_VALUE:
            next(words, None)
        elif word == "-" or not word.startswith("-") or word == "--":
            return None
        elif not word.startswith("--"):
            flags = word[1:]
            for at, flag in enumerate(flags):
                if flag == "m":  # -m NAME, -mNAME, -um NAME
                    return flags[at + 1 :] or next(words, None)
                if flag == "c":  # -c's program ends the options
                    return None
                if flag in "XW":  # -Ximporttime: the rest of the word is the value; -EX dev: the next word
                    if not flags[at + 1 :]:
                        next(words, None)
                    break
    return None
