"""Signal handlers that run between two bytecodes of the step path (docs/architecture.md, "Time windows",
"Signals"): the window's timer wakes the main thread with a signal whose handler calls
``CaptureController.tick()``, and SIGTERM's handler finishes the capture (``finish_on_sigterm``), at any
instruction of the function the main thread is in. An opcode-level trace (``sys.settrace`` with
``f_trace_opcodes``) runs the handler's action at each offset of the function in turn, in-process, with
test_controller_units' rig (torch's own profiler and schedule); what must hold is read from torch (its
``step_num``, the ProfilerStep ranges it entered) and from the job's own count of its boundaries, never
from npuprof's conclusions.
"""

from __future__ import annotations

import contextlib
import dis
import functools
import signal
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from test_controller_units import RangesOpened, Rig, Timed, TorchPlan

from npuprof.agent.controller import CaptureController


def offsets(function: Callable[..., Any]) -> list[int]:
    return [instruction.offset for instruction in dis.get_instructions(function)]


@contextlib.contextmanager
def handler_at(function: Callable[..., Any], offset: int, handler: Callable[[], None]) -> Iterator[list[int]]:
    """Run ``handler`` once, before the instruction at ``offset`` of ``function``'s first call in the block
    (as a signal handler would run there); the list says whether it ran."""
    code = function.__code__
    ran: list[int] = []

    def trace(frame: types.FrameType, event: str, arg: Any) -> Any:
        if event == "call":
            if frame.f_code is not code or ran:
                return None
            frame.f_trace_opcodes = True
            frame.f_trace_lines = False
            return trace
        if event == "opcode" and frame.f_lasti == offset and not ran:
            ran.append(offset)
            handler()
        return None

    sys.settrace(trace)
    try:
        yield ran
    finally:
        sys.settrace(None)


def test_a_window_the_timer_opens_as_the_first_boundary_claims_the_thread_counts_that_boundary() -> None:
    """The window opened in step 0 (no boundary yet, so no thread drives): its signal handler ran as the
    job's first boundary began, after on_boundary had seen no driver, and the capture it opened claimed the
    main thread; _claim then took that boundary for another thread's and dropped it ("step boundaries from
    thread MainThread are ignored: thread MainThread drives"), every later step counted one behind the
    job's, torch's numbers with them."""
    for function in (CaptureController.on_boundary, CaptureController._claim):
        for offset in offsets(function):
            plan = Timed()
            rig = Rig(plan)  # armed by the optimizer's making: step 0 runs, no driver yet
            plan.open = True
            rig.c.replan()  # as the window's timer does, then it kicks the main thread
            with handler_at(function, offset, rig.c.tick) as ran:
                rig.run(1)
            rig.run(2)
            where = (function.__name__, offset, ran)
            prof = rig.backend.created[0][1]
            assert rig.c.step == prof.step_num == 3, (where, rig.c.step, prof.step_num)
            assert not [line for line in rig.log.lines if "are ignored" in line[-1]], (where, rig.log.lines)


def test_a_window_the_timer_closes_between_a_boundarys_count_and_its_decision_ends_at_that_boundary(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The window's end came as step 5's boundary began: its signal handler ran after on_boundary counted
    step 5 and before the decision (at _decide's entry, say), and closed the window "inside step 5 (no step
    boundary came within the wait for one); step 5 is partial", a step whose range torch never opened: the
    trace ends with step 4, whole. Wherever the handler runs, the capture's last step is the last range
    torch entered."""
    ranges = RangesOpened(monkeypatch)
    for function in (CaptureController.on_boundary, CaptureController._decide):
        for offset in offsets(function):
            plan = Timed()
            rig = Rig(plan)
            rig.run(2)
            plan.open = True
            rig.c.tick()  # opened inside step 2
            rig.run(2)
            plan.open = False
            rig.c.replan()  # the window's end: the timer replans, then kicks the main thread
            with handler_at(function, offset, rig.c.tick) as ran:
                rig.run(1)
            (finish,) = [event for event in rig.sink.events if event[0] == "finish"]
            assert finish[1] == ranges.entered[-1] == 4, (
                function.__name__,
                offset,
                ran,
                finish,
                ranges.entered,
            )
            assert rig.c.prof is None and rig.c.step == 5


class Died(BaseException):
    """The process dies of SIGTERM as its handler ends (npuprof's handler kills it): nothing after runs."""


class SigtermHolds:
    """SigtermGuard's holds as the controller uses them (signals.export_hold finds the guard installed): a
    SIGTERM that comes inside one has its handler run as the outermost ends, or, where a trace was written
    in it, only the hand-over and the death (SigtermGuard.export_hold, _deliver_held)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, rig: Rig) -> None:
        from npuprof.agent import signals

        monkeypatch.setattr(signals, "_current", self)
        self.rig = rig
        self.depth = 0
        self.held = False
        self.events_at_death: list[tuple[Any, ...]] = []

    @contextlib.contextmanager
    def export_hold(self, limit_s: float = 0.0, holding: str = "") -> Iterator[None]:
        self.depth += 1
        written = self.written()
        try:
            yield
        finally:
            self.depth -= 1
            if not self.depth and self.held:
                self.held = False
                if self.written() > written:
                    self.die()
                self.handler()

    def written(self) -> int:
        return sum(1 for event in self.rig.sink.events if event[0] == "finish")

    def die(self) -> None:
        self.events_at_death = list(self.rig.sink.events)
        raise Died

    def sigterm(self) -> None:
        if self.depth:
            self.held = True
        else:
            self.handler()

    def handler(self) -> None:
        self.rig.c.finish_on_sigterm()
        self.die()


def test_a_sigterm_as_torch_opens_a_recorded_steps_range_records_the_steps_the_trace_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A SIGTERM whose handler ran at step 4's boundary after torch's step() had opened step 4's range, and
    before the controller stored that it had: the record said the capture ended with step 3, whole, of a
    trace holding ProfilerStep#4 (cut: its length the handler's, a step analyse took for whole). Wherever
    the handler runs in the boundary's stepping of the profiler, the capture's last step is the last range
    torch entered, partial exactly when that is the step in flight."""
    ranges = RangesOpened(monkeypatch)
    function = CaptureController._step_profiler
    lasts = set()
    for offset in offsets(function):
        rig = Rig(TorchPlan(skip_first=2, wait=0, warmup=0, active=5, repeat=1))  # steps 2-6 recorded
        holds = SigtermHolds(monkeypatch, rig)
        rig.run(3)  # step 3 in flight
        with contextlib.suppress(Died), handler_at(function, offset, holds.sigterm) as ran:
            rig.run(1)
        if not ran:  # an instruction this boundary does not run
            continue
        where = (offset, holds.events_at_death, ranges.entered[-3:])
        assert holds.events_at_death[0] == ("begin", 2), where
        (finish,) = holds.events_at_death[1:]
        assert finish[1] == ranges.entered[-1] and finish[2] == "stopped by SIGTERM", where
        assert rig.sink.partials == [finish[1] == 4], (where, rig.sink.partials)
        lasts.add(finish[1])
    assert lasts == {3, 4}  # handled before torch's step(), and after it


def test_a_sigterm_as_the_next_capture_begins_at_the_boundary_that_saves_one_writes_each_capture_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Captures back to back (--wait 0 --warmup 0): at step 3's boundary torch's step() saves steps 1-2 and
    starts the next cycle's recording, whose files the controller begins after it. A SIGTERM whose handler
    ran between the two finished that cycle into the capture just saved: its steps again, this cycle's trace
    ("the trace of steps 1-2 was not written" said on the torch backend, a second capture of steps 1-2 on
    torch_npu's). Wherever the handler runs, each capture begun is finished once, none that was not."""
    for function in (CaptureController._step_profiler, CaptureController._note_capture_start):
        outcomes = set()
        for offset in offsets(function):
            rig = Rig(TorchPlan(skip_first=1, wait=0, warmup=0, active=2, repeat=0))  # 1-2, 3-4, ...
            holds = SigtermHolds(monkeypatch, rig)
            rig.run(2)  # step 2, the capture's last, in flight
            with contextlib.suppress(Died), handler_at(function, offset, holds.sigterm) as ran:
                rig.run(1)
            if not ran:
                continue
            kinds = [event[0] for event in holds.events_at_death]
            assert kinds in (["begin", "finish"], ["begin", "finish", "begin", "finish"]), (
                function.__name__,
                offset,
                holds.events_at_death,
            )
            outcomes.add(len(kinds))
            began = [step for kind, step, _ in rig.plan.heard if kind == "began"]
            ended = [detail.split(" ")[0] for kind, _, detail in rig.plan.heard if kind == "ended"]
            assert [first for first, _ in (span.split("-") for span in ended)] == [str(s) for s in began]
        assert outcomes == {2, 4}, (function.__name__, outcomes)  # the next capture not begun, and begun


def test_a_sigterm_as_a_window_opens_never_stops_a_profiler_torch_has_not_started(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With SIGTERM's handler installed before the window (--dynamic's session, a memory snapshot's copy
    still running), a SIGTERM whose handler ran as the profiler had just been made, before the hold that
    waits for torch's start began: it stopped a profiler torch had not started (torch raises there: "could
    not finalise the capture" logged as npuprof's failure, the record of a capture never begun written).
    Wherever the handler runs in the opening, torch's stop comes only after its start, and each capture
    begun is finished once."""
    function = CaptureController._open
    outcomes = set()
    for offset in offsets(function):
        plan = Timed()
        rig = Rig(plan)
        holds = SigtermHolds(monkeypatch, rig)
        rig.run(1)
        plan.open = True
        rig.c.replan()  # the window opens at the next boundary
        with contextlib.suppress(Died), handler_at(function, offset, holds.sigterm) as ran:
            rig.run(1)
        if not ran:
            continue
        calls = [call for call, _ in rig.backend.trace]
        where = (offset, rig.backend.trace, holds.events_at_death)
        assert calls in ([], ["prepare", "start", "stop"]), where
        assert [event[0] for event in holds.events_at_death] == (["begin", "finish"] if calls else []), where
        outcomes.add(len(calls))
    assert outcomes == {0, 3}  # handled before the profiler's making, and once torch started it


def test_a_sigterm_handled_as_a_windows_capture_stops_finds_it_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The window's end, inside step 3 (the timer's tick): a SIGTERM whose handler ran in the stop after it
    had begun (_stopping set) and before torch's stop(), held, found the capture being stopped by this very
    thread, left it to that stop, and the process died of SIGTERM as the handler ended: the capture was
    lost, "capturing". Wherever the handler runs in the stop, the capture is written, once, before the
    process dies."""
    function = CaptureController._stop_now
    written = set()
    for offset in offsets(function):
        plan = Timed()
        rig = Rig(plan)
        holds = SigtermHolds(monkeypatch, rig)
        rig.run(2)
        plan.open = True
        rig.c.tick()  # the window opens inside step 2
        rig.run(1)
        plan.open = False  # its end: the next tick closes it, inside step 3
        with contextlib.suppress(Died), handler_at(function, offset, holds.sigterm) as ran:
            rig.c.tick()
        if not ran:
            continue
        kinds = [event[0] for event in holds.events_at_death]
        assert kinds == ["begin", "finish"], (offset, holds.events_at_death)
        written.add(holds.events_at_death[1][1])
    assert written == {3}


class Timeout(Exception):
    """What the script's own signal handler raises (its request timeout; sys.exit is alike)."""


def _raises(signum: int, frame: Any) -> None:
    raise Timeout("request timed out")


def test_the_scripts_handler_that_raises_in_a_windows_stop_leaves_the_capture_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The script's own handler that raises (a timeout of its own; sys.exit on a second SIGTERM as the
    process finalises) ran in the controller's stop of a capture before torch's stop(), the only part that
    deferred it: its exception left the stop with the capture unwritten ("capturing") and torch's profiler
    enabled (at the interpreter's end, SIGSEGV). Wherever it runs in the stop, the capture is written and
    the profiler stopped, and what it raised reaches the script once the decision ends."""
    function = CaptureController._stop_now
    previous = signal.signal(signal.SIGUSR1, _raises)
    try:
        for offset in offsets(function):
            plan = Timed()
            rig = Rig(plan)
            rig.run(2)
            plan.open = True
            rig.c.tick()  # the window opens inside step 2
            rig.run(1)
            plan.open = False  # its end: the next tick closes it, inside step 3
            reached = False
            comes = functools.partial(signal.raise_signal, signal.SIGUSR1)
            try:
                with handler_at(function, offset, comes) as ran:
                    rig.c.tick()
            except Timeout:
                reached = True
            if not ran:
                continue
            where = (offset, rig.sink.events, rig.backend.trace)
            assert reached, where
            assert [event[:2] for event in rig.sink.events] == [("begin", 2), ("finish", 3)], where
            assert [call for call, _ in rig.backend.trace] == ["prepare", "start", "stop"], where
            assert rig.c.prof is None and rig.profiling == [True, False] and not rig.c.inside_a_decision()
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_the_scripts_handler_that_raises_as_a_window_opens_leaves_no_profiler_unstarted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The script's own handler that raises ran as a window opened, after the profiler was made and before
    torch started it (the capture's first files, the log line): its exception left a profiler never started
    as the capture in flight, and the exit's stop of it failed in torch ("could not finalise the capture",
    the record of a capture that recorded nothing). Wherever it runs in the opening, torch's stop comes
    only after its start, and what the handler raised reaches the script once the decision ends."""
    from npuprof.agent import log as log_module
    from npuprof.agent.signals import decision_begins, decision_ends

    previous = signal.signal(signal.SIGUSR1, _raises)
    try:
        for function in (CaptureController._open, CaptureController._before_start, CaptureController._start):
            for offset in offsets(function):
                plan = Timed()
                rig = Rig(plan)
                monkeypatch.setattr(log_module, "_current", rig.log)
                rig.run(1)
                plan.open = True
                rig.c.replan()  # the window opens at the next boundary
                reached = False
                comes = functools.partial(signal.raise_signal, signal.SIGUSR1)
                try:
                    with handler_at(function, offset, comes) as ran:
                        rig.run(1)
                except Timeout:
                    reached = True
                if not ran:
                    continue
                decision_begins()  # the exit's finalise (entry.Agent._at_exit)
                try:
                    rig.c.finish_at_exit("training ended before the capture's last step")
                finally:
                    decision_ends(exiting=True)
                where = (function.__name__, offset, rig.backend.trace, rig.sink.events)
                assert reached, where
                calls = [call for call, _ in rig.backend.trace]
                assert calls in ([], ["prepare", "start", "stop"]), where
                kinds = [event[0] for event in rig.sink.events]
                assert kinds == (["begin", "finish"] if calls else []), where
                assert not [line for line in rig.log.lines if line[0] == "error"], (where, rig.log.lines)
    finally:
        signal.signal(signal.SIGUSR1, previous)
