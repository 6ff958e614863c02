"""export-stacks reads through the one trace vocabulary: torch 1.8-1.10's category names give the same
stacks as torch 2.x's, and npuprof's own frames and threads never show in the user's flame graph."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from stacks_support import synthetic_cuda

from npuprof.reports import stacks as st

# torch 1.8-1.10's names for the categories torch 2.x writes (docs/formats.md, "Traces npuprof reads")
OLD = {"cpu_op": "Operator", "kernel": "Kernel", "cuda_runtime": "Runtime", "gpu_memcpy": "Memcpy"}


def _old_release(events: list[dict]) -> list[dict]:
    out = []
    for ev in events:
        ev = dict(ev)
        if ev.get("cat") in OLD:
            ev["cat"] = OLD[ev["cat"]]
        if ev.get("pid") == synthetic_cuda.GPU and "tid" in ev:
            ev["tid"] = f"stream {synthetic_cuda.STREAM}"  # old releases name GPU threads by string
        out.append(ev)
    return out


def _write(path: Path, events: list[dict]) -> Path:
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_an_old_release_trace_gives_the_device_stacks_of_the_new_names(tmp_path: Path) -> None:
    new_events = synthetic_cuda.events()
    old_events = _old_release(new_events)
    assert any(ev.get("cat") == "Kernel" for ev in old_events) and not any(
        ev.get("cat") in OLD for ev in old_events
    )
    new = st.folded_from_trace(_write(tmp_path / "new.json", new_events), "self_cuda_time_total")
    old = st.folded_from_trace(_write(tmp_path / "old.json", old_events), "self_cuda_time_total")
    # independently: every kernel and memcpy of the trace, by duration
    device_total = sum(ev["dur"] for ev in old_events if ev.get("cat") in ("Kernel", "Memcpy"))
    assert old.total_us == device_total == new.total_us
    assert old.values == new.values
    gemm = [path for path in old.values if path[-1] == "sm80_gemm_kernel<float>"]
    assert gemm and gemm[0][-2] == "aten::mm"  # under the operator that launched it, not the runtime call
    host_old = st.folded_from_trace(tmp_path / "old.json", "self_cpu_time_total")
    host_new = st.folded_from_trace(tmp_path / "new.json", "self_cpu_time_total")
    assert host_old.values == host_new.values


def _x(cat: str, name: str, ts: float, dur: float, tid: int) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur}


AGENT = "/venv/lib/python3.11/site-packages/npuprof/agent"


def test_npuprofs_own_frames_and_threads_stay_out_of_the_stacks(tmp_path: Path) -> None:
    """npuprof's wrappers of the script's calls pass their time to the caller; npuprof's own work at a step
    boundary (stepping torch's profiler) is one "[npuprof]" frame, not the script's; its threads are out."""
    events = [
        # the training thread: the user's step goes through npuprof's wrapper around Optimizer.step
        _x("python_function", "train.py(20): <module>", 0, 100, tid=1),
        _x("python_function", f"{AGENT}/steps.py(57): stepped", 10, 70, tid=1),
        _x("python_function", "torch/optim/sgd.py(80): step", 12, 40, tid=1),
        _x("cpu_op", "aten::add_", 20, 10, tid=1),
        # ... which then takes the step boundary: the controller steps torch's profiler, whose schedule
        # calls back into the backend (agent/backends/)
        _x("python_function", f"{AGENT}/controller.py(130): on_boundary", 60, 18, tid=1),
        _x("python_function", "torch/profiler/profiler.py(1150): step", 62, 14, tid=1),
        _x("python_function", f"{AGENT}/backends/torch_backend.py(70): <lambda>", 70, 5, tid=1),
        # npuprof's hand-over thread: Python frames only, npuprof's among them
        _x("python_function", "threading.py(1002): _bootstrap", 0, 500, tid=2),
        _x("python_function", f"{AGENT}/capture.py(300): _hand_over", 5, 400, tid=2),
        # a user's thread with Python frames only stays
        _x("python_function", "loader.py(9): prefetch", 0, 30, tid=3),
    ]
    folded = st.folded_from_trace(_write(tmp_path / "t.json", events), "self_cpu_time_total")
    frames = {frame for path in folded.values for frame in path}
    assert not any("npuprof/" in frame or "profiler.py" in frame for frame in frames), frames
    assert ("train.py(20):_<module>", "torch/optim/sgd.py(80):_step", "aten::add_") in folded.values
    # the wrapper's own time (70 - 40 - 18 us) goes to its caller (whose own is 100 - 70); the boundary's
    # 18 us, torch's profiler step inside it included, to npuprof; busy time of threads 1 and 3 only
    assert folded.values[("train.py(20):_<module>",)] == (100 - 70) + (70 - 40 - 18)
    assert folded.values[("train.py(20):_<module>", "[npuprof]")] == 18
    assert folded.values[("train.py(20):_<module>", "torch/optim/sgd.py(80):_step")] == 40 - 10
    assert folded.total_us == 100 + 30


MARKS = "/venv/lib/python3.11/site-packages/npuprof/marks.py"


def test_npuprof_ranges_show_no_frame_of_npuprofs_marks(tmp_path: Path) -> None:
    """``with npuprof.range("fwd"):`` and ``@npuprof.range("bwd")`` showed marks.py's ``__enter__``,
    ``range_start``, ``__exit__`` and the decorator's ``ranged`` as frames of the script's graph. As for the
    step wrapper: the decorator's frame passes its time to its caller, opening and ending a range is one
    "[npuprof]" frame; the ranges hold what ran in them. Times in µs."""
    events = [
        _x("python_function", "train.py(20): <module>", 0, 1000, tid=1),
        _x("python_function", f"{MARKS}(114): __enter__", 100, 12, tid=1),
        _x("python_function", f"{MARKS}(63): range_start", 101, 10, tid=1),
        _x("python_function", "torch/_ops.py(1089): __call__", 103, 5, tid=1),
        _x("user_annotation", "fwd", 106, 794, tid=1),  # [106, 900)
        _x("cpu_op", "aten::linear", 200, 600, tid=1),
        _x("python_function", f"{MARKS}(140): __exit__", 890, 8, tid=1),
        _x("python_function", f"{MARKS}(80): range_end", 891, 6, tid=1),
        # the decorator's wrapper around the script's function
        _x("python_function", f"{MARKS}(207): ranged", 920, 70, tid=1),
        _x("python_function", f"{MARKS}(63): range_start", 921, 5, tid=1),
        _x("user_annotation", "bwd", 926, 60, tid=1),  # [926, 986)
        _x("python_function", "train.py(9): backward", 927, 55, tid=1),
        _x("cpu_op", "aten::mm", 930, 40, tid=1),
        _x("python_function", f"{MARKS}(80): range_end", 983, 2, tid=1),
        # a thread of the script's with Python frames only, npuprof.mark's among them, stays
        _x("python_function", "loader.py(9): prefetch", 0, 30, tid=3),
        _x("python_function", f"{MARKS}(54): mark", 10, 3, tid=3),
    ]
    folded = st.folded_from_trace(_write(tmp_path / "t.json", events), "self_cpu_time_total")
    module, npuprof = "train.py(20):_<module>", "[npuprof]"
    # __enter__ up to the range's start; the range's own time less the operator and __exit__; the wrapper's
    # own time (70 less range_start and bwd) goes to the module
    enter, opened = 106 - 100, 5
    expected = {
        (module,): 1000 - enter - 794 - opened - 60,
        (module, npuprof): enter + opened,
        (module, "fwd"): 794 - 600 - 8,
        (module, "fwd", npuprof): 8,
        (module, "fwd", "aten::linear"): 600,
        (module, "bwd"): 60 - 55 - 2,
        (module, "bwd", npuprof): 2,
        (module, "bwd", "train.py(9):_backward"): 55 - 40,
        (module, "bwd", "train.py(9):_backward", "aten::mm"): 40,
        ("loader.py(9):_prefetch",): 30 - 3,
        ("loader.py(9):_prefetch", npuprof): 3,
    }
    assert folded.values == expected, folded.values


def test_npuprof_ranges_leave_the_call_stacks_of_operators_and_torch_npus_stacks(tmp_path: Path) -> None:
    """The same frames in an operator's "Call stack" (torch_npu's trace_view.json) and in the stacks file
    torch_npu's export_stacks writes during the run."""
    from npuprof.agent.capture_exports import _npuprof_work_folded

    def op(name: str, ts: float, dur: float, *stack: str) -> dict:
        return {**_x("cpu_op", name, ts, dur, tid=1), "args": {"Call stack": ";".join(stack)}}

    events = [
        op("aten::linear", 0, 50, f"{MARKS}(114): __enter__", "train.py(20): <module>"),
        op("aten::mm", 60, 40, "train.py(9): backward", f"{MARKS}(207): ranged", "train.py(20): <module>"),
    ]
    folded = st.folded_from_trace(_write(tmp_path / "t.json", events), "self_cpu_time_total")
    module = "train.py(20):_<module>"
    assert folded.values == {
        (module, "aten::linear"): 50,
        (module, "train.py(9):_backward", "aten::mm"): 40,
    }, folded.values
    written = (
        f"{module};{MARKS}(114):___enter__;{MARKS}(63):_range_start;aten::empty 5\n"
        f"{module};{MARKS}(207):_ranged;train.py(9):_backward;aten::mm 40\n"
        f"{module};{MARKS}(207):_ranged;{MARKS}(63):_range_start 3\n"
    ).encode()
    assert _npuprof_work_folded(written).decode().splitlines() == [
        f"{module};[npuprof] {5 + 3}",
        f"{module};train.py(9):_backward;aten::mm 40",
    ]
