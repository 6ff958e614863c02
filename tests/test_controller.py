"""The CaptureController's seams, driven in-process with a recording backend (no torch profiler): a plan
that changes its mind and wakes the controller (replan), a configuration per capture, windows skipped
without a search, and the disk guard."""

from __future__ import annotations

import dataclasses
from typing import Any

from npuprof.agent.controller import NEVER, CaptureController
from npuprof.agent.log import AgentLog
from npuprof.agent.schedule import Action
from npuprof.config import ProfileConfig


class Prof:
    """torch.profiler's step/stop contract: each step() asks the schedule; RECORD_AND_SAVE -> trace ready."""

    def __init__(self, schedule: Any, on_trace_ready: Any) -> None:
        self.schedule = schedule
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self.current_action = Action.NONE

    def start(self) -> None:
        pass

    def step(self) -> None:
        previous = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        if previous is Action.RECORD_AND_SAVE:
            self.on_trace_ready(self)

    def stop(self) -> None:
        if self.current_action.recording:
            self.on_trace_ready(self)


class Backend:
    name = "fake"
    device = "cpu"
    writes_own_layout = False

    def __init__(self) -> None:
        self.configs: list[ProfileConfig] = []

    def ignored_flags(self, cfg: ProfileConfig) -> list[str]:
        return []

    def create_profiler(self, cfg: ProfileConfig, schedule: Any, on_trace_ready: Any) -> Prof:
        self.configs.append(cfg)
        return Prof(schedule, on_trace_ready)

    def align(self, prof: Prof, step: int) -> None:
        prof.step_num = step
        prof.current_action = prof.schedule(step)


class Sink:
    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.skipped_into: list[str] = []  # the directory each skipped capture was to write into

    def begin(self, step: int, cfg: ProfileConfig) -> None:
        self.events.append(("begin", step, cfg.record_shapes))

    def finish(
        self,
        prof: Any,
        last_step: int,
        detail: str = "",
        status: str = "complete",
        last_partial: bool = False,
        ending_since: float | None = None,
    ) -> None:
        self.events.append(("finish", last_step, status))

    def abandon(self, detail: str) -> None:
        self.events.append(("abandon", detail))

    def skipped(self, step: int, detail: str, output: str) -> None:
        self.events.append(("skipped", step))
        self.skipped_into.append(output)


class WindowPlan:
    """Records steps [start, start + active) with a configuration of its own; replaceable at run time."""

    def __init__(self, start: int | None, active: int, cfg: ProfileConfig | None = None) -> None:
        self.start, self.active, self.cfg = start, active, cfg
        self.asked = 0

    def action_at(self, step: int) -> Action:
        self.asked += 1
        if self.start is None or not self.start <= step < self.start + self.active:
            return Action.NONE
        return Action.RECORD_AND_SAVE if step == self.start + self.active - 1 else Action.RECORD

    def next_busy_step(self, after: int) -> int | None:
        if self.start is None or after >= self.start + self.active - 1:
            return None
        return max(after + 1, self.start)

    def next_window_start(self, after: int) -> int | None:
        return self.start if self.start is not None and self.start > after else None

    def config_at(self, step: int) -> ProfileConfig | None:
        return self.cfg


def _controller(plan: Any, rank: int | None = 0, cfg: ProfileConfig | None = None, space: Any = None):
    backend, sink = Backend(), Sink()
    controller = CaptureController(
        cfg or ProfileConfig(),
        plan,
        backend_factory=lambda: backend,
        sink_factory=lambda b: sink,
        log=AgentLog(None, "test"),
        rank_fn=lambda: rank,
        space=space,
    )
    controller.arm()
    return controller, backend, sink


def _run(controller: CaptureController, steps: int) -> None:
    for _ in range(steps):
        controller.on_boundary()


def test_an_idle_plan_costs_nothing_until_replan_wakes_the_controller() -> None:
    plan = WindowPlan(None, 2)
    controller, backend, sink = _controller(plan)
    assert controller.next_check == NEVER
    _run(controller, 5)
    asked = plan.asked
    _run(controller, 100)
    assert plan.asked == asked  # never asked again: the step path is a counter and a comparison
    plan.start, plan.cfg = 110, ProfileConfig(record_shapes=True)  # a config watcher's thread
    controller.replan()
    _run(controller, 20)
    assert sink.events == [("begin", 110, True), ("finish", 111, "complete")]
    assert backend.configs[-1].record_shapes  # the capture's own configuration reached the profiler


def test_a_replan_during_a_decision_is_not_lost() -> None:
    plan = WindowPlan(None, 1)
    original = plan.next_busy_step
    controllers: list[CaptureController] = []

    def replanned_meanwhile(after: int) -> int | None:
        answer = original(after)  # the controller is deciding with the old plan ...
        if controllers:
            plan.start = after + 3  # ... while the watcher changes it and wakes the controller
            plan.next_busy_step = original  # type: ignore[method-assign]
            controllers[0].replan()
        return answer

    plan.next_busy_step = replanned_meanwhile  # type: ignore[method-assign]
    controller, _, sink = _controller(plan)
    controllers.append(controller)
    controller.replan()  # the arm's decision said NEVER: wake it once to reach the racing decision
    _run(controller, 10)
    assert sink.events[:1] == [("begin", 4, False)]


def test_an_unselected_rank_never_asks_again_and_a_busy_plan_is_never_searched() -> None:
    cfg = dataclasses.replace(ProfileConfig(), ranks=[1])

    class AlwaysBusy(WindowPlan):
        def action_at(self, step: int) -> Action:
            self.asked += 1
            return Action.RECORD

        def next_busy_step(self, after: int) -> int | None:
            return after + 1

        def next_window_start(self, after: int) -> int | None:
            return after + 1

    plan = AlwaysBusy(0, 1)
    controller, _, sink = _controller(plan, rank=0, cfg=cfg)
    _run(controller, 1000)
    assert plan.asked <= 2 and controller.next_check == NEVER and sink.events == []


def test_low_disk_skips_a_window_and_stops_one_in_flight() -> None:
    class Space:
        ok = True

        def ok_for(self, path: str) -> bool:
            return self.ok

        def describe(self, path: str) -> str:
            return "only 1 MiB free"

        def fix(self, path: str) -> str:
            return "--min-free-space 0 turns the check off"

    space = Space()
    plan = WindowPlan(2, 5)
    controller, _, sink = _controller(plan, space=space)
    _run(controller, 4)  # steps 2, 3, 4 recorded
    space.ok = False
    _run(controller, 1)
    assert sink.events == [("begin", 2, False), ("finish", 4, "incomplete")]  # step 5 not begun in the trace
    plan.start = 20
    controller.replan()
    _run(controller, 20)
    assert sink.events[-1] == ("skipped", 20)


class Tick(Exception):
    """The script's own exception, raised by its signal handler."""


def test_the_scripts_signal_handler_exception_reaches_the_script_and_profiling_goes_on() -> None:
    """A signal handler of the script (or torch's DataLoader SIGCHLD check) that raises while npuprof's code
    runs: the exception is the script's, not an npuprof failure (found by an adversary with SIGALRM)."""
    import signal

    def handler(signum: int, frame: Any) -> None:
        raise Tick

    previous = signal.signal(signal.SIGUSR1, handler)
    try:
        plan = WindowPlan(2, 2)
        controller, backend, sink = _controller(plan)
        original = backend.create_profiler

        def create_and_get_signalled(*args: Any) -> Prof:
            signal.raise_signal(signal.SIGUSR1)  # delivered here, inside npuprof's step
            return original(*args)

        backend.create_profiler = create_and_get_signalled  # type: ignore[method-assign]
        seen = 0
        for _ in range(8):
            try:
                controller.on_boundary()
            except Tick:
                seen += 1
                backend.create_profiler = original  # type: ignore[method-assign]
        assert seen == 1
        assert controller.enabled  # not taken for an internal error
        assert ("begin", 2, False) in sink.events or ("begin", 3, False) in sink.events
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_a_real_failure_of_npuprofs_own_code_still_stops_profiling_quietly() -> None:
    plan = WindowPlan(2, 2)
    controller, backend, _sink = _controller(plan)

    def broken(*args: Any) -> Prof:
        raise RuntimeError("profiler cannot start")

    backend.create_profiler = broken  # type: ignore[method-assign]
    _run(controller, 6)  # never raises into the script
    assert not controller.enabled
