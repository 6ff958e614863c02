"""Which profiler action each step gets. The controller asks a plan: a torch-style schedule (the flags, or
a --config file), or, with --dynamic, a watcher of profiler_config.json (npuprof.agent.dynamic_plan)."""

from __future__ import annotations

import enum
from typing import Any, Protocol

from npuprof.config import ProfileConfig, Schedule


class Action(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3

    @property
    def recording(self) -> bool:
        return self in (Action.RECORD, Action.RECORD_AND_SAVE)


class CapturePlan(Protocol):
    def action_at(self, step: int) -> Action: ...

    def next_busy_step(self, after: int) -> int | None:
        """The first step > ``after`` whose action is not NONE (None: never again)."""
        ...

    def next_window_start(self, after: int) -> int | None:
        """The first step > ``after`` where a new capture window (warm-up or recording) begins."""
        ...

    def config_at(self, step: int) -> ProfileConfig | None:
        """The configuration of a capture whose window begins at ``step`` (None: the run's own)."""
        ...

    # A plan may also have (the controller looks them up): ``bind(controller)`` once,
    # ``training_started()`` when training starts, ``refresh(step)`` before each decision, and
    # ``hear(kind, step, detail)`` of what the controller did (began, ended, skipped).


def plan_for(cfg: ProfileConfig, run: dict[str, Any], log: Any) -> CapturePlan:
    """The run's plan: the watcher of --dynamic DIR, one time window (--delay/--duration), else the
    schedule."""
    if cfg.timed:
        from npuprof.agent.window_plan import WindowPlan

        return WindowPlan(cfg, log)
    if cfg.dynamic:
        from npuprof.agent.dynamic_plan import DynamicPlan

        return DynamicPlan(cfg, run, log)
    return SchedulePlan(cfg.schedule)


class SchedulePlan:
    """torch.profiler.schedule(wait, warmup, active, repeat, skip_first), exactly."""

    def __init__(self, schedule: Schedule) -> None:
        self.s = schedule
        self.cycle = schedule.wait + schedule.warmup + schedule.active

    def action_at(self, step: int) -> Action:
        s = self.s
        if s.off or step < s.skip_first:
            return Action.NONE
        step -= s.skip_first
        if s.repeat > 0 and step // self.cycle >= s.repeat:
            return Action.NONE
        mod = step % self.cycle
        if mod < s.wait:
            return Action.NONE
        if mod < s.wait + s.warmup:
            return Action.WARMUP
        return Action.RECORD if mod < self.cycle - 1 else Action.RECORD_AND_SAVE

    def next_busy_step(self, after: int) -> int | None:
        s = self.s
        if s.off:
            return None
        start = max(after + 1, s.skip_first)
        if s.repeat > 0 and start >= s.skip_first + self.cycle * s.repeat:
            return None
        # computed, never searched for: a --wait of 10^8 steps must not cost 10^8 iterations at a step
        if self.cycle <= s.wait:
            return None  # no warm-up or active step in a cycle
        k, mod = divmod(start - s.skip_first, self.cycle)
        return start if mod >= s.wait else s.skip_first + k * self.cycle + s.wait

    def next_window_start(self, after: int) -> int | None:
        # Window k begins at skip_first + k * cycle + wait; with repeat 0 and wait 0 every step is busy,
        # so this is computed, never searched for.
        s = self.s
        if s.off:
            return None
        first = max(after + 1, s.skip_first + s.wait)
        k = -(-(first - s.skip_first - s.wait) // self.cycle)
        if s.repeat > 0 and k >= s.repeat:
            return None
        return s.skip_first + k * self.cycle + s.wait

    def config_at(self, step: int) -> ProfileConfig | None:
        return None  # a schedule records every window with the run's configuration

    def recorded_steps(self, total_steps: int) -> list[list[int]]:
        """The captures (lists of steps) a run of ``total_steps`` steps yields; for reports and tests."""
        captures: list[list[int]] = []
        current: list[int] = []
        for step in range(total_steps):
            action = self.action_at(step)
            if action.recording:
                current.append(step)
            if action is Action.RECORD_AND_SAVE:
                captures.append(current)
                current = []
        return captures
