"""export-stacks holds a trace's events in less memory (interned strings, args it never reads dropped,
analyse's read blocks), with the same stacks as when every event is held whole."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

from npuprof.reports import stacks as st
from npuprof.reports.trace_events import load, span_or_flow

FIXTURE = Path(__file__).parent / "fixtures" / "ascend-real" / "trace_view.json"
PID, TID, CS_TID, GPU = 7, 7, 8, 99


def _x(cat: str, name: str, ts: float, dur: float, tid: int = TID, pid: int = PID, args: str = "") -> str:
    body = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    text = json.dumps(body)
    return text[:-1] + f', "args": {args}}}' if args else text


def _tricky_trace() -> str:
    """Ties the args decide (Python ids, an External id written with a JSON escape), an mstx mark (no
    category, told by its args), operators' Call stacks, launches linked by correlation, flow and External
    id, args of keys no stack reads."""
    events = [
        json.dumps({"ph": "M", "name": "process_name", "pid": GPU, "args": {"name": "GPU 0"}}),
        _x("user_annotation", "ProfilerStep#1", 0, 1000),
        # callee first in the file: "Python parent id" orders them
        _x("python_function", "b.py(2): inner", 10, 300, args='{"Python id": 2, "Python parent id": 1}'),
        _x("python_function", "a.py(1): outer", 10, 300, args='{"Python id": 1, "Python parent id": null}'),
        # callee first again, its External id's key escaped: "External\u0020id"
        _x("cpu_op", "aten::_to_copy", 400, 100, args='{"External\\u0020id": 6}'),
        _x("cpu_op", "aten::to", 400, 100, args='{"External id": 5, "Sequence number": 3}'),
        _x("cpu_op", "aten::mm", 520, 200, args='{"External id": 9, "Sequence number": 4}'),
        _x("cuda_runtime", "cudaLaunchKernel", 530, 20, args='{"correlation": 31}'),
        _x("cuda_runtime", "cudaMemcpyAsync", 560, 20, args='{"Sequence number": 1}'),
        _x("", "mark_in_the_step", 600, 50, args='{"event_type": "marker", "Sequence number": 1}'),
        _x("cpu_op", "aten::add", 800, 50, args='{"External id": 12, "Fwd thread id": 0}'),
        json.dumps({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 40, "pid": PID, "tid": TID, "ts": 565}),
        json.dumps(
            {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 40, "pid": GPU, "tid": 1, "ts": 900, "bp": "e"}
        ),
        _x("kernel", "gemm", 700, 80, 1, GPU, '{"correlation": 31}'),
        _x("gpu_memcpy", "Memcpy HtoD", 900, 30, 1, GPU, '{"Sequence number": 2}'),
        _x("kernel", "add_kernel", 950, 10, 1, GPU, '{"External id": 12}'),
        # a thread without python_function events: its operators' Call stacks are its Python frames
        _x("cpu_op", "aten::relu", 100, 40, CS_TID, args='{"Call stack": "m.py(9): fwd;train.py(3): main"}'),
        _x("cpu_op", "aten::empty", 150, 5, CS_TID, args='{"Sequence number": -1, "Fwd thread id": 0}'),
    ]
    return '{"traceEvents": [' + ",\n".join(events) + "]}"


def _held_whole(path: Path, metric: str) -> st.FoldedStacks:
    """The stacks of the trace's events as the reader gives them, none slimmed."""
    return st.folded_from_events(load(path, keep=span_or_flow).events, metric)


def test_slimmed_events_give_the_stacks_of_the_events_held_whole(tmp_path: Path) -> None:
    trace = tmp_path / "tricky.pt.trace.json"
    trace.write_text(_tricky_trace())
    for metric in (st.HOST_METRIC, "self_cuda_time_total"):
        whole, slim = _held_whole(trace, metric), st.folded_from_trace(trace, metric)
        assert slim.values == whole.values, metric
        assert slim.notes == whole.notes and slim.has_python_frames == whole.has_python_frames
    host = st.folded_from_trace(trace).values
    # what the args decide, counted by hand: the callers above their callees, the mark in no stack, the
    # Call stack frames above the operator
    assert host[("ProfilerStep", "a.py(1):_outer", "b.py(2):_inner")] == 300
    assert host[("ProfilerStep", "aten::to", "aten::_to_copy")] == 100
    assert host[("ProfilerStep",)] == 1000 - 300 - 100 - 200 - 50
    assert not any("mark_in_the_step" in frame for path in host for frame in path)
    assert host[("train.py(3):_main", "m.py(9):_fwd", "aten::relu")] == 40
    device = st.folded_from_trace(trace, "self_cuda_time_total").values
    assert device == {
        ("ProfilerStep", "aten::mm", "gemm"): 80,
        ("ProfilerStep", "aten::mm", "Memcpy_HtoD"): 30,
        ("ProfilerStep", "aten::add", "add_kernel"): 10,
    }


def test_a_flow_ending_in_a_step_event_links_its_task_too(tmp_path: Path) -> None:
    """A launch flow whose end is written as a step ("t": one of torch's flow phases, docs/formats.md) links
    the memcpy to aten::mm as its "f" does, as analyse reads it (helper-368: export-stacks' reader leaving
    out "t" events failed no test)."""
    trace = tmp_path / "t_flow.pt.trace.json"
    trace.write_text(_tricky_trace().replace('{"ph": "f", "cat": "ac2g"', '{"ph": "t", "cat": "ac2g"'))
    device = st.folded_from_trace(trace, "self_cuda_time_total").values
    assert device[("ProfilerStep", "aten::mm", "Memcpy_HtoD")] == 30


def _repeated_fixture(path: Path, copies: int) -> None:
    """torch_npu's real trace_view.json, its events repeated ``copies`` times, each copy 20 ms later."""
    events = json.loads(FIXTURE.read_text())
    meta = [ev for ev in events if ev.get("ph") == "M"]
    body = [ev for ev in events if ev.get("ph") != "M"]
    out = list(meta)
    for k in range(copies):
        for ev in body:
            shifted = dict(ev)
            if "ts" in shifted:  # string µs with 3 decimals: whole ms added keep the text exact
                whole, _, frac = shifted["ts"].partition(".")
                shifted["ts"] = f"{int(whole) + 20_000 * k}.{frac}" if frac else str(int(whole) + 20_000 * k)
            out.append(shifted)
    path.write_text(json.dumps(out))


def test_stacks_of_a_trace_take_about_its_size_in_memory(tmp_path: Path) -> None:
    """A 200 MB trace took 823 MB (its events held whole, 16 MB decoded at a time): ~4x its size. Python's
    allocations while the stacks are made stay under 2.5 times the trace's size (1.6 here; 6.9 before)."""
    trace = tmp_path / "trace_view.json"
    _repeated_fixture(trace, 8)
    size = trace.stat().st_size
    tracemalloc.start()
    try:
        folded = st.folded_from_trace(trace)
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert folded.values
    assert peak < 2.5 * size, f"{peak / 1e6:.1f} MB for a {size / 1e6:.1f} MB trace"
