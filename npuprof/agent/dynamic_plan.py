"""Dynamic capture: a capture plan fed by a watcher of ``DIR/profiler_config.json`` (docs/architecture.md,
"Dynamic capture").

Two threads, and what each may do:

- the **watcher** (one daemon thread per training process, started when training starts) reads the file
  every poll interval (2 s, then the measured time of step 10 to 11, at least 1 s; or --poll-interval),
  parses a changed content into a :class:`Request`, puts it in an inbox and calls the controller's
  ``replan()`` (which only lowers ``next_check``). It writes both logs; no training step ever does.
- the **training thread** takes the inbox only when the controller decides (the steps around a capture,
  or the one right after a replan): a step outside captures costs what it costs without --dynamic, one
  increment and one comparison. There it turns the last request into a window of steps; a request that
  arrives while a capture runs waits for its end (the last one wins), except a cancel (start_step 0),
  which ends the capture in flight with the step it arrives at (what was recorded is saved).

deque appends and pops are atomic: no lock is taken on either side.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from npuprof.agent.dynamic_files import CONFIG_NAME, LOG_DIR, digest, held_request
from npuprof.agent.dynamic_log import (
    ATTEMPT,
    HEARTBEAT_S,
    NOT_EFFECTIVE,
    PROCESS_ENDS,
    REPLACED,
    STARTED_AT,
    STARTED_WITH,
    STOPPED_BY,
    WATCHING,
    DynamicLogs,
    not_selected,
    skipped_line,
)
from npuprof.agent.dynamic_request import NEXT_STEP, NO_CAPTURE, Request, parse_request
from npuprof.agent.schedule import Action
from npuprof.config import ConfigError, ProfileConfig, parse_config_bytes

FIRST_POLL_S = 2.0  # torch_npu's first interval
MIN_POLL_S = 1.0  # the floor of the measured interval
# its ceiling: a long step 10 (an evaluation, a checkpoint) made a 20 s interval for the job (helper-124)
MAX_POLL_S = 5.0
MEASURED_STEPS = (10, 11)  # the interval between these two step boundaries becomes the poll interval
UPKEEP_S = 60.0  # the SIGTERM guard's check on the main thread between captures, this often (keep_up)
CLOCK_TICK_SLACK_S = 1.0  # /proc's start time is to the clock tick, a log line's to the ms: both this host's
CLOCK_SLACK_S = 5.0  # a file server's clock may be behind this host's: a change this close is the process's
MONITOR_LOADED = "Dynamic profiler process load json success"
MONITOR_FAILED = "Dynamic profiler process load json failed"
MONITOR_DONE = "Dynamic profiler process done"


@dataclasses.dataclass
class Window:
    """The steps of one capture: warm-up from ``first``, recording from ``record`` to ``last``."""

    first: int
    record: int
    last: int
    cfg: ProfileConfig
    request: Request

    def action(self, step: int) -> Action:
        if step < self.first or step > self.last:
            return Action.NONE
        if step < self.record:
            return Action.WARMUP
        return Action.RECORD if step < self.last else Action.RECORD_AND_SAVE

    def busy(self, step: int) -> bool:
        """Whether a capture of this window may hold a profiler at ``step`` (it is closed one step after
        its last, so a new window may begin no earlier than ``last + 2``)."""
        return self.first <= step <= self.last + 1


class DynamicPlan:
    """The CapturePlan of `npuprof run --dynamic DIR` (npuprof.agent.schedule.CapturePlan)."""

    def __init__(self, cfg: ProfileConfig, run: dict[str, Any], log: Any, watch: bool = True) -> None:
        """``watch=False``: no watcher thread (a caller drives ``poll_once`` itself, as tests do)."""
        from npuprof.agent.ranks import current_rank

        self.base = cfg
        self.directory = Path(cfg.dynamic or ".")
        self.file = self.directory / CONFIG_NAME
        self.fixed_interval = cfg.poll_interval
        self.baseline: str | None = run.get("dynamic_baseline")
        start = run.get("start_ns")
        self.run_start_ns: int | None = start if isinstance(start, int) else None
        self.agent_log = log
        self.controller: Any = None
        self._rank_fn: Any = current_rank
        self.logs = DynamicLogs(self.directory, self._rank)
        # between the threads (see the module's docstring)
        self._inbox: deque[Request] = deque()
        self._events: deque[tuple[float, str, str, int | None]] = deque()
        # the training thread's own
        self._window: Window | None = None
        self._pending: Request | None = None
        self._step10: float | None = None
        self._captures_ended = 0
        self.measured_interval: float | None = None
        # the watcher's own
        self._seen: str | None = None  # digest of the last content acted on (or reported)
        self._unsettled: str | None = None  # digest of unparsable content seen once: maybe half-written
        self._problem: str | None = None
        self._last_beat = 0.0
        self._beat_step = -1
        self._pid: int | None = None
        self._watch_thread = watch
        self._thread: bool | None = None  # its watcher started (npuprof.agent.threads: not listed)
        # a check the watcher makes and the duty the training thread then does at a decision (the agent's
        # SIGTERM guard's, keep_up)
        self._upkeep: tuple[Callable[[], Any], Callable[[], None]] | None = None
        self._upkeep_asked: Any = None  # what the check last found, asked for once
        self._upkeep_last = 0.0  # when the watcher last asked (monotonic)
        self._upkeep_due = False  # asked, not done yet
        self._stop = threading.Event()
        self._ended = False
        # the last lines come from the exit, a SIGTERM handler (maybe interrupting them) or the SIGTERM
        # watcher's thread: once
        self._ending = threading.RLock()
        if watch:  # registered before the agent's own exit hook: runs after it, so its last capture is logged
            atexit.register(self._at_exit)

    # ---- seams the controller uses ---------------------------------------------------------------------
    def bind(self, controller: Any) -> None:
        self.controller = controller
        self._rank_fn = getattr(controller, "_rank_fn", None) or self._rank_fn

    def training_started(self) -> None:
        """Training starts (the controller is armed): start this process's watcher, once per process."""
        if self._pid == os.getpid():
            return
        if self._pid is not None:  # a forked child that trains: nothing of the parent's is its own
            self._forget_parent()
        self._pid = os.getpid()
        if not self._watch_thread:
            return
        from npuprof.agent import threads

        self._thread = True
        threads.start(self._watch, "npuprof-dynamic")

    def keep_up(self, check: Callable[[], Any], duty: Callable[[], None]) -> None:
        """``duty`` done by the training thread at the decision the watcher asks for when its ``check``
        finds something new (not None), and every UPKEEP_S: a step boundary that costs ~2 µs. Between
        captures there is no decision otherwise, and npuprof's SIGTERM handler, which --dynamic keeps there,
        is to wrap a SIGCHLD handler the script set after training began (agent/child_signal.py) and to
        give SIGTERM its default action back once the script took the wakeup fd (asyncio: a main thread
        blocked in C++ then never ran the handler, and the job ignored SIGTERM; SigtermGuard.check_pipe),
        which only the main thread can see."""
        self._upkeep = (check, duty)

    def refresh(self, step: int) -> None:
        """Called by the training thread at each decision, before it asks for ``step``'s action."""
        if self._upkeep_due and self._upkeep is not None:
            self._upkeep_due = False
            self._upkeep[1]()
        self._measure(step)
        self._take_inbox(step)
        self._promote(step)

    def hear(self, kind: str, step: int, detail: str = "") -> None:
        """What the controller did (from the training thread): logged by the watcher."""
        if kind == "ended":
            self._captures_ended += 1  # said in the line: npuprof status counts them after a rotation too
        window = self._window
        if kind == "skipped" and window is not None and window.first <= step <= window.last:
            # the request did not capture (said below): its window is gone. Kept, it held a later request
            # back ("a capture runs ... waits for its end") and the decision that request asked for opened
            # it after all, with the skipped request's settings, for the rest of its steps (helper-207)
            self._window = None
        messages = {
            "began": ("INFO", f"capture started at step {step} into {detail}"),
            "ended": ("INFO", f"capture {self._captures_ended} of steps {detail}"),
            "skipped": ("WARNING", skipped_line(step, detail)),
        }
        level, message = messages.get(kind, ("INFO", f"{kind} at step {step}: {detail}"))
        done = self._step()  # the tag of every line is the steps done ("ended" is told the capture's last)
        self._event(level, message, step if done is None else done)

    # ---- CapturePlan -------------------------------------------------------------------------------------
    def action_at(self, step: int) -> Action:
        window = self._window  # pure: torch's profiler calls this from inside its step()
        return window.action(step) if window is not None else Action.NONE

    def next_busy_step(self, after: int) -> int | None:
        self._promote(after + 1)
        looks: list[int] = []
        window = self._window
        if window is not None:
            if window.first > after:
                looks.append(window.first)
            elif after <= window.last:
                looks.append(after + 1)
        if self._pending is not None:
            looks.append(max(after + 1, window.last + 2 if window is not None else after + 1))
        if self.fixed_interval is None and self.measured_interval is None:
            looks += [s for s in MEASURED_STEPS if s > after]
        return min(looks) if looks else None

    def next_window_start(self, after: int) -> int | None:
        self._promote(after + 1)
        window = self._window
        if window is not None and window.first > after:
            return window.first
        if self._pending is not None:
            return max(after + 1, window.last + 2 if window is not None else after + 1)
        return None

    def config_at(self, step: int) -> ProfileConfig | None:
        window = self._window
        return window.cfg if window is not None and window.first <= step <= window.last else None

    # ---- the training thread's side ------------------------------------------------------------------------
    def _measure(self, step: int) -> None:
        if self.fixed_interval is not None or self.measured_interval is not None:
            return
        if step == MEASURED_STEPS[0]:
            self._step10 = time.monotonic()
        elif step == MEASURED_STEPS[1] and self._step10 is not None:
            took = time.monotonic() - self._step10
            self.measured_interval = min(MAX_POLL_S, max(MIN_POLL_S, took))
            self._event(
                "INFO",
                f"poll interval now {self.measured_interval:.3f} s (step 10 to 11 took {took:.3f} s; at "
                f"least {MIN_POLL_S:g} s, at most {MAX_POLL_S:g} s)",
                step,
            )

    def _take_inbox(self, step: int) -> None:
        # Each request the watcher loaded, in order (the last change wins, as each replaces the one before):
        # a cancel followed within one step by another request still ends the capture in flight, as its
        # "loaded" line, which npuprof trigger reads as acted on, says (docs/architecture.md, "Dynamic
        # capture"; helper-194: it was skipped, and the capture of 200 steps went on to its end)
        while self._inbox:
            self._take(self._inbox.popleft(), step)

    def _take(self, newest: Request, step: int) -> None:
        window = self._window
        if self._pending is not None:
            # a warning, naming the request that never ran: said at INFO with the new one's name only, it
            # reached neither npuprof status nor the trigger that sent it (helper-224: two triggers read
            # while the training thread was blocked; the first never ran, the log alone said so)
            self._event(
                "WARNING",
                f"the waiting request ({self._pending.describe()}) never ran: {REPLACED} "
                f"({newest.describe()})",
                step,
            )
        if window is not None and window.busy(step) and not newest.cfg.wants_rank(self._rank_fn()):
            # not this rank's, and a capture has begun here: it runs on (a `--cancel --ranks 1` ended rank
            # 0's capture in flight), a request waiting here is dropped (the last change wins), and this one
            # is said not selected now; queued, it was logged "waits for its end" and, the job ending
            # first, "never began", a WARNING npuprof status showed in place of the capture (helper-370)
            self._pending = None
            self._event("INFO", not_selected(self._rank_fn(), newest.describe()), step)
            return
        if window is not None and newest.start_step == NO_CAPTURE and window.first <= step <= window.record:
            # a cancel during the warm-up (or read at the boundary into the first recorded step, which
            # has not begun): nothing was recorded, nothing is saved
            self._window = None
            self._pending = None
            self._event(
                "INFO", f"the capture planned from step {window.record} is cancelled during its warm-up", step
            )
            controller = self.controller
            if controller is not None and getattr(controller, "prof", None) is not None:
                controller.finish_early(
                    "cancelled during its warm-up (start_step 0): nothing was recorded", status="incomplete"
                )
            return
        if (
            window is not None
            and window.busy(step)
            and newest.start_step == NO_CAPTURE
            and step <= window.last
        ):
            # a cancel ends the capture in flight with this step (what it recorded is saved): a capture of
            # --active 100000 asked by mistake would otherwise hold every step's events until its end
            window.record, window.last = min(window.record, step), step
            self._pending = None
            self._event(
                "INFO",
                f"the capture in flight ends with step {step}, cancelled ({newest.describe()})",
                step,
            )
            return
        if window is not None and window.busy(step):
            newest.queued = True
            self._event(
                "INFO",
                f"a capture runs (steps {window.record}-{window.last}): the new request waits for its end "
                f"({newest.describe()})",
                step,
            )
        self._pending = newest

    def _promote(self, step: int) -> None:
        """Turn the waiting request into the window, once no capture may hold a profiler at ``step``."""
        request = self._pending
        window = self._window
        if request is None or (window is not None and window.busy(step)):
            return
        self._pending = None
        self._window = None
        if request.start_step == NO_CAPTURE:
            if window is not None and window.first > step:
                self._event(
                    "INFO", f"the capture planned from step {window.first} is cancelled (start_step 0)", step
                )
            return
        if window is not None and window.first > step:
            # the last change wins (docs/architecture.md, "Dynamic capture"), and the log says so: status
            # showed the dropped window as planned for ever when the new request was for other ranks
            self._event(
                "INFO",
                f"the capture planned from step {window.first} is cancelled: {REPLACED} "
                f"({request.describe()})",
                step,
            )
        rank = self._rank_fn()
        if not request.cfg.wants_rank(rank):
            self._event("INFO", not_selected(rank, request.describe()), step)
            return
        first = step if request.start_step == NEXT_STEP else request.start_step
        if first < step:
            if not request.queued:
                self._event(
                    "WARNING",
                    f"{_passed(first, step)}{NOT_EFFECTIVE}",
                    step,
                )
                return
            self._event(
                "INFO", f"start_step {first} passed while the capture before ran: starts at {step}", step
            )
            first = step
        first = max(first, 1)  # step 0 runs before the watcher can have seen anything (as torch_npu)
        record = first + request.warmup
        last = record + request.active - 1
        self._window = Window(first, record, last, request.with_window(first), request)
        self._event("INFO", f"capture planned: steps {record}-{last} ({request.describe()})", step)

    def _event(self, level: str, message: str, step: int | None) -> None:
        self._events.append((time.time(), level, message, step))

    def _rank(self) -> int | None:
        return self._rank_fn()

    def _forget_parent(self) -> None:
        self._ended = False
        # its captures are its own: its log's "capture N of steps" counted on from the parent's, which
        # npuprof status shows as the child's count (helper-207: 3 for its first capture)
        self._captures_ended = 0
        self._inbox.clear()
        self._events.clear()
        self._window = None
        self._pending = None
        self._step10 = None
        self._stop = threading.Event()
        self._ending = threading.RLock()  # the parent's may have been held at the fork
        self.logs = DynamicLogs(self.directory, self._rank)

    # ---- the watcher thread ------------------------------------------------------------------------------
    def _watch(self) -> None:
        from npuprof.agent.untraced import leave_trace

        try:
            leave_trace()
            self.first_look()
            began = time.monotonic()
            # A fixed cadence: the poll's own work (reading, logging) does not stretch the interval.
            while not self._stop.wait(max(0.0, began + self.interval() - time.monotonic())):
                began = time.monotonic()
                leave_trace()
                self.poll_once()
        except Exception as exc:  # never reaches training: this process just stops watching
            import traceback

            self.agent_log.error(f"the dynamic-capture watcher failed: {exc!r}\n{traceback.format_exc()}")
            self._say("ERROR", f"the watcher failed ({exc!r}): no more dynamic captures in this process")

    def interval(self) -> float:
        if self.fixed_interval is not None:
            return self.fixed_interval
        return self.measured_interval if self.measured_interval is not None else FIRST_POLL_S

    def _step(self) -> int | None:
        controller = self.controller
        return controller.step if controller is not None else None

    def first_look(self) -> None:
        """The watcher's first read: the content the launcher saw is no request; a change since is, unless
        it was made before this process began (a process started later in the run, an evaluation
        subprocess or a restarted worker, would capture again a request the others acted on long ago)."""
        logs = self.directory / LOG_DIR
        try:
            logs.mkdir(mode=0o750, exist_ok=True)
        except OSError:
            pass
        self._say(
            "INFO",
            f"{WATCHING}{self.file} every {self.interval():g} s"
            + (" (then the time of step 10 to 11, 1 to 5 s)" if self.fixed_interval is None else "")
            + f"; host {self.logs.host}, pid {os.getpid()}, rank {self.logs.rank()}{self._started_at()}",
            self._step(),
        )
        if self.logs.lost:
            self.agent_log.warning(f"cannot write the dynamic-capture logs in {logs}; captures still work")
        raw = self._read()
        if raw is None:
            return
        current = digest(raw)
        if self.baseline is None or current == self.baseline:
            self._seen = current
            self._say(
                "INFO",
                f"{STARTED_WITH}{held_request(raw)}: edit it, or run npuprof trigger, to capture",
                self._step(),
            )
            return
        if current == self._seen:
            # a forked child that trains: the process it forked from read this content (and acted on it);
            # made less than 5 s before the fork, it took it for its own and captured again (helper-207)
            self._say(
                "INFO",
                "the process this one forked from read the file as it is: not a request for it; edit it, or "
                "run npuprof trigger, to capture",
                self._step(),
            )
            return
        changed = self._changed_at()
        if self._changed_before_this_process(changed) and not self._unread_request_of_this_run(changed):
            self._seen = current
            self._say(
                "INFO",
                "the file was changed before this process began: not a request for it; edit it, or run "
                "npuprof trigger, to capture",
                self._step(),
            )
            return
        if self._read_by_earlier_attempt():
            # however soon after the request it started: the 5 s of CLOCK_SLACK_S are for a clock behind,
            # not for a restart (a capture that crashed the job, out of memory, crashed each restart)
            self._seen = current
            self._say(
                "INFO",
                "an earlier attempt of this job (before torchrun restarted it) read the file as it is: not a "
                "request for this one; edit it, or run npuprof trigger, to capture",
                self._step(),
            )
            return
        if self._read_by_ended_process():
            # a restart whatever its count says: torchrun restarts with its count unchanged the workers of a
            # node whose own did not fail, when another node's did (docs/architecture.md, "Dynamic capture")
            self._seen = current
            self._say(
                "INFO",
                "a process of this host that ended before this one began (an earlier attempt of the job, "
                "its workers restarted, or an earlier process of a job run in phases) read the file as it "
                "is: not a request for this one; edit it, or run npuprof trigger, to capture",
                self._step(),
            )
            return
        if self._read_before_exec():
            self._seen = current
            self._say(
                "INFO",
                "this process read the file before it replaced itself (os.exec*): not a request for it "
                "again; edit it, or run npuprof trigger, to capture",
                self._step(),
            )
            return
        self._handle(raw, current)  # changed between the launch and now: a request

    def _changed_at(self) -> float | None:
        """The file's last change (epoch s), None when it cannot be looked up."""
        try:
            return os.stat(self.file).st_mtime
        except OSError:
            return None

    def _unread_request_of_this_run(self, changed: float | None) -> bool:
        """The file asks for a capture that it was given after the run began and that no process of the
        run has read: the job's Python started late (a wrapper's set-up, a rendezvous; helper-124: 7 s after
        the trigger), so the request is this process's, not one the others acted on."""
        start_ns = self.run_start_ns
        if not start_ns or changed is None:
            return False
        from npuprof.agent.dynamic_log import unread_request

        return changed >= start_ns / 1e9 - CLOCK_SLACK_S and unread_request(self.directory) is not None

    def _read_by_earlier_attempt(self) -> bool:
        """A worker torchrun restarted (TORCHELASTIC_RESTART_COUNT over 0): a process of this host of an
        earlier attempt of the run read the request (their first lines and heartbeats name their attempt)."""
        from npuprof.agent.dynamic_log import read_by_earlier_attempt
        from npuprof.results.handover import restart_count_from_env

        attempt = restart_count_from_env(os.environ)
        if not attempt:
            return False
        return read_by_earlier_attempt(self.directory, self.logs.host, attempt, self._since())

    def _read_by_ended_process(self) -> bool:
        """A process of this host that read the request ended before this one began (to the clock tick: a
        restart follows its attempt's end by about a second, within /proc/stat's whole-second boot time)."""
        from npuprof.agent.dynamic_log import read_by_ended_process
        from npuprof.proc_stat import started_at

        began = started_at("self", to_tick_end=True)  # a process that ended in its tick is not missed
        if began is None:
            return False
        return read_by_ended_process(self.directory, self.logs.host, began, self._since())

    def _since(self) -> float:
        """The start of the run (epoch s, a file server's clock allowed for): the lines of its processes."""
        start_ns = self.run_start_ns
        return start_ns / 1e9 - CLOCK_SLACK_S if start_ns else 0.0

    def _read_before_exec(self) -> bool:
        """This process's earlier image read the request (a script that restarts itself with os.execv keeps
        its pid, its start time and its logs): its new image captured the request again (helper-158)."""
        from npuprof.agent.dynamic_log import Reader, read_before_exec
        from npuprof.results.layout import process_start_time

        began = process_start_time()
        if began is None:
            return False
        return read_before_exec(
            self.directory, Reader(self.logs.host, os.getpid(), began - CLOCK_TICK_SLACK_S)
        )

    def _changed_before_this_process(self, changed: float | None) -> bool:
        if changed is None:
            return False
        from npuprof.results.layout import process_start_time

        began = process_start_time()
        return began is not None and changed < began - CLOCK_SLACK_S

    def poll_once(self) -> None:
        """One look at the file (the watcher thread; tests call it directly). The file first: a request
        reaches the training thread before anything is logged."""
        raw = self._read()
        if raw is not None:
            current = digest(raw)
            if current != self._seen:
                self._handle(raw, current)
        self._ask_for_upkeep()
        self._heartbeat()
        self._flush_events()

    def _read(self) -> bytes | None:
        from npuprof.config import read_config_bytes, unreadable_because
        from npuprof.file_trust import check_directory

        try:
            check_directory(str(self.directory), "the dynamic directory")
            raw = read_config_bytes(self.file, CONFIG_NAME)
        except FileNotFoundError:
            self._report("WARNING", f"{self.file} is missing; waiting for it")
            return None
        except (OSError, ValueError) as exc:
            # (a link is named so: "Too many levels of symbolic links" was said of a link to a real file)
            reason = unreadable_because(exc) if isinstance(exc, OSError) else str(exc)
            self._report("ERROR", f"{self.file} is not read: {reason}")
            return None
        self._problem = None
        return raw

    def _report(self, level: str, problem: str) -> None:
        """A problem reading the file: logged once until it changes or goes away."""
        if problem == self._problem:
            return
        self._problem = problem
        self._say(level, problem, self._step())
        self.logs.monitor(level, f"{MONITOR_FAILED}: {problem}")

    def _handle(self, raw: bytes, current: str) -> None:
        try:
            parse_config_bytes(raw, CONFIG_NAME, CONFIG_NAME)
        except ConfigError:
            if current != self._unsettled:  # an editor may be half-way through writing: look once more
                self._unsettled = current
                return
        self._unsettled = None
        self._seen = current
        step = self._step()
        heard: list[tuple[str, str]] = []  # logged once the request is on its way

        def say(level: str, message: str) -> None:
            heard.append((level, message))

        request = parse_request(raw, current, self.base, say)
        passed = request is not None and 0 < request.start_step <= (step if step is not None else -1)
        # queued (no write yet) ahead of what a step boundary makes of the request once handed over: a step
        # in between planned it, and its "capture planned" was written before this "loaded"
        for level, message in heard:
            self._event(level, message, step)
        if request is not None:
            self._event("INFO", f"loaded: {request.describe()}", step)
        if request is not None and not passed:
            self._watch_space(request)
            self._inbox.append(request)
            controller = self.controller
            if controller is not None:
                controller.replan()
        self._flush_events()
        if request is None:
            problems = [message for level, message in heard if level == "ERROR"]
            self.logs.monitor("ERROR", f"{MONITOR_FAILED}: {problems[0] if problems else 'not a request'}")
            return
        self.logs.monitor("INFO", f"{MONITOR_LOADED}: {request.describe()}")
        if passed and step is not None:  # (passed is of a step counted)
            self._say(
                "WARNING",
                f"{_passed(request.start_step, step)}{NOT_EFFECTIVE}",
                step,
            )

    def _watch_space(self, request: Request) -> None:
        """Free space is watched once captures may come (npuprof.agent.disk_guard), on the filesystem of
        the request's ``prof_dir`` (measured here, before a step boundary can take the request)."""
        space = getattr(self.controller, "space", None)
        if request.start_step == NO_CAPTURE or space is None:
            return
        space.watch(request.cfg.output)
        space.start()

    def _ask_for_upkeep(self) -> None:
        if self._upkeep is None:
            return
        found = self._upkeep[0]()
        now = time.monotonic()
        new = found is not None and found is not self._upkeep_asked
        if (new or now - self._upkeep_last >= UPKEEP_S) and self.controller is not None:
            self._upkeep_asked, self._upkeep_last, self._upkeep_due = found, now, True
            self.controller.replan()

    def _heartbeat(self) -> None:
        step = self._step()
        now = time.monotonic()
        if step is None or step == self._beat_step or now - self._last_beat < HEARTBEAT_S:
            return
        self._last_beat, self._beat_step = now, step
        self._say("INFO", f"at step {step}{self._started_at()}", step)

    @staticmethod
    def _started_at() -> str:
        """The end of the first line and the heartbeat: torchrun's attempt (a restarted worker reads it,
        read_by_earlier_attempt) and this process's start (npuprof status reads it)."""
        from npuprof.proc_stat import start_ticks
        from npuprof.results.handover import restart_count_from_env

        attempt = restart_count_from_env(os.environ)
        ticks = start_ticks("self")
        return ("" if attempt is None else ATTEMPT.format(attempt=attempt)) + (
            "" if ticks is None else ", " + STARTED_AT.format(ticks=ticks)
        )

    def _say(self, level: str, message: str, step: int | None = None) -> None:
        """A line of the watcher's own, after the training thread's events queued before it: they are
        stamped earlier, and the log is read in time order (docs/architecture.md, "Dynamic capture";
        helper-224: "poll interval now ..." of 10:46:33 came after the heartbeat of 10:46:34)."""
        self._flush_events()
        self.logs.action(level, message, step)

    def _flush_events(self) -> None:
        while self._events:
            when, level, message, step = self._events.popleft()
            self.logs.action(level, message, step, when=when)

    def at_exit(self, signalled: str = "") -> None:
        """The process ends (atexit, or os._exit through the agent; ``signalled``: it dies of that signal):
        the events not yet written, then "the process ends"; once."""
        self._at_exit(signalled)

    def _at_exit(self, signalled: str = "") -> None:
        with self._ending:
            if self._pid != os.getpid() or self._ended:
                return  # never watched in this process (a forked DataLoader worker, say), or said already
            self._ended = True
            self._last_lines(signalled)

    def _last_lines(self, signalled: str) -> None:
        try:
            self._stop.set()
            inbox = list(self._inbox)  # read by the next step boundary, which will not come
            left = inbox[-1] if inbox else self._pending
            if (
                left is not None
                and left.start_step != NO_CAPTURE
                and not left.cfg.wants_rank(self._rank_fn())
            ):
                # never this rank's to run: not a request it missed (helper-370: a WARNING status showed)
                self._event("INFO", not_selected(self._rank_fn(), left.describe()), self._step())
            elif left is not None and left.start_step != NO_CAPTURE:  # loaded, never planned
                window, step = self._window, self._step()
                busy = left.queued or (window is not None and step is not None and window.busy(step))
                waited = "waiting for the capture in flight" if busy else "loaded"
                self._event(
                    "WARNING",
                    f"the request {waited} ({left.describe()}) never began, the process ending first"
                    + NOT_EFFECTIVE,
                    step,
                )
            if signalled:
                self._event("WARNING", STOPPED_BY.format(signal=signalled), self._step())
            self._flush_events()
            self.logs.action("INFO", PROCESS_ENDS, self._step())
            self.logs.monitor("INFO", MONITOR_DONE)
        except Exception:
            pass


def _passed(start_step: int, step: int) -> str:
    """Why a request's start_step is not effective at ``step``, the step the job runs: before it, passed; the
    step itself has begun (a window opens at the boundary before its first step), which "start_step 400 has
    passed (the job is at step 400)" left a reader to work out."""
    if start_step < step:
        return f"start_step {start_step} has passed (the job is at step {step})"
    return f"start_step {start_step} has already begun (the job is in step {step})"
