"""The agent's heart: at each step boundary, decide whether to capture (docs/architecture.md).

Step counting is the only cost outside captures: ``on_boundary`` increments a counter and compares it
with the next step at which anything changes. A plan (a schedule, or the watcher of --dynamic's config
file) says which action each step gets and with which configuration; a backend turns that into a running
profiler; a sink owns the result files. A plan that changes its mind calls ``replan`` (from any thread)
and the controller asks it again at the next step boundary; a plan may also hear what the controller did
(``hear``) and look at its news before each decision (``refresh``), both on the training thread.

Threads: torch's profiler belongs to the thread that starts it (its callbacks are thread-local); stepping
or stopping it from another thread, or leaving it running when that thread ends, crashes libtorch. So one
thread drives the controller: the first that takes a step boundary (or that opens a profiler when armed).
Boundaries from other threads are ignored, never waited on (one that takes 3 in a row, the driving
thread none and no profiler open, takes over). When the driving thread ends (a training
thread, a pool worker), a capture in flight is finalised in that thread as it ends, and the next thread
to take a boundary drives from then on.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from _thread import get_ident
from collections.abc import Callable
from typing import Any, Protocol

from npuprof.agent import (
    frames,
    polling,
    recursion_limit,
    released_waits,
    sigterm_clock,
    thread_deaths,
    user_profiler,
    window_plan,
)
from npuprof.agent.backends.base import Backend, CaptureRefused, load_range_modules, release_profiler
from npuprof.agent.log import AgentLog, raised_by_a_signal_handler, report_failure
from npuprof.agent.profile_hook import ProfileHookWatch
from npuprof.agent.schedule import Action, CapturePlan
from npuprof.agent.signals import (
    CAPTURE_FILES,
    HAND_OVER_S,
    HANDLER_LIMIT_S,
    PROFILER_START,
    SIGTERM_LIMIT_S,
    TRACE_EXPORT,
    decision_begins,
    decision_ends,
    export_hold,
    script_handlers_deferred,
    sigint_held_back,
)
from npuprof.config import ProfileConfig

NEVER = 1 << 62
# How long a thread that is not the recording one waits for it to finish a capture (see finish_early).
EXIT_WAIT_S = 5.0
OTHER_THREAD_WAIT_S = 2.0
# ... while that thread is inside a step-boundary decision (it finishes the capture as the decision ends),
# and what a SIGTERM's handler waits for that thread's next step boundary: this long at most, within the
# HANDLER_LIMIT_S its watcher gives it, the rest left to the finish and the hand-over (docs/architecture.md,
# "Signals").
DECISION_WAIT_S = HANDLER_LIMIT_S / 2
# A finish under way on the recording thread (its trace export) is waited for this long from the ask: the
# capture is on disk once it ends; the hand-over after it gets what is left of HANDLER_LIMIT_S. On SIGTERM
# both waits also end SIGTERM_LIMIT_S - HAND_OVER_S after the signal (finish_on_sigterm's ``give_up_at``).
FINISH_WAIT_S = HANDLER_LIMIT_S - HAND_OVER_S
THREADS_LOGGED = 10  # the threads taking the steps over that the log names
# Boundaries a thread that does not drive takes in a row, the driving one taking none, that make it drive
# (when no profiler is open), as an optimizer takes over counting (agent/steps.py, SWITCH_AFTER).
TAKE_OVER_AFTER = 3
FOREIGN_THREADS_COUNTED = 64  # threads whose boundaries are counted at once (a thread per step: bounded)
# A look at the driving thread's wait that found none is followed by the next one only after this many
# times its own CPU time, at most LOOK_SPACING_MAX_S later: a thread training beside a driver that waits
# in a way nothing reads looked every third step for the whole job, ~30 µs a step (docs/architecture.md,
# "Step boundaries").
LOOK_SPACING = 1000
LOOK_SPACING_MAX_S = 1.0
# Frames a decision may use beyond the job's recursion limit: a boundary reached near that limit (a step
# called deep in recursive code) must cost the job's stack no more than the hook's own frames, where
# starting or exporting a capture takes dozens more (helper-152).
DECISION_HEADROOM = 200


class CaptureSink(Protocol):
    def begin(self, step: int, cfg: ProfileConfig) -> None: ...

    def finish(
        self,
        prof: Any,
        last_step: int,
        detail: str = "",
        status: str = "complete",
        last_partial: bool = False,
        ending_since: float | None = None,
    ) -> None: ...

    def abandon(self, detail: str) -> None: ...

    def skipped(self, step: int, detail: str, output: str) -> None: ...

    def steps_begin_at(self, step: int) -> None: ...

    first_step_partial: bool  # the capture began inside its first step (set by the controller)
    # (the step whose boundary started the profiler, the ms it took): for the next capture's record
    start_cost: tuple[int, float] | None


def later_start_avoids_it(cfg: Any) -> str:
    """How a capture opened before training began (on the thread that made the optimizer, while the steps
    run on another) is avoided: by a later first step, or a later time window (--delay excludes
    --skip-first)."""
    if getattr(cfg, "timed", False):
        return "a --delay that ends once training has begun avoids this"
    return "a schedule that starts later, --skip-first 1, avoids this"


class CaptureController:
    def __init__(
        self,
        cfg: ProfileConfig,
        plan: CapturePlan,
        backend_factory: Any,
        sink_factory: Any,
        log: AgentLog,
        rank_fn: Any,
        on_arm: Any = None,
        space: Any = None,
        on_profiling: Any = None,
        on_new_cycle: Any = None,
        on_recorded_step: Any = None,
        on_idle_decision: Any = None,
        backend_costs_an_import: Any = None,
    ) -> None:
        self.base_cfg = cfg
        self.cfg = cfg  # the configuration of the capture in flight (or the next one)
        self.plan = plan
        self._backend_factory = backend_factory
        self._sink_factory = sink_factory
        self.log = log
        self._rank_fn = rank_fn
        self._on_arm = on_arm
        self.space = space  # a DiskGuard (npuprof.agent.disk_guard) or None
        self._on_profiling = on_profiling  # told when a profiler of ours starts (True) and stops (False)
        self._on_new_cycle = on_new_cycle  # told when a running profiler of ours begins another capture
        self._on_recorded_step = on_recorded_step  # told at each step boundary while a profiler of ours runs
        # told at a decision taken while no profiler of ours runs (replan asks for one)
        self._on_idle_decision = on_idle_decision
        # whether making the backend now would import torch (a --step-on job that has not loaded it), and a
        # skipped window's record can be written without it (_sink_for_a_skip)
        self._backend_costs_an_import = backend_costs_an_import or (lambda: False)
        self._skip_sink: CaptureSink | None = None  # the sink of such records, made without a backend
        self._skipped_without_backend: set[str] = set()  # the outputs it recorded a skip in
        self.step = 0
        self.windows_skipped = 0  # capture windows that could not record (no room, no directory)
        self._skips_said: dict[str, str] = {}  # each skip warning last logged, numbers aside (_warn_skip)
        self.next_check = 0
        self.enabled = True
        self.armed = False
        self.step_function_wrapped = False  # --step-on's function found and wrapped in this process
        self.backend: Backend | None = None
        self.sink: CaptureSink | None = None
        self.prof: Any = None
        self.action = Action.NONE
        self._stopping = False
        self._ending_since: float | None = None  # see _on_trace_ready
        self._stop_detail = ""
        self._stop_status = "complete"
        self._stop_last = 0  # the last step of a capture being stopped
        self._no_steps = False  # armed by a timed plan's tick: no ProfilerStep spans (one window)
        self._inside_a_step = False  # a decision taken between two step boundaries (_decide_inside_a_step)
        self._replanned = False
        self._discarding = False  # a capture that could not begin: its trace, if any, is dropped
        # Threads (see the module's docstring): the driving thread's id, the thread the profiler in flight
        # belongs to, and a lock taken without waiting, so that no two threads are ever inside at once.
        self.driver: int | None = None
        self._prof_thread: int | None = None
        self._lock = threading.RLock()  # re-entrant: a signal handler may finish a capture mid-decision
        self._deciding = False  # the lock's holder is inside _decide (another thread may read it)
        self._thread_guards = threading.local()
        self._guard: object | None = None  # the token of the driving thread's guard
        self._finish_requested: tuple[str, str] | None = None
        self._foreign_reported = False
        # The step of the last ignored boundary, and the boundaries each thread took at that step, the
        # driving one taking none (see foreign_boundary): one tuple, replaced whole, read by any thread.
        self._foreign: tuple[int, dict[threading.Thread, int]] = (-1, {})
        self._foreign_noted: list[str] | None = None  # the notes of the capture told of them (see above)
        self._held_noted: list[str] | None = None  # ... told that its thread waits for the stepping one
        self._unread_wait_said = False  # the driver's wait npuprof does not read was named (once)
        self._looks = threading.local()  # each thread's next look at the driver's wait (_look_due)
        self.steps_elsewhere: str | None = None  # steps taken on this thread while ours armed on another
        self.driving_threads = 0  # threads other than the main one that took the steps over, in turn
        self._capture_first = 0  # the first recorded step of the capture in flight
        # the sink began the capture in flight (its files): torch's step() that saves a capture starts the
        # next cycle's profiler before the controller begins its files (_step_profiler)
        self._capture_begun = False
        # Iterations that passed uncounted while a profiler of ours ran (steps_missed), and why: added to
        # the step number once it stops (_count_missed_while_recording).
        self._missed_while_recording = (0, "")
        self._range_opened = 0  # the last step whose ProfilerStep range torch opened (its start or step())
        self._capture_notes: list[str] = []  # said in the record of the capture in flight (its detail)
        self._notes_for_next: list[str] = []  # for the capture that begins next
        self._armed_on: int | None = None  # the thread that armed us (made the first optimizer, say)
        self._profiler_failed = ""  # prof.start() / prof.step() raised: when (see _must_not_stop)
        # why no capture may open any more: the process is exiting and npuprof's exit hook, which finalises
        # one, has run (steps in an atexit handler run after it: Agent._at_exit)
        self.closed_for_exit = ""
        self._hooks = ProfileHookWatch(log)  # --with-stack and the job's own sys.setprofile hook
        self._loader_worker: bool | None = None  # this process is a DataLoader worker (once known)
        bind = getattr(plan, "bind", None)
        if bind is not None:
            bind(self)

    @property
    def counts_steps(self) -> bool:
        """Step boundaries come (an optimizer or --step-on armed this controller, not a timed window)."""
        return self.armed and not self._no_steps

    # ---- called from the step hooks ----------------------------------------------------------
    def arm(self, at_a_step_start: bool = False) -> None:
        """Step 0 begins: the first optimizer exists (the set-up until its first step is then in step 0), or
        the step function is first called (``at_a_step_start``: step 0 is whole)."""
        if self.armed or self._in_a_loader_worker():
            return
        self.armed = True
        self._armed_on = get_ident()
        if self._on_arm is not None:
            self._on_arm()
        training_started = getattr(self.plan, "training_started", None)
        if training_started is not None:
            training_started()
        if at_a_step_start or self._no_steps:
            self._decide()
        else:  # step 0 began here, with no boundary before it: it holds the set-up since (helper-95)
            self._decide_inside_a_step()

    def on_boundary(self) -> None:
        if get_ident() != self.driver and not self._claim(get_ident()):
            return
        self.step += 1
        if self.step >= self.next_check:
            self._decide()

    def on_boundary_of(self, thread: int) -> None:
        """``on_boundary`` for a caller that knows its thread's id already (one call less per step)."""
        if thread != self.driver and not self._claim(thread):
            return
        self.step += 1
        if self.step >= self.next_check:
            self._decide()

    def steps_missed(self, count: int, why: str = "") -> bool:
        """``count`` iterations passed without a boundary (an optimizer taking over counts from its third
        step): added to the step number now when no profiler of ours runs (True); else once it stops, at
        the end of its capture, so that the capture keeps its profiler's numbering and later captures
        land on the job's iterations (False). Steps of a capture window among them had no warm-up or
        recording: the capture that goes on says so in its record, a window that passed whole is logged."""
        if count <= 0:
            return False
        if self.prof is not None:
            held, reason = self._missed_while_recording
            self._missed_while_recording = (held + count, reason or why)
            return False
        self._count_missed(count, why)
        return True

    def _count_missed_while_recording(self, at_a_boundary: bool = False) -> bool:
        """The profiler has stopped: the iterations missed while it ran are counted now; whether any were.
        ``at_a_boundary``: the step in flight has just begun (none of its iterations ran)."""
        count, why = self._missed_while_recording
        if count <= 0 or self.prof is not None:
            return False
        self._missed_while_recording = (0, "")
        self._count_missed(count, why, at_a_boundary)
        self.log.info(f"the {count} step(s) that passed uncounted in the capture now count: step {self.step}")
        return True

    def _count_missed(self, count: int, why: str, at_a_boundary: bool = False) -> None:
        """Add ``count`` to the step number; the first step a capture may open at comes after the step in
        flight, or is it when that step has just begun."""
        first = self.step if at_a_boundary else self.step + 1
        self.step += count
        opens_at = self.step if at_a_boundary else self.step + 1
        try:
            windows = self._windows_among(first, opens_at)
            goes_on = self.plan.action_at(opens_at) is not Action.NONE
        except Exception:  # a plan that cannot tell: nothing is said
            windows, goes_on = [], False
        why = why or "an optimizer took over counting"
        for steps, closed in windows:
            span = f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}-{steps[-1]}"
            lost = f"{span} of its window passed uncounted ({why})"
            if goes_on and steps[-1] == opens_at - 1 and not closed:  # the capture at opens_at is its rest
                self._notes_for_next.append(f"{lost}: recorded from step {opens_at}")
            else:
                self.log.warning(f"capture window not recorded: {lost}")

    def _windows_among(self, first: int, end: int) -> list[tuple[list[int], bool]]:
        """The planned steps from ``first`` to before ``end``, one list per window, and whether the window
        ended among them (its RECORD_AND_SAVE step): with --wait 0 the next window begins at the step after
        it, and the steps of one that passed whole were said to be the next one's, which recorded all its
        own."""
        windows: list[tuple[list[int], bool]] = []
        ended = True
        for step in range(first, end):
            action = self.plan.action_at(step)
            if action is not Action.NONE:
                if ended:
                    windows.append(([], False))
                windows[-1][0].append(step)
            ended = action in (Action.NONE, Action.RECORD_AND_SAVE)
            if action is Action.RECORD_AND_SAVE:
                windows[-1] = (windows[-1][0], True)
        return windows

    def note_for_capture(self, note: str) -> None:
        """A fact about the capture in flight that its record's detail keeps (e.g. a step that holds
        several optimizer steps); nothing without a capture."""
        if self.prof is not None:
            self._capture_notes.append(note)

    def _decide(self) -> None:
        """``_sync`` under the lock; when another thread holds it, this boundary takes no decision (the
        next one will), it never waits. A boundary reached inside a decision of its own thread (a signal
        handler of the script's that steps, a SIGALRM timer driving training, interrupted it; the lock is
        re-entrant) takes none either, and is not counted: part of the step in flight, as torch's profiler,
        not stepped there, sees it. Re-entered, the decision failed mid-way (an import of npuprof's half
        done: "cannot import name ... from partially initialized module") and profiling stopped."""
        if self._deciding and self.inside_a_decision():
            self.step -= 1  # (only on_boundary's reach here inside a decision: tick's never decide there)
            return
        try:
            raised = more_stack()
        except RecursionError:  # no frame left for a decision here (nothing held yet): a later one takes it
            return
        if not self._lock.acquire(blocking=False):
            less_stack(raised)
            return
        if self.driver not in (None, get_ident()):  # taken over since this boundary began (_take_over)
            self._lock.release()
            less_stack(raised)
            return
        decision_begins()
        self._deciding = True
        try:
            if self._finish_if_asked():
                return
            self._sync()
            if self.prof is None and self._on_idle_decision is not None:
                self._tell_idle_decision()
            self._finish_if_asked()  # asked during this decision (a SIGTERM's handler waits for it)
        finally:
            self._deciding = False
            less_stack(raised)
            self._lock.release()
            decision_ends()  # the script's handlers deferred during an export run now (agent/signals.py)

    def _finish_if_asked(self) -> bool:
        """Finish the capture in flight when another thread asked for it; at this boundary the step before
        is the trace's last. Whether it did."""
        requested, self._finish_requested = self._finish_requested, None
        if requested is None or self.prof is None:
            return False
        self.finish_early(*requested, last=self.step - 1)
        return True

    def _tell_idle_decision(self) -> None:
        try:
            self._on_idle_decision()
        except Exception as exc:
            self.log.warning(f"idle decision hook failed: {exc!r}")

    def _in_a_loader_worker(self) -> bool:
        """Whether this process is a DataLoader worker, which records nothing (looked at once a process,
        said once): the optimizer steps taken there (a model fitted to each sample in ``__getitem__``, or
        in a thread the worker starts) are not the job's iterations, and each worker's captures were
        listed beside the training process's as its steps 6-8 (docs/architecture.md, "Safety", signals)."""
        if self._loader_worker is None:
            try:  # (called from the script's Optimizer(): a failure to look must not reach it)
                self._loader_worker = window_plan.a_dataloader_worker()
            except Exception:  # not known: this process records as any other
                self._loader_worker = False
            if self._loader_worker:
                self.enabled = False
                self.log.info(
                    "optimizer steps in a DataLoader worker are not the job's iterations: this process "
                    "records nothing"
                )
        return self._loader_worker

    def _claim(self, thread: int) -> bool:
        """A boundary from a thread that does not drive: it becomes the driver when there is none (the
        first boundary, or the driver has ended) or when it takes over (``foreign_boundary``); otherwise
        it is ignored. A driver that is ``thread`` already counts this boundary: the window's signal
        handler, run since the caller looked, opened a capture and claimed the thread (the job's first
        boundary was dropped as another thread's, every step then counted one behind the job's)."""
        if self.driver is not None:
            return self.driver == thread or self.foreign_boundary()
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if self.driver is not None:
                return self.driver == thread
            self._claim_for(get_ident())
            return True
        finally:
            self._lock.release()

    def foreign_boundary(self) -> bool:
        """``_foreign_boundary``, whose failure (it looks at another thread's frames) never reaches the
        training thread that stepped: said once, that thread's steps ignored as before."""
        try:
            return self._foreign_boundary()
        except Exception as exc:
            if raised_by_a_signal_handler(exc):
                raise  # the script's own exception (its signal handler ran inside our code): it is theirs
            report_failure("a step boundary of a thread that does not drive the profiler", exc, self.log)
            return False

    def _foreign_boundary(self) -> bool:
        """A step on a thread that does not drive: ignored (said once in the log), unless this thread has
        stepped ``TAKE_OVER_AFTER`` times while the driving one did not once (other threads' steps between
        them do not count against it: a pool's workers that each train interleave theirs), no profiler is
        open and the driving one waits for other threads (``join``, a future's result): this one then
        drives, True (a
        sanity step on the main thread before training moves to a thread of its own, which was never
        counted: docs/architecture.md, "Step boundaries"; helper-219)."""
        ident, step = get_ident(), self.step
        foreign = self._foreign
        if foreign[0] != step or len(foreign[1]) > FOREIGN_THREADS_COUNTED:
            foreign = self._foreign = (step, {})
        counts = foreign[1]
        # each thread's own (a pool's workers interleave), by its Thread object: a thread started after
        # another one ended may get its id, and took the ended one's steps as its own
        me = threading.current_thread()
        count = counts[me] = counts.get(me, 0) + 1
        looks = count % TAKE_OVER_AFTER == 0 and self._look_due()
        began = time.thread_time() if looks else 0.0
        waits = looks and self.prof is None and _waits_for_other_threads(self.driver)
        if waits and self._take_over(ident):
            return True
        if looks and self.prof is None and not self._unread_wait_said:
            self._say_unread_wait()
        if self.prof is not None and self.step and self._foreign_noted is not self._capture_notes:
            self._note_foreign_steps()
        if (
            looks
            and self.prof is not None
            and self.step  # (step 0: a profiler opened when armed, said below with its own fix)
            and self._held_noted is not self._capture_notes
            and _waits_for_other_threads(self.driver)
        ):
            self._say_capture_held_by_a_waiting_driver()
        if looks and not waits:
            self._space_looks(began)
        if self._foreign_reported:
            return False
        self._foreign_reported = True
        name = threading.current_thread().name
        if self.step == 0 and self.prof is not None:  # opened when armed, on a thread that never steps
            self.steps_elsewhere = name
            self.log.warn_once(
                "foreign-thread",
                f"npuprof's profiler started on the thread that created the optimizer, but steps are taken "
                f"on thread {name}: no steps are counted ({later_start_avoids_it(self.cfg)})",
            )
            return
        names = {thread.ident: thread.name for thread in threading.enumerate()}
        self.log.info(
            f"step boundaries from thread {name} are ignored: thread {names.get(self.driver, self.driver)} "
            'drives the profiler (one thread only: docs/architecture.md, "Step boundaries")'
        )
        return False

    def _look_due(self) -> bool:
        """Whether the calling thread may look at the driving thread's wait now (``_space_looks``)."""
        return time.monotonic() >= getattr(self._looks, "next_at", 0.0)

    def _space_looks(self, began: float) -> None:
        """The calling thread's look at the driving thread's wait, begun at CPU time ``began``, found no
        wait for it: its next look comes ``LOOK_SPACING`` times that look's CPU time later (at most
        ``LOOK_SPACING_MAX_S``), so that looking costs it ~0.1 % of its time, not every third step's
        look for the whole job. Not after the first empty look only: a driver may begin its wait later
        (it starts the thread, then sets up more before it joins it)."""
        spent = time.thread_time() - began
        self._looks.next_at = time.monotonic() + min(spent * LOOK_SPACING, LOOK_SPACING_MAX_S)

    def _say_unread_wait(self) -> None:
        """Once: the driving thread waits for this one in a way npuprof does not read, named with what
        hands the steps over; the run's last line when no capture was written (docs/architecture.md, "Step
        boundaries"): a flag that a variable of its function holds, polled in a sleeping loop (read, it
        would be from that frame's variables, ``released_waits.unread_flag``), or an event loop awaiting
        this thread's work beside a task that sleeps (``released_waits.loop_ticks_beside_this_thread``)."""
        frame = frames.current_frames().get(self.driver) if self.driver is not None else None
        name = threading.current_thread().name
        try:
            how = self._unread_wait_of(frame, name)
        except Exception:  # another thread's frame, changing as it is read: not known, nothing said
            return
        if not how:
            return
        self._unread_wait_said = True
        names = {thread.ident: thread.name for thread in threading.enumerate()}
        driver = names.get(self.driver, self.driver)
        self.log.info(f"thread {name}{UNREAD_WAIT}{driver} waits for it {how}")

    @staticmethod
    def _unread_wait_of(frame: Any, name: str) -> str:
        """How the thread whose innermost frame is ``frame`` waits for this one (``name``), unread, and
        its fix; "" when it does not so wait."""
        if frame is None:
            return ""
        flag = released_waits.unread_flag(frame)
        if flag:
            return (
                f"polling {flag}, a variable of {_place_of(released_waits.outside_the_waits(frame))}, which "
                "npuprof does not read (that would keep its variables alive); wait on a threading.Event "
                "that thread sets (or join() it, or keep the flag in a module global)"
            )
        if released_waits.loop_ticks_beside_this_thread(frame):
            work = released_waits.work_run_here()
            inside = f"in {work}(), which thread {name} runs," if work else f"in thread {name}"
            return (
                "in an asyncio event loop beside a task that sleeps (a ticker), which may step between its "
                "sleeps, so npuprof does not read it as a wait for that thread; take the first step "
                f"{inside} too (none on the loop's thread before training moves there)"
            )
        return ""

    def _note_foreign_steps(self) -> None:
        """Once a capture (its notes' list, new at each capture, says which): its record says that another
        thread stepped while it was open, steps neither counted nor in its trace (their profiler callbacks
        are the driving thread's alone): a pool's workers, a thread training while the one that opened the
        capture waits for it. Its steps looked like all the job's (docs/architecture.md, "Step
        boundaries"). Not at step 0, where a profiler opened when armed says it counted none itself."""
        notes = self._foreign_noted = self._capture_notes
        driver = self.driver
        names = {thread.ident: thread.name for thread in threading.enumerate()}
        notes.append(
            f"other threads took steps during this capture (thread {threading.current_thread().name} first), "
            f"not counted and not in its trace: its steps are thread {names.get(driver, driver)}'s alone"
        )

    def _say_capture_held_by_a_waiting_driver(self) -> None:
        """This thread would take the steps over, but the driving thread that waits for it has a profiler
        open (a window opened at the step after a sanity step, before training moved to a thread of its
        own): torch's profiler belongs to the thread that started it (docs/architecture.md, "Step
        boundaries"), so that capture records the wait, no step of this thread, and no step is counted
        while it is open. Only the record said "other threads took steps", and "training ended before the
        capture's last step" at the exit that closed it: said once on stderr, with a schedule that avoids
        it, and in the capture's record."""
        name = threading.current_thread().name
        names = {thread.ident: thread.name for thread in threading.enumerate()}
        driver = names.get(self.driver, self.driver)
        self._held_noted = self._capture_notes
        if self.action.recording:
            self.note_for_capture(
                f"it records thread {driver}'s wait for thread {name}, which took the steps (torch's "
                "profiler cannot be handed to another thread)"
            )
            held = f"that capture records thread {driver}'s wait, none of thread {name}'s steps"
        else:  # warming up: the window's recording would begin at a boundary of thread {driver}
            held = f"its window, warming up, records none of thread {name}'s steps"
        self.log.warn_once(
            "capture-held-by-a-waiting-thread",
            f"thread {name} takes the steps while thread {driver}, which has npuprof's profiler open (at its "
            f"step {self.step}), waits for it: torch's profiler belongs to the thread that started it and "
            f"cannot be handed over, so {held}, and steps are not counted until it closes "
            f"({self._later_window(self.step)})",
        )

    def _later_window(self, step: int) -> str:
        """How a window opened on a thread that then waits for another one that trains is avoided: one
        that opens once the training thread has taken over counting (``TAKE_OVER_AFTER`` steps)."""
        if getattr(self.cfg, "timed", False):
            return "a --delay that ends once training runs on that thread avoids this"
        later = step + TAKE_OVER_AFTER
        return f"a schedule that starts at step {later} or later, --skip-first N, avoids this"

    def _take_over(self, ident: int) -> bool:
        """This thread drives from now on, its earlier steps (not boundaries then) counted, when no
        decision is under way and still no profiler is open and the driver has not stepped since."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            step, counts = self._foreign
            count = counts.get(threading.current_thread(), 0)
            if self.prof is not None or self._stopping or step != self.step or not count:
                return False
            name = threading.current_thread().name
            self.log.info(
                f"thread {name} takes over counting the steps: it stepped {count} times while "
                'the thread that counted them waited for other threads (docs/architecture.md, "Step '
                'boundaries")'
            )
            self.steps_missed(count - 1, f"thread {name} took over counting")
            self._foreign, self._foreign_reported = (-1, {}), False
            self._claim_for(ident)
            return True
        finally:
            self._lock.release()

    def _claim_for(self, ident: int) -> None:
        self.driver = ident
        if threading.current_thread() is not threading.main_thread():
            # Told when this thread ends (its thread-local values are released in it, as it ends).
            self._guard = token = object()  # the guard itself is the thread's alone: it must die with it
            self._thread_guards.guard = guard = _DriverGuard(self, token)
            thread_deaths.name_this_threads_death_on(guard)
            self.driving_threads += 1
            name = threading.current_thread().name
            if self.driving_threads <= THREADS_LOGGED:  # a thread per step, for days: not a line each
                self.log.info(f"steps are counted on thread {name}")
            elif self.driving_threads == THREADS_LOGGED + 1:
                self.log.info(f"steps are counted on thread {name}; later threads that take the steps over "
                              "are not logged")  # fmt: skip

    def driver_ended(self, token: object, died_of: str | None = None) -> None:
        """Runs in the driving thread as it ends (of ``died_of``, an uncaught exception, where it did):
        finish the capture it owns, let another thread drive."""
        if token is not self._guard:
            return
        self._guard = None
        ident = get_ident()
        try:
            if self.prof is not None and self._prof_thread == ident:
                ended = f"died of {died_of}" if died_of else "ended"
                self.finish_early(
                    f"the training thread {ended} before the capture's last step; step {self.step} is partial"
                )
        finally:
            self.driver = None

    def inside_a_decision(self) -> bool:
        """Whether this thread is inside one of this controller's decisions (a step boundary, the profiler's
        step or export): a signal handler that runs here must not stop the profiler itself."""
        return bool(self._lock._is_owned())  # type: ignore[attr-defined]

    def tick(self) -> None:
        """A timed plan's nudge (agent/window_plan.py), run by the main thread's signal handler between
        two bytecodes: open the window it now wants, or close it, in a job that takes no step boundary
        to do so. Only when the main thread drives (or nobody does yet) and is not inside a decision."""
        if self.driver not in (None, get_ident()) or self.inside_a_decision():
            return
        try:
            raised = more_stack()
        except RecursionError:  # no frame left for a decision here (nothing held yet): a later one takes it
            return
        if not self._lock.acquire(blocking=False):
            less_stack(raised)
            return
        # the script's handlers deferred during the window's export run once the lock is let go: raised
        # inside the stop, what they raise (a timeout of its own) was npuprof's "could not finalise"
        decision_begins()
        try:
            self._tick()
        finally:
            less_stack(raised)
            self._lock.release()
            decision_ends()

    def _tick(self) -> None:
        """``tick`` under the lock."""
        refresh = getattr(self.plan, "refresh", None)
        if refresh is not None:
            refresh(self.step)
        wanted = self.plan.action_at(self.step)
        if self.prof is not None:
            if wanted is Action.NONE:
                if self._no_steps:  # a job without steps: the window is the capture
                    reason = self.plan.late_by() if hasattr(self.plan, "late_by") else ""
                elif self._range_opened < self.step:
                    # A boundary counted this step and its decision has not run (the handler ran between
                    # them): the window ends at that boundary, its last step the one before, whole, as the
                    # decision would end it; "ended inside step N" named a step the trace has no range of.
                    self._finish_early("", last=self.step - 1)
                    return
                elif self.step == 0:  # no boundary yet: the job has shown no step to wait for
                    reason = (
                        "the time window ended inside step 0, before the job's first step boundary "
                        "(a window open before it is timed as in a job without steps); step 0 is partial"
                    )
                else:
                    reason = (
                        f"the time window ended inside step {self.step} (no step boundary came within "
                        f"the wait for one); step {self.step} is partial"
                    )
                self._finish_early(reason, last=self.step)
            return
        if wanted is Action.NONE or not self.enabled:
            return
        if self.armed and self.driver is None and self._armed_on != get_ident():
            return  # the job's steps are another thread's: the window opens at its first boundary
        if not self.armed:
            self._no_steps = True  # no step hook armed us: a window of a job without steps
            self.arm()
            return
        self._decide_inside_a_step()

    def _decide_inside_a_step(self) -> None:
        """``_decide()`` between two step boundaries: a capture that begins here has its first step cut,
        which its record says (helper-95)."""
        closed = self.prof is None
        self._inside_a_step = True
        try:
            self._decide()
        finally:
            self._inside_a_step = False
        if closed and self.prof is not None and self.sink is not None:
            self.sink.first_step_partial = True

    def replan(self) -> None:
        """The plan changed (a config watcher's thread, say), or work is done that a decision acts on (a
        memory snapshot's copy): look again at the next step boundary. The flag is set before ``next_check``
        so that a decision being taken right now cannot hide it."""
        self._replanned = True
        self.next_check = 0

    # ---- the decision --------------------------------------------------------------------------
    def _sync(self) -> None:
        if not self.enabled or self._in_a_loader_worker():
            self.next_check = NEVER
            return
        self._replanned = False
        try:
            self._advance()
            if self._replanned:
                self.next_check = 0
        except Exception as exc:
            if raised_by_a_signal_handler(exc):
                raise  # the script's own exception (its signal handler ran inside our code): it is theirs
            import traceback

            logged = self.log.error(
                f"capture control failed at step {self.step}: {exc!r}\n{traceback.format_exc()}"
            )
            # (helper-98: with no descriptor left the details were not there)
            details = "details in npuprof.log" if logged else "npuprof.log could not take the details"
            self.log.warn_once(
                "controller",
                f"profiling stopped after an internal error at step {self.step} ({exc!r}); "
                f"training goes on; {details}",
            )
            self._drop_session(f"internal error at step {self.step}: {exc!r}")
            self.enabled = False
            self.next_check = NEVER

    def _advance(self) -> None:
        refresh = getattr(self.plan, "refresh", None)
        if refresh is not None:
            refresh(self.step)
        self._decide_at(self.step)

    def _decide_at(self, step: int) -> None:
        wanted = self.plan.action_at(step)
        if self.prof is None:
            if wanted is Action.NONE:
                self._schedule_next(step)
                return
            self.cfg = self.plan.config_at(step) or self.base_cfg
            refusal = self._refusal(step)
            if refusal is not None:
                forever, why = refusal
                self._tell_plan("skipped", step, why)
                self._skip(step, forever)
                return
            # A Ctrl-C in the capture's first files or torch's start left a profiler never started as the
            # capture in flight, stepped and recorded as complete at exit: it comes once the start is done.
            # So do the script's own handlers (they run as the decision ends): one that raised there (a
            # timeout, sys.exit) left it so, and the exit's stop of it failed in torch ("could not finalise").
            with sigint_held_back(), script_handlers_deferred():
                opened = self._open(step, wanted)
            if not opened:
                return  # the window was skipped
        else:
            if self._range_opened == step:
                # The capture opened inside this decision's own step: the window's signal handler ran
                # while arm() started the post-processor, or between a boundary's count and its decision.
                # torch's range for this step is open already; a step() here numbered every later step
                # one ahead of ours (docs/architecture.md, "Time windows").
                self.next_check = step + 1
                return
            if self.space is not None and not self.space.ok_for(self.cfg.output):
                reason = f"stopped at step {step}: {self.space.describe(self.cfg.output)}"
                self.finish_early(
                    reason, status="incomplete", last=step - 1
                )  # step has not begun in the trace
                return
            if wanted is Action.NONE and getattr(self.plan, "timed", False):
                self._finish_early("", last=step - 1)  # a time window ends at this boundary
                return
            if self._no_steps:
                self._steps_came(step)
            if self._on_recorded_step is not None:
                self._on_recorded_step()
            if self.action.recording and (note := self._hooks.lost_at(step - 1)) is not None:
                self.note_for_capture(note)
            # A Ctrl-C while torch collects the events would lose them all: it reaches the script once
            # this boundary is done, the controller's own state included.
            with sigint_held_back():
                self._step_profiler(step, wanted)
            return
        self.next_check = step + 1

    def _steps_came(self, step: int) -> None:
        """A time window opened before the job's first step boundary (as one of a job without steps) and
        steps now come: from this boundary on the trace has its ProfilerStep spans, and the capture's
        steps start here, so that the record's steps are the trace's (docs/architecture.md, time windows)."""
        self._no_steps = False
        if getattr(self.prof, "record_steps", True) is not False:
            # this profiler numbers its steps from its start: its first one began with the window
            if self.sink is not None:
                self.sink.first_step_partial = True
            return
        self.prof.record_steps = True  # torch opens ProfilerStep#{step} in the step() that follows
        self._capture_first = step
        if self.sink is not None:
            self.sink.steps_begin_at(step)
        self.log.info(f"steps began during the time window: its steps are counted from step {step}")

    def _step_profiler(self, step: int, wanted: Action) -> None:
        previous = self.action
        if self._missed_while_recording[0] > 0:
            if previous is Action.WARMUP and self._renumber_the_warm_up():
                step, wanted = self.step, self.plan.action_at(self.step)
            elif previous in (Action.WARMUP, Action.RECORD_AND_SAVE):
                self._recount_after_capture()
                return
        if previous is Action.RECORD_AND_SAVE and wanted is not Action.NONE and _inside_backward():
            # torch's step() would save the capture and start the next window's trace here, inside backward
            # (INSIDE_BACKWARD): a stop saves it (as _recount_after_capture's), and _refusal says the rest
            failed = self._close_quietly()
            if failed is not None and self.sink is not None:
                self.sink.abandon(f"finalising failed: {failed!r}")
            self._decide_at(step)
            return
        # The capture's files are begun before torch starts recording, so that their cost is not in the
        # first recorded step; after a window that saves at this boundary, once it is saved (one capture
        # at a time).
        begin_first = previous is not Action.RECORD_AND_SAVE
        if begin_first and not self._note_capture_start(previous, wanted, step):
            return
        if previous is Action.RECORD_AND_SAVE:  # this step() ends the capture: its end cost counts from here
            self._ending_since = time.perf_counter()
        starts = wanted.recording and previous is not Action.RECORD
        hook = self._hooks.before_start(starts and self.cfg.with_stack)
        # torch runs the transitions, on_trace_ready included. On the main thread, whose SIGTERM handler
        # finishes the capture there and then, a SIGTERM waits for the store that says this step's range is
        # open (the finish reads it: _last_in_the_trace), as one in the export does: run between the two, it
        # recorded the capture as ending with the step before, whole, of a trace that holds this step's
        # range (docs/architecture.md, "Signals"). Another thread is asked to finish at its next boundary.
        main = threading.current_thread() is threading.main_thread()
        with export_hold(step_holds(previous)) if main else contextlib.nullcontext():
            self._profiler_call(self.prof.step, recording=previous.recording)
            self._range_opened = step
        self.action = wanted
        if starts:
            self._hooks.started(hook, self.cfg.with_stack)
        if not begin_first and not self._note_capture_start(previous, wanted, step):
            return
        if wanted is Action.NONE:
            self._close_quietly()
            self._schedule_next(step)
            return
        self.next_check = step + 1

    def _renumber_the_warm_up(self) -> bool:
        """A warm-up runs at this boundary and iterations passed uncounted in it: nothing was recorded, so
        they count now and its profiler goes on from the job's step (a fresh one is aligned so: backend.align;
        both torch's and torch_npu's step() number from ``step_num``), its capture then beginning at the
        job's iteration. False, nothing done, where the job's step is outside any window: the warm-up is
        stopped then (torch_npu says "Incorrect schedule" of a warm-up stopped, as of a WARMUP then NONE)."""
        count, why = self._missed_while_recording
        if self.plan.action_at(self.step + count) is Action.NONE:
            return False
        self._missed_while_recording = (0, "")
        self._count_missed(count, why, at_a_boundary=True)
        self.log.info(f"the {count} step(s) that passed uncounted in the warm-up now count: step {self.step}")
        self.prof.step_num = self.step - 1  # its step() at this boundary takes it to self.step
        return True

    def _recount_after_capture(self) -> None:
        """The capture ends at this boundary, or its warm-up goes on, and iterations passed uncounted
        meanwhile: torch's stop saves the capture (its last step the one before this boundary) or drops the
        warm-up, those iterations are counted, and this boundary is decided again under the job's own step
        number: a profiler kept open for the next window (--repeat) would go on numbering its steps from the
        capture's, and a warm-up's capture recorded iterations later than the steps its record named
        (docs/architecture.md)."""
        # torch's stop of a RECORD_AND_SAVE runs on_trace_ready, as its step() would; where it fails, the
        # record said "capturing" for as long as the job ran on (abandon does nothing to a capture written)
        failed = self._close_quietly()
        if failed is not None and self.sink is not None:
            self.sink.abandon(f"finalising failed: {failed!r}")
        self._count_missed_while_recording(at_a_boundary=True)
        self._decide_at(self.step)

    def _schedule_next(self, step: int) -> None:
        upcoming = self.plan.next_busy_step(step)
        self.next_check = NEVER if upcoming is None else upcoming

    def _skip(self, step: int, forever: bool) -> None:
        """Pass over a window this process must not record. A rank that is not selected never records;
        otherwise (the user's profiler runs, the disk is full) the next window is asked again. Never a
        search over steps: with --repeat 0 --wait 0 every step is busy."""
        if forever:
            self.next_check = NEVER
            return
        upcoming = self.plan.next_window_start(step)
        self.next_check = NEVER if upcoming is None else upcoming

    def _refusal(self, step: int) -> tuple[bool, str] | None:
        """None when a capture may open at ``step``; else whether it may never open in this process, and
        why (for the plan: --dynamic's log and status say it)."""
        rank = self._rank_fn()
        if not self.cfg.wants_rank(rank):
            self.log.info(
                f"{_rank_said(rank)} not selected (--ranks){_rankless(rank)}; no capture at step {step}"
            )
            # an unknown rank may become known once the process group exists
            return rank is not None, f"{_rank_said(rank)} is not selected (--ranks{_rankless(rank)})"
        if user_profiler.running() or _profiler_already_enabled():
            user_profiler.report(self.log, step)
            return False, "the script's own profiler is running (npuprof records nothing meanwhile)"
        if self.closed_for_exit:
            self.log.warn_once(
                "closed-for-exit",
                f"capture at step {step} skipped: the process is exiting ({self.closed_for_exit}), and a "
                "capture opened now could not be finalised (torch's profiler left running crashed the "
                "process at its end, SIGSEGV); training goes on",
            )
            return True, f"the process is exiting ({self.closed_for_exit})"
        if _inside_backward():
            self._warn_skip("inside-backward", f"capture at step {step} skipped: {INSIDE_BACKWARD}")
            return False, "the step boundary came inside a backward pass, where torch's profiler cannot start"
        if self.space is not None and not self.space.ok_for(self.cfg.output):
            message = f"capture at step {step} skipped: {self.space.describe(self.cfg.output)}"
            self.windows_skipped += 1
            fix = self.space.fix(self.cfg.output)
            self._warn_skip("disk-space", f"{message}; training goes on ({fix})")
            self._sink_for_a_skip(self.cfg.output).skipped(step, message, self.cfg.output)
            return False, self.space.describe(self.cfg.output)
        return None

    def _warn_skip(self, key: str, message: str) -> None:
        """The warning of a window skipped, into the log again only when its words change, numbers aside
        (the step's, the free space's): a window skipped at each step for the same reason (a disk below
        --min-free-space) wrote a line each, on the step path, and rotated the run's start out of the log
        (helper-374). The run's end logs how many were skipped."""
        from npuprof.reports.footnotes import numbers_hidden

        said = numbers_hidden(message)
        if self._skips_said.get(key) == said:
            return
        self._skips_said[key] = said
        self.log.warn_once(key, message)

    def _sink_for_a_skip(self, output: str) -> CaptureSink:
        """The sink that records a skipped window into ``output``: the captures' own; but, before it is
        made, one made without a backend while making that would import torch (seconds on the step path,
        and a CUDA context, for a window known not to run: a --step-on job that has not loaded torch). That
        one keeps the directories it recorded a skip in (a sink records one a directory); once torch is
        loaded, another directory's skip names the backend (docs/formats.md, the capture record)."""
        if self.sink is None and self._backend_costs_an_import():
            if self._skip_sink is None:
                self._skip_sink = self._sink_factory(None)
            self._skipped_without_backend.add(output)
            return self._skip_sink
        if self._skip_sink is not None and output in self._skipped_without_backend:
            return self._skip_sink
        self._ensure_sink()
        assert self.sink is not None
        return self.sink

    def _ensure_sink(self) -> bool:
        if self.sink is None:
            if self.backend is None:
                self.backend = self._backend_factory()
            self.sink = self._sink_factory(self.backend)
        return self.sink is not None

    def _report_ignored_flags(self) -> None:
        assert self.backend is not None
        ignored = self.backend.ignored_flags(self.cfg)
        if ignored:
            text = ", ".join(ignored)
            self.log.warn_once(f"ignored-flags:{text}", f"ignored on the {self.backend.name} backend: {text}")

    def _open(self, step: int, wanted: Action) -> bool:
        starting = time.perf_counter()  # the capture's set-up and torch's start: see _note_start_cost
        try:
            self._ensure_sink()
        except OSError as exc:  # npuprof's own modules loaded here: a job holding every descriptor (EMFILE)
            self._windows_skipped_for(step, exc)  # may free some by the next window (helper-108)
            return False
        assert self.backend is not None
        self._report_ignored_flags()
        if self.driver is None:  # armed on this thread, before any boundary: the profiler is this thread's
            self._claim_for(get_ident())
        # A SIGTERM from the profiler's making to the end of torch's start waits for it, as for an export:
        # its handler's stop of a profiler made and not started raised ("Profiler must be initialized"),
        # said at the run's end as npuprof's agent failing. The outer hold is --dynamic's (its handler is
        # installed already; or kept for a memory snapshot's copy), the inner one the handler's that
        # _tell_profiling installs (docs/architecture.md, "Signals").
        with export_hold(PROFILER_START):
            try:
                self.prof = self.backend.create_profiler(self.cfg, self.plan.action_at, self._on_trace_ready)
            except CaptureRefused as exc:
                self._windows_skipped_for(step, exc, forever=True)
                return False
            if not self._before_start(step, wanted):
                return False
            self._tell_profiling(True)
            with export_hold(PROFILER_START):
                hook = self._start(step, wanted)
            self._range_opened = step
        self._note_start_cost(step, starting)
        if wanted.recording:
            self._hooks.started(hook, self.cfg.with_stack)
        recording = getattr(self.plan, "recording_started", None)
        if recording is not None:
            recording()  # a time window counts its duration from here (the first start takes seconds)
        return True

    def _before_start(self, step: int, wanted: Action) -> bool:
        """The profiler made: what comes before torch's start (the capture's files); False when the
        capture cannot begin (the window is skipped)."""
        assert self.prof is not None and self.backend is not None
        try:
            load_range_modules()
        except Exception as exc:  # torch's own lazy import: the capture goes on without it loaded early
            self.log.warn_once("range-modules", f"torch's range module could not be loaded early: {exc!r}")
        self._prof_thread = get_ident()
        if self._no_steps and hasattr(self.prof, "record_steps"):
            self.prof.record_steps = False  # torch's own switch: a window without steps is not a step
        user_profiler.mark_ours(self.prof)
        self.backend.align(self.prof, step)
        self.action = wanted
        return self._note_capture_start(Action.NONE, wanted, step, started=False)

    def _start(self, step: int, wanted: Action) -> Any:
        """torch's start, after the log line and the profile hook's look (returned), which open the step in
        a recording window: their cost is not in it."""
        assert self.prof is not None and self.backend is not None
        self.log.info(f"profiler starts at step {step} ({wanted.name}) on {self.backend.name}")
        hook = self._hooks.before_start(wanted.recording and self.cfg.with_stack)
        try:
            self._profiler_call(self.prof.start, recording=False)
        except BaseException:
            self._tell_profiling(False)
            raise
        return hook

    def _note_start_cost(self, step: int, starting: float) -> None:
        """The profiler's start (the capture's set-up: the sink, torch's profiler object, the hooks of a
        running profiler; then torch's start()) at the boundary that ends step ``step - 1`` runs inside
        that step's optimizer.step() (or --step-on function's) call: a timer of the user's around that step
        counts it, no table shows it (README, "Comparing with your own timer"; the first start of a process
        with no optimizer takes torch seconds). Kept on the sink for the capture's record (``start_ms``);
        None for a start in step 0 or between two boundaries (a time window)."""
        if self.sink is None:
            return
        at_a_boundary = step >= 1 and not self._no_steps and not self._inside_a_step
        took = round((time.perf_counter() - starting) * 1000, 1)
        self.sink.start_cost = (step - 1, took) if at_a_boundary else None

    def _note_capture_start(self, previous: Action, now: Action, step: int, started: bool = True) -> bool:
        """Begin the capture's files when recording begins. An OSError there (a full disk, no permission)
        skips this window, with one warning, and the next window tries again: False."""
        if not (now.recording and previous is not Action.RECORD):
            return True
        assert self.sink is not None
        try:
            # A SIGTERM's finish comes once the capture is begun, its files and the controller's account of
            # them (_on_trace_ready finishes only a capture begun: see there), its plan told.
            with export_hold(CAPTURE_FILES):
                self.sink.begin(step, self.cfg)
                self._capture_begun = True
                self._capture_first = step
                self._capture_notes, self._notes_for_next = self._notes_for_next, []
                self._tell_plan("began", step, str(getattr(self.sink, "rank_dir", None) or self.cfg.output))
            if started:
                self._tell_new_cycle()
            return True
        except OSError as exc:
            message = self._windows_skipped_for(step, exc)
            self._discard_profiler(started)
            try:
                self.sink.abandon(message)  # a directory half made says "incomplete", when it can
            except Exception as again:
                self.log.error(f"could not mark the skipped capture: {again!r}")
            return False

    def _windows_skipped_for(self, step: int, exc: Exception, forever: bool = False) -> str:
        """A window that could not begin for ``exc`` (a full disk, no permission, no descriptor left): said
        once, counted, the next window tried; none, ``forever`` (the profiler refuses this process). The
        line says which: "the next window is tried" was said of the only window of --repeat 1 (the default)
        and of a --dynamic request, which is over once skipped."""
        message = f"capture at step {step} skipped: {exc}"
        self.windows_skipped += 1
        self._tell_plan("skipped", step, str(exc))
        self._skip(step, forever=forever)
        if forever:
            then = "no capture opens there"
        else:
            then = "no later window is planned" if self.next_check == NEVER else "the next window is tried"
        self.log.warn_once("capture-begin", f"{message}; training goes on, {then}")
        return message

    def _discard_profiler(self, started: bool) -> None:
        """Stop the profiler of a capture that could not begin; whatever it recorded is dropped."""
        prof, self.prof = self.prof, None
        self.action = Action.NONE
        self._count_missed_while_recording()
        if prof is None or not started:
            return
        self._discarding = True
        try:
            with sigint_held_back():
                prof.stop()
            release_profiler(prof)
        except Exception as exc:
            self.log.warning(f"profiler stop failed: {exc!r}")
        finally:
            self._discarding = False
        self._tell_profiling(False)

    def _on_trace_ready(self, prof: Any) -> None:
        # Called by the profiler inside step() or stop(); the capture ended at the previous step.
        self._hooks.stopped()
        if self._discarding:
            return
        begun, self._capture_begun = self._capture_begun, False
        last = self._stop_last if self._stopping else self.step - 1
        detail = "; ".join(filter(None, [self._stop_detail if self._stopping else "", *self._capture_notes]))
        self._capture_notes = []
        status = self._stop_status if self._stopping else "complete"
        # Not begun: a SIGTERM's handler stopped the cycle torch's step() had just started, after it saved
        # the capture before and before this boundary began the new one's files: finished here, it wrote the
        # capture before again (its steps, this cycle's trace; "the trace of steps 1-2 was not written" on
        # the torch backend, a second record of them on torch_npu's). It recorded nothing: it is dropped.
        if self.sink is not None and begun:
            first = self._capture_first
            where = getattr(self.sink, "rank_dir", None) or self.cfg.output
            # a window in a job without steps holds none: its record says so, not "step 0"
            no_steps = self._no_steps
            # stopped with the step in flight as its last: that step was cut (at a boundary it is whole)
            partial = self._stopping and not no_steps and last >= self.step
            self.sink.finish(
                prof,
                first - 1 if no_steps else last,
                detail,
                status,
                last_partial=partial,
                ending_since=self._ending_since,
            )
            self._tell_plan(
                "ended", last, f"{first}-{last} {status} in {where}" + (f" ({detail})" if detail else "")
            )
        self._ending_since = None  # set where a step() or stop() may end the capture, used once

    def _tell_plan(self, kind: str, step: int, detail: str) -> None:
        hear = getattr(self.plan, "hear", None)
        if hear is not None:
            try:
                hear(kind, step, detail)
            except Exception as exc:
                self.log.warning(f"the plan could not hear of {kind} at step {step}: {exc!r}")

    def _tell_profiling(self, active: bool) -> None:
        if self._on_profiling is not None:
            try:
                self._on_profiling(active)
            except Exception as exc:
                self.log.warning(f"profiling {'start' if active else 'stop'} hook failed: {exc!r}")

    def _tell_new_cycle(self) -> None:
        if self._on_new_cycle is not None:
            try:
                self._on_new_cycle()
            except Exception as exc:
                self.log.warning(f"new capture hook failed: {exc!r}")

    def _close_quietly(self) -> Exception | None:
        """Stop the profiler in flight, if any; what its stop raised (logged), if it did."""
        failed = None
        prof, self.prof = self.prof, None
        if prof is not None:
            try:
                with sigint_held_back():
                    self._ending_since = time.perf_counter()
                    prof.stop()
                release_profiler(prof)
            except Exception as exc:
                self.log.warning(f"profiler stop failed: {exc!r}")
                failed = exc
            self._tell_profiling(False)
        self.action = Action.NONE
        return failed

    def _profiler_call(self, call: Callable[[], Any], recording: bool) -> None:
        """``prof.start`` / ``prof.step``; when one raises, what the profiler was doing (_must_not_stop)."""
        try:
            call()
        except Exception as exc:
            if not raised_by_a_signal_handler(exc):
                self._profiler_failed = "while recording" if recording else "as it began"
            raise

    def _must_not_stop(self, failed: str) -> bool:
        """Whether a profiler whose start() / step() raised must be left as it is. torch's stop() of a
        profiler it has not enabled starts its trace, unprepared when the prepare failed (a thread that could
        not start, under a memory limit: SIGSEGV, helper-124; the next cycle's prepare at a capture's end:
        helper-128); one it has enabled is stopped, which hands over what it recorded (helper-127). Where the
        backend cannot tell (torch_npu), by what the profiler was doing when it failed."""
        enabled = getattr(self.backend, "profiler_enabled", None)
        state = enabled() if enabled is not None else None
        return not state if state is not None else failed != "while recording"

    def _drop_session(self, detail: str) -> None:
        prof, self.prof = self.prof, None
        self.action = Action.NONE
        failed, self._profiler_failed = self._profiler_failed, ""
        if prof is not None:
            if failed and self._must_not_stop(failed):
                _keep_unstopped(prof)  # never collected: torch_npu's __del__ would stop it (helper-127)
                self.log.warning(f"the profiler failed {failed}: not stopped (stopping it could crash)")
            else:
                try:
                    with sigint_held_back():
                        prof.stop()
                except Exception:
                    pass
            self._tell_profiling(False)
        self._capture_begun = False
        if self.sink is not None:
            self.sink.abandon(detail)

    # ---- ending early --------------------------------------------------------------------------
    def finish_early(
        self,
        reason: str,
        status: str = "complete",
        last: int | None = None,
        wait_s: float | None = None,
        give_up_at: float | None = None,
        cut: str = "",
    ) -> None:
        """Training ends (or a signal came, the user's profiler starts, the disk fills) while ours
        records: keep what was recorded, marked with ``reason`` (and ``status``); drop a warm-up. The
        next window is asked again (never a search: see ``_skip``). ``cut``: what a finish made here and now
        cuts ("; step N is partial"), said after the reason; not said by one the recording thread makes at
        its next boundary, which ends that step whole (helper-365: the record called a whole step partial).

        Only the thread the profiler belongs to may stop it: from any other thread this asks that thread
        to finish at its next step boundary (or as it ends), and waits for it a little (never on a step
        boundary: this comes from the exit, a SIGTERM, or the script starting its own profiler):
        ``wait_s``, or EXIT_WAIT_S at exit, OTHER_THREAD_WAIT_S otherwise (see ``_still_waiting``), and never
        past ``give_up_at`` (on ``sigterm_clock.CLOCK``: a SIGTERM's, see ``finish_on_sigterm``)."""
        if self.prof is None or self._stopping_here():
            return
        try:
            raised = more_stack()
        except RecursionError:  # no frame left for a decision here (nothing held yet): a later one takes it
            return
        if self._prof_thread not in (None, get_ident()) or not self._lock.acquire(blocking=False):
            less_stack(raised)
            wait = self._prof_thread != get_ident()
            self._ask_the_recording_thread(reason, status, wait, wait_s, give_up_at)
            return
        decision_begins()  # the script's handlers deferred during the export run once all is done
        try:
            self._finish_early(reason + cut, status, last)
        finally:
            less_stack(raised)
            self._lock.release()
            decision_ends()

    def finish_at_exit(self, reason: str, cut: str = "") -> None:
        """``finish_early`` as the process ends (atexit, ``os._exit``, ``os.exec*``): a thread that records
        is waited for EXIT_WAIT_S and nothing opens again, whichever thread ends the process. An
        ``os._exit`` on the main thread, which is still alive then, gave a training thread mid-step
        OTHER_THREAD_WAIT_S, and its capture was lost past it (helper-281)."""
        if self.prof is not None and self._prof_thread not in (None, get_ident()):
            self.enabled = False
        self.finish_early(reason, wait_s=EXIT_WAIT_S, cut=cut)

    def recorded_off_the_main_thread(self) -> bool:
        """A profiler of ours runs and belongs to a thread other than the main one (any thread may ask)."""
        owner = self._prof_thread
        return self.prof is not None and owner is not None and owner != threading.main_thread().ident

    def finish_on_sigterm(self, give_up_at: float | None = None) -> None:
        """``finish_early`` from SIGTERM's handler: a thread that records is waited for up to its next step
        boundary (a step of seconds), at most DECISION_WAIT_S, then for the finish it begins there (its
        export) up to FINISH_WAIT_S; 2 s lost the capture of any longer step (helper-281). ``give_up_at``:
        when the SIGTERM's finish must be done (``SigtermGuard.finish_by``, counted from the signal's
        arrival): no wait goes past it, whatever held the handler or the watcher before (a hold, the
        watcher's grace; docs/architecture.md, "Signals")."""
        self.finish_early("stopped by SIGTERM", wait_s=DECISION_WAIT_S, give_up_at=give_up_at)

    def _stopping_here(self) -> bool:
        """Whether this thread is inside its own stop of the profiler: a SIGTERM's handler run there (a
        warm-up's stop, which no hold defers) would stop it again mid-stop, torch then raising "Profiler is
        already enabled", said as npuprof's failure at the run's end; the stop under way ends it."""
        return self._stopping and self._prof_thread in (None, get_ident())

    def _ask_the_recording_thread(
        self, reason: str, status: str, wait: bool, wait_s: float | None, give_up_at: float | None = None
    ) -> None:
        # At exit (the main thread has ended; a daemon thread still trains) no capture opens again: one
        # left recording in a thread that outlives the interpreter's exit crashes libtorch.
        exiting = not threading.main_thread().is_alive()
        if exiting:
            self.enabled = False
        self._finish_requested = (reason, status)
        self.next_check = 0
        self.log.info(f"capture to finish at the next step of the thread that records it: {reason}")
        if not wait:
            return
        if wait_s is None:
            wait_s = EXIT_WAIT_S if exiting else OTHER_THREAD_WAIT_S
        clock = sigterm_clock.CLOCK  # a SIGTERM's deadlines are on it (``give_up_at``)
        asked = clock.monotonic()
        while self.prof is not None and self._still_waiting(asked, asked + wait_s, give_up_at):
            clock.sleep(0.005)
        if self.prof is None:
            return
        if give_up_at is not None and clock.monotonic() >= give_up_at:
            self._say_given_up_on_sigterm()
        else:
            self.log.warning(f"the thread recording the capture did not finish it in time ({reason})")

    def _say_given_up_on_sigterm(self) -> None:
        """Said once, on stderr too: what the finish was still waiting for as a SIGTERM's time ran out."""
        waited_for = (
            "its trace export"
            if self._stopping
            else "the step-boundary decision it is in"
            if self._deciding
            else "its next step boundary"
        )
        self.log.warn_once(
            "sigterm-given-up",
            f"SIGTERM: the thread recording the capture was waited for ({waited_for}) until "
            f"{SIGTERM_LIMIT_S - HAND_OVER_S:.0f} s after the signal, and no longer: the process dies of it "
            f"within {SIGTERM_LIMIT_S:.0f} s, before torchrun's or Slurm's SIGKILL; the capture in flight "
            "is lost",
        )

    def _still_waiting(self, asked: float, deadline: float, give_up_at: float | None = None) -> bool:
        """Before ``deadline``; past it, while the recording thread is still in the decision it finishes
        the capture at the end of (a trace export, torch's start), at most DECISION_WAIT_S from ``asked``,
        and while it is stopping the capture (its export begun: the capture is saved as it ends), at most
        FINISH_WAIT_S. At exit too: a daemon thread's export cut short there lost the capture. Never at or
        past ``give_up_at``."""
        now = sigterm_clock.CLOCK.monotonic()
        if give_up_at is not None and now >= give_up_at:
            return False
        if now < deadline:
            return True
        return (self._deciding and now < asked + DECISION_WAIT_S) or (
            self._stopping and now < asked + FINISH_WAIT_S
        )

    def _finish_early(self, reason: str, status: str = "complete", last: int | None = None) -> None:
        """Stop the profiler now; ``last``: the capture's last step (default: the one in flight). An
        empty ``reason``: the capture ended where its plan said (a time window). A Ctrl-C meanwhile waits
        for the end (the events torch collects now are the capture's); so does a SIGTERM, from the stop's
        first instruction: torch's stop() alone was held, and a handler run before it found this thread's
        stop under way, left the capture to it, and the process died of SIGTERM with the capture unwritten
        (docs/architecture.md, "Signals"). So do the script's own handlers, run once the decision this is
        in ends (signals.decision_ends): one that raised before torch's stop() (sys.exit on a second
        SIGTERM as the process finalised) lost the capture and left torch's profiler enabled."""
        with sigint_held_back(), export_hold(TRACE_EXPORT), script_handlers_deferred():
            self._stop_now(reason, status, last)

    def _stop_now(self, reason: str, status: str, last: int | None) -> None:
        self._stopping = True
        self._stop_detail = reason
        self._stop_status = status
        self._stop_last = self._last_in_the_trace() if last is None else last
        try:
            recording = self.action.recording
            self._ending_since = time.perf_counter()
            self.prof.stop()  # when recording, torch runs stop_trace + on_trace_ready
            release_profiler(self.prof)
            if not recording and self.sink is not None:
                self.sink.abandon(reason)
            if reason and not recording:  # a warm-up: nothing was recorded, nothing is kept (helper-110)
                self.log.info(f"warm-up ended at step {self.step} before its capture began: {reason}")
            elif reason:
                self.log.info(f"capture finished early at step {self.step}: {reason}")
            else:
                self.log.info(f"time window ended at step {self.step}")
        except Exception as exc:
            # the script's (its own timeout), once the trace is written (the stop itself defers the
            # script's handlers: entry._hold_sigterm_in_profilers): passed on, but not at the exit, whose
            # hand-over comes after this and which no code of the script would see it in
            if not raised_by_a_signal_handler(exc):
                self.log.error(f"could not finalise the capture ({reason}): {exc!r}")
                if self.sink is not None:
                    self.sink.abandon(f"{reason}; finalising failed: {exc!r}")
            elif threading.main_thread().is_alive():
                raise
            else:
                self.log.info(f"the script's signal handler raised {exc!r} as the process ended")
        finally:
            self.prof = None
            self.action = Action.NONE
            self._stopping = False
            self._stop_detail = ""
            self._stop_status = "complete"
            self._tell_profiling(False)
        self._count_missed_while_recording()
        self._skip(self.step, forever=False)

    def _last_in_the_trace(self) -> int:
        """The last step whose range the trace holds when the profiler stops now: the step in flight once
        torch opened its range, else (a SIGTERM on its boundary, before or inside torch's step(), between
        its closing the last range and opening the next) the step before it, whole. The record said
        "6-7, step 7 partial" of a trace that holds step 6 only (docs/architecture.md, "Signals")."""
        if self._range_opened < self.step and self._capture_first < self.step:
            return self.step - 1
        return self.step

    def reset_after_fork(self) -> None:
        """A forked child starts counting its own steps; the parent's profiler and files are not its."""
        _keep_unstopped(self.prof)
        self.prof = None
        self.backend = None
        self.sink = None
        self._skip_sink = None
        self._skipped_without_backend = set()
        self.action = Action.NONE
        self._capture_begun = False
        self.step = 0
        self._missed_while_recording = (0, "")
        self.next_check = 0
        self.armed = False
        self._stopping = False
        self._discarding = False
        # The only thread of the child is the one that forked; the parent's lock may have been held.
        self.driver = None
        self._prof_thread = None
        self._guard = None
        self._lock = threading.RLock()
        self._deciding = False
        self._thread_guards = threading.local()
        self._finish_requested = None
        self._foreign_reported = False
        self._foreign = (-1, {})
        self._unread_wait_said = False
        self._looks = threading.local()
        self._loader_worker = None  # a DataLoader worker is forked; it says so once it runs its loop


# Where a driving thread that stopped stepping waits for other threads to finish (their steps may then take
# over): Thread.join, the interpreter's wait for non-daemon threads at exit, a future's result.
_WAITS_FOR_THREADS = {
    "/threading.py": ("join", "_shutdown"),
    "/concurrent/futures/_base.py": ("result", "wait", "as_completed", "_result_or_cancel"),
}


def _place_of(frame: Any) -> str:
    """``main() (train.py:27)``: the function ``frame`` runs and where, by its file's name."""
    if frame is None:
        return "its function"
    code = frame.f_code
    return f"{code.co_name}() ({os.path.basename(code.co_filename)}:{frame.f_lineno})"


# what the line naming a wait npuprof does not read says of it (npuprof/reports/run_summary.py finds it)
UNREAD_WAIT = "'s steps are not counted: thread "
_WAIT_FRAMES = 6  # the frames looked at from the innermost (Condition.wait, _wait_for_tstate_lock, ...)
_THROUGH = 2  # threads a wait may go through to the stepping one: the driver joins one that joins it
_THREADS_THROUGH = 8  # non-daemon threads looked at for the exit's wait
_WORKERS_LOOKED_AT = 64  # threads looked at for the executor thread that runs a future the driver waits for
_WORK_ITEM_FRAMES = 32  # frames of such a thread looked at, outward from its join, for its work item


def _waits_for_other_threads(driver: int | None) -> bool:
    """``_waits_now``, and when a thread is still inside ``Thread.start()`` of the calling thread (which
    has begun: it steps), the driver or one it waits for (a supervisor that starts it, then joins it), once
    more after this thread has let it run: a step shorter than the interpreter's switch interval keeps the
    GIL from it, and 12-21 steps of a thread that trains while the main thread joins it passed uncounted
    before it was seen in ``join()``, a window in them lost."""
    if _waits_now(driver):
        return True
    if not _a_thread_starts_this_one():
        return False
    time.sleep(0)  # the GIL to the starting thread, which returns from start() into its wait
    return _waits_now(driver)


def _a_thread_starts_this_one() -> bool:
    """Whether a thread is inside ``Thread.start()`` of the calling thread."""
    me = threading.current_thread()
    for frame in list(frames.current_frames().values())[:_WORKERS_LOOKED_AT]:
        for _ in range(_WAIT_FRAMES):
            if frame is None or not frame.f_code.co_filename.endswith("/threading.py"):
                break
            if frame.f_code.co_name == "start":
                try:
                    if frame.f_locals.get("self") is me:
                        return True
                except Exception:  # another thread's frame, changing as it is read: not known, no
                    pass
                break
            frame = frame.f_back
    return False


def _waits_now(driver: int | None, through: int = 0) -> bool:
    """Whether thread ``driver`` waits for the calling thread to end or hand a result (its innermost frame
    is threading's, one of the next few is in ``_WAITS_FOR_THREADS`` and waits for this thread: its
    ``join``, the exit's wait while this thread is not a daemon, a future this thread runs, an event, a
    queue... that this thread's code releases: ``released_waits``; or it polls this thread's
    ``is_alive()`` between sleeps: ``polling.polls_this_thread``, or that of a thread that waits for it in
    turn), or is gone.
    Looked at only when this thread stepped ``TAKE_OVER_AFTER`` times alone: a thread training beside the
    driving one never takes over while the driving one trains, nor while it waits for its data (a loader's
    future, a prefetch thread's join: helper-222; docs/architecture.md, "Step boundaries"). ``through``:
    the threads joined on the way to ``driver`` (``_waits_through``)."""
    frame = frames.current_frames().get(driver) if driver is not None else None
    if frame is None:  # a driver that ended without its guard: none is left to step (a thread it joined
        return driver is not None and not through  # that ended is waited for no more)
    try:
        if polling.polls_this_thread(frame, lambda polled: _waits_through(polled, through)):
            return True  # while t.is_alive(): time.sleep(0.1), as join() waits
        if released_waits.feeds_this_thread(frame):  # for batch in loader: q.put(batch)
            return True
        if released_waits.polls_a_flag_this_thread_sets(frame):  # while not state["done"]: time.sleep(1)
            return True
    except Exception:  # another thread's frame and variables, changing as they are read: not known, no
        pass
    if not frame.f_code.co_filename.endswith("/threading.py"):
        try:  # an event loop whose only task awaits asyncio.to_thread(train); signal.pause()
            if released_waits.loop_awaits_only_this_thread(frame):
                return True
            return released_waits.pauses_for_a_signal_this_thread_sends(frame)
        except Exception:  # another thread's frame and loop, changing as they are read: not known, no
            return False
    innermost = frame
    for _ in range(_WAIT_FRAMES):
        if frame is None:
            break
        code = frame.f_code
        for suffix, names in _WAITS_FOR_THREADS.items():
            if code.co_name in names and code.co_filename.endswith(suffix):
                try:
                    return _waits_for_this_thread(code.co_name, frame, through)
                except Exception:  # another thread's frame, changing as it is read: not known, no
                    return False
        frame = frame.f_back
    try:  # an event this thread sets, a queue it puts its result into
        return released_waits.waits_on_what_this_thread_releases(innermost)
    except Exception:  # another thread's frame and objects, changing as they are read: not known, no
        return False


def _waits_for_this_thread(name: str, frame: Any, through: int = 0) -> bool:
    """The wait ``name`` of another thread's ``frame`` (one of ``_WAITS_FOR_THREADS``) waits for the
    calling thread: joins it, or the exit's wait (it is not a daemon), or a future it runs; or joins, or
    waits at exit for, a thread that waits for it in turn (``_waits_through``), or waits for a future whose
    executor thread joins it (``_a_worker_joins_this_thread``)."""
    me = threading.current_thread()
    if name == "_shutdown":
        if not me.daemon:
            return True
        waiting = threading.main_thread()
        others = [t for t in threading.enumerate() if not t.daemon and t is not me and t is not waiting]
        return any(_waits_through(thread, through) for thread in others[:_THREADS_THROUGH])
    waited = frame.f_locals
    if name == "join":
        joined = waited.get("self")
        return joined is me or _waits_through(joined, through)
    if name == "result":
        futures = [waited.get("self")]
    elif name == "_result_or_cancel":
        futures = [waited.get("fut")]
    else:  # wait, as_completed
        futures = list(tuple(waited.get("fs") or ()))
    if any(f is g for g in futures for f in _futures_run_here()):
        return True
    return _a_worker_joins_this_thread(futures, through)


def _a_worker_joins_this_thread(futures: list[Any], through: int) -> bool:
    """Whether the executor thread running one of ``futures`` joins the calling thread (or a thread that
    waits for it in turn: ``_waits_through``): ``pool.submit(supervise).result()``, ``supervise`` starting
    the training thread and joining it. Only a join: a future's work that waits for anything else (its
    data, an event) is a loader's, whose waits are not for the stepping thread (helper-222)."""
    if through >= _THROUGH or not futures:
        return False
    me = get_ident()
    for ident, frame in list(frames.current_frames().items())[:_WORKERS_LOOKED_AT]:
        join = _join_frame(frame) if ident != me else None
        items = released_waits.work_items_from(join, _WORK_ITEM_FRAMES) if join is not None else []
        if any(item.future is f for item in items for f in futures):
            return _waits_for_this_thread("join", join, through + 1)
    return False


def _join_frame(frame: Any) -> Any:
    """The frame of ``Thread.join`` among the innermost frames from ``frame`` (threading's), or None."""
    for _ in range(_WAIT_FRAMES):
        if frame is None or not frame.f_code.co_filename.endswith("/threading.py"):
            return None
        if frame.f_code.co_name == "join":
            return frame
        frame = frame.f_back
    return None


def _waits_through(thread: Any, through: int) -> bool:
    """Whether ``thread``, which the driver joins (or waits for at exit), waits for the calling thread:
    a supervisor thread that starts the training thread and joins it, the main thread joining the
    supervisor. ``_THROUGH`` such threads at most on the way."""
    if not isinstance(thread, threading.Thread) or through >= _THROUGH:
        return False
    return _waits_now(thread.ident, through + 1)


def _futures_run_here() -> list[Any]:
    """The futures whose work the calling thread runs (an executor's work items on its stack)."""
    items = released_waits.work_items_run_here()
    return [item.future for item in items if getattr(item, "future", None) is not None]


# Profilers that must never be stopped, held until the process ends: one a forked child inherited (torch_npu's
# profile stops itself in __del__: stop_trace and finalize_trace into the parent's rank dir, a device
# synchronize, from the child), one whose start failed before it recorded (its stop could crash the job).
_KEPT_UNSTOPPED: list[Any] = []


def more_stack() -> bool:
    """Raise the recursion limit by DECISION_HEADROOM for npuprof's work at a boundary; whether it did."""
    return recursion_limit.move(DECISION_HEADROOM)


def less_stack(raised: bool) -> None:
    """Take back the headroom that more_stack added (by frames: another thread's moves meanwhile stay)."""
    if raised:
        recursion_limit.take_back(DECISION_HEADROOM)


def _keep_unstopped(prof: Any) -> None:
    """Keep ``prof`` from ever being collected, and mark it stopped, so that no destructor of a profiler
    (torch_npu's ``if not self.stopped: self.stop()``) stops it."""
    if prof is None:
        return
    _KEPT_UNSTOPPED.append(prof)
    try:
        if getattr(prof, "stopped", True) is False:
            prof.stopped = True
    except (AttributeError, TypeError):  # a profiler without that attribute has no such destructor
        pass


class _DriverGuard:
    """Kept in a thread-local of the driving thread: released in that thread as it ends. ``died_of`` is
    what it died of, where an uncaught exception ended it (agent/thread_deaths.py)."""

    __slots__ = ("controller", "died_of", "token")

    def __init__(self, controller: CaptureController, token: object) -> None:
        self.controller = controller
        self.token = token
        self.died_of: str | None = None

    def __del__(self) -> None:
        try:
            self.controller.driver_ended(self.token, self.died_of)
        except Exception:  # never from a finaliser: the capture stays "capturing" (read as interrupted)
            pass


# An optimizer stepped from an autograd hook (the optimizer-in-backward recipe: one optimizer a parameter,
# stepped by register_post_accumulate_grad_hook) ends each step inside backward. torch's profiler started
# there runs in the engine's copy of the thread's state, which backward's end discards: "Leaked callback
# handle", then SIGSEGV at the capture's export (exit 139), as a bare torch.profiler's step() there does.
INSIDE_BACKWARD = (
    "its step boundary came inside a backward pass (an optimizer stepped from an autograd hook, as the "
    "optimizer-in-backward recipe does), where torch's profiler cannot start (started there, it crashes the "
    "process); training goes on. Name the function of one iteration to capture: --step-on "
    "__main__:train_step"
)


def _inside_backward() -> bool:
    """Whether this thread runs inside autograd's engine (a hook, a custom Function's backward)."""
    current = getattr(getattr(sys.modules.get("torch"), "_C", None), "_current_graph_task_id", None)
    try:
        return current is not None and current() != -1
    except Exception:
        return False


def _profiler_already_enabled() -> bool:
    autograd_profiler = sys.modules.get("torch.autograd.profiler")
    return bool(getattr(autograd_profiler, "_is_profiler_enabled", False))


def step_holds(previous: Action) -> str:
    """What a profiler's step() after ``previous`` does, as a SIGTERM held past the limit names it: the step
    that ends a warm-up starts the recording, any other may export a trace (entry's hold of torch's step()
    too)."""
    return PROFILER_START if previous is Action.WARMUP else TRACE_EXPORT


def _rank_said(rank: int | None) -> str:
    """A process's rank as its lines say it: one without a rank counts as rank 0 (README, --ranks), and says
    so (:func:`_rankless`) after the brackets older readers of the line parse ("rank None" before)."""
    return f"rank {0 if rank is None else rank}"


def _rankless(rank: int | None) -> str:
    from npuprof.agent.dynamic_log import RANKLESS

    return f"; {RANKLESS}" if rank is None else ""
