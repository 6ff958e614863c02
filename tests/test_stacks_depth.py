"""export-stacks on very deep nesting: a folded line holds its whole path, so 50,000 nested spans wrote
~1.25e9 frames (11 GB of memory, minutes, never finished). Paths are cut at MAX_DEPTH frames into one frame
that keeps the time below it."""

from __future__ import annotations

import json
from pathlib import Path

from npuprof.reports import stacks as st


def _nested_trace(path: Path, depth: int) -> tuple[Path, float]:
    """``depth`` operators each inside the one before, under a step; returns the trace and its host time
    (the step's length: everything in it is nested)."""
    events = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": f"op{i % 7}",
            "pid": 1,
            "tid": 1,
            "ts": 10 + i,
            "dur": 4 * depth - 2 * i,
        }
        for i in range(depth)
    ]
    step = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "pid": 1, "tid": 1, "ts": 0}
    step["dur"] = 4 * depth + 20
    path.write_text(json.dumps({"traceEvents": [step, *events]}))
    return path, float(step["dur"])


def test_a_trace_nested_far_deeper_than_the_limit_is_cut_there_and_keeps_its_time(tmp_path: Path) -> None:
    trace, host_us = _nested_trace(tmp_path / "deep.pt.trace.json", 20_000)
    folded = st.folded_from_trace(trace)
    assert abs(folded.total_us - host_us) < 1e-6 * host_us
    longest = max(len(path) for path in folded.values)
    assert longest == st.MAX_DEPTH + 1, longest  # the step and MAX_DEPTH - 1 operators, then the folded frame
    deepest = [path for path in folded.values if path[-1] == st.DEEPER_FRAME]
    assert len(deepest) == 1 and len(folded.values) == st.MAX_DEPTH + 1
    # below the cut: 20,000 - 1,023 operators, each 2 µs of its own, the innermost all its 2*20,000+2 µs
    below = (20_000 - st.MAX_DEPTH + 1) * 2 - 2 + (4 * 20_000 - 2 * 19_999)
    assert folded.values[deepest[0]] == below
    assert any(str(st.MAX_DEPTH) in note and st.DEEPER_FRAME in note for note in folded.notes), folded.notes
    assert len(folded.text().splitlines()) == st.MAX_DEPTH + 1


def test_a_trace_within_the_limit_is_folded_whole_without_a_note(tmp_path: Path) -> None:
    trace, host_us = _nested_trace(tmp_path / "shallow.pt.trace.json", 300)
    folded = st.folded_from_trace(trace)
    assert folded.total_us == host_us
    assert max(len(path) for path in folded.values) == 301
    assert not any(st.DEEPER_FRAME in path for path in folded.values)
    assert not any(st.DEEPER_FRAME in note for note in folded.notes), folded.notes


def _span(cat: str, name: str, ts: float, dur: float, pid: int = 1, tid: int = 1, **args: object) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def test_a_kernel_launched_below_the_cut_keeps_the_folded_frame_in_its_device_path(tmp_path: Path) -> None:
    """A launch below MAX_DEPTH is folded into the DEEPER_FRAME node, which was then taken for the launch
    itself (a runtime call: its kernels go to its caller): the kernel's device path skipped the folded
    frame and named the operator at the cut as its launcher, unlike the note and the host paths."""
    depth, launches = 1_500, 3
    span = 10 * launches + 10
    events: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
        _span("user_annotation", "ProfilerStep#0", 0, span + 2 * depth + 10),
    ]
    events += [_span("cpu_op", f"op{i}", 1 + i, span + 2 * (depth - i)) for i in range(depth)]
    for k in range(launches):
        ts = 1 + depth + 10 * k
        events.append(_span("cuda_runtime", "cudaLaunchKernel", ts, 2, correlation=k + 1))
        events.append(_span("kernel", "k", ts + 3, 5, pid=0, tid=7, correlation=k + 1, stream=7, device=0))
    trace = tmp_path / "deep_launch.pt.trace.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    device = st.folded_from_trace(trace, metric="self_cuda_time_total")
    host = st.folded_from_trace(trace)
    assert list(device.values.values()) == [5.0 * launches]
    (path,) = device.values
    assert path[-2:] == (st.DEEPER_FRAME, "k"), path[-3:]
    cut = next(p for p in host.values if p[-1] == st.DEEPER_FRAME)
    assert path[:-1] == cut
