"""export-stacks and memory-timeline keep only the events they read from a trace: a --profile-memory
--with-stack capture is a third [memory] instants and a third spans, and keeping both for either command
held ~3x the trace's size in memory (bench/README.md). In-process, a small trace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from npuprof.reports import memory_timeline as mt
from npuprof.reports import stacks as st
from npuprof.reports import trace_events


def _trace(path: Path) -> Path:
    events: list[dict] = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}}]
    allocated = 1 << 20
    for k in range(20):
        t = 100.0 * k
        events.append(
            {
                "ph": "X",
                "cat": "python_function",
                "name": "train.py(3): step",
                "pid": 1,
                "tid": 1,
                "ts": t,
                "dur": 80.0,
                "args": {"Python id": 2 * k, "Python parent id": 0},
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::mm",
                "pid": 1,
                "tid": 1,
                "ts": t + 10,
                "dur": 50.0,
                "args": {"External id": k + 1},
            }
        )
        for sign in (1, -1):
            allocated += sign * 4096
            events.append(
                {
                    "ph": "i",
                    "s": "t",
                    "cat": "cpu_instant_event",
                    "name": "[memory]",
                    "pid": 1,
                    "tid": 1,
                    "ts": t + 20 + 10 * (sign < 0),
                    "args": {
                        "Total Allocated": allocated,
                        "Total Reserved": 1 << 22,
                        "Bytes": sign * 4096,
                        "Device Type": 1,
                        "Device Id": 0,
                    },
                }
            )
    path.write_text(json.dumps({"traceEvents": events}))
    return path


@pytest.fixture
def kept(monkeypatch: pytest.MonkeyPatch) -> list[list]:
    """The events each trace_events.load returned, as loaded."""
    loads: list[list] = []
    real = trace_events.load_trace

    def recording(path, keep=None, **options):
        loaded = real(path, keep=keep, **options)
        loads.append(list(loaded.events))
        return loaded

    monkeypatch.setattr(trace_events, "load_trace", recording)
    return loads


def test_memory_timeline_keeps_only_the_memory_events(tmp_path: Path, kept: list[list]) -> None:
    trace = _trace(tmp_path / "t.pt.trace.json")
    data = mt.from_trace(trace)
    assert len(kept) == 1 and len(kept[0]) == 40, [ev.name for ev in kept[0]]
    assert {ev.name for ev in kept[0]} == {"[memory]"}
    assert data.max_allocated == (1 << 20) + 4096


def test_export_stacks_leaves_the_memory_instants_out(tmp_path: Path, kept: list[list]) -> None:
    trace = _trace(tmp_path / "t.pt.trace.json")
    folded = st.folded_from_trace(trace)
    assert len(kept) == 1 and "[memory]" not in {ev.name for ev in kept[0]}
    assert len(kept[0]) == 41  # the 40 spans and the process name
    # the stacks of every event the reports read (memory instants included) are the same
    assert folded.text() == st.folded_from_events(trace_events.load_events(trace)).text()


def test_each_frame_name_is_sanitised_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A trace's frames are a few names met thousands of times: each is sanitised once (on the 100 MB
    traces of bench/reports_bench.py, sanitising every event's name took 15-30% of export-stacks' CPU)."""
    trace = _trace(tmp_path / "t.pt.trace.json")
    shown: list[str] = []
    real = st.printable
    monkeypatch.setattr(st, "printable", lambda text: shown.append(text) or real(text))
    getattr(st.sanitise_frame, "cache_clear", lambda: None)()
    folded = st.folded_from_trace(trace)
    assert sorted(shown) == sorted(set(shown)) and len(shown) == 2, shown  # the frame and the operator
    assert set(folded.values) == {("train.py(3):_step",), ("train.py(3):_step", "aten::mm")}
