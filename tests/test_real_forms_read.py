"""The readers (analyse, export-stacks, memory-timeline) take every real form of a trace: torch_npu's
trace_view.json (a bare JSON array, string epoch times with nanosecond decimals; the real file of
tests/fixtures/ascend-real, see its SOURCE.md), Kineto's object form, gzipped or not, under any name,
and torch 1.8-1.10's category names. Every expected value is computed here from the input file (json and
Decimal), never read back from npuprof's code."""

from __future__ import annotations

import csv
import gzip
import json
import os
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from _forked_cli import npuprof  # report commands forked from a process that imported them: see its doc

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "ascend-real" / "trace_view.json"


# ---- independent helpers (json + Decimal only) -----------------------------------------------------------
def _raw() -> list[dict[str, Any]]:
    return json.loads(FIXTURE.read_text())


def _process_names(events: list[dict[str, Any]]) -> dict[Any, str]:
    return {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}


def _thread_names(events: list[dict[str, Any]]) -> dict[tuple[Any, Any], str]:
    return {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in events
        if e.get("ph") == "M" and e["name"] == "thread_name"
    }


def _pid_of(events: list[dict[str, Any]], name: str) -> Any:
    (pid,) = [pid for pid, n in _process_names(events).items() if n == name]
    return pid


def _union(spans: list[tuple[Decimal, Decimal]]) -> Decimal:
    total, end = Decimal(0), None
    start = None
    for s, e in sorted(spans):
        if end is None or s > end:
            if end is not None:
                total += end - start
            start, end = s, e
        else:
            end = max(end, e)
    return total + (end - start if end is not None else 0)


def _span(e: dict[str, Any]) -> tuple[Decimal, Decimal]:
    ts = Decimal(str(e["ts"]))
    return ts, ts + Decimal(str(e["dur"]))


def _folded(text: str) -> dict[tuple[str, ...], int]:
    out = {}
    for line in text.splitlines():
        path, value = line.rsplit(" ", 1)
        out[tuple(path.split(";"))] = int(value)
    return out


def _x(
    name: str, ts: Any, dur: float, pid: Any = 1, tid: Any = 1, cat: str | None = None, **args: Any
) -> dict:
    event = {"ph": "X", "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}
    if cat is not None:
        event["cat"] = cat
    return event


def _meta(pid: Any, name: str) -> dict:
    return {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}


def _write(path: Path, doc: Any, gz: bool = False) -> Path:
    data = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


# ---- 1. one reader for every form, times kept to the nanosecond -----------------------------------------
def test_the_real_trace_view_is_read_with_every_event_and_its_nanoseconds() -> None:
    from npuprof.analysis.trace_loader import FORM_ARRAY, load_trace

    raw = _raw()
    trace = load_trace(FIXTURE)
    assert trace.form == FORM_ARRAY
    assert len(trace.events) == len(raw) == 3670
    for event, source in zip(trace.events, raw, strict=True):
        assert (event.name, event.ph, event.pid, event.tid) == (
            source["name"],
            source["ph"],
            source["pid"],
            source["tid"],
        )
        if "ts" in source:
            # the shortest text of the offset, plus the base, is the file's own text: no digit lost
            assert Decimal(repr(event.ts)) + trace.ts_base == Decimal(source["ts"]), source
    # the base is Kineto's key for "ts are µs after this": the file's epoch times come back
    assert trace.meta["baseTimeNanoseconds"] == trace.ts_base * 1000


def _variants(tmp_path: Path) -> dict[str, tuple[Path, int | None]]:
    """The same events in every form: array / object, string / number times, plain / gzipped, and names
    that say nothing (trace.json, chrome_trace_14.json, a .gz without .json); with the ns to add to number
    times (None: string times, whose base the reader chose)."""
    raw = _raw()
    base = Decimal(min(Decimal(e["ts"]) for e in raw if "ts" in e)).to_integral_value()
    numeric = []
    for e in raw:
        e = dict(e)
        if "ts" in e:
            e["ts"] = float(Decimal(e["ts"]) - base)
        numeric.append(e)
    base_ns = int(base) * 1000
    return {
        "array-string": (_write(tmp_path / "trace.json", raw), None),
        "array-string-gz": (_write(tmp_path / "chrome_trace_14.json", raw, gz=True), None),
        "object-string": (_write(tmp_path / "any_name", {"traceEvents": raw}), None),
        "object-number-gz": (
            _write(tmp_path / "x.gz", {"baseTimeNanoseconds": base_ns, "traceEvents": numeric}, gz=True),
            base_ns,
        ),
        "array-number": (_write(tmp_path / "numbers.json", numeric), base_ns),
    }


def test_every_form_gives_the_same_events_at_the_same_times(tmp_path: Path) -> None:
    from npuprof.analysis.trace_loader import TraceReader, load_trace

    expected = [
        (e["name"], e["ph"], e["pid"], e["tid"], int(Decimal(e["ts"]) * 1000) if "ts" in e else None)
        for e in _raw()
    ]
    for form, (path, number_base_ns) in _variants(tmp_path).items():
        trace = load_trace(path)
        base_ns = trace.ts_base * 1000 if number_base_ns is None else number_base_ns
        if form.startswith("object"):
            assert trace.meta["baseTimeNanoseconds"] == base_ns, form
        got = [
            (e.name, e.ph, e.pid, e.tid, round(Decimal(repr(e.ts)) * 1000) + base_ns if e.ph != "M" else None)
            for e in trace.events
        ]
        assert got == expected, form
        if not path.read_bytes().startswith(b"\x1f\x8b"):  # plain files: read in byte ranges, small blocks
            reader = TraceReader(path, block=4096)
            start, end = reader.region()
            cut = reader.boundary_after(start + (end - start) // 3, end)
            parts = [
                e for a, z in ((start, cut), (cut, end)) for c in reader.iter_range(a, z) for e in c.events
            ]
            assert [(e.name, e.ts) for e in parts] == [(e.name, e.ts) for e in trace.events], form


def test_string_times_of_any_shape_keep_their_digits(tmp_path: Path) -> None:
    """Times across the base's 10^12 boundary, with zeros after the base's digits, without decimals, as a
    plain small number; a string that is no time makes the trace corrupt, in words."""
    from npuprof.analysis.trace_loader import load_trace

    texts = [
        "1704161511420306.491",
        "1704000000000001.5",  # zeros after the base's leading digits
        "1704999999999999.999",
        "1705000000000000.001",  # the next 10^12 µs: another "bucket", the same base
        "1704161511420306",
        "1704161511420306.123456",  # beyond the nanosecond: rounded to it
    ]
    events = [_x(f"e{k}", t, 1.0, cat="cpu_op") for k, t in enumerate(texts)]
    trace = load_trace(_write(tmp_path / "t.json", events))
    for event, text in zip(trace.events, texts, strict=True):  # to the nanosecond
        assert round((Decimal(repr(event.ts)) + trace.ts_base) * 1000) == round(Decimal(text) * 1000), text
    # torch_npu's one layout (the fast path), with a time of the next 10^12 µs among them
    same_width = [
        "1704161511420306.491",
        "1704000000000000.000",
        "1705000000000000.001",
        "1704999999999999.999",
    ]
    events = [_x(f"w{k}", t, 1.0, cat="cpu_op") for k, t in enumerate(same_width)]
    trace = load_trace(_write(tmp_path / "w.json", events))
    assert [Decimal(repr(e.ts)) + trace.ts_base for e in trace.events] == [Decimal(t) for t in same_width]
    small = load_trace(_write(tmp_path / "s.json", {"traceEvents": [_x("a", "12.5", 1.0, cat="cpu_op")]}))
    assert small.events[0].ts == 12.5 and small.ts_base == 0
    # a ts "soon" is a damaged event: left out and said, the rest read (docs/formats.md, "Damaged events")
    left = load_trace(_write(tmp_path / "b.json", [*events, _x("bad", "soon", 1.0, cat="cpu_op")]))
    assert [e.name for e in left.events] == [e["name"] for e in events]
    assert left.damaged.total == 1 and '"soon"' in left.damaged.first


def test_sniff_trace_tells_the_form_by_content(tmp_path: Path) -> None:
    from npuprof.analysis.trace_loader import sniff_trace

    big_header = {"schemaVersion": 1, "distributedInfo": {"pg_config": ["x" * 100] * 2000}, "traceEvents": []}
    cases = {
        FIXTURE: "array",
        _write(tmp_path / "a.bin", _raw(), gz=True): "array",
        _write(tmp_path / "trace.json", {"traceEvents": [_x("a", 1, 1)]}): "kineto",
        _write(tmp_path / "k.json.gz", {"schemaVersion": 1, "traceEvents": []}, gz=True): "kineto",
        _write(tmp_path / "big.json", big_header): "kineto",  # traceEvents beyond the first KBs
        _write(tmp_path / "memory.raw.json", [[1, 2, 3, 4]]): None,
        _write(tmp_path / "profiler_info.json", {"config": {"common_config": {}}}): None,
        _write(tmp_path / "empty.json", []): None,
        # another tool's keys first (Perfetto's otherData): a trace when traceEvents comes early
        _write(tmp_path / "perfetto.json", {"otherData": {"a": 1}, "traceEvents": [_x("a", 1, 1)]}): "kineto",
        _write(tmp_path / "late.json", {"otherData": ["x" * 100] * 2000, "traceEvents": []}): None,
    }
    (tmp_path / "garbage.json").write_bytes(b"\x00\x01 not json")
    cases[tmp_path / "garbage.json"] = None
    cases[tmp_path / "missing.json"] = None
    os.mkfifo(tmp_path / "fifo.json")  # never opened: it would block
    cases[tmp_path / "fifo.json"] = None
    cases[tmp_path] = None
    for path, form in cases.items():
        assert sniff_trace(path) == form, path


def test_an_object_with_traceevents_late_is_read_when_named_and_said_otherwise(tmp_path: Path) -> None:
    """traceEvents after 200 KB of another tool's keys: a file the user names is read on until it shows;
    one that never shows it (in its first 64 MB) is named, with the way to read it anyway."""
    late = _write(tmp_path / "late.json", {"otherData": ["x" * 100] * 2000, "traceEvents": [_x("a", 1, 1)]})
    assert npuprof("analyse", str(late)).returncode == 0
    none = _write(tmp_path / "none.json", {"otherData": ["x" * 100] * 2000})
    done = npuprof("analyse", str(none))
    assert done.returncode == 1
    said = " ".join(done.stderr.split())
    assert "no traceEvents in its first 64 MB" in said and "name it *.pt.trace.json" in said, said


def test_the_reports_read_through_the_one_loader() -> None:
    from npuprof.analysis.trace_loader import Event
    from npuprof.reports import trace_events

    raw = _raw()
    events = trace_events.load_events(FIXTURE)
    wanted = [e for e in raw if e["ph"] in ("X", "s", "f", "t", "M") or e["name"] == "[memory]"]
    assert len(events) == len(wanted) and all(type(e) is Event for e in events)
    assert not hasattr(trace_events, "read_trace_bytes")  # no second reader of its own


# ---- 2. any name: the CLI readers ------------------------------------------------------------------------
def test_the_cli_readers_take_a_trace_of_any_name(tmp_path: Path) -> None:
    from npuprof.analysis.report import is_bare_trace

    raw = _raw()
    names = ("trace.json", "chrome_trace_14.json")
    for name in names:
        path = _write(tmp_path / name, raw)
        assert is_bare_trace(path)
        stacks = npuprof("export-stacks", str(path), "-m", "self_npu_time_total")
        assert stacks.returncode == 0, stacks.stderr
        assert sum(_folded(stacks.stdout).values()) > 0
    assert not is_bare_trace(_write(tmp_path / "profiler_info_0.json", {"config": {}}))
    assert not is_bare_trace(tmp_path)


# ---- 3. torch 1.8-1.10 ---------------------------------------------------------------------------------
def _old_release_trace() -> list[dict[str, Any]]:
    """torch 1.8-1.10's Kineto output (docs/formats.md; output-format.md §7): Operator / Runtime / Kernel /
    Memcpy / Memset / Trace, string thread ids, "external id" on the device side, the step an Operator."""
    host, gpu = 13721, 0
    return [
        _meta(host, "python"),
        _meta(gpu, "GPU 0"),
        _x("ProfilerStep#1", 50, 400, host, "123", "Operator", **{"External id": 1}),
        _x(
            "aten::mm", 100, 70, host, "123", "Operator", **{"Input dims": [[2, 2], [2, 2]], "External id": 4}
        ),
        _x("cudaLaunchKernel", 110, 20, host, "123", "Runtime", correlation=334, **{"external id": 4}),
        _x("gemm", 200, 100, gpu, "stream 7", "Kernel", stream=7, correlation=334, **{"external id": 4}),
        _x(
            "Memcpy HtoD", 305, 10, gpu, "stream 7", "Memcpy", stream=7, correlation=335, **{"external id": 4}
        ),
        _x("Memset (Device)", 320, 5, gpu, "stream 7", "Memset", stream=7, correlation=336),
        _x("kernel_after_the_step", 600, 50, gpu, "stream 7", "Kernel", stream=7),
        _x("PyTorch Profiler (0)", 0, 700, "Traces", "PyTorch Profiler", "Trace"),
    ]


def _analyse_json(path: Path) -> dict[str, Any]:
    done = npuprof("analyse", str(path), "-j", "1", "--format", "json", timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_an_old_release_trace_counts_its_device_work_in_its_step(tmp_path: Path) -> None:
    events = _old_release_trace()
    report = _analyse_json(_write(tmp_path / "chrome_trace_14.json", {"traceEvents": events}))
    (rank,) = report["ranks"]
    (step_op,) = [e for e in events if e["name"].startswith("ProfilerStep#")]
    lo, hi = Decimal(step_op["ts"]), Decimal(step_op["ts"] + step_op["dur"])
    # computing is the kernels' time; the copy engines' memcpy and memset are not computing: free time, as
    # torch_npu, msprof-analyze and HTA count them
    device = [
        (max(s, lo), min(e, hi))
        for s, e in (_span(ev) for ev in events if ev.get("cat") == "Kernel")
        if s < hi and e > lo
    ]
    (step,) = rank["steps"]
    assert step["step"] == 1 and step["duration_us"] == float(hi - lo)
    assert step["computing_us"] == float(_union(device)) == 100
    assert step["free_us"] == float(hi - lo - _union(device))
    assert "ProfilerStep#1" not in [op["name"] for op in rank["top_operators"]]  # a step, not an operator
    # the kernel is given to the operator that launched it ("external id", torch 1.8-1.10's spelling)
    out = tmp_path / "chrome_trace_14.json.npuprof" / "kernel_details.csv"
    rows = {row["Name"]: row for row in csv.DictReader(out.open())}
    assert rows["gemm"]["Type"] == "aten::mm"


def test_old_release_operators_spelling_external_id_get_their_device_time(tmp_path: Path) -> None:
    """An operator carrying torch 1.8-1.10's lower-case ``external id`` (as its tasks do) gets its tasks'
    time, and a collective's span of that spelling its kernel's (they read 0 and the host span's 50 µs)."""
    events = _old_release_trace()
    for ev in events:
        if ev.get("cat") == "Operator" and "External id" in ev["args"]:
            ev["args"]["external id"] = ev["args"].pop("External id")
    host, gpu = 13721, 0
    events += [
        _x("nccl:all_reduce", 360, 30, host, "123", "Operator", **{"external id": 9}),
        _x("ncclKernel_AllReduce_RING_LL_Sum_float", 380, 120, gpu, "stream 13", "Kernel", stream=13,
           **{"external id": 9}),
    ]  # fmt: skip
    report = _analyse_json(_write(tmp_path / "old_lower.json", {"traceEvents": events}))
    (rank,) = report["ranks"]
    device = {op["name"]: op["device_us"] for op in rank["top_operators"]}
    tasks = [ev for ev in events if ev.get("cat") in ("Kernel", "Memcpy")]
    launched_by_mm = [ev["dur"] for ev in tasks if ev["args"].get("external id") == 4]
    assert device["aten::mm"] == sum(launched_by_mm) == 110
    assert device["nccl:all_reduce"] == 120
    assert rank["communication"]["time_us"] == 120


def test_stacks_of_an_old_release_trace_link_device_work_by_its_external_id(tmp_path: Path) -> None:
    """Memcpy HtoD has no Runtime call of its correlation: torch 1.8-1.10's "external id" alone gives its
    operator (it went to the stack of device work with no launching call)."""
    path = _write(tmp_path / "old.json", {"traceEvents": _old_release_trace()})
    folded = tmp_path / "device.folded"
    done = npuprof("export-stacks", str(path), "--metric", "self_npu_time_total", "-o", str(folded))
    assert done.returncode == 0, done.stderr
    stacks = _folded(folded.read_text())
    # every ProfilerStep#N is one ProfilerStep frame (docs: the steps merge into one graph)
    assert stacks[("ProfilerStep", "aten::mm", "Memcpy_HtoD")] == 10
    assert stacks[("ProfilerStep", "aten::mm", "gemm")] == 100


def test_device_work_of_an_unknown_category_is_counted_and_named_once(tmp_path: Path) -> None:
    from npuprof.analysis.scan import scan
    from npuprof.analysis.tables import build_tables

    events = [
        _meta(7, "python3"),
        _meta(0, "GPU 0"),
        _x("ProfilerStep#3", 0, 1000, 7, 7, "user_annotation"),
        _x("aten::mm", 10, 100, 7, 7, "cpu_op"),
        _x("future_kernel_a", 200, 300, 0, 7, "cuda_kernel_v9"),
        _x("future_kernel_b", 400, 200, 0, 7, "cuda_kernel_v9"),
        _x("future_copy", 700, 50, 0, 8, "gpu_memcpy_v2"),
    ]
    path = _write(tmp_path / "future.pt.trace.json", {"traceEvents": events})
    extract, _meta_keys, _end = scan(path)
    unknown = [e for e in events if e.get("cat") in ("cuda_kernel_v9", "gpu_memcpy_v2")]
    (step,) = build_tables(extract).summary["steps"]
    assert step["computing_us"] == float(_union([_span(e) for e in unknown]))  # not 100 % Free
    (warning,) = extract.warnings()
    assert "cuda_kernel_v9" in warning and "gpu_memcpy_v2" in warning and "'GPU 0'" in warning
    assert f"{len(unknown)} device event" in warning
    done = npuprof("export-stacks", str(path), "-m", "self_cuda_time_total")
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "warning:" in line]
    assert len(warnings) == 1 and "cuda_kernel_v9" in warnings[0], done.stderr
    assert sum(_folded(done.stdout).values()) == sum(e["dur"] for e in unknown)
    analysed = npuprof("analyse", str(path), "-j", "1", "--format", "json", timeout=300)
    assert analysed.returncode == 0, analysed.stderr
    (rank,) = json.loads(analysed.stdout)["ranks"]
    # in the report, and once on stderr; and that no operator launched those tasks (none is linked)
    assert rank["warnings"][0] == warning and rank["warnings"][1].startswith("none of the 3 device tasks")
    said = [line for line in analysed.stderr.splitlines() if "warning:" in line and "cuda_kernel_v9" in line]
    assert len(said) == 1, analysed.stderr


# ---- 4. torch_npu's trace_view.json: stacks, memory, analyse ---------------------------------------------
def test_device_stacks_of_the_real_trace_follow_the_async_npu_flows(tmp_path: Path) -> None:
    raw = _raw()
    assert set(_process_names(raw).values()) == {"Python", "CANN", "Ascend Hardware", "Overlap Analysis"}
    hardware = _pid_of(raw, "Ascend Hardware")
    tasks = [e for e in raw if e["pid"] == hardware and e["ph"] == "X"]
    assert len(tasks) == 276
    done = npuprof("export-stacks", str(FIXTURE), "-m", "self_npu_time_total")
    assert done.returncode == 0, done.stderr
    folded = _folded(done.stdout)
    total = sum(Decimal(str(t["dur"])) for t in tasks)
    assert sum(folded.values()) == round(total)  # all the device time, given once
    # independently: each task's async_npu flow starts inside a cpu_op; the innermost one launched it
    python = _pid_of(raw, "Python")
    ops = defaultdict(list)
    for e in raw:
        if e["pid"] == python and e["ph"] == "X" and e.get("cat") == "cpu_op":
            ops[e["tid"]].append(e)
    starts = {e["id"]: e for e in raw if e.get("cat") == "async_npu" and e["ph"] == "s"}
    ends = {(e["tid"], e["ts"]): e["id"] for e in raw if e.get("cat") == "async_npu" and e["ph"] == "f"}
    expected: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    for task in tasks:
        flow = ends.get((task["tid"], task["ts"]))
        if flow is None:
            continue
        start = starts[flow]
        at = Decimal(start["ts"])
        around = [op for op in ops[start["tid"]] if _span(op)[0] <= at <= _span(op)[1]]
        launcher = min(around, key=lambda op: _span(op)[1] - _span(op)[0])
        expected[(launcher["name"], task["name"])] += Decimal(str(task["dur"]))
    assert sum(expected.values()) > total * Decimal("0.9")  # most tasks have a flow
    got: dict[tuple[str, str], int] = defaultdict(int)
    for path, value in folded.items():
        got[path[-2:]] += value
    for key, value in expected.items():
        assert abs(got[key] - value) <= 1, key  # whole µs per line


def test_host_stacks_of_the_real_trace_hold_each_threads_busy_time_once(tmp_path: Path) -> None:
    """CANN's AscendCL calls run on the Python threads of the same id: they nest under those threads'
    operators instead of being counted a second time; device tasks and the Overlap Analysis lanes are no
    host time."""
    raw = _raw()
    names = _process_names(raw)
    python, cann = _pid_of(raw, "Python"), _pid_of(raw, "CANN")
    busy: dict[Any, list[tuple[Decimal, Decimal]]] = defaultdict(list)
    for e in raw:
        if e["ph"] == "X" and e["pid"] in (python, cann):
            busy[e["tid"]].append(_span(e))
    expected = sum(_union(spans) for spans in busy.values())
    done = npuprof("export-stacks", str(FIXTURE))
    assert done.returncode == 0, done.stderr
    folded = _folded(done.stdout)
    assert abs(sum(folded.values()) - expected) <= 1
    frames = {frame for path in folded for frame in path}
    lanes = {e["name"] for e in raw if names.get(e["pid"]) == "Overlap Analysis" and e["ph"] == "X"}
    assert not frames & lanes
    assert any(path[0] == "ProfilerStep" and "AscendCL@" in path[-1] for path in folded)


def test_host_stacks_take_python_frames_from_the_call_stack(tmp_path: Path) -> None:
    """torch_npu writes no python_function events: with --with-stack its operators carry args["Call
    stack"], innermost frame first (as torch writes it)."""
    stack = "model.py(40): forward;torch/nn/modules/module.py(1773): _call_impl;train.py(61): train_step"
    events = [
        _meta(5, "Python"),
        _x("ProfilerStep#2", "1704161511420000.000", 1000.0, 5, 5, "cpu_op"),
        _x("aten::linear", "1704161511420100.250", 300.0, 5, 5, "cpu_op", **{"Call stack": stack}),
        _x("aten::addmm", "1704161511420150.250", 100.0, 5, 5, "cpu_op", **{"Call stack": stack}),
    ]
    done = npuprof("export-stacks", str(_write(tmp_path / "trace_view.json", events)))
    assert done.returncode == 0, done.stderr
    frames = [f.replace(" ", "_") for f in reversed(stack.split(";"))]
    folded = _folded(done.stdout)
    assert folded == {
        ("ProfilerStep",): 1000 - 300,
        ("ProfilerStep", *frames, "aten::linear"): 300 - 100,
        ("ProfilerStep", *frames, "aten::linear", "aten::addmm"): 100,
    }
    assert "no Python stacks" not in done.stderr


def test_memory_timeline_of_a_torch_npu_trace_keeps_its_epoch_times(tmp_path: Path) -> None:
    def memory(ts: str, allocated: int, reserved: int, size: int) -> dict:
        args = {"Total Allocated": allocated, "Total Reserved": reserved, "Bytes": size}
        return {
            "ph": "i",
            "name": "[memory]",
            "pid": 5,
            "tid": 5,
            "ts": ts,
            "s": "t",
            "args": args | {"Device Type": 20, "Device Id": 0},
        }

    records = [
        memory("1704161511420306.491", 4096, 1 << 20, 4096),
        memory("1704161511420310.999", 12288, 1 << 20, 8192),
        memory("1704161511421000.001", 4096, 2 << 20, -8192),
    ]
    events = [_meta(5, "Python"), _x("aten::empty", "1704161511420300.000", 20.0, 5, 5, "cpu_op"), *records]
    trace = _write(tmp_path / "trace.json", events)
    out = tmp_path / "memory.json"
    done = npuprof("memory-timeline", str(trace), "-o", str(out))
    assert done.returncode == 0, done.stderr
    times, sizes = json.loads(out.read_text())
    # torch's layout (its _coalesce_timeline: int(ns / 1000)) and the allocator's running total per time
    assert times == [int(int(Decimal(r["ts"]) * 1000) / 1000) for r in records]
    assert [sum(row) for row in sizes] == [r["args"]["Total Allocated"] for r in records]
    assert "npu:0" in done.stderr
    raw_out = tmp_path / "memory.raw.json.gz"
    assert npuprof("memory-timeline", str(trace), "-o", str(raw_out)).returncode == 0
    raw = json.loads(gzip.decompress(raw_out.read_bytes()))
    assert raw[0][0] == int(Decimal(records[0]["ts"]) * 1000)  # nanoseconds, exact
    # the real file has no [memory] event: one line that says so
    none = npuprof("memory-timeline", str(FIXTURE), "-o", str(tmp_path / "none.json"))
    assert none.returncode == 1 and len(none.stderr.splitlines()) == 1 and "[memory]" in none.stderr


def test_analyse_reads_the_real_trace_view(tmp_path: Path) -> None:
    raw = _raw()
    path = _write(tmp_path / "trace_view.json", raw)
    report = _analyse_json(path)
    (rank,) = report["ranks"]
    assert rank["device"] == "NPU"  # its device process is "Ascend Hardware", not a GPU
    (step_op,) = [e for e in raw if e["name"].startswith("ProfilerStep#")]
    lo, hi = _span(step_op)
    hardware = _pid_of(raw, "Ascend Hardware")
    tasks = [_span(e) for e in raw if e["pid"] == hardware and e["ph"] == "X"]
    # the DMA tasks (MEMCPY_ASYNC) copy, they do not compute
    computes = [
        _span(e) for e in raw if e["pid"] == hardware and e["ph"] == "X" and e["name"] != "MEMCPY_ASYNC"
    ]
    assert len(computes) == len(tasks) - 2
    inside = [(max(s, lo), min(e, hi)) for s, e in computes if s < hi and e > lo]
    (step,) = rank["steps"]
    assert step["step"] == int(step_op["name"].split("#")[1])
    assert step["duration_us"] == float(hi - lo)
    # times are floats after the trace's base (µs of an 11.6-day window): sums of hundreds of them are
    # exact to the nanosecond, give or take one in the last place of the report's 3 decimals
    assert abs(Decimal(str(step["computing_us"])) - _union(inside)) <= Decimal("0.002")
    # and equal to torch_npu's own Computing lane of the same file (1,788.2505 µs, its one step)
    lanes, lane_names = _pid_of(raw, "Overlap Analysis"), _thread_names(raw)
    own = [
        e for e in raw if e["pid"] == lanes and e["ph"] == "X" and lane_names[lanes, e["tid"]] == "Computing"
    ]
    own_total = sum(Decimal(str(e["dur"])) for e in own)
    assert abs(Decimal(str(step["computing_us"])) - own_total) <= Decimal("0.002"), own_total
    assert step["computing_us"] > 0
    assert abs(Decimal(str(step["free_us"])) - (hi - lo - _union(inside))) <= Decimal("0.002")
    # the first task's start, from the step's start
    assert step["preparing_us"] == float(min(s for s, _ in tasks) - lo)
    kernels = {k["name"]: k["count"] for k in rank["top_kernels"]}
    names = [e["name"] for e in raw if e["pid"] == hardware and e["ph"] == "X"]
    top = max(
        set(names),
        key=lambda n: sum(Decimal(str(e["dur"])) for e in raw if e["name"] == n and e["pid"] == hardware),
    )
    assert kernels[top] == names.count(top)


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _npu_dims(dims: list[list[int]]) -> str:
    """torch_npu's ``Input Dims`` of an operator (its data_reporter: each input's dims joined by ",", the
    inputs by ";"; its TorchOpBean then puts "\\r\\n" after each ";")."""
    return ";".join(",".join(str(d) for d in one) for one in dims).replace(";", ";\r\n")


def test_input_shapes_in_torch_npus_string_form_are_read(tmp_path: Path) -> None:
    """helper-122: torch_npu writes an operator's Input Dims as a string ("8;\\r\\n4,8"), not Kineto's list:
    its kernels got no Input Shapes (0 of 106 rows), operator_details.csv the escaped text."""
    shapes = [[[8], [4, 8], [8, 8], []], [[16, 2], [2]], [[3, 224, 224]]]
    forms = {}
    for form in ("list", "string"):
        raw = _raw()
        ops = [e for e in raw if e.get("cat") == "cpu_op" and not e["name"].startswith("ProfilerStep#")]
        for k, op in enumerate(ops):
            dims = shapes[k % len(shapes)]
            op.setdefault("args", {})["Input Dims"] = dims if form == "list" else _npu_dims(dims)
        (tmp_path / form).mkdir()
        path = _write(tmp_path / form / "trace_view.json", raw)
        _analyse_json(path)
        tables = path.parent / "trace_view.json.npuprof"
        kernels = [r["Input Shapes"] for r in _csv_rows(tables / "kernel_details.csv")]
        operators = {(r["Name"], r["Input Shapes"]) for r in _csv_rows(tables / "operator_details.csv")}
        forms[form] = (kernels, operators)
    assert _npu_dims(shapes[0]) == "8;\r\n4,8;\r\n8,8;\r\n"  # as the real writer, by hand
    kernels, operators = forms["string"]
    assert forms["list"] == forms["string"]
    assert sum(cell != "N/A" for cell in kernels) > len(kernels) // 2
    assert '"8;4,8;8,8;"' in kernels and '"3,224,224"' in kernels
    assert {cell for _name, cell in operators} >= {"[[8],[4,8],[8,8],[]]", "[[16,2],[2]]", "[[3,224,224]]"}


@pytest.mark.parametrize("stream_id_nan", [False, True])
def test_dma_tasks_of_later_releases_are_told_by_their_task_type(tmp_path: Path, stream_id_nan: bool) -> None:
    """Later torch_npu releases give a DMA task its own task type (msprof-analyze's SDMA_SQE, PCIE_DMA_SQE)
    whatever its name: the real file's two copies, renamed and typed so, are still no computing. So with a
    Stream Id of NaN (a script's json.dump): the task's args were all read as absent, its Task Type with
    them, and the copies counted as Computing."""
    raw = _raw()
    hardware = _pid_of(raw, "Ascend Hardware")
    copies = [e for e in raw if e["pid"] == hardware and e["name"] == "MEMCPY_ASYNC"]
    assert len(copies) == 2
    task_types = ("SDMA_SQE", "PCIE_DMA_SQE")
    for copy, task_type in zip(copies, task_types, strict=True):
        copy["name"], copy["args"]["Task Type"] = "aclrtMemcpyAsync", task_type
        if stream_id_nan:
            copy["args"]["Stream Id"] = float("nan")
    (rank,) = _analyse_json(_write(tmp_path / "trace_view.json", raw))["ranks"]
    rows = _csv_rows(tmp_path / "trace_view.json.npuprof" / "kernel_details.csv")
    cores = [r["Accelerator Core"] for r in rows if r["Name"] == "aclrtMemcpyAsync"]
    assert cores == list(task_types), cores
    (step_op,) = [e for e in raw if e["name"].startswith("ProfilerStep#")]
    lo, hi = _span(step_op)
    computes = [_span(e) for e in raw if e["pid"] == hardware and e["ph"] == "X" and e not in copies]
    inside = [(max(s, lo), min(e, hi)) for s, e in computes if s < hi and e > lo]
    (step,) = rank["steps"]
    assert abs(Decimal(str(step["computing_us"])) - _union(inside)) <= Decimal("0.002"), step
    assert abs(Decimal(str(step["free_us"])) - (hi - lo - _union(inside))) <= Decimal("0.002"), step


def test_a_trace_mixing_string_and_number_times_is_read_on_one_clock(tmp_path: Path) -> None:
    """A trace merged or edited by hand: every other device task's ts written as a number (epoch µs). The
    numbers were left absolute while the strings became offsets, so those tasks fell outside every step
    (computing 906.69 µs of the real 1790.44, no warning)."""
    raw = _raw()
    hardware = _pid_of(raw, "Ascend Hardware")
    tasks = [e for e in raw if e["pid"] == hardware and e["ph"] == "X"]
    for task in tasks[::2]:
        task["ts"] = float(task["ts"])  # a double holds epoch µs to ~0.25 µs
    (rank,) = _analyse_json(_write(tmp_path / "trace_view.json", raw))["ranks"]
    (step_op,) = [e for e in raw if e["name"].startswith("ProfilerStep#")]
    lo, hi = _span(step_op)
    spans = [_span(e) for e in tasks if e["name"] != "MEMCPY_ASYNC"]  # copies, not computing
    inside = [(max(s, lo), min(e, hi)) for s, e in spans if s < hi and e > lo]
    (step,) = rank["steps"]
    assert abs(Decimal(str(step["computing_us"])) - _union(inside)) <= Decimal("1"), step


# ---- 5. the bench has the two new cases ------------------------------------------------------------------
def test_the_analyse_bench_runs_the_mix_and_the_string_time_cases() -> None:
    import subprocess
    import sys

    from conftest import ROOT, clean_env

    done = subprocess.run(
        [sys.executable, "bench/analyse_bench.py", "--quick", "--size-mb", "2", "--cases", "mix,string-ts"],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith(("mix ", "string-ts "))]
    assert [row[0] for row in rows] == ["mix", "string-ts"], done.stdout
    assert "(exit" not in done.stdout, done.stdout  # npuprof read both traces


def test_a_rank_dir_holding_a_trace_under_another_name_is_analysed(tmp_path: Path) -> None:
    """`prof.export_chrome_trace("trace.json")` into a rank dir: found by its content, analysed."""
    rank_dir = tmp_path / "result" / "node_7_20250101000000000_ascend_pt"
    rank_dir.mkdir(parents=True)
    step = _x("ProfilerStep#3", 100, 1000, cat="user_annotation")
    op = _x("aten::mm", 200, 300, cat="cpu_op")
    (rank_dir / "trace.json").write_text(json.dumps({"traceEvents": [step, op]}))
    (rank_dir / "notes.json").write_text(json.dumps({"not": "a trace"}))
    report = _analyse_json(tmp_path / "result")
    assert report["problems"] == []
    [rank] = report["ranks"]
    assert [s["step"] for s in rank["steps"]] == [3] and rank["steps"][0]["duration_us"] == 1000


def test_operators_of_the_real_trace_get_the_device_time_their_flows_launched(tmp_path: Path) -> None:
    """torch_npu's trace_view.json has no External ids: each device task is tied to its operator by an
    async_npu flow only. Expected, independently: a task's flow starts at the start of the innermost
    cpu_op on that thread; an operator's device time is that of the tasks launched by it or by the
    operators inside it, summed over its calls in the step."""
    raw = _raw()
    python, hardware = _pid_of(raw, "Python"), _pid_of(raw, "Ascend Hardware")
    ops = [e for e in raw if e["pid"] == python and e["ph"] == "X" and e.get("cat") == "cpu_op"]
    (step,) = [op for op in ops if op["name"].startswith("ProfilerStep#")]
    lo, hi = _span(step)
    tasks = {(e["tid"], e["ts"]): e for e in raw if e["pid"] == hardware and e["ph"] == "X"}
    launched: list[tuple[Any, Decimal, Decimal]] = []  # (thread, launcher's start, task's duration)
    for flow in (e for e in raw if e.get("cat") == "async_npu" and e["ph"] == "s"):
        finish = next(
            e for e in raw if e.get("cat") == "async_npu" and e["ph"] == "f" and e["id"] == flow["id"]
        )
        task = tasks[(finish["tid"], finish["ts"])]
        launched.append((flow["tid"], Decimal(flow["ts"]), Decimal(str(task["dur"]))))
    expected: dict[str, Decimal] = defaultdict(Decimal)
    for op in ops:
        start, end = _span(op)
        if op is step or not lo <= start < hi:
            continue
        expected[op["name"]] += sum(
            (dur for tid, at, dur in launched if tid == op["tid"] and start <= at <= end), Decimal(0)
        )
    copy = tmp_path / "trace_view.json"
    copy.write_bytes(FIXTURE.read_bytes())
    (rank,) = _analyse_json(copy)["ranks"]
    got = {op["name"]: op["device_us"] for op in rank["top_operators"]}
    assert sum(1 for name in got if expected[name] > 0) >= 5  # most of the top operators launched work
    for name, device_us in got.items():
        assert device_us == pytest.approx(float(expected[name]), abs=0.002), name


def _cpu_step_with(collective: dict[str, Any]) -> list[dict[str, Any]]:
    """A torch 1.8-1.10 CPU trace: every host span an "Operator" (the step too), two operators on the step
    thread and one collective, which the caller places."""
    return [
        _meta(7, "python"),
        _x("ProfilerStep#4", 0, 1000, 7, "7", "Operator"),
        _x("aten::mm", 100, 150, 7, "7", "Operator"),
        _x("aten::add", 600, 150, 7, "7", "Operator"),
        collective,
    ]


@pytest.mark.parametrize(
    "collective",
    [
        _x("gloo:all_reduce", 550, 200, 7, "24900", "Operator"),  # on gloo's worker thread
        _x("gloo:all_reduce", 550, 200, 7, "7", "Operator"),  # on the step thread
        _x("c10d::allreduce_", 550, 200, 7, "7", "Operator"),  # the call alone
    ],
    ids=["gloo-thread", "gloo-step-thread", "c10d-call"],
)
def test_an_old_release_cpu_trace_counts_its_collective_as_communication(
    tmp_path: Path, collective: dict[str, Any]
) -> None:
    """Spans of "Operator" category were computing-less and communication-less: their time went to Free
    and the report said no collective (operators 0)."""
    events = _cpu_step_with(collective)
    (rank,) = _analyse_json(_write(tmp_path / "old_cpu.json", {"traceEvents": events}))["ranks"]
    ops = [_span(e) for e in events[2:4]]
    comm = _span(collective)
    overlap = sum(max(Decimal(0), min(e, comm[1]) - max(s, comm[0])) for s, e in ops)
    (step,) = rank["steps"]
    assert step["computing_us"] == float(_union(ops))
    assert step["communication_us"] == float(comm[1] - comm[0])
    assert step["comm_not_overlapped_us"] == float(comm[1] - comm[0] - overlap)
    assert step["free_us"] == float(1000 - _union(ops) - (comm[1] - comm[0] - overlap))
    assert rank["communication"] == {"operators": 1, "time_us": 200.0, "size_unknown_operators": 1}


def test_the_collectives_of_traces_without_a_host_record_are_their_device_tasks(tmp_path: Path) -> None:
    """torch 1.8-1.10 (nccl:all_reduce on the host, its kernel by "external id") and torch_npu's
    trace_view (an HCCL task only): the steps counted communication while the report said operators 0."""
    old = [
        _meta(1, "python"),
        _meta(0, "GPU 0"),
        _x("ProfilerStep#1", 0, 1000, 1, "1", "Operator"),
        _x("nccl:all_reduce", 300, 30, 1, "1", "Operator", **{"External id": 5}),
        _x("ncclKernel_AllReduce_RING_LL_Sum_float", 320, 200, 0, "stream 9", "Kernel", stream=9,
           correlation=104, **{"external id": 5}),
    ]  # fmt: skip
    (rank,) = _analyse_json(_write(tmp_path / "old.json", {"traceEvents": old}))["ranks"]
    kernel = old[-1]
    assert rank["communication"] == {"operators": 1, "time_us": kernel["dur"], "size_unknown_operators": 1}
    hardware = 9
    npu = [
        _meta(2, "Python"),
        _meta(hardware, "Ascend Hardware"),
        _x("ProfilerStep#3", "1736413971600000.000", 1000, 2, 1),
        _x("hcom_allReduce__123_0_1", "1736413971600300.500", 200.125, hardware, 4),
        _x("MatMulV2", "1736413971600100.000", 150, hardware, 3),
    ]
    (rank,) = _analyse_json(_write(tmp_path / "trace_view.json", npu))["ranks"]
    assert rank["communication"] == {"operators": 1, "time_us": 200.125, "size_unknown_operators": 1}
    assert rank["steps"][0]["communication_us"] == 200.125


def test_a_collective_torch_records_three_ways_counts_once(tmp_path: Path) -> None:
    """torch 2.x with NCCL: record_param_comms, the backend's nccl:all_reduce on the host and again over
    the kernel on the GPU. The report counted 3 operators and summed their times."""
    kernel = _x("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 320, 300, 0, 9, "kernel", stream=9, correlation=11,
                **{"External id": 3})  # fmt: skip
    events = [
        _meta(1, "python"),
        _meta(0, "GPU 0"),
        _x("ProfilerStep#1", 0, 1000, 1, 1, "user_annotation"),
        _x(
            "record_param_comms",
            300,
            15,
            1,
            1,
            "cpu_op",
            **{"Collective name": "allreduce", "In msg nelems": 1000, "dtype": "Float", "External id": 3},
        ),
        _x("nccl:all_reduce", 300, 190, 1, 1, "user_annotation", **{"External id": 4}),
        _x("nccl:all_reduce", 320, 300, 0, 9, "gpu_user_annotation", **{"External id": 4}),
        kernel,
    ]
    (rank,) = _analyse_json(_write(tmp_path / "nccl.json", {"traceEvents": events}))["ranks"]
    assert rank["communication"] == {"operators": 1, "time_us": kernel["dur"], "size_mb": 1000 * 4 / 1e6}


def test_a_collectives_nelems_of_nan_is_unknown_not_zero(tmp_path: Path) -> None:
    """A record_param_comms whose ``In msg nelems`` is NaN (a tool's json.dump; read as "?") beside a known
    ``Out msg nelems`` was sized 0 bytes, the "?" taken over the other count; it is sized by the count that
    is a number, and one with no count that is a number has its size said unknown, not 0."""
    kernel = _x("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 320, 300, 0, 9, "kernel", stream=9, correlation=11,
                **{"External id": 3})  # fmt: skip

    def trace(name: str, nelems_in: float, nelems_out: float) -> Path:
        comms = {"Collective name": "allreduce", "In msg nelems": nelems_in, "Out msg nelems": nelems_out,
                 "dtype": "Float", "External id": 3}  # fmt: skip
        events = [
            _meta(1, "python"),
            _meta(0, "GPU 0"),
            _x("ProfilerStep#1", 0, 1000, 1, 1, "user_annotation"),
            _x("record_param_comms", 300, 15, 1, 1, "cpu_op", **comms),
            kernel,
        ]
        return _write(tmp_path / name, {"traceEvents": events})

    (rank,) = _analyse_json(trace("in_nan.json", float("nan"), 1000))["ranks"]
    assert rank["communication"] == {"operators": 1, "time_us": kernel["dur"], "size_mb": 1000 * 4 / 1e6}
    (rank,) = _analyse_json(trace("both_nan.json", float("inf"), float("nan")))["ranks"]
    assert rank["communication"] == {"operators": 1, "time_us": kernel["dur"], "size_unknown_operators": 1}


def test_a_collectives_size_is_its_in_msg_nelems_not_its_out(tmp_path: Path) -> None:
    """An all-gather of 4 ranks records 1000 elements in and 4000 out: its size is the input's, 1000 floats
    (README, "communication tables": from ``In msg nelems``; helper-368: sized by ``Out msg nelems`` when
    both are numbers, it failed no test, the tests' collectives having one count or two equal)."""
    comms = {"Collective name": "allgather", "In msg nelems": 1000, "Out msg nelems": 4000, "dtype": "Float",
             "External id": 3}  # fmt: skip
    kernel = _x("ncclDevKernel_AllGather_RING_LL", 320, 300, 0, 9, "kernel", stream=9, correlation=11,
                **{"External id": 3})  # fmt: skip
    events = [
        _meta(1, "python"),
        _meta(0, "GPU 0"),
        _x("ProfilerStep#1", 0, 1000, 1, 1, "user_annotation"),
        _x("record_param_comms", 300, 15, 1, 1, "cpu_op", **comms),
        kernel,
    ]
    (rank,) = _analyse_json(_write(tmp_path / "gather.json", {"traceEvents": events}))["ranks"]
    assert rank["communication"] == {"operators": 1, "time_us": kernel["dur"], "size_mb": 1000 * 4 / 1e6}


def test_nccls_sendrecv_kernel_is_a_receive_only_when_its_record_says_so(tmp_path: Path) -> None:
    """NCCL runs both directions of point-to-point as ncclDevKernel_SendRecv: a send was read as a receive
    (the pipeline's bubble, 200 µs of it in a step that waited for nothing)."""

    def p2p(direction: str, ext: int, start: int, dur: int) -> list[dict[str, Any]]:
        return [
            _x("record_param_comms", start - 20, 10, 1, 1, "cpu_op", **{"Collective name": direction,
               "In msg nelems": 10, "dtype": "Float", "External id": ext}),
            _x("ncclDevKernel_SendRecv", start, dur, 0, 9, "kernel", stream=9, correlation=ext,
               **{"External id": ext}),
        ]  # fmt: skip

    events = [
        _meta(1, "python"),
        _meta(0, "GPU 0"),
        _x("ProfilerStep#1", 0, 1000, 1, 1, "user_annotation"),
        *p2p("send", 3, 100, 200),
        _x("ProfilerStep#2", 1000, 1000, 1, 1, "user_annotation"),
        *p2p("recv", 4, 1300, 150),
    ]
    (rank,) = _analyse_json(_write(tmp_path / "p2p.json", {"traceEvents": events}))["ranks"]
    first, second = rank["steps"]
    assert (first["communication_us"], first["bubble_us"]) == (200.0, 0.0)
    assert (second["communication_us"], second["bubble_us"]) == (150.0, 150.0)


def _with_communication_process(raw: list[dict[str, Any]], process: str) -> tuple[list[dict], list[tuple]]:
    """The real trace plus torch_npu's communication process (output-format: ``HCCL`` or ``Communication``,
    collectives on ``Group <g> Communication``, their tasks on ``Plane <n>``): two all-reduces from 1 ms and
    6 ms after the first device task, each with a task of half its length on a plane. Returns the events
    and the collectives' spans."""
    hardware = _pid_of(raw, "Ascend Hardware")
    t0 = min(Decimal(e["ts"]) for e in raw if e["pid"] == hardware and e["ph"] == "X")
    pid = 4376751000
    events = [
        *raw,
        _meta(pid, process),
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": 2, "args": {"name": "Group 0 Communication"}},
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": 3, "args": {"name": "Plane 0"}},
    ]
    spans = []
    for n, (start, dur) in enumerate(((t0 + 1000, 3000), (t0 + 6000, 2000))):
        events.append(_x(f"hcom_allReduce__123_{n}_1", str(start), dur, pid, 2, count=1024))
        events.append(_x("Memcpy", str(start + 10), dur / 2, pid, 3))
        spans.append((start, start + dur))
    return events, spans


def test_a_receive_of_torch_npus_communication_process_is_point_to_point(tmp_path: Path) -> None:
    """HCCL names a receive ``hcom_receive_`` (docs/formats.md, the collectives' names): communication.json
    lists it under p2p, beside the all-reduce under collective (helper-368: without "receive" among the
    point-to-point names it was a collective, and no test failed)."""
    events, _spans = _with_communication_process(_raw(), "HCCL")
    for e in events:
        if e.get("name") == "hcom_allReduce__123_1_1":
            e["name"] = "hcom_receive__123_1_1"
    rank_dir = tmp_path / "host_1_20250101000000000_ascend_pt"
    rank_dir.mkdir()
    (rank_dir / "profiler_info_0.json").write_text("{}")
    _write(rank_dir / "host.1.pt.trace.json", events)
    _analyse_json(rank_dir)
    comm = json.loads((rank_dir / "ASCEND_PROFILER_OUTPUT" / "communication.json").read_text())
    kinds = {
        kind: sorted(name.split("__")[0] for name in ops if name != "Total Op Info")
        for step in comm.values()
        for kind, ops in step.items()
    }
    assert kinds == {"collective": ["allReduce"], "p2p": ["receive"]}


@pytest.mark.parametrize("process", ["HCCL", "Communication"])
def test_collectives_of_torch_npus_communication_process_are_communication(
    tmp_path: Path, process: str
) -> None:
    """helper-91: they were left out, the step read 0 % communication and its time as free."""
    events, collectives = _with_communication_process(_raw(), process)
    path = _write(tmp_path / "trace_view.json", events)
    report = _analyse_json(path)
    (rank,) = report["ranks"]
    (step_op,) = [e for e in events if e["name"].startswith("ProfilerStep#")]
    lo, hi = _span(step_op)
    hardware = _pid_of(events, "Ascend Hardware")

    def clipped(spans: list[tuple[Decimal, Decimal]]) -> list[tuple[Decimal, Decimal]]:
        return [(max(s, lo), min(e, hi)) for s, e in spans if s < hi and e > lo]

    tasks = clipped(
        [_span(e) for e in events if e["pid"] == hardware and e["ph"] == "X" and e["name"] != "MEMCPY_ASYNC"]
    )
    computing, communication = _union(tasks), _union(clipped(collectives))
    both = _union(tasks + clipped(collectives))
    overlapped = computing + communication - both
    (step,) = rank["steps"]
    assert communication == 5000  # both inside the step
    for key, want in (
        ("computing_us", computing),
        ("communication_us", communication),
        ("overlapped_us", overlapped),
        ("comm_not_overlapped_us", communication - overlapped),
        ("free_us", hi - lo - both),
    ):
        assert abs(Decimal(str(step[key])) - want) <= Decimal("0.002"), key
    assert rank["communication"]["operators"] == 2  # the collectives, not their plane's tasks
    assert rank["communication"]["time_us"] == 5000.0
    # trace_view.json keeps the trace's own communication process and adds none of npuprof's
    written = json.loads((tmp_path / "trace_view.json.npuprof" / "trace_view.json").read_text())
    names = list(_process_names(written).values())
    assert names.count(process) == 1
    assert names.count("Communication") == (process == "Communication")
    lanes = {
        e["name"] for e in written if e["pid"] == _pid_of(written, "Overlap Analysis") and e["ph"] == "X"
    }
    assert {"Communication", "Communication(Not Overlapped)"} <= lanes


def test_device_tasks_in_a_process_of_no_known_kind_are_named_not_dropped_silently(tmp_path: Path) -> None:
    """helper-91: the device process renamed ("Task Scheduler"): its tasks cannot be counted, and the report
    said "CPU-only trace" without a word about them."""
    raw = _raw()
    hardware = _pid_of(raw, "Ascend Hardware")
    for e in raw:
        if e["ph"] == "M" and e["name"] == "process_name" and e["pid"] == hardware:
            e["args"]["name"] = "Task Scheduler"
    tasks = sum(1 for e in raw if e["pid"] == hardware and e["ph"] == "X")
    path = _write(tmp_path / "renamed.json", raw)
    result = npuprof("analyse", str(path))
    assert result.returncode == 0, result.stderr
    assert f'("Task Scheduler" x{tasks}) were left out' in result.stderr
    assert "no device kernels counted" in result.stdout
    assert "CPU-only trace (the CPU is the device" not in " ".join(result.stdout.split())


def test_stacks_that_cannot_be_written_to_stdout_are_an_error(tmp_path: Path) -> None:
    """helper-92: `export-stacks TRACE > /dev/full` lost the stacks and exited 0, where analyse says so."""
    import subprocess
    import sys

    from conftest import clean_env

    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "npuprof", "export-stacks", str(FIXTURE)],
            stdout=full, stderr=subprocess.PIPE, text=True, env=clean_env(), timeout=120,
        )  # fmt: skip
    assert done.returncode == 1
    assert "npuprof export-stacks: cannot write the stacks to stdout: No space left on device" in done.stderr
    assert "Traceback" not in done.stderr


def test_memory_timeline_times_of_epoch_microseconds_are_exact_nanoseconds(tmp_path: Path) -> None:
    """helper-91: a trace of epoch µs times (no baseTimeNanoseconds) got ns times off by up to ~100 ns
    (1620000000000900 µs became 1620000000000900096): µs x 1000 is past a float's 53 bits."""
    times = [1620000000000900, 1620000000001501, 1620000000002500]
    allocated = [100 << 20, 150 << 20, 120 << 20]
    events = [_meta(7, "python3")]
    previous = 0
    for ts, total in zip(times, allocated, strict=True):
        args = {"Device Type": 1, "Device Id": 0, "Total Allocated": total, "Total Reserved": 256 << 20,
                "Bytes": total - previous, "Addr": 1}  # fmt: skip
        events.append({"ph": "i", "s": "t", "name": "[memory]", "pid": 7, "tid": 7, "ts": ts, "args": args})
        previous = total
    events.append(_x("ProfilerStep#1", times[0] - 10, 2000, 7, 7, cat="user_annotation"))
    trace = _write(tmp_path / "old.json", {"traceEvents": events})
    target = tmp_path / "m.raw.json.gz"
    done = npuprof("memory-timeline", str(trace), "-o", str(target))
    assert done.returncode == 0, done.stderr
    raw = json.loads(gzip.decompress(target.read_bytes()))
    want = [int(Decimal(str(t)) * 1000) for t in times]
    assert [row[0] for row in raw] == want


def test_a_collective_both_on_a_stream_and_in_the_hccl_process_counts_once(tmp_path: Path) -> None:
    """helper-93: the HCCL process's collectives were added to the same collectives as tasks of the device's
    streams (real kernel_details.csv files list hcom tasks): 4 operations, 10 ms, for 2 and 5 ms."""
    raw = _raw()
    events, collectives = _with_communication_process(raw, "HCCL")
    hardware = _pid_of(raw, "Ascend Hardware")
    stream = next(e["tid"] for e in raw if e["pid"] == hardware and e["ph"] == "X")
    for n, (start, end) in enumerate(collectives):
        events.append(_x(f"hcom_allReduce__123_{n}_1", str(start), float(end - start), hardware, stream))
    report = _analyse_json(_write(tmp_path / "trace_view.json", events))
    (rank,) = report["ranks"]
    assert rank["communication"]["operators"] == 2
    assert rank["communication"]["time_us"] == 5000.0
    assert rank["steps"][0]["communication_us"] == 5000.0


def test_a_send_and_receive_of_the_hccl_process_is_no_bubble(tmp_path: Path) -> None:
    """helper-93: hcom_batchSendRecv in the HCCL process counted its whole time as a receive (bubble); no
    record says which way it went, as for the device's own such tasks."""
    raw = _raw()
    events, _spans = _with_communication_process(raw, "HCCL")
    for e in events:
        if e.get("name", "").startswith("hcom_allReduce__123_0"):
            e["name"] = "hcom_batchSendRecv__123_0_1"
    (rank,) = _analyse_json(_write(tmp_path / "trace_view.json", events))["ranks"]
    assert rank["steps"][0]["bubble_us"] == 0.0
    assert rank["steps"][0]["communication_us"] == 5000.0


def test_an_hccl_process_without_device_tasks_reads_as_an_npu_trace_not_a_cpu_one(tmp_path: Path) -> None:
    """helper-93: torch_npu's HCCL process and no Ascend Hardware task (a trace filtered, or its device data
    lost): read as CPU, its host operators as computing. It is an NPU's trace: Computing 0, communication
    HCCL's collectives, said in a warning. npuprof's own CPU trace_view.json ("Communication") stays CPU."""
    raw = _raw()
    hardware = _pid_of(raw, "Ascend Hardware")
    events, collectives = _with_communication_process(raw, "HCCL")
    events = [e for e in events if e["pid"] != hardware]
    (rank,) = _analyse_json(_write(tmp_path / "trace_view.json", events))["ranks"]
    (step_op,) = [e for e in events if e["name"].startswith("ProfilerStep#")]
    lo, hi = _span(step_op)
    communication = _union([(max(s, lo), min(e, hi)) for s, e in collectives if s < hi and e > lo])
    (step,) = rank["steps"]
    assert rank["device"] == "NPU"
    assert step["computing_us"] == 0.0
    assert abs(Decimal(str(step["communication_us"])) - communication) <= Decimal("0.002")
    assert abs(Decimal(str(step["free_us"])) - (hi - lo - communication)) <= Decimal("0.002")
    assert any("HCCL process but no device task" in w for w in rank["warnings"]), rank["warnings"]
    renamed = [
        {**e, "args": {"name": "Communication"}} if e.get("args", {}).get("name") == "HCCL" else e
        for e in events
    ]
    (cpu,) = _analyse_json(_write(tmp_path / "ours.json", renamed))["ranks"]
    assert cpu["device"] == "CPU" and cpu["steps"][0]["computing_us"] > 0


# ---- names torch's Kineto writer did not escape -----------------------------------------------------------
def _kineto_with_names_unescaped() -> tuple[bytes, list[dict[str, Any]], list[str]]:
    """A CPU trace as torch's C++ Kineto writer lays it out, with two Python frames whose names it wrote
    unescaped: torch 2.13's (measured here: a frame of code compiled under the file name
    'gen{"device": "cpu"}', each key on its own line, the '"' as it is) and torch 2.0.1's (pytorch#113001:
    a frame named after its source line, a raw newline in it, the keys on one line). The text, the events
    as json reads them once each name is a placeholder, and the placeholders' names."""
    pid = tid = 4242
    events = [
        _meta(pid, "python"),
        _x("ProfilerStep#1", 1000, 100, pid, tid, "user_annotation"),
        _x("NAME_A", 1010, 50, pid, tid, "python_function"),
        _x("aten::mm", 1020, 30, pid, tid, "cpu_op"),
        _x("NAME_B", 1060, 30, pid, tid, "python_function"),
        _x("aten::add", 1065, 10, pid, tid, "cpu_op"),
        {
            **{"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]"},
            **{"pid": pid, "tid": tid, "ts": 1030},
            "args": {"Device Type": 0, "Device Id": -1, "Bytes": 4096, "Total Allocated": 8192},
        },
    ]
    names = ['gen{"device": "cpu"}(2): f', '_lib = torch.library.Library("_x", "IMPL")\n(1): <module>']
    head = b'{\n  "schemaVersion": 1,\n  "deviceProperties": [\n  ],\n  "traceEvents": [\n'
    parts = []
    layouts = {  # torch 2.13's, then torch 2.0.1's
        "NAME_A": '  {\n    "ph": "X",\n    "cat": "python_function",\n    "name": "@NAME",\n'
        '    "pid": @PID,\n    "tid": @TID,\n    "ts": @TS,\n    "dur": @DUR\n    ,\n'
        '    "args": {\n      "Python id": 2\n    }\n  }',
        "NAME_B": '  {\n    "ph": "X", "cat": "python_function", "name": "@NAME", "pid": @PID, "tid": @TID,\n'
        '    "ts": @TS, "dur": @DUR,\n    "args": {\n      "Python id": 3\n    }\n  }',
    }
    for e in events:
        if e["name"] in layouts:
            fields = {"@NAME": names[e["name"] == "NAME_B"], "@PID": pid, "@TID": tid, "@TS": e["ts"]}
            part = layouts[e["name"]]
            for key, value in {**fields, "@DUR": e["dur"]}.items():
                part = part.replace(key, str(value))
            parts.append(part)
        else:
            parts.append("  " + json.dumps(e))
    text = head + ",\n".join(parts).encode() + b'\n],\n  "traceName": "t.pt.trace.json"\n}\n'
    return text, events, names


def test_names_torchs_kineto_wrote_unescaped_are_read_and_said(tmp_path: Path) -> None:
    """torch's C++ trace writer does not escape a '"' in an event's name (a Python frame of code compiled
    under such a file name, as torch.compile's generated code is; pytorch#146900), nor, in torch 2.0, a
    newline (pytorch#113001): json.load refuses the file, and npuprof refused the whole trace ("malformed
    JSON ... (corrupt trace)": no step, no stack). It is read, the names with ' and a space in their place,
    and said."""
    text, events, names = _kineto_with_names_unescaped()
    path = tmp_path / "t.pt.trace.json"
    path.write_bytes(text)
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    readable = [n.replace('"', "'").replace("\n", " ") for n in names]
    (step,) = [e for e in events if e["name"].startswith("ProfilerStep#")]
    lo, hi = _span(step)
    computing = _union([_span(e) for e in events if e.get("cat") == "cpu_op"])  # the CPU is the device here
    note = "2 event name(s) hold a '\"' or a control character that torch's trace writer did not escape"
    report = _analyse_json(path)
    (rank,) = report["ranks"]
    assert [(s["step"], s["duration_us"], s["computing_us"]) for s in rank["steps"]] == [
        (1, float(hi - lo), float(computing))
    ]
    assert any(w.startswith(note) for w in rank["warnings"]), rank["warnings"]
    stacks = npuprof("export-stacks", str(path))
    assert stacks.returncode == 0, stacks.stderr
    assert note in stacks.stderr
    by_name = {e["name"]: e for e in events}
    outer = [e for e in events if e.get("cat") == "python_function"]
    folded = _folded(stacks.stdout)
    for frame, readable_name in zip(outer, readable, strict=True):
        inner = [
            e for e in events if e.get("cat") == "cpu_op" and _span(frame)[0] <= _span(e)[0] < _span(frame)[1]
        ]
        self_us = _span(frame)[1] - _span(frame)[0] - sum(_span(e)[1] - _span(e)[0] for e in inner)
        (found,) = [v for k, v in folded.items() if k[-1] == readable_name.replace(" ", "_")]
        assert found == int(self_us), (readable_name, folded)
    assert by_name["NAME_A"]["dur"] - by_name["aten::mm"]["dur"] == 20  # the case is what it says
    timeline = npuprof("memory-timeline", str(path), "-o", str(tmp_path / "m.json"))
    assert timeline.returncode == 0, timeline.stderr
    assert note in timeline.stderr
    (memory,) = [e for e in events if e["name"] == "[memory]"]
    times, sizes = json.loads((tmp_path / "m.json").read_text())
    # on the CPU the capture's own changes, summed (helper-215: torch's totals carry earlier captures' blocks)
    assert times == [memory["ts"]] and sizes[-1][-1] == memory["args"]["Bytes"]


def test_a_rank_whose_torch_wrote_no_distributed_info_is_said_to_be_left_out_across_ranks(
    tmp_path: Path,
) -> None:
    """Two ranks' traces in one folder, rank 1's from a torch 2.x (distributedInfo) and the other's from
    torch 1.8-1.10, which writes none: the comparison across ranks held rank 1 alone, its max the min, and
    nothing said the other trace was not in it (the note came only for two traces without a rank)."""
    old = _old_release_trace()
    renamed = {"Operator": "cpu_op", "Kernel": "kernel", "Runtime": "cuda_runtime", "Memcpy": "gpu_memcpy"}
    new = [{**e, "cat": renamed.get(e["cat"], e["cat"])} if "cat" in e else e for e in old]  # torch 2.x's
    _write(tmp_path / "a.1.pt.trace.json", {"traceEvents": old})
    _write(
        tmp_path / "b.2.pt.trace.json", {"distributedInfo": {"rank": 1, "world_size": 2}, "traceEvents": new}
    )
    done = npuprof("analyse", str(tmp_path), "-j", "1", "--format", "json", timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert sorted((r["rank"] is None, r["trace"]) for r in report["ranks"]) == [
        (False, "b.2.pt.trace.json"),
        (True, "a.1.pt.trace.json"),
    ]
    (step,) = [e for e in new if e["name"].startswith("ProfilerStep#")]
    assert report["cross_rank"]["steps"] == [
        {"step": 1, "ranks": {"1": step["dur"]}, "max_us": step["dur"], "min_us": step["dur"]}
    ]
    assert (
        "1 process's captures have no rank (no profiler_info_<rank>.json, no distributedInfo in the trace): "
        "they are not compared with those of rank(s) 1 across ranks"
    ) in " ".join(done.stderr.split())
