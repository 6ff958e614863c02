"""--with-stack on Python 3.12.0-3.12.4, where torch's Python tracer also takes sys.monitoring's profiler
slot (a CALL event) while it records, and npuprof frees that slot as each capture starts so that a
cProfile of the job's can take it. Shown on any Python with a sys.monitoring that behaves as 3.12's: its
free_tool_id frees the name only, and leaves the tool's events and callbacks as they were, which only a
tool in use may change."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from npuprof.agent.log import AgentLog
from npuprof.agent.profile_hook import TORCH_MONITORING_TOOL, ProfileHookWatch

PROFILER_ID = 2
CALL = 1 << 4


class Monitoring312:
    """sys.monitoring's profiler slot as Python 3.12 keeps it."""

    PROFILER_ID = PROFILER_ID
    events = SimpleNamespace(CALL=CALL, NO_EVENTS=0, PY_START=1)

    def __init__(self) -> None:
        self.name: str | None = None
        self.event_set = 0
        self.callbacks: dict[int, Any] = {}

    def get_tool(self, tool: int) -> str | None:
        return self.name if tool == PROFILER_ID else None

    def use_tool_id(self, tool: int, name: str) -> None:
        if self.name is not None:
            raise ValueError("tool 2 is already in use")
        self.name = name

    def free_tool_id(self, tool: int) -> None:
        self.name = None  # 3.12: the events and callbacks stay

    def _in_use(self) -> None:
        if self.name is None:
            raise ValueError("tool 2 is not in use")

    def register_callback(self, tool: int, event: int, func: Any) -> Any:
        self._in_use()
        old, self.callbacks[event] = self.callbacks.get(event), func
        return old

    def set_events(self, tool: int, events: int) -> None:
        self._in_use()
        self.event_set = events

    def get_events(self, tool: int) -> int:
        return self.event_set

    def torch_starts(self) -> None:  # torch's registerMonitoringCallback
        self.use_tool_id(PROFILER_ID, TORCH_MONITORING_TOOL)
        self.register_callback(PROFILER_ID, CALL, "torch's c_call_callback")
        self.set_events(PROFILER_ID, CALL)

    def torch_stops(self) -> None:  # torch's unregisterMonitoringCallback: only on a slot named its own
        if self.get_tool(PROFILER_ID) != TORCH_MONITORING_TOOL:
            return
        self.register_callback(PROFILER_ID, CALL, None)
        self.set_events(PROFILER_ID, 0)
        self.free_tool_id(PROFILER_ID)


@pytest.fixture
def monitoring(monkeypatch: pytest.MonkeyPatch) -> Monitoring312:
    fake = Monitoring312()
    monkeypatch.setattr(sys, "monitoring", fake, raising=False)
    return fake


def capture(watch: ProfileHookWatch, monitoring: Monitoring312, during: Any = None) -> None:
    before = watch.before_start(True)
    monitoring.torch_starts()
    watch.started(before, True)
    if during is not None:
        during()
    monitoring.torch_stops()
    watch.stopped()


def test_torchs_event_is_not_left_on_the_freed_slot_after_the_capture(
    tmp_path: Path, monitoring: Monitoring312
) -> None:
    """The slot freed, torch's stop no longer found its name there and left its CALL event and callback:
    every call of the rest of the job went through torch's callback (measured on 3.12.1: a loop of calls
    twice as slow after the first capture). After the capture the slot is as the job had it."""
    watch = ProfileHookWatch(AgentLog(str(tmp_path / "log"), "agent"))
    for _ in range(2):
        capture(watch, monitoring)
        assert monitoring.name is None
        assert monitoring.get_events(PROFILER_ID) == 0, "torch's CALL event left on after the capture"
        assert monitoring.callbacks.get(CALL) is None


def test_a_jobs_tool_that_took_the_freed_slot_keeps_it(tmp_path: Path, monitoring: Monitoring312) -> None:
    """A cProfile the job enabled inside the capture and still runs when it ends keeps its slot, its
    events and its callbacks."""
    watch = ProfileHookWatch(AgentLog(str(tmp_path / "log"), "agent"))

    def job_enables_cprofile() -> None:
        monitoring.use_tool_id(PROFILER_ID, "cProfile")
        monitoring.register_callback(PROFILER_ID, CALL, "cProfile's")
        monitoring.set_events(PROFILER_ID, CALL | 1)

    capture(watch, monitoring, during=job_enables_cprofile)
    assert monitoring.name == "cProfile"
    assert monitoring.get_events(PROFILER_ID) == CALL | 1
    assert monitoring.callbacks[CALL] == "cProfile's"


def test_a_slot_npuprof_did_not_free_is_left_alone(tmp_path: Path, monitoring: Monitoring312) -> None:
    """A tool of the job's that held the slot before the capture (torch then took none) is not touched."""
    watch = ProfileHookWatch(AgentLog(str(tmp_path / "log"), "agent"))
    monitoring.use_tool_id(PROFILER_ID, "coverage.py")
    monitoring.set_events(PROFILER_ID, CALL)
    watch.started(watch.before_start(True), True)
    watch.stopped()
    assert monitoring.name == "coverage.py" and monitoring.get_events(PROFILER_ID) == CALL
