"""Traces no profiler writes, edited by hand or by a script: parsed with a warning that says what was passed
over, or refused with where and why; never silently different numbers."""

from __future__ import annotations

import csv
import gzip
import json
import math
import os
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from _forked_cli import npuprof  # forked from a process that imported npuprof's reports: see its doc
from analyse_support.handmade import PID, cpu_trace, cuda_trace, mem, write_rank_dir, x
from conftest import clean_env

from npuprof.analysis.parse import SUMMARY_FILE, parse_rank_dir

REAL = Path(__file__).resolve().parent / "fixtures" / "ascend-real"  # see its SOURCE.md


def _summary(rank_dir: Path) -> dict:
    outcome = parse_rank_dir(rank_dir, workers=1)
    assert outcome.ok, outcome
    return json.loads((rank_dir / "ASCEND_PROFILER_OUTPUT" / SUMMARY_FILE).read_text())


def test_a_repeated_step_number_is_named_and_the_first_span_kept(tmp_path: Path) -> None:
    trace = cpu_trace()
    trace["traceEvents"] += [
        x("ProfilerStep#8", "user_annotation", 1000, 400),
        x("ProfilerStep#7", "user_annotation", 1400, 300),
    ]
    summary = _summary(write_rank_dir(tmp_path, trace))
    assert [(s["step"], s["duration_us"]) for s in summary["steps"]] == [(7, 1000.0), (8, 400.0)]
    (note,) = summary["warnings"]
    assert note.startswith("1 step number(s) appear more than once (ProfilerStep#7)"), note


def test_steps_of_two_processes_in_one_trace_are_said_to_be_read_together(tmp_path: Path) -> None:
    """helper-99: a trace holding a second process's copy of the steps said the repeated steps were "left
    out" while that process's operators were still counted (in the first process's steps and the top
    operators: twice the calls). The note now says what is done with them."""
    trace = cpu_trace()
    ours = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    trace["traceEvents"] += [{**e, "pid": e["pid"] + 1, "tid": e["tid"] + 1, "ts": e["ts"] + 3} for e in ours]
    summary = _summary(write_rank_dir(tmp_path, trace))
    (note,) = [w for w in summary["warnings"] if "appear more than once" in w]
    assert f"the steps are of 2 processes ({PID}, {PID + 1}), read as one rank" in note, note
    assert "their operators are counted together" in note, note
    calls: Counter[str] = Counter()
    for op in summary["top_operators"]:
        calls[op["name"]] += op["count"]
    mine = Counter(e["name"] for e in ours if e["cat"] == "cpu_op")
    assert calls == Counter({name: 2 * n for name, n in mine.items()})  # as the note says


def test_steps_that_overlap_are_named(tmp_path: Path) -> None:
    """ProfilerStep#8 begins 100 µs before #7 ends (two profilers' steps in one trace, an edit): the time
    they share is in both steps' figures, and the report says so (it was silent: helper-84)."""
    trace = cpu_trace()
    trace["traceEvents"].append(x("ProfilerStep#8", "user_annotation", 900, 600))
    summary = _summary(write_rank_dir(tmp_path, trace))
    assert [(s["step"], s["duration_us"]) for s in summary["steps"]] == [(7, 1000.0), (8, 600.0)]
    (note,) = summary["warnings"]
    assert note.startswith("1 pair(s) of steps overlap in time (steps 7 and 8)"), note
    touching = cpu_trace()  # one step ending where the next begins is no overlap
    touching["traceEvents"].append(x("ProfilerStep#8", "user_annotation", 1000, 600))
    assert "warnings" not in _summary(write_rank_dir(tmp_path / "b", touching))


def test_a_negative_duration_is_named(tmp_path: Path) -> None:
    trace = cpu_trace()
    trace["traceEvents"].append(x("aten::relu", "cpu_op", 700, -50, **{"External id": 9}))
    trace["traceEvents"].append(x("ProfilerStep#8", "user_annotation", 1000, -100))
    summary = _summary(write_rank_dir(tmp_path, trace))
    (note,) = summary["warnings"]
    assert note.startswith("2 step, operator, device or Python event(s) with a negative duration"), note
    assert note.endswith("are counted as 0 µs long"), note
    assert [(s["step"], s["duration_us"]) for s in summary["steps"]] == [(7, 1000.0), (8, 0.0)]


def test_epoch_times_written_as_numbers_with_decimals_are_said_to_be_rounded(tmp_path: Path) -> None:
    """helper-112: a trace whose ts are absolute epoch µs as JSON numbers with ns decimals (a Kineto of
    2024, before its times moved after baseTimeNanoseconds) is read through doubles, which hold such
    numbers to 0.25 µs: every figure rounded, unsaid. Whole epoch µs (torch before 2.4) are exact."""
    base = 1_614_000_000_000_000

    def shifted(fraction: float) -> dict:
        trace = cpu_trace()
        for event in trace["traceEvents"]:
            event["ts"] = base + event["ts"] + fraction
        return trace

    (note,) = _summary(write_rank_dir(tmp_path / "ns", shifted(0.217)))["warnings"]
    assert note.startswith("the trace's times are epoch µs written as JSON numbers with decimals"), note
    grain = float(np.spacing(float(base)))  # the step of a double there, computed apart
    assert grain == 0.25 and f"to {grain:g} µs, so every figure is rounded to that" in note, note
    assert "warnings" not in _summary(write_rank_dir(tmp_path / "us", shifted(0.0)))


def test_a_negative_kernel_duration_counts_as_zero_in_every_table(tmp_path: Path) -> None:
    """helper-112: a kernel of dur -1e9 was passed over by the step figures (their unions) but summed by
    the kernel tables: a top kernel of -999994.528 ms and a kernel_details.csv row of -1e9 beside steps
    that knew nothing of it. Every table now reads it as 0 µs, and says so."""
    trace = cuda_trace()
    extra = x("kernel_a", "kernel", 600, -1e9, pid=0, tid=7, correlation=16, stream=7, device=0)
    trace["traceEvents"].append({**extra, "args": {**extra["args"], "External id": 2}})
    rank_dir = write_rank_dir(tmp_path, trace)
    summary = _summary(rank_dir)
    (note,) = summary["warnings"]
    assert note.startswith("1 step, operator, device or Python event(s) with a negative duration"), note
    clean = _summary(write_rank_dir(tmp_path / "clean", cuda_trace()))
    assert summary["steps"] == clean["steps"]  # 0 µs adds nothing to a union
    kernels = {k["name"]: k for k in summary["top_kernels"]}
    assert kernels["kernel_a"]["count"] == 2 and kernels["kernel_a"]["total_us"] == 200.0, kernels
    rows = list(csv.DictReader((rank_dir / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").open()))
    durations = sorted(float(r["Duration(us)"]) for r in rows if r["Name"] == "kernel_a")
    assert durations == [0.0, 200.0], durations


@pytest.mark.parametrize("compact", [False, True])
def test_nan_or_infinity_in_args_is_read_as_unknown(tmp_path: Path, compact: bool) -> None:
    """An arg of NaN or Infinity (Python's json.dump of a float nan or inf: a record_function's arg, a tool's)
    made analyse refuse the whole trace, naming the byte. It is read as unknown ("?"), said in one line, and
    every figure is the clean trace's (a ts or dur of NaN leaves that event out: test_damaged_events.py)."""
    trace = cpu_trace()
    odd = [float("nan"), float("inf"), -float("inf")]
    trace["traceEvents"][2]["args"]["Sequence number"] = odd[0]
    trace["traceEvents"][3]["args"]["lr"] = [0.5, *odd[1:]]
    rank_dir = write_rank_dir(tmp_path, trace, compact=compact)
    summary = _summary(rank_dir)
    clean = _summary(write_rank_dir(tmp_path / "clean", cpu_trace()))
    assert summary["steps"] == clean["steps"] and summary["top_operators"] == clean["top_operators"]
    (note,) = [w for w in summary["warnings"] if "NaN or Infinity" in w]
    assert note.startswith(f"{len(odd)} arg value(s) are NaN or Infinity, which is no JSON"), note
    assert 'read as unknown (the string "?")' in note, note
    from npuprof.analysis.trace_loader import load_trace

    loaded = load_trace(next(rank_dir.glob("*.pt.trace.json")))
    args = [e.args_dict() for e in loaded.events]
    assert args[2]["Sequence number"] == "?" and args[3]["lr"] == [0.5, "?", "?"], args[2:4]
    assert loaded.damaged.total == 0


def test_a_nan_arg_keeps_an_event_where_it_is_only_shown_and_leaves_one_out_where_a_figure_needs_it(
    tmp_path: Path,
) -> None:
    """A kernel's stream of NaN (and an Infinity in its grid) left the kernel out as damaged, its device
    time lost from its step; it is kept, its stream read as its thread's. An operator's External id of NaN
    (a link) keeps the operator too, linked to no kernel (helper-351: it was left out). A [memory] event's
    Bytes of NaN (a sum) still leaves its event out, but said as NaN or Infinity: the count named "Expected
    `float`, got `str`", a string the trace does not hold."""
    trace = cuda_trace()
    events = trace["traceEvents"]
    kernel = next(e for e in events if e["name"] == "kernel_a")
    kernel["args"].update({"stream": float("nan"), "grid": [float("inf"), 1, 1]})
    alloc = next(e for e in events if e["name"] == "[memory]" and e["args"]["Bytes"] > 0)
    alloc["args"]["Bytes"] = float("nan")
    mul = next(e for e in events if e["name"] == "aten::mul")
    mul["args"]["External id"] = float("nan")
    summary = _summary(write_rank_dir(tmp_path, trace))

    step_1 = next(e for e in events if e["name"] == "ProfilerStep#1")
    spans = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("cat") == "kernel"
        and not e["name"].startswith("nccl")
        and e["ts"] < step_1["ts"] + step_1["dur"]
    )
    computing, end = 0.0, -math.inf
    for start, stop in spans:  # their union
        computing += max(0.0, stop - max(start, end))
        end = max(end, stop)
    assert summary["steps"][0]["computing_us"] == computing == 300.0, summary["steps"][0]
    assert "aten::mul" in {op["name"] for op in summary["top_operators"]}, summary["top_operators"]
    (damaged,) = [w for w in summary["warnings"] if "damaged event(s) left out" in w]
    assert damaged.startswith("1 damaged event(s) left out ("), damaged
    assert "args.Bytes is NaN or Infinity x1" in damaged and "External id" not in damaged, damaged
    assert "got `str`" not in damaged, damaged
    (note,) = [w for w in summary["warnings"] if "arg value(s) are NaN or Infinity" in w]
    assert note.startswith("4 arg value(s)") and "counted with the damaged ones" in note, note


def test_nan_as_text_inside_a_string_is_left_as_written_beside_a_nan_arg(tmp_path: Path) -> None:
    """A string holding ",NaN," (a label, a path) beside an arg of NaN: the repair overwrote the text inside
    the string too (a list's element, to the read back), the JSON broke and the whole trace was refused. Only
    the arg is read as unknown; the string, and one after a path ending in a backslash, keep their text."""
    from npuprof.analysis.trace_loader import load_trace

    trace = cpu_trace()
    trace["traceEvents"][2]["args"].update({"dir": "C:\\out\\", "label": "a,NaN,b", "lr": float("nan")})
    trace["traceEvents"][3]["args"].update({"label": "[NaN, -Infinity]", "beta": float("inf")})
    rank_dir = write_rank_dir(tmp_path, trace)
    loaded = load_trace(next(rank_dir.glob("*.pt.trace.json")))
    args = [e.args_dict() for e in loaded.events]
    assert (args[2]["label"], args[2]["lr"], args[2]["dir"]) == ("a,NaN,b", "?", "C:\\out\\"), args[2]
    assert (args[3]["label"], args[3]["beta"]) == ("[NaN, -Infinity]", "?"), args[3]
    assert loaded.damaged.total == 0


def test_nan_in_args_of_every_event_of_a_bare_array_read_in_small_blocks(tmp_path: Path) -> None:
    """torch_npu's form with an arg of NaN in every event, read in blocks smaller than the file: the event
    boundaries are still found (a value no JSON in every event hid them) and every event read."""
    from npuprof.analysis.trace_loader import TraceReader

    events = [{**e, "ts": f"{e['ts']:.3f}"} for e in cpu_trace()["traceEvents"]]  # torch_npu's string ts
    odd = [{**e, "args": {**e.get("args", {}), "bandwidth": float("nan")}} for e in events] * 200
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps(odd))
    reader = TraceReader(path, block=4096)
    read = [e for chunk in reader for e in chunk.events]
    assert len(read) == len(odd) and {e.args_dict()["bandwidth"] for e in read} == {"?"}
    assert reader.repaired_values == {"arg not a number": len(odd)}


def test_nan_written_by_pythons_json_as_a_pid_is_named_where_it_stands(tmp_path: Path) -> None:
    """A NaN as an event's own key (pid, tid, id) is still refused, naming its byte: read as "?", a pid
    would be a process of its own."""
    trace = cpu_trace()
    trace["traceEvents"][2]["pid"] = float("nan")
    rank_dir = write_rank_dir(tmp_path, trace)
    text = next(rank_dir.glob("*.pt.trace.json")).read_text()
    outcome = parse_rank_dir(rank_dir, workers=1)
    assert outcome.status == "corrupt", outcome
    byte = text.encode().index(b"NaN")
    assert f"malformed JSON at byte {byte} (NaN: not a JSON number" in outcome.reason, (byte, outcome.reason)


def test_infinity_in_the_first_event_of_a_bare_array_is_named(tmp_path: Path) -> None:
    """torch_npu's form (a bare array) with a tid of Infinity in its first event: the reason gave the byte
    but not what stood there (helper-84), which the same value in a later event got."""
    from npuprof.analysis.trace_loader import TraceError, TraceReader

    events = [{**e, "ts": f"{e['ts']:.3f}"} for e in cpu_trace()["traceEvents"]]  # torch_npu's string ts
    first = {**events[1], "tid": float("inf")}  # no time's: an event's own key, still refused
    text = json.dumps([first, *events[2:], events[0]] * 200)
    path = tmp_path / "trace_view.json"
    path.write_text(text)
    byte = text.encode().index(b"Infinity")
    # read in blocks smaller than the file, as a large trace is: the block's split meets the bad byte first
    with pytest.raises(TraceError) as refused:
        list(TraceReader(path, block=4096))
    assert f"malformed JSON at byte {byte} (Infinity: not a JSON number" in str(refused.value), refused.value
    result = npuprof("analyse", str(path), env=clean_env())
    assert result.returncode == 1, result.stderr
    assert f"malformed JSON at byte {byte} (Infinity" in result.stderr, result.stderr


def test_memory_peaks_are_the_devices_not_a_host_allocation(tmp_path: Path) -> None:
    """A CUDA trace with the host's allocator's events too: the peaks (per step and of the capture) are the
    GPU's; a 2 GiB host allocation inside a step changes none of them."""
    trace = cuda_trace()

    def on(device_type: int, ts: float, nbytes: int, allocated: int, reserved: int) -> dict:
        event = mem(ts, nbytes, allocated, 0x1000 + int(ts))
        event["args"].update({"Device Type": device_type, "Total Reserved": reserved})
        return event

    trace["traceEvents"] += [
        on(1, 100, 100 << 20, 100 << 20, 128 << 20),  # step 1: the GPU at 100 MiB
        on(1, 1100, 100 << 20, 200 << 20, 256 << 20),  # step 2: 200 MiB
        on(0, 1200, 2 << 30, 2 << 30, 2 << 30),  # a 2 GiB host allocation in step 2
        on(0, 1300, -(2 << 30), 0, 2 << 30),
    ]
    summary = _summary(write_rank_dir(tmp_path, trace))
    peaks = {s["step"]: s["memory_peak_mb"] for s in summary["steps"]}
    assert peaks == {1: 100.0, 2: 200.0}, peaks
    assert summary["memory"]["peak_allocated_mb"] == 200.0
    assert summary["memory"]["peak_reserved_mb"] == 256.0


def test_a_steps_memory_peak_counts_what_it_started_with(tmp_path: Path) -> None:
    """A step that begins by freeing a buffer held over from the step before held that buffer until then:
    its peak is at least the level it started with (it read 0 MiB). Steps [0, 1000) and [1000, 2000)."""
    trace = cuda_trace()

    def on(ts: float, nbytes: int, allocated: int) -> dict:
        event = mem(ts, nbytes, allocated, 0x1000)
        event["args"]["Device Type"] = 1
        return event

    trace["traceEvents"] += [
        on(500, 64 << 20, 64 << 20),  # step 1 ends holding 64 MiB
        on(1500, -(64 << 20), 0),  # step 2 frees it halfway through: it held 64 MiB until 1500
    ]
    summary = _summary(write_rank_dir(tmp_path, trace))
    peaks = {s["step"]: s["memory_peak_mb"] for s in summary["steps"]}
    assert peaks == {1: 64.0, 2: 64.0}, peaks


def test_the_report_names_the_raw_trace_as_it_is_now_and_no_peak_for_no_step(tmp_path: Path) -> None:
    """The post-processor gzips the raw trace after the parse that named it: the report names the .gz;
    --steps that picks no step of the capture gives no memory peak (not the whole capture's)."""
    trace = cuda_trace()
    trace["traceEvents"].append(mem(1100, 1 << 20, 3 << 20, 0x9000))
    rank_dir = write_rank_dir(tmp_path, trace)
    _summary(rank_dir)
    (raw,) = rank_dir.glob("*.pt.trace.json")
    with open(raw, "rb") as src, gzip.open(f"{raw}.gz", "wb") as dst:
        dst.write(src.read())
    raw.unlink()
    report = json.loads(npuprof("analyse", str(rank_dir), "--format", "json", env=clean_env()).stdout)
    (rank,) = report["ranks"]
    assert rank["trace"] == f"{raw.name}.gz"
    assert rank["memory_peak_mb"] == 3.0
    later = cpu_trace()  # another capture, of step 5
    for event in later["traceEvents"]:
        if event.get("name", "").startswith("ProfilerStep#"):
            event["name"] = "ProfilerStep#5"
    write_rank_dir(tmp_path, later, name="b_1_20240301000000000")
    chosen = npuprof("analyse", str(tmp_path), "--format", "json", "--steps", "5", env=clean_env())
    assert chosen.returncode == 0, chosen.stderr
    (rank,) = [r for r in json.loads(chosen.stdout)["ranks"] if r["rank_dir"] == str(rank_dir)]
    assert rank["steps"] == [] and rank["memory_peak_mb"] is None


def test_two_captures_of_one_rank_with_the_same_steps_are_named(tmp_path: Path) -> None:
    """Two rank dirs of rank 0 with no npuprof record (torch_npu's, copied side by side) and the same step
    numbers: the report says they were pooled instead of dropping one capture's steps without a word."""
    first = write_rank_dir(tmp_path, cpu_trace(), name="a_1_20240101000000000")
    slow = cpu_trace()
    for event in slow["traceEvents"]:
        if event.get("name", "").startswith("ProfilerStep#"):
            event["dur"] *= 3
    second = write_rank_dir(tmp_path, slow, name="b_1_20240301000000000")
    result = npuprof("analyse", str(tmp_path), "--format", "json", env=clean_env())
    assert result.returncode == 0, result.stderr
    assert {r["rank_dir"] for r in json.loads(result.stdout)["ranks"]} == {str(first), str(second)}
    note = f"rank 0 has step 7 in 2 captures ({first}, {second}): they may be different runs"
    assert note in result.stderr, result.stderr


def test_a_trace_whose_directory_cannot_take_the_tables_is_analysed_into_the_cache(tmp_path: Path) -> None:
    """analyse only reads a trace: where its tables cannot go beside it (here a file holds the name they
    would take; a read-only mount is the usual case), they go to the user's cache, and the note says so."""
    trace_dir = tmp_path / "shared"
    trace_dir.mkdir()
    trace = trace_dir / "trace.json"
    trace.write_text(json.dumps(cpu_trace()))
    (trace_dir / "trace.json.npuprof").write_text("in the way")
    env = {**clean_env(), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    result = npuprof("analyse", str(trace), "--format", "json", env=env)
    assert result.returncode == 0, result.stderr
    (cached,) = (tmp_path / "cache" / "npuprof" / "traces").iterdir()
    assert cached.name.startswith("trace.json-")
    assert f"cannot write the tables beside the trace ({trace_dir / 'trace.json.npuprof'}: " in result.stderr
    assert f"they go to {cached}" in result.stderr
    assert (cached / "npuprof_summary.json").is_file()
    steps = sorted(
        int(e["name"][13:]) for e in cpu_trace()["traceEvents"] if e["name"].startswith("ProfilerStep#")
    )
    assert [s["step"] for s in json.loads(result.stdout)["ranks"][0]["steps"]] == steps
    again = npuprof("analyse", str(trace), "--format", "json", env=env)  # the cache is read back
    assert again.returncode == 0, again.stderr
    assert again.stdout == result.stdout.replace('"status": "parsed"', '"status": "cached"')


def test_a_trace_in_a_folder_no_one_may_write_in_is_analysed_into_the_cache_even_by_root(
    tmp_path: Path,
) -> None:
    """helper-103: as root, `analyse` wrote `<trace>.npuprof/` into a folder of mode 555 (root passes the
    access check): a folder kept read-only by its owner is not written in."""
    trace_dir = tmp_path / "kept"
    trace_dir.mkdir()
    trace = trace_dir / "trace.json"
    trace.write_text(json.dumps(cpu_trace()))
    trace_dir.chmod(0o555)
    try:
        env = clean_env(XDG_CACHE_HOME=str(tmp_path / "cache"))
        result = npuprof("analyse", str(trace), "--format", "json", env=env)
        assert sorted(p.name for p in trace_dir.iterdir()) == ["trace.json"], result.stderr
    finally:
        trace_dir.chmod(0o755)
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stderr.split())
    assert "cannot write the tables beside the trace" in text and "read-only (mode 555)" in text, text
    (cached,) = (tmp_path / "cache" / "npuprof" / "traces").iterdir()
    assert (cached / "npuprof_summary.json").is_file()


def _rank_dir_of_the_real_trace_view_alone(tmp_path: Path) -> tuple[Path, Path]:
    """A torch_npu rank dir (rank 3) whose tables are the real trace_view.json alone; and that file."""
    rank_dir = tmp_path / "runs" / "h_1_20240101000000000_ascend_pt"
    (rank_dir / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    (rank_dir / "profiler_info_3.json").write_text('{"config": {}}')
    view = rank_dir / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    view.write_bytes((REAL / "trace_view.json").read_bytes())
    return rank_dir, view


def _is_the_real_trace_views_rank(result: subprocess.CompletedProcess) -> None:
    """``analyse --format json`` reported the real trace_view.json's rank dir: rank 3, NPU, its steps."""
    (rank,) = json.loads(result.stdout)["ranks"]
    assert rank["rank"] == 3 and rank["device"] == "NPU"
    assert [(s["step"], s["duration_us"]) for s in rank["steps"]] == _steps_of_the_real_trace_view()


def _steps_of_the_real_trace_view() -> list[tuple[int, float]]:
    """(step, duration µs) of each ProfilerStep#N span of the real trace_view.json, read with json here."""
    events = json.loads((REAL / "trace_view.json").read_text())
    return [
        (int(e["name"].removeprefix("ProfilerStep#")), float(e["dur"]))
        for e in events
        if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
    ]


def test_a_rank_dir_with_only_trace_view_json_is_analysed_from_it(tmp_path: Path) -> None:
    """torch_npu's trace_view.json kept without its raw data or tables: the rank dir is reported from that
    trace, its rank kept, the tables made in the user's cache (a parse in torch_npu's folder would write
    over it), the folder left as it was."""
    rank_dir, view = _rank_dir_of_the_real_trace_view_alone(tmp_path)
    env = clean_env(XDG_CACHE_HOME=str(tmp_path / "cache"))
    for target in (rank_dir, rank_dir.parent):
        result = npuprof("analyse", str(target), "--format", "json", env=env)
        assert result.returncode == 0, result.stderr
        assert f"{rank_dir}: torch_npu's tables stop short of step_trace_time.csv" in result.stderr
        _is_the_real_trace_views_rank(result)
    assert sorted(p.name for p in view.parent.iterdir()) == ["trace_view.json"]
    assert view.read_bytes() == (REAL / "trace_view.json").read_bytes()
    assert list((tmp_path / "cache").rglob("step_trace_time.csv"))


def test_a_rank_dir_with_only_trace_view_json_and_no_home_is_analysed_from_scratch_tables(
    tmp_path: Path,
) -> None:
    """helper-349: with the user's cache unusable too (HOME=/nonexistent, a system user's or a bare
    container's), such a rank dir failed ("failed: the home directory does not exist"), where a bare trace
    and a read-only rank dir are reported from tables in /dev/shm or TMPDIR, removed afterwards (README,
    "Analysing")."""
    rank_dir, view = _rank_dir_of_the_real_trace_view_alone(tmp_path)
    home = tmp_path / "nonexistent"
    env = clean_env(HOME=str(home))
    env.pop("XDG_CACHE_HOME", None)
    result = npuprof("analyse", str(rank_dir), "--format", "json", env=env)
    assert result.returncode == 0, result.stderr
    assert f"{rank_dir}: its tables can be written neither there nor in the user's cache" in result.stderr
    _is_the_real_trace_views_rank(result)
    assert not home.exists()
    assert sorted(p.name for p in view.parent.iterdir()) == ["trace_view.json"]


def test_files_that_are_no_trace_say_what_they_hold(tmp_path: Path) -> None:
    whole = gzip.compress(json.dumps(cpu_trace()).encode())
    files = {
        "empty.json": (b"", "it is empty (0 bytes)"),
        "blank.json": (b" \n\t\n", "it holds only white space"),
        "events.json": (b"[ ]", "it is an empty JSON array: a trace with no events"),
    }
    for name, (data, said) in files.items():
        (tmp_path / name).write_bytes(data)
        result = npuprof("analyse", str(tmp_path / name), env=clean_env())
        assert result.returncode == 1
        (line,) = result.stderr.splitlines()
        assert line.startswith(f"npuprof analyse: nothing to analyse: {tmp_path / name} is neither"), line
        assert said in line, line
    # a trace cut inside its gzip data is a trace, cut short: read as far as it goes (GzipMembers passes the
    # first member's data on as it comes); here before its first event closes: nothing to read
    (tmp_path / "cut.json.gz").write_bytes(whole[: len(whole) // 2])
    result = npuprof("analyse", str(tmp_path / "cut.json.gz"), env=clean_env())
    assert result.returncode == 1
    said = " ".join(result.stderr.split())
    assert "cut.json.gz: truncated" in said and "nothing to read" in said, said
    assert "the gzip data ends early, in a member cut short" in said, said
    assert "Traceback" not in said and "EOFError" not in said, said


def test_a_trace_without_events_is_said_to_have_none(tmp_path: Path) -> None:
    (tmp_path / "none.json").write_text('{"traceEvents": []}')
    result = npuprof("analyse", str(tmp_path / "none.json"), env=clean_env())
    assert result.returncode == 0, result.stderr
    assert "the trace holds no events: nothing was recorded" in result.stderr, result.stderr
    assert "CPU-only" not in result.stdout  # nothing is known of the device (helper-91)


def test_events_of_unknown_category_in_an_unnamed_process_are_named(tmp_path: Path) -> None:
    """Device work of a category the tables do not know in a process with no process_name cannot be told
    from anything else: it is left out, said in a warning, never silently."""
    trace = cpu_trace()
    trace["traceEvents"] += [
        x("mykernel", "gpu_op", 200, 300, pid=7, tid="stream 7", **{"External id": 1}),
        x("mykernel", "gpu_op", 600, 100, pid=7, tid="stream 7", **{"External id": 2}),
    ]
    (note,) = _summary(write_rank_dir(tmp_path, trace))["warnings"]
    assert note.startswith(
        "2 complete event(s) of categories the tables do not know (gpu_op x2) in process(es) 7 with no "
        "process_name: left out"
    ), note


def test_torch_npus_tables_without_step_times_are_read_from_their_trace(tmp_path: Path) -> None:
    """A rank dir torch_npu began to parse (kernel_details.csv, trace_view.json) but left without
    step_trace_time.csv (helper-97): reported from its trace_view.json, said in a note; beside it a rank dir
    torch_npu parsed whole is read from its tables as before."""
    rank_dir = tmp_path / "node1_1234_20240101000000000_ascend_pt"
    out = rank_dir / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (out / "kernel_details.csv").write_bytes((REAL / "kernel_details_2023.csv").read_bytes())
    (out / "trace_view.json").write_bytes((REAL / "trace_view.json").read_bytes())
    result = npuprof(
        "analyse", str(tmp_path), "--format", "json", env=clean_env(XDG_CACHE_HOME=str(tmp_path / ".cache"))
    )
    assert result.returncode == 0, result.stderr
    said = f"{rank_dir}: torch_npu's tables stop short of step_trace_time.csv: its"
    assert said in " ".join(result.stderr.split()), result.stderr
    (rank,) = json.loads(result.stdout)["ranks"]
    assert [(s["step"], s["duration_us"]) for s in rank["steps"]] == _steps_of_the_real_trace_view()
    assert sorted(p.name for p in out.iterdir()) == ["kernel_details.csv", "trace_view.json"]


def test_a_top_above_what_the_parse_keeps_is_said(tmp_path: Path) -> None:
    rank_dir = write_rank_dir(tmp_path, cpu_trace())
    result = npuprof("analyse", str(rank_dir), "--top", "150", env=clean_env())
    assert result.returncode == 0, result.stderr
    assert "--top 150: the parse keeps each step's top 100 operators and kernels" in result.stderr
    assert "--top" not in npuprof("analyse", str(rank_dir), "--top", "100", env=clean_env()).stderr


def test_a_bare_trace_written_again_is_parsed_again(tmp_path: Path) -> None:
    """A script that writes trace.json again (a second profiling run): the tables beside it were made from
    the old one; the report is of the new one, and says it parsed it again."""
    trace = tmp_path / "trace.json"
    first = cpu_trace()
    trace.write_text(json.dumps(first))
    report = json.loads(npuprof("analyse", str(trace), "--format", "json", env=clean_env()).stdout)
    assert [(s["step"], s["duration_us"]) for s in report["ranks"][0]["steps"]] == [(7, 1000.0)]
    second = cpu_trace()
    second["traceEvents"][0] = x("ProfilerStep#9", "user_annotation", 0, 2500)
    trace.write_text(json.dumps(second))
    again = npuprof("analyse", str(trace), "--format", "json", env=clean_env())
    assert again.returncode == 0, again.stderr
    rank = json.loads(again.stdout)["ranks"][0]
    assert rank["status"] == "parsed"
    assert [(s["step"], s["duration_us"]) for s in rank["steps"]] == [(9, 2500.0)]
    assert f"{trace} was written (or touched) since its tables" in again.stderr
    unchanged = npuprof("analyse", str(trace), "--format", "json", env=clean_env())
    assert json.loads(unchanged.stdout)["ranks"][0]["status"] == "cached"
    assert "since its tables" not in unchanged.stderr
    # another trace put in its place with the same size and mtime (cp -p, rsync -a): parsed again
    stamp = trace.stat()
    replacement = tmp_path / "other.json"
    replacement.write_text(json.dumps(first))  # the first trace: a different size, set to look alike
    text = replacement.read_text()
    replacement.write_text(text + " " * (stamp.st_size - len(text)))
    os.utime(replacement, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    os.replace(replacement, trace)
    assert trace.stat().st_size == stamp.st_size and trace.stat().st_mtime_ns == stamp.st_mtime_ns
    swapped = json.loads(npuprof("analyse", str(trace), "--format", "json", env=clean_env()).stdout)
    assert [s["step"] for s in swapped["ranks"][0]["steps"]] == [7]


def test_an_operator_name_with_a_newline_moves_no_step(tmp_path: Path) -> None:
    """Names are searched joined by newlines: one holding a newline (a trace another tool wrote; torch
    strips them) shifted every later index: no step found, or an IndexError."""
    trace = cpu_trace()  # its steps as operators, as torch_npu and torch 1.8-1.10 write them
    trace["traceEvents"][0] = x("ProfilerStep#7", "cpu_op", 0, 1000)
    trace["traceEvents"][0:0] = [x("load\nbatch", "cpu_op", -300, 200)]
    trace["traceEvents"].append(x("my\nop", "cpu_op", 700, 50, **{"External id": 9}))
    trace["traceEvents"].append(x("ProfilerStep#8", "cpu_op", 1000, 400))
    summary = _summary(write_rank_dir(tmp_path, trace))
    assert [(s["step"], s["duration_us"]) for s in summary["steps"]] == [(7, 1000.0), (8, 400.0)]
    assert "my\nop" in {o["name"] for o in summary["top_operators"]}


def test_the_memory_peaks_allocated_and_reserved_cover_the_same_steps(tmp_path: Path) -> None:
    """--steps chose the allocated peak's steps, while the reserved peak stayed the whole capture's (events
    after the last step included): the pair described two different spans of time."""

    def sample(ts: float, allocated_mib: int, reserved_mib: int) -> dict:
        event = mem(ts, 1 << 20, allocated_mib << 20, 0x1000 + int(ts))
        event["args"]["Total Reserved"] = reserved_mib << 20
        return event

    trace = cpu_trace()
    trace["traceEvents"] += [
        x("ProfilerStep#8", "user_annotation", 1000, 400),
        sample(200, 10, 20),  # step 7
        sample(1100, 30, 40),  # step 8
        sample(2000, 50, 90),  # after the steps
    ]
    rank_dir = write_rank_dir(tmp_path, trace)

    def peaks(*flags: str) -> tuple:
        result = npuprof("analyse", str(rank_dir), "--format", "json", *flags, env=clean_env())
        assert result.returncode == 0, result.stderr
        rank = json.loads(result.stdout)["ranks"][0]
        steps = [(s["step"], s["memory_peak_mb"], s["memory_peak_reserved_mb"]) for s in rank["steps"]]
        return steps, rank["memory_peak_mb"], rank["memory_peak_reserved_mb"]

    assert peaks() == ([(7, 10.0, 20.0), (8, 30.0, 40.0)], 30.0, 40.0)
    assert peaks("--steps", "7") == ([(7, 10.0, 20.0)], 10.0, 20.0)


def test_a_directory_of_trace_files_is_analysed_file_by_file(tmp_path: Path) -> None:
    """torch's tensorboard_trace_handler leaves one trace file per rank in a directory (no rank dirs):
    each file is a rank of the report (was "no *_ascend_pt rank directory")."""
    tb = tmp_path / "tb"
    tb.mkdir()
    for rank, step_us in ((0, 1000), (1, 1500)):
        trace = cpu_trace()
        trace["distributedInfo"]["rank"] = rank
        trace["traceEvents"][0]["dur"] = step_us
        (tb / f"host_{100 + rank}.1700000000{rank}.pt.trace.json").write_text(json.dumps(trace))
    (tb / "notes.txt").write_text("not a trace")
    os.mkfifo(tb / "stuck.pt.trace.json")  # never opened: reading it would block
    result = npuprof("analyse", str(tb), "--format", "json", env=clean_env())
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert [(r["rank"], r["steps"][0]["duration_us"]) for r in report["ranks"]] == [(0, 1000.0), (1, 1500.0)]
    assert report["cross_rank"]["slowest"]["rank"] == 1
    assert "its 2 trace file(s) are analysed" in result.stderr
    assert "skipped" in result.stderr and "stuck.pt.trace.json: not a regular file" in result.stderr
    assert npuprof("analyse", str(tb), "--run", "all", env=clean_env()).returncode == 2


def test_an_empty_trace_file_says_it_is_empty(tmp_path: Path) -> None:
    (tmp_path / "w.1.pt.trace.json").write_bytes(b"")
    (tmp_path / "w.2.pt.trace.json").write_bytes(b" \n")
    for name, what in (("w.1.pt.trace.json", "it is empty (0 bytes)"), ("w.2.pt.trace.json", "white space")):
        result = npuprof("analyse", str(tmp_path / name), env=clean_env())
        assert result.returncode == 1 and what in result.stderr, result.stderr
        stacks = npuprof("export-stacks", str(tmp_path / name), env=clean_env())
        assert stacks.returncode == 1 and what in stacks.stderr, stacks.stderr
        assert not (tmp_path / (name + ".npuprof")).exists()  # no empty table directory left behind


def test_a_second_trace_in_a_rank_dir_and_a_rank_the_trace_contradicts_are_named(tmp_path: Path) -> None:
    """A rank dir holds one capture's trace: a second one put beside it is named as not read; the rank of
    profiler_info_{rank}.json (msprof-analyze's source) wins over the trace's, and the clash is said."""
    rank_dir = write_rank_dir(tmp_path, cpu_trace(), rank=3)  # the trace says rank 0
    other = cpu_trace()
    other["traceEvents"][0]["dur"] = 5000
    (rank_dir / "host.0.pt.trace.json").write_text(json.dumps(other))
    result = npuprof("analyse", str(tmp_path), "--format", "json", env=clean_env())
    assert result.returncode == 0, result.stderr
    (rank,) = json.loads(result.stdout)["ranks"]
    assert (rank["rank"], rank["steps"][0]["duration_us"]) == (3, 1000.0)  # host.1 is read, as before
    assert "host.0.pt.trace.json: a second trace in the rank dir: only host.1.pt.trace.json is read" in (
        result.stderr
    )
    assert rank["warnings"] == [
        "the trace says rank 0 (distributedInfo), profiler_info_3.json rank 3: reported as rank 3"
    ]


def test_tables_are_never_written_through_a_link_beside_a_bare_trace(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(cpu_trace()))
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "trace.json.npuprof").symlink_to(target)
    cache = tmp_path / "cache"
    result = npuprof("analyse", str(trace), "--format", "json", env=clean_env(XDG_CACHE_HOME=str(cache)))
    assert result.returncode == 0, result.stderr
    assert list(target.iterdir()) == []
    assert "a symbolic link (not followed)" in result.stderr and str(cache) in result.stderr


def test_a_trace_gzipped_under_a_parse_is_read_from_its_gz(tmp_path: Path, monkeypatch) -> None:
    """`npuprof analyse` while the run's post-processor gzips the same capture: the plain trace vanished
    under the parse (FileNotFoundError, the capture reported "failed"); the .gz is read instead."""
    from npuprof.analysis import parse

    rank_dir = write_rank_dir(tmp_path, cpu_trace())
    real = parse.write_outputs
    calls: list[str] = []

    def gzipped_meanwhile(raw: Path, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(raw.name)
        if raw.suffix == ".json":
            with open(raw, "rb") as plain, gzip.open(str(raw) + ".gz", "wb") as packed:
                packed.write(plain.read())
            raw.unlink()
            raise FileNotFoundError(2, "No such file or directory", str(raw))
        return real(raw, *args, **kwargs)

    monkeypatch.setattr(parse, "write_outputs", gzipped_meanwhile)
    outcome = parse_rank_dir(rank_dir, workers=1)
    assert outcome.status == "parsed", outcome
    assert calls == ["host.1.pt.trace.json", "host.1.pt.trace.json.gz"]


def test_names_and_paths_with_brackets_are_shown_as_they_are(tmp_path: Path) -> None:
    """`[rank0] fwd`, `load[/tmp/data]`: rich read them as markup, so a closing tag ended the report with a
    MarkupError traceback (exit 1) and other names lost their brackets."""
    trace = cpu_trace()
    names = ["load[/tmp/data] aten::mm", "[rank0] aten::add", "[bold red]X[/bold red]aten::empty"]
    for event, name in zip(trace["traceEvents"][1:4], names, strict=True):
        event["name"] = name
    folder = tmp_path / "runs" / "[exp]"
    folder.mkdir(parents=True)
    (folder / "trace.json").write_text(json.dumps(trace))
    result = npuprof("analyse", str(folder / "trace.json"), env=clean_env(COLUMNS="200"))
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    for name in names:
        assert name in result.stdout, (name, result.stdout)
    assert "runs/[exp]/trace.json" in "".join(result.stdout.split())  # the title may wrap


@pytest.mark.parametrize("gz", [False, True])
def test_array_keys_after_the_events_are_read_as_keys(tmp_path: Path, gz: bool) -> None:
    """Chrome's JSON object format has `"samples": [...]` after `traceEvents`, and a tool that re-saves a
    trace may put `deviceProperties` last: their `]` was taken for the events' end ("corrupt")."""
    trace = cuda_trace()
    events = trace.pop("traceEvents")
    properties = trace.pop("deviceProperties")
    samples = [{"cpu": 0, "tid": 1, "ts": 100 + i, "name": f"sample {i}", "weight": 1} for i in range(1500)]
    moved = {
        **trace,
        "traceEvents": events,
        "deviceProperties": properties,
        "samples": [],
        "x": [[1], [2]],
        "more": samples,  # ~100 KB of objects after the events: beyond the first look back
    }
    text = json.dumps(moved, indent=1)
    assert text.rstrip().endswith("]\n}") and '"samples": []' in text
    assert len(text) - text.index('"more"') > 1 << 16
    rank = _analysed_text(tmp_path / "moved.json", text, gz)
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert sum(k["count"] for k in rank["top_kernels"]) == len(kernels)
    assert sum(k["total_us"] for k in rank["top_kernels"]) == pytest.approx(sum(k["dur"] for k in kernels))
    assert rank["device"] != "CPU"


@pytest.fixture(scope="module")
def plain_rank(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The one rank of `npuprof analyse` of cpu_trace() as it is (plain.json, not gzipped): the same run
    for both variants of the test below, run once."""
    return _analysed_text(tmp_path_factory.mktemp("plain") / "plain.json", json.dumps(cpu_trace()), False)


@pytest.mark.parametrize("gz", [False, True])
def test_a_long_array_after_the_events_is_read_as_a_key(tmp_path: Path, gz: bool, plain_rank: dict) -> None:
    """Chrome's samples of a long recording: 1.5 MB of objects, each holding an array, after the events.
    The look back from the end found no key there (1 MiB, 16 arrays at most): "corrupt". (plain_rank: the
    trace without them, analysed once for both variants.)"""
    trace = cpu_trace()
    samples = [{"cpu": 0, "tid": 1, "ts": str(i), "stack": [1, 2, i]} for i in range(25000)]
    text = json.dumps({**trace, "samples": samples, "stackFrames": {"1": {"name": "f"}}})
    assert len(text) - text.index('"samples"') > 1 << 20
    rank = _analysed_text(tmp_path / "long.json", text, gz)
    assert trace == cpu_trace()  # the trace plain_rank analysed
    assert rank["steps"] == plain_rank["steps"] and rank["top_operators"] == plain_rank["top_operators"]


@pytest.fixture(scope="module")
def cut_refusal(tmp_path_factory: pytest.TempPathFactory):
    """`npuprof analyse` of a trace's text cut 50 bytes before its end (cut.json, never gzipped), run once
    per text: the gz variants of the test below write the same text, gzipped or not, and cut it alike."""
    done: dict[str, subprocess.CompletedProcess[str]] = {}

    def refusal(text: str) -> subprocess.CompletedProcess[str]:
        if text not in done:
            cut = tmp_path_factory.mktemp("cut") / "cut.json"
            cut.write_bytes(text.encode()[: len(text) - 50])
            done[text] = npuprof("analyse", str(cut), env=clean_env())
        return done[text]

    return refusal


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("after", ["long string", "brackets in a string"])
def test_any_value_after_the_events_is_read_as_a_key(
    tmp_path: Path, gz: bool, after: str, cut_refusal
) -> None:
    """A key after the events holding one string longer than the look back from the end (1 MiB), or 100
    "]" inside a string (64 were tried): refused as "truncated" (helper-84), though json.load reads it.
    (The cut file is the text cut, never gzipped: cut_refusal analyses it once for both gz variants.)"""
    trace = cpu_trace()
    value = "x" * (1 << 20) + "y" if after == "long string" else "a]b" * 100
    text = json.dumps({**trace, "note": value, "displayTimeUnit": "ms"})
    assert json.loads(text)["note"] == value  # valid JSON
    rank = _analysed_text(tmp_path / "after.json", text, gz)
    # cpu_trace's one step [0, 1000): computing 300, communication 300 (its docstring's figures)
    assert [
        (s["step"], s["duration_us"], s["computing_us"], s["communication_us"]) for s in rank["steps"]
    ] == [(7, 1000.0, 300.0, 300.0)]
    result = cut_refusal(text)  # the same file cut inside that value: its events read, the cut said
    assert result.returncode == 0, result.stderr
    assert "after its events' array closed, in the keys after it" in " ".join(result.stderr.split())


def test_a_memory_snapshot_left_says_its_timeline_was_not_made(tmp_path: Path) -> None:
    """A post-processor killed between the parse and the memory timeline leaves the snapshot: analyse names
    it and the command that makes the timeline (it was silent: helper-84)."""
    rank_dir = write_rank_dir(tmp_path, cpu_trace())
    (rank_dir / "memory_timeline.snapshot.msgpack").write_bytes(b"\x90")
    result = npuprof("analyse", str(rank_dir), "--format", "json", env=clean_env())
    assert result.returncode == 0, result.stderr
    (rank,) = json.loads(result.stdout)["ranks"]
    assert (
        "its memory timeline was not made (memory_timeline.snapshot.msgpack is left): "
        f"npuprof memory-timeline {rank_dir} -o memory.json makes it"
    ) in rank["warnings"], rank


def test_a_trace_cut_inside_a_value_after_the_events_is_truncated(tmp_path: Path) -> None:
    """Cut inside a string of "],}" after the events, the file ended in "],}": taken for the events' end
    followed by ", }" (a comma before no key), then refused as "corrupt: undecodable events" after reading
    it all again (helper-86: 49 s on 225 MB). It is a truncated trace."""
    text = json.dumps({**cpu_trace(), "blob": "],}" * 100_000})
    cut = text[: text.rindex("],}") + 3]
    path = tmp_path / "cut.pt.trace.json"
    path.write_text(cut)
    result = npuprof("analyse", str(path), env=clean_env())  # read: cut after the events (docs/formats.md)
    assert result.returncode == 0, result.stderr
    said = " ".join(result.stderr.split())
    assert "after its events' array closed, in the keys after it" in said, said
    assert f"read the {len(cpu_trace()['traceEvents'])} complete event(s)" in said, said


def test_bytes_after_a_closed_trace_are_shown_in_the_refusal(tmp_path: Path) -> None:
    """helper-112: a whole trace followed by other bytes was refused as "truncated ... before its JSON
    closes", which left the user to guess; the refusal now shows the file's last bytes, where the JSON's
    close and what follows it are seen."""
    path = tmp_path / "trail.json"
    path.write_text(json.dumps(cpu_trace()) + "\n}garbage,,,")
    result = npuprof("analyse", str(path), env=clean_env())
    assert result.returncode == 1 and "truncated" in result.stderr, result.stderr
    said = " ".join(result.stderr.split())
    tail = path.read_bytes()[-32:].decode()
    assert f"its last bytes: {tail!r}" in said, said


def test_a_gz_trace_with_megabytes_of_braces_after_its_events_is_read_in_one_pass(tmp_path: Path) -> None:
    """A .gz trace whose value after the events is megabytes of "],}]," (past the block the stream is read
    in): every "}" was looked at from Python, again for each block read (helper-86: 158 s for 20 MB). The
    regex engine finds the events' boundaries now. The guard is the reader's CPU time, far above the ~2
    CPU-s it takes (~40 s before), not its wall time (a loaded machine missed the 20 s timeout it had)."""
    import resource
    import subprocess
    import sys

    trace = cpu_trace()
    path = tmp_path / "braces.pt.trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps({**trace, "blob": "],}]," * 2_400_000}).encode(), 1))
    script = (
        "import sys; from npuprof.analysis.trace_loader import TraceReader; "
        "print(sum(len(c.events) for c in TraceReader(sys.argv[1], block=128 << 10)))"
    )
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=300, check=False
    )
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert done.returncode == 0 and done.stdout.split() == [str(len(trace["traceEvents"]))], done.stderr
    cpu_s = (cpu_after.ru_utime + cpu_after.ru_stime) - (cpu_before.ru_utime + cpu_before.ru_stime)
    assert cpu_s < 15, cpu_s
    result = npuprof("analyse", str(path), "--format", "json", env=clean_env(), timeout=300)
    assert result.returncode == 0, result.stderr
    (rank,) = json.loads(result.stdout)["ranks"]
    assert [(s["step"], s["computing_us"]) for s in rank["steps"]] == [(7, 300.0)]


def _analysed_text(path: Path, text: str, gz: bool) -> dict:
    """The one rank of `npuprof analyse` of a trace of this text (gzipped: at path.gz)."""
    if gz:
        path = path.with_name(path.name + ".gz")
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    result = npuprof("analyse", str(path), "--format", "json", env=clean_env())
    assert result.returncode == 0, result.stderr
    (rank,) = json.loads(result.stdout)["ranks"]
    return rank


def test_begin_end_pairs_and_unknown_categories_are_named_not_read_as_free_time(tmp_path: Path) -> None:
    """A Chrome trace of "B"/"E" pairs, or one whose operators carry another category, read as one
    100%-free step with no operator and no word."""
    pairs = cpu_trace()
    events = []
    for e in pairs["traceEvents"]:
        events.append({**{k: v for k, v in e.items() if k != "dur"}, "ph": "B"})
        events.append(
            {**{k: v for k, v in e.items() if k not in ("dur", "args")}, "ph": "E", "ts": e["ts"] + e["dur"]}
        )
    pairs["traceEvents"] = events
    renamed = cpu_trace()  # with its process named, as torch names it
    renamed["traceEvents"].append(
        {"ph": "M", "name": "process_name", "pid": 100, "tid": 0, "args": {"name": "python3"}}
    )
    for e in renamed["traceEvents"]:
        if e.get("cat") == "cpu_op":
            e["cat"] = "CPU_OP"
    for name, trace, said in (
        ("pairs.json", pairs, f'{len(events)} event(s) of phases the tables do not read ("B" x5, "E" x5)'),
        ("renamed.json", renamed, "complete event(s) of other categories (CPU_OP x3) were left out"),
    ):
        (tmp_path / name).write_text(json.dumps(trace))
        result = npuprof("analyse", str(tmp_path / name), env=clean_env(COLUMNS="300"))
        assert result.returncode == 0, result.stderr
        assert said in " ".join(result.stderr.split()), result.stderr
    real = write_rank_dir(tmp_path / "real", cpu_trace())
    assert "warning" not in npuprof("analyse", str(real), env=clean_env()).stderr


def test_a_folder_of_traces_under_any_json_name_is_analysed(tmp_path: Path) -> None:
    """`prof.export_chrome_trace(f"chrome_trace_{i}.json")` into one folder: "no *_ascend_pt rank
    directory"; the files are told by content, the folder's other JSON left alone."""
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "chrome_trace_1.json").write_text(json.dumps(cpu_trace()))
    (folder / "chrome_trace_2.json.gz").write_bytes(gzip.compress(json.dumps(cpu_trace()).encode()))
    (folder / "config.json").write_text(json.dumps({"lr": 0.1}))
    result = npuprof("analyse", str(folder), "--format", "json", env=clean_env())
    assert result.returncode == 0, result.stderr
    ranks = json.loads(result.stdout)["ranks"]
    assert sorted(Path(r["rank_dir"]).name for r in ranks) == [
        "chrome_trace_1.json",
        "chrome_trace_2.json.gz",
    ]
    assert all([s["duration_us"] for s in r["steps"]] == [1000.0] for r in ranks)


def test_an_event_whose_args_are_no_object_does_not_make_the_trace_unreadable(tmp_path: Path) -> None:
    """`"args": null` on one operator (a trace edited by hand) made analyse refuse the whole trace as
    corrupt, while export-stacks read it."""
    trace = cpu_trace()
    trace["traceEvents"][1]["args"] = None
    trace["traceEvents"][3]["args"] = [1, 2]
    (tmp_path / "t.json").write_text(json.dumps(trace))
    result = npuprof("analyse", str(tmp_path / "t.json"), "--format", "json", env=clean_env())
    assert result.returncode == 0, result.stderr
    (rank,) = json.loads(result.stdout)["ranks"]
    (step,) = rank["steps"]
    assert (step["duration_us"], step["computing_us"]) == (1000.0, 300.0)  # as cpu_trace's doc says
    assert {o["name"]: o["count"] for o in rank["top_operators"]} == {
        "aten::mm": 1,
        "aten::empty": 1,
        "aten::add": 1,
    }


def test_complete_events_without_a_time_are_left_out_and_said(tmp_path: Path) -> None:
    """An operator with no ts was read at time 0 (outside every step: gone without a word; export-stacks
    nested all such events in one another); one with no dur hid its time in its parent's."""
    trace = cpu_trace()
    extra = [
        x("aten::mm", "cpu_op", 700, 50),
        x("aten::mm", "cpu_op", 800, 50),
        x("aten::cat", "cpu_op", 900, 10),
    ]
    del extra[0]["ts"], extra[1]["ts"], extra[2]["dur"]
    trace["traceEvents"] += extra
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace))
    result = npuprof("analyse", str(path), "--format", "json", env=clean_env(COLUMNS="300"))
    assert result.returncode == 0, result.stderr
    assert "3 complete event(s) without a ts or a dur were left out" in result.stderr
    (rank,) = json.loads(result.stdout)["ranks"]
    assert {o["name"]: o["count"] for o in rank["top_operators"]} == {
        "aten::mm": 1,
        "aten::empty": 1,
        "aten::add": 1,
    }
    assert rank["steps"][0]["computing_us"] == 300.0
    folded = tmp_path / "t.folded"
    assert npuprof("export-stacks", str(path), "-o", str(folded), env=clean_env()).returncode == 0
    assert "aten::cat" not in folded.read_text() and "aten::mm;aten::mm" not in folded.read_text()


def test_a_truncated_gzip_trace_is_said_to_end_early(tmp_path: Path) -> None:
    """A .gz cut in its last bytes: what it holds is read (it was refused: docs/formats.md, "Traces cut
    short"), and the gzip data is said to end early."""
    whole = gzip.compress(json.dumps(cpu_trace()).encode())
    path = tmp_path / "t.json.gz"
    path.write_bytes(whole[:-12])
    result = npuprof("export-stacks", str(path), "-o", str(tmp_path / "s.folded"), env=clean_env())
    assert result.returncode == 0, result.stderr
    assert "the gzip data ends early, in a member cut short" in result.stderr, result.stderr
    assert (tmp_path / "s.folded").exists()


STUB_JOB = """
import sys, torch
model = torch.nn.Linear(1024, 1024)  # steps of tens of ms: the stub stays under 10% of one on a loaded host
window = torch.profiler.schedule(wait=1, warmup=1, active=3)
ready = lambda prof: prof.export_chrome_trace(sys.argv[1])
with torch.profiler.profile(schedule=window, on_trace_ready=ready) as prof:
    for _ in range(4):  # the loop ends inside the window: the profiler stops at the with's end
        model(torch.randn(128, 1024)).sum().backward()
        prof.step()
import gc; gc.freeze()  # the trace is written at the with's end: torch's objects out of the exit's collection
"""


def test_the_stub_step_torch_leaves_after_the_last_step_call_is_partial(tmp_path: Path) -> None:
    """A loop calling prof.step() last that ends inside the schedule's window: the step after the last call
    begins and the profiler stops, a step of a few µs with nothing in it, which was counted as a whole step
    (the mean a third lower)."""
    import subprocess
    import sys

    from conftest import clean_env, npuprof

    job, trace = tmp_path / "job.py", tmp_path / "trace.json"
    job.write_text(STUB_JOB)
    cmd = [sys.executable, str(job), str(trace)]
    done = subprocess.run(cmd, env=clean_env(), capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    events = json.loads(trace.read_text())["traceEvents"]
    named = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    spans = {int(e["name"].split("#")[1]): e for e in named}
    assert len(spans) >= 3
    last = max(spans)
    lo, hi = spans[last]["ts"], spans[last]["ts"] + spans[last]["dur"]
    assert not [e for e in events if e.get("cat") == "cpu_op" and lo <= e["ts"] < hi]  # nothing ran in it
    analysed = npuprof("analyse", str(trace), "--format", "json", "-j", "1")
    assert analysed.returncode == 0, analysed.stderr
    (rank,) = json.loads(analysed.stdout)["ranks"]
    flags = {s["step"]: s.get("partial", False) for s in rank["steps"]}
    assert flags == {k: k == last for k in spans}
    whole = [spans[k]["dur"] for k in spans if k != last]
    assert rank["step_time_mean_us"] == pytest.approx(sum(whole) / len(whole), abs=0.01)
    assert "nothing ran in it" in rank["partial_reason"]


def test_a_long_idle_last_step_is_not_a_stub() -> None:
    from npuprof.analysis.report import trailing_stub
    from npuprof.analysis.summary_schema import Summary, SummaryStep, TopOperator

    def step(n: int, duration: float, computing: float, communication: float = 0.0) -> SummaryStep:
        times = dict.fromkeys(SummaryStep.__struct_fields__[1:], 0.0)
        times.pop("memory_peak_mb"), times.pop("memory_peak_reserved_mb")
        given = {
            "step": n,
            "duration_us": duration,
            "computing_us": computing,
            "communication_us": communication,
        }
        return SummaryStep(**{**times, **given})

    def summary(steps: list[SummaryStep], ops_in: int | None = None) -> Summary:
        ops = [TopOperator(step=ops_in, name="aten::mm", count=1, self_us=5, total_us=5, device_us=0)]
        return Summary(rank=0, trace="t", events=1, device="CUDA", device_id=0, steps=steps,
                       top_operators=ops if ops_in is not None else [], top_kernels=[], memory={},
                       communication={}, world_size=1)  # fmt: skip

    busy = [step(1, 1000.0, 800.0), step(2, 1000.0, 800.0)]
    assert trailing_stub(summary([*busy, step(3, 15.0, 0.0)]))[0] == 3
    assert trailing_stub(summary([*busy, step(3, 900.0, 0.0)])) is None  # a data-loading stall: a real step
    assert trailing_stub(summary([*busy, step(3, 15.0, 5.0)])) is None  # something ran
    # a collective ran, nothing computed (helper-368: taken for a stub, it failed no test)
    assert trailing_stub(summary([*busy, step(3, 15.0, 0.0, communication=10.0)])) is None
    # a device trace: the host launched work in the step, its kernel runs after the step's span
    assert trailing_stub(summary([*busy, step(3, 15.0, 0.0)], ops_in=3)) is None
    assert trailing_stub(summary([step(1, 15.0, 0.0)])) is None


@pytest.mark.parametrize("form", ["kineto", "array"])
def test_nul_bytes_after_a_whole_trace_are_no_content_and_instead_of_its_end_are_named(
    tmp_path: Path, form: str
) -> None:
    """A file extended past its end (a crash, a full disk) ends in NUL bytes: after the whole JSON it was
    refused as "truncated"; where the JSON was cut, the message says what is there."""
    trace = cpu_trace()
    body = json.dumps(trace if form == "kineto" else trace["traceEvents"], indent=1).encode()
    whole = tmp_path / "whole.json"
    whole.write_bytes(body + b"\n" + b"\0" * 3000)
    done = npuprof("analyse", str(whole), "--format", "json", "-j", "1")
    assert done.returncode == 0, done.stderr
    (rank,) = json.loads(done.stdout)["ranks"]
    assert [s["step"] for s in rank["steps"]] == [7]
    cut = tmp_path / "cut.json"  # cut short, then NULs: its complete events read (docs: "Traces cut short")
    cut.write_bytes(body[: len(body) // 2] + b"\0" * 3000)
    done = npuprof("analyse", str(cut), "-j", "1")
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stderr.split())
    assert f"it ends after {len(body) // 2} bytes" in said and "(3000 NUL bytes at its end" in said, said


def test_traces_one_level_down_are_pointed_at(tmp_path: Path) -> None:
    """tensorboard_trace_handler's usual layout, logs/<run>/*.pt.trace.json: analyse of logs said only
    "no rank directory ... and it is not a trace file" (helper-87)."""
    for run in ("runA", "runB"):
        (tmp_path / "logs" / run).mkdir(parents=True)
        (tmp_path / "logs" / run / "w.1.pt.trace.json").write_text(json.dumps(cpu_trace()))
    result = npuprof("analyse", str(tmp_path / "logs"), env=clean_env())
    assert result.returncode == 1, result.stderr
    runs = f"{tmp_path / 'logs' / 'runA'}, {tmp_path / 'logs' / 'runB'}"
    said = " ".join(result.stderr.split())
    assert f"trace files are in its subdirectories ({runs}): analyse one of them" in said, said


def test_traces_deeper_down_are_pointed_at(tmp_path: Path) -> None:
    """TensorBoard's profile plugin layout, logs/plugins/profile/<date>/<host>.pt.trace.json (and a run
    folder next to it holding none): "no rank directory ... and it is not a trace file" (helper-137). The
    nearest level with traces is named; deeper ones are not looked for."""
    deep = tmp_path / "logs" / "plugins" / "profile" / "2026_12_05"
    deep.mkdir(parents=True)
    (tmp_path / "logs" / "events").mkdir()
    (deep / "host.1.pt.trace.json").write_text(json.dumps(cpu_trace()))
    result = npuprof("analyse", str(tmp_path / "logs"), env=clean_env())
    assert result.returncode == 1, result.stderr
    said = " ".join(result.stderr.split())
    assert f"trace files are in its subdirectories ({deep}): analyse one of them" in said, said
    (tmp_path / "logs" / "events" / "run.pt.trace.json").write_text(json.dumps(cpu_trace()))
    said = " ".join(npuprof("analyse", str(tmp_path / "logs"), env=clean_env()).stderr.split())
    assert f"trace files are in its subdirectories ({tmp_path / 'logs' / 'events'}): analyse" in said, said
    way_down = tmp_path / "far" / "a" / "b" / "c" / "d"
    way_down.mkdir(parents=True)
    (way_down / "host.1.pt.trace.json").write_text(json.dumps(cpu_trace()))
    said = " ".join(npuprof("analyse", str(tmp_path / "far"), env=clean_env()).stderr.split())
    assert "no rank directory (a capture) under" in said and "subdirectories" not in said, said


def test_a_named_trace_whose_events_come_after_long_other_keys_is_read(tmp_path: Path) -> None:
    """`npuprof analyse big_head.json`: traceEvents after 100 KB of another tool's keys was "neither a
    result directory nor a trace file" for analyse while export-stacks read it (helper-87). A file the user
    names is read on until traceEvents shows (a folder's other JSON files still are not)."""
    trace = cpu_trace()
    path = tmp_path / "big_head.json"
    path.write_text(json.dumps({"otherData": {"note": "x" * 100_000}, **trace}))
    result = npuprof("analyse", str(path), "--format", "json", env=clean_env())
    assert result.returncode == 0, result.stderr
    (rank,) = json.loads(result.stdout)["ranks"]
    assert [(s["step"], s["duration_us"]) for s in rank["steps"]] == [(7, 1000.0)]


def test_the_tables_folder_of_a_bare_trace_points_back_at_its_trace(tmp_path: Path) -> None:
    """`npuprof analyse trace.json.npuprof` (the tables made for trace.json) analysed its trace_view.json as
    a folder of traces and made trace_view.json.npuprof/ inside it (helper-87)."""
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(cpu_trace()))
    assert npuprof("analyse", str(trace), env=clean_env()).returncode == 0
    tables = tmp_path / "trace.json.npuprof"
    again = npuprof("analyse", str(tables), env=clean_env())
    assert again.returncode == 1, again.stderr
    assert f"{tables} holds the tables npuprof analyse made for {trace}: analyse that trace" in " ".join(
        again.stderr.split()
    ), again.stderr
    assert not (tables / "trace_view.json.npuprof").exists()


def test_device_tasks_no_operator_launched_are_named(tmp_path: Path) -> None:
    """helper-99: a process of kernels added to a CPU trace, linked to none of its operators (no
    correlation, External id or flow), made it a CUDA trace of 15 % computing without a word."""
    trace = cpu_trace()
    trace["traceEvents"] += [
        {"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {"name": "GPU 0"}},
        x("mykernel", "kernel", 200, 300, pid=7, tid=7),
        x("mykernel", "kernel", 600, 100, pid=7, tid=7),
    ]
    summary = _summary(write_rank_dir(tmp_path, trace))
    assert summary["device"] == "CUDA"
    (note,) = [w for w in summary["warnings"] if "linked to a host operator" in w]
    assert note.startswith("none of the 2 device tasks is linked to a host operator"), note
    linked = cuda_trace()  # every kernel of it launched by an operator: nothing said
    assert not [
        w for w in _summary(write_rank_dir(tmp_path / "linked", linked)).get("warnings", []) if "linked" in w
    ]


def test_control_characters_in_names_are_shown_never_sent_to_the_terminal(tmp_path: Path) -> None:
    """helper-104: an operator named with an escape sequence (a trace from elsewhere) cleared the screen
    when its table was printed, and reached export-stacks' stdout raw. Shown as \\xNN instead; the
    JSON report keeps the name as the trace has it."""
    trace = cpu_trace()
    hostile = "aten::mm\x1b[2J\x07"
    for event in trace["traceEvents"]:
        if event.get("name") == "aten::mm":
            event["name"] = hostile
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(trace))
    table = npuprof("analyse", str(path), env=clean_env(COLUMNS="200"))
    assert table.returncode == 0, table.stderr
    assert "\x1b" not in table.stdout + table.stderr and "\x07" not in table.stdout + table.stderr
    assert "aten::mm\\x1b[2J\\x07" in table.stdout
    report = npuprof("analyse", str(path), "--format", "json", env=clean_env())
    names = {op["name"] for op in json.loads(report.stdout)["ranks"][0]["top_operators"]}
    assert hostile in names
    stacks = npuprof("export-stacks", str(path), env=clean_env())
    assert stacks.returncode == 0, stacks.stderr
    assert "\x1b" not in stacks.stdout and "aten::mm\\x1b[2J\\x07" in stacks.stdout


def test_a_gpu_named_by_its_process_labels_only_has_its_work_of_an_unknown_category_counted(
    tmp_path: Path,
) -> None:
    """helper-104: Kineto names a GPU's process after the host's ("python") and says "GPU 0" only in its
    process_labels; device work of a category npuprof does not know there was dropped without a word and
    the trace called CPU-only. Counted as device tasks now, named in a warning (analyse, export-stacks)."""
    trace = cuda_trace()
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    assert kernels
    for event in trace["traceEvents"]:
        if event.get("ph") == "M" and event["name"] == "process_name" and event["pid"] == 0:
            event["args"]["name"] = "python"
        if event.get("cat") == "kernel":
            event["cat"] = "cuda_kernel"
    trace["traceEvents"].append(
        {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}}
    )
    path = tmp_path / "labelled.json"
    path.write_text(json.dumps(trace))
    result = npuprof("analyse", str(path), "--format", "json", env=clean_env())
    assert result.returncode == 0, result.stderr
    (rank,) = json.loads(result.stdout)["ranks"]
    assert rank["device"] != "CPU"
    expected = Counter()
    for k in kernels:
        expected[k["name"]] += k["dur"]
    assert {k["name"]: k["total_us"] for k in rank["top_kernels"]} == dict(expected)
    warned = " ".join(rank["warnings"])
    assert f"{len(kernels)} of category 'cuda_kernel' in process 'python'" in warned, warned
    stacks = npuprof("export-stacks", str(path), "-m", "self_cuda_time_total", env=clean_env())
    assert stacks.returncode == 0, stacks.stderr
    total = sum(int(line.rsplit(" ", 1)[1]) for line in stacks.stdout.splitlines())
    assert total == sum(k["dur"] for k in kernels)


@pytest.mark.parametrize(("overrun", "said"), [(0.001, False), (200.0, True)], ids=["rounding", "overlap"])
def test_export_stacks_cuts_a_step_that_runs_into_the_next(
    tmp_path: Path, overrun: float, said: bool
) -> None:
    """helper-104: step 5 ending 1 ns after step 6 began (a clock's rounding) took step 6 in as its child:
    step 6's own time and its place as a root were lost (1,210 of 2,500 µs), without a word. Cut at the next
    step's start, as analyse does; an overlap beyond rounding is named."""
    events = [
        {"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": "python3"}},
        x("ProfilerStep#5", "user_annotation", 0, 1000 + overrun),
        x("aten::mm", "cpu_op", 100, 300),
        x("ProfilerStep#6", "user_annotation", 1000, 1500),
        x("aten::add", "cpu_op", 1100, 500),
    ]
    path = tmp_path / "steps.json"
    path.write_text(json.dumps({"traceEvents": events}))
    result = npuprof("export-stacks", str(path), env=clean_env())
    assert result.returncode == 0, result.stderr
    folded = {line.rsplit(" ", 1)[0]: int(line.rsplit(" ", 1)[1]) for line in result.stdout.splitlines()}
    # each step a root, its own time and its operator's under it: 1000 + 1500 µs in all
    assert folded == {
        "ProfilerStep": 1000 - 300 + 1500 - 500,
        "ProfilerStep;aten::mm": 300,
        "ProfilerStep;aten::add": 500,
    }
    assert ("ran into the next step (ProfilerStep#5)" in result.stderr) is said, result.stderr


def test_memory_events_of_torch_before_1_10_bytes_only_are_summed(tmp_path: Path) -> None:
    """helper-104: [memory] events with Bytes and no Total Allocated (what torch wrote before 1.10, which
    TensorBoard's plugin reads) gave 0.0 MiB in every step without a word, and memory-timeline said the
    trace had no [memory] events. Their running sum from the capture's start is the figure, said so."""
    trace = cpu_trace()
    changes = [(110, 4096), (120, 1 << 20), (300, -4096), (600, 2048)]
    for ts, nbytes in changes:
        # a block's address by its size: its free has its allocation's, as torch writes them
        event = mem(ts, nbytes, 0, 0x1000 + abs(nbytes))
        event["args"] = {"Bytes": nbytes, "Device Type": 0, "Device Id": -1}
        trace["traceEvents"].append(event)
    running = peak = 0
    for _ts, nbytes in changes:
        running += nbytes
        peak = max(peak, running)
    path = tmp_path / "old_memory.json"
    path.write_text(json.dumps(trace))
    result = npuprof("analyse", str(path), "--format", "json", env=clean_env())
    assert result.returncode == 0, result.stderr
    (rank,) = json.loads(result.stdout)["ranks"]
    assert [s["memory_peak_mb"] for s in rank["steps"]] == [round(peak / (1 << 20), 3)]
    # no reserved total in such a trace: unknown, not 0 (helper-112), in the report and the tables
    assert [s["memory_peak_reserved_mb"] for s in rank["steps"]] == [None]
    assert any("4 [memory] event(s) without 'Total Allocated'" in w for w in rank["warnings"]), rank[
        "warnings"
    ]
    tables = tmp_path / "old_memory.json.npuprof"
    records = list(csv.DictReader((tables / "memory_record.csv").open()))
    assert [r["Total Reserved(MB)"] for r in records] == ["N/A"] * len(changes), records
    timeline = npuprof("memory-timeline", str(path), "-o", str(tmp_path / "m.json"), env=clean_env())
    assert timeline.returncode == 0, timeline.stderr
    said = " ".join(timeline.stderr.split())
    assert "from the trace's [memory] Bytes, summed" in said, said
    # it said both "no allocator totals" and "... is in the allocator's totals" (helper-112)
    assert "in the allocator's totals" not in said and "the sum starts at 0 there" in said, said
    times, sizes = json.loads((tmp_path / "m.json").read_text())
    assert max(sum(row) for row in sizes) == peak and len(times) == len(changes)


def test_a_rank_dir_that_cannot_take_its_tables_is_analysed_into_the_cache(tmp_path: Path) -> None:
    """helper-104: a rank dir the user may not write in (a colleague's results, a read-only mount) got
    "analyse a copy", while a bare trace there was analysed into the cache. The rank dir's trace is now
    analysed as such, its rank kept, and the note says where its tables are."""
    import shutil
    import stat as stat_module

    run = tmp_path / "theirs"
    trace = cpu_trace()
    trace["distributedInfo"]["rank"] = 3
    rank_dir = write_rank_dir(run, trace, rank=3)
    for path in [run, rank_dir, *rank_dir.iterdir()]:
        path.chmod(path.stat().st_mode & ~(stat_module.S_IWUSR | stat_module.S_IWGRP | stat_module.S_IWOTH))
    command = ["analyse", str(run), "--format", "json"]
    env = clean_env(XDG_CACHE_HOME=str(tmp_path / "cache"))
    try:
        if os.geteuid() == 0:  # root passes every permission check: drop the capabilities that do
            setpriv = shutil.which("setpriv")
            if setpriv is None:
                pytest.skip("running as root without setpriv: cannot be refused a write")
            import subprocess
            import sys

            result = subprocess.run(
                [setpriv, "--bounding-set=-dac_override,-dac_read_search,-fowner", "--inh-caps=-all",
                 sys.executable, "-m", "npuprof", *command],
                env=env, capture_output=True, text=True, timeout=120,
            )  # fmt: skip
        else:
            result = npuprof(*command, env=env)
        assert not (rank_dir / "ASCEND_PROFILER_OUTPUT").exists()
    finally:
        for path in [run, rank_dir, *rank_dir.iterdir()]:
            path.chmod(path.stat().st_mode | stat_module.S_IWUSR)
    assert result.returncode == 0, result.stderr
    (rank,) = json.loads(result.stdout)["ranks"]
    steps = sorted(
        int(e["name"][13:]) for e in cpu_trace()["traceEvents"] if e["name"].startswith("ProfilerStep#")
    )
    assert rank["rank"] == 3 and [s["step"] for s in rank["steps"]] == steps
    said = " ".join(result.stderr.split())
    assert "its tables cannot be written there (Permission denied" in said, said
    assert str(tmp_path / "cache" / "npuprof" / "traces") in said


def test_a_rank_dir_no_one_may_write_in_is_not_written_in_even_by_root(tmp_path: Path) -> None:
    """helper-139: as root, `analyse` made ASCEND_PROFILER_OUTPUT/ in a rank dir of mode 555 (`chmod -R a-w`
    results: root passes the access check), and `--force` rewrote tables in a folder kept so, which a
    bare trace there (helper-103) was spared. Both now go to the user's cache, as for any reader."""
    env = clean_env(XDG_CACHE_HOME=str(tmp_path / "cache"))
    trace = cpu_trace()
    trace["distributedInfo"]["rank"] = 3
    fresh = write_rank_dir(tmp_path / "frozen", trace, rank=3)
    parsed = write_rank_dir(tmp_path / "kept", trace, rank=3)
    assert npuprof("analyse", str(parsed), env=env).returncode == 0
    tables = parsed / "ASCEND_PROFILER_OUTPUT"
    stamps = {p.name: p.stat().st_ino for p in tables.iterdir()}
    frozen = [fresh, tables]
    for path in frozen:
        path.chmod(0o555)
    try:
        first = npuprof("analyse", str(fresh), "--format", "json", env=env)
        forced = npuprof("analyse", str(parsed), "--force", "--format", "json", env=env)
        assert sorted(p.name for p in fresh.iterdir()) == ["host.1.pt.trace.json", "profiler_info_3.json"]
        assert {p.name: p.stat().st_ino for p in tables.iterdir()} == stamps, forced.stderr
    finally:
        for path in frozen:
            path.chmod(0o755)
    for result in (first, forced):
        assert result.returncode == 0, result.stderr
        (rank,) = json.loads(result.stdout)["ranks"]
        assert rank["rank"] == 3 and [s["step"] for s in rank["steps"]] == [7], result.stderr
        said = " ".join(result.stderr.split())
        assert "its tables cannot be written there" in said and str(tmp_path / "cache") in said, said


@pytest.mark.skipif(os.geteuid() != 0, reason="only root may write in a folder of mode 555")
def test_the_post_processor_parses_its_runs_rank_dir_made_under_umask_222(tmp_path: Path) -> None:
    """A job run as root under `umask 222` makes its rank dirs without write bits: its own post-processor
    still parses them (the rule above is for results kept read-only, read by `npuprof analyse`)."""
    from npuprof.results.handover import CaptureJob, CaptureRecord
    from npuprof.results.postprocess import _parse

    rank_dir = write_rank_dir(tmp_path / "run", cpu_trace(), rank=3)
    rank_dir.chmod(0o555)
    try:
        job = CaptureJob(rank_dir=str(rank_dir), record=CaptureRecord(status="complete"), analyse=True)
        assert _parse(rank_dir, job) == 0, (tmp_path / "run" / "npuprof.log").read_text()
        assert (rank_dir / "ASCEND_PROFILER_OUTPUT" / "analyse.done").is_file()
    finally:
        rank_dir.chmod(0o755)


def test_links_that_lead_nowhere_and_widths_that_are_none_are_named(tmp_path: Path) -> None:
    """helper-104: a loop of symbolic links was said not to exist; --min-width nan and inf were taken."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    for command, name, said in (
        ("analyse", "a", "is a loop of symbolic links"),
        ("export-stacks", "a", "is a loop of symbolic links"),
        (
            "memory-timeline",
            "dangling",
            f"is a symbolic link to {str(tmp_path / 'gone')!r}, which does not exist",
        ),
    ):
        extra = ("-o", str(tmp_path / "m.json")) if command == "memory-timeline" else ()
        result = npuprof(command, str(tmp_path / name), *extra, env=clean_env())
        # an input that is not there is the input's fault (exit 1), never a bad flag (2)
        assert result.returncode == 1 and said in result.stderr and "Traceback" not in result.stderr, result
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps(cpu_trace()))
    for width in ("nan", "inf", "-1"):
        result = npuprof("export-stacks", str(trace), "--svg", str(tmp_path / "s.svg"), "--min-width", width)
        assert result.returncode == 2 and f"--min-width {float(width)}: give a width" in result.stderr, result
        assert not (tmp_path / "s.svg").exists()


@pytest.mark.parametrize("base", ["abc", 10**30, -5, 1.5e18])
def test_a_time_base_that_is_no_time_is_named(tmp_path: Path, base: object) -> None:
    """helper-120: a baseTimeNanoseconds of "abc" or 1e30 was dropped without a word: the rank's starts are
    then compared across ranks on another clock."""
    trace = cpu_trace()
    trace["baseTimeNanoseconds"] = base
    summary = _summary(write_rank_dir(tmp_path, trace))
    assert "time_base_ns" not in summary
    (note,) = [w for w in summary.get("warnings", []) if "baseTimeNanoseconds" in w]
    assert note.startswith(f"the trace's baseTimeNanoseconds ({base!r}) is no time in nanoseconds"), note
    trace["baseTimeNanoseconds"] = 1_700_000_000_000_000_000
    good = _summary(write_rank_dir(tmp_path / "good", trace))
    assert good["time_base_ns"] == 1_700_000_000_000_000_000
    assert not [w for w in good.get("warnings", []) if "baseTimeNanoseconds" in w]


def test_a_name_of_undecodable_bytes_is_read_and_named(tmp_path: Path) -> None:
    """helper-120: one operator named with an unpaired surrogate escape (Python's json.dump of a path of
    bytes that are not UTF-8) refused the whole trace as "malformed JSON"; it is read, and said."""
    trace = cpu_trace()
    plain = _summary(write_rank_dir(tmp_path / "plain", trace))
    op = next(e for e in trace["traceEvents"] if e.get("cat") == "cpu_op")
    op["name"] = "bad\udcffname"
    d = write_rank_dir(tmp_path / "odd", trace)  # json.dump writes the escape "\udcff"
    (raw,) = d.glob("*.pt.trace.json")
    assert b"bad\\udcffname" in raw.read_bytes()
    summary = _summary(d)
    assert summary["steps"] == plain["steps"]
    assert "bad\ufffdname" in {o["name"] for o in summary["top_operators"]}
    (note,) = [w for w in summary["warnings"] if "not text" in w]
    assert note.startswith("1 character(s) in the trace's strings are not text"), note


def test_a_time_base_beyond_a_double_is_named_not_the_trace_refused(tmp_path: Path) -> None:
    """helper-123: baseTimeNanoseconds 1e400 (no double holds it) refused the whole trace: "cannot decode
    the keys before traceEvents: Number out of range"."""
    trace = cpu_trace()
    trace["baseTimeNanoseconds"] = "MARK"
    d = write_rank_dir(tmp_path, trace)
    (raw,) = d.glob("*.pt.trace.json")
    raw.write_text(raw.read_text().replace('"MARK"', "1e400"))
    summary = _summary(d)
    assert summary["steps"] and "time_base_ns" not in summary
    (note,) = [w for w in summary.get("warnings", []) if "baseTimeNanoseconds" in w]
    assert note.startswith("the trace's baseTimeNanoseconds (inf) is no time in nanoseconds"), note


def test_export_stacks_and_memory_timeline_say_what_they_read_as_no_text(tmp_path: Path) -> None:
    """helper-123: export-stacks drew a frame with U+FFFD and memory-timeline left out a [memory] event with
    a field that is no number, neither saying so (analyse does)."""
    trace = cpu_trace()
    trace["traceEvents"] += [mem(10 * k, 4096, 4096 * (k + 1), 160 + k) for k in range(5)]
    trace["traceEvents"][-1]["args"]["Total Allocated"] = "MARK"
    op = next(e for e in trace["traceEvents"] if e.get("cat") == "cpu_op")
    op["name"] = "bad\udcffname"
    path = tmp_path / "t.pt.trace.json"
    path.write_text(json.dumps(trace))
    stacks = npuprof("export-stacks", str(path), env=clean_env())
    assert stacks.returncode == 0, stacks.stderr
    assert "bad\ufffdname" in stacks.stdout
    assert "1 character(s) in the trace's strings are not text" in stacks.stderr
    timeline = npuprof("memory-timeline", str(path), "-o", str(tmp_path / "m.json"), env=clean_env())
    assert timeline.returncode == 0, timeline.stderr
    assert "1 character(s) in the trace's strings are not text" in timeline.stderr
    assert "1 [memory] event(s) whose fields are not numbers (a damaged trace?): left out" in timeline.stderr
    assert "4 memory events" in timeline.stderr


def test_empty_steps_between_the_real_ones_are_named(tmp_path: Path) -> None:
    """prof.step() called twice an iteration: a 5 µs step with nothing in it after each real one, which
    lowered the mean step time unsaid (helper-137). The last step's stub is a partial step, not one."""
    events, t = [], 0.0
    for step in range(8):
        real = step % 2 == 0 and step != 7
        dur = 1000.0 if real else 5.0
        events.append(x(f"ProfilerStep#{step}", "user_annotation", t, dur))
        if real:
            events.append(x("aten::mm", "cpu_op", t + 100, 200, **{"External id": step + 1}))
        t += dur
    trace = {"schemaVersion": 1, "traceEvents": events}
    rank_dir = write_rank_dir(tmp_path, trace)
    result = npuprof("analyse", str(rank_dir), "--format", "json", env=clean_env())
    assert result.returncode == 0, result.stderr
    (rank,) = json.loads(result.stdout)["ranks"]
    durations = {s["step"]: s["duration_us"] for s in rank["steps"]}
    empty_in_middle = [step for step, d in durations.items() if step != 7 and d < 100]
    assert empty_in_middle == [1, 3, 5]
    mean = sum(durations.values()) / len(durations)
    kept = [d for step, d in durations.items() if step not in empty_in_middle]
    without = sum(kept) / len(kept)
    said = [w for w in rank.get("warnings", []) if "ran nothing" in w]
    assert said == [
        "3 step(s) ran nothing and lasted under 10% of the median step (steps 1, 3, 5): prof.step() called "
        f"more than once an iteration? They lower the mean step time ({mean / 1000:.3f} ms; "
        f"{without / 1000:.3f} ms without them)"
    ], rank.get("warnings")


def test_empty_steps_are_judged_against_the_steps_that_ran() -> None:
    """Steps that ran nothing are judged against the median of the others: four 5 µs steps between two of
    1000 µs are flagged, though they are most of the steps (helper-368: a median over every step, 5 µs,
    flagged none and failed no test, the other test's empty steps being fewer than its real ones)."""
    from npuprof.analysis.report import empty_steps
    from npuprof.analysis.report_schema import ReportStep
    from npuprof.analysis.summary_schema import Summary, SummaryStep

    def step(kind: type, n: int, duration: float, computing: float) -> SummaryStep:
        times = dict.fromkeys(SummaryStep.__struct_fields__[1:], 0.0)
        times.pop("memory_peak_mb"), times.pop("memory_peak_reserved_mb")
        return kind(**{**times, "step": n, "duration_us": duration, "computing_us": computing})

    plan = [(0, 1000.0, 800.0), *((n, 5.0, 0.0) for n in range(1, 5)), (5, 1000.0, 800.0)]
    summary = Summary(rank=0, trace="t", events=1, device="CUDA", device_id=0,
                      steps=[step(SummaryStep, *p) for p in plan], top_operators=[], top_kernels=[],
                      memory={}, communication={}, world_size=1)  # fmt: skip
    mean, without = (2000.0 + 4 * 5.0) / 6, 1000.0
    assert empty_steps(summary, [step(ReportStep, *p) for p in plan]) == (
        "4 step(s) ran nothing and lasted under 10% of the median step (steps 1, 2, 3, 4): prof.step() "
        f"called more than once an iteration? They lower the mean step time ({mean / 1000:.3f} ms; "
        f"{without / 1000:.3f} ms without them)"
    )


def test_steps_stacked_over_one_another_are_measured_without_a_piece_per_step_and_span(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """helper-175: N steps that all overlap (an edited or merged trace) cut the work into N x spans pieces
    for the per-step times and the Overlap Analysis lanes: 3,000 such steps took 78 s and 2.6 GB, 20,000
    (a 4 MB file) were killed by the kernel at 24 GB. Their times now come from running sums, and the lanes,
    which would draw each kernel once per step over it, are left out with a warning. 300 steps [k, k+3000)
    over 300 kernels [5j, 5j+3): each step's computing is counted here by clipping each kernel."""
    n = 300
    trace = cpu_trace()
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("ph") == "M"] + [
        x(f"ProfilerStep#{k}", "user_annotation", k, 10 * n) for k in range(n)
    ]
    trace["traceEvents"] += [
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
        *(x("k", "kernel", 5 * j, 3, pid=0, tid=7) for j in range(n)),
    ]
    from npuprof.analysis import step_breakdown

    # 90,000 pieces: under the floor below which they are made and the lanes drawn (the same times)
    small = _summary(write_rank_dir(tmp_path / "small", trace))
    assert not any("overlap one another so much" in w for w in small["warnings"])
    monkeypatch.setattr(step_breakdown, "PIECES_FLOOR", 0)  # as for a trace of thousands of such steps
    rank_dir = write_rank_dir(tmp_path, trace)
    summary = _summary(rank_dir)
    expected = [sum(max(0, min(5 * j + 3, k + 10 * n) - max(5 * j, k)) for j in range(n)) for k in range(n)]
    assert [s["computing_us"] for s in summary["steps"]] == pytest.approx(expected)
    assert [s["computing_us"] for s in small["steps"]] == pytest.approx(expected)
    assert [s["free_us"] for s in summary["steps"]] == pytest.approx([10 * n - c for c in expected])
    assert any(w.startswith(f"the {n} steps overlap one another so much") for w in summary["warnings"])
    view = json.loads((rank_dir / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
    lanes = [e for e in view if e.get("ph") == "X" and e.get("pid") == 2_000_000_001]  # Overlap Analysis
    assert lanes == []


def test_running_sums_give_what_the_pieces_give() -> None:
    """intervals.totals_in (running sums) against totals(clip_many) (pieces), on disjoint spans and windows
    that overlap, touch, hold no span or lie outside them all."""
    from npuprof.analysis import intervals

    rng = np.random.default_rng(7)
    for _ in range(50):
        edges = np.sort(
            rng.choice(np.arange(0, 10_000, dtype=float), size=2 * int(rng.integers(0, 40)), replace=False)
        )
        spans = (edges[0::2], edges[1::2])
        lo = rng.uniform(-500, 10_500, size=int(rng.integers(1, 30)))
        hi = lo + rng.uniform(0, 4000, size=len(lo))
        by_pieces = intervals.totals(*intervals.clip_many(spans, lo, hi), len(lo))
        assert intervals.totals_in(spans, lo, hi) == pytest.approx(by_pieces)


def test_device_work_of_two_devices_in_one_trace_is_said_to_be_counted_as_one(tmp_path: Path) -> None:
    """helper-175: one process driving two GPUs writes one trace with kernels of both; the step breakdown
    counts their union as one device's time (two GPUs each busy half a step read as one busy all of it),
    and nothing said so. cuda_trace's step 1 has kernels [100, 300) and [250, 400) on device 0; a kernel
    [400, 900) on device 1 makes its computing 300 + 500, and the warning names both devices."""
    trace = cuda_trace()
    trace["traceEvents"] += [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "GPU 1"}},
        x("kernel_c", "kernel", 400, 500, pid=1, tid=7, stream=7, device=1),
    ]
    summary = _summary(write_rank_dir(tmp_path, trace))
    assert summary["steps"][0]["computing_us"] == pytest.approx(300 + 500)
    notes = [
        w for w in summary["warnings"] if w.startswith("the trace holds device work of 2 devices (0, 1)")
    ]
    assert len(notes) == 1, summary["warnings"]
    one = write_rank_dir(tmp_path / "one", cuda_trace())  # one device: nothing said
    assert not any("devices" in w for w in _summary(one).get("warnings", []))


def test_memory_of_two_gpus_of_one_process_is_each_devices_own(tmp_path: Path) -> None:
    """helper-179: a process allocating on cuda:0 and cuda:1 had every memory_record.csv row labelled
    CUDA:0 and one running peak over both; each row now names its device, and the peaks are of the device
    with the most events (cuda:1 here: five events against cuda_trace's two and two more on cuda:0)."""
    trace = cuda_trace()

    def on(device_id: int, ts: float, nbytes: int, allocated: int) -> dict:
        event = mem(ts, nbytes, allocated, 0x1000 + int(ts))
        event["args"].update({"Device Id": device_id, "Total Reserved": 512 << 20})
        return event

    trace["traceEvents"] += [
        on(0, 100, 300 << 20, 300 << 20),  # cuda:0 at 300 MiB
        on(1, 150, 50 << 20, 50 << 20),  # cuda:1: 50, 120, 130, then 90 and 50 MiB
        on(1, 200, 70 << 20, 120 << 20),
        on(0, 250, -(300 << 20), 0),
        on(1, 300, 10 << 20, 130 << 20),
        on(1, 1100, -(40 << 20), 90 << 20),
        on(1, 1200, -(40 << 20), 50 << 20),
    ]
    rank_dir = write_rank_dir(tmp_path, trace)
    summary = _summary(rank_dir)
    assert summary["memory"]["peak_allocated_mb"] == 130.0  # cuda:1's, not cuda:0's 300
    assert {s["step"]: s["memory_peak_mb"] for s in summary["steps"]} == {1: 130.0, 2: 130.0}
    with (rank_dir / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["Device Type"], float(r["Total Allocated(MB)"])) for r in rows[2:]] == [
        ("CUDA:0", 300.0),
        ("CUDA:1", 50.0),
        ("CUDA:1", 120.0),
        ("CUDA:0", 0.0),
        ("CUDA:1", 130.0),
        ("CUDA:1", 90.0),
        ("CUDA:1", 50.0),
    ]  # fmt: skip (cuda_trace's own two events on cuda:0 come first)


def test_bytes_only_memory_whose_first_frees_take_the_sum_below_zero_starts_at_what_they_free(
    tmp_path: Path,
) -> None:
    """helper-179: a torch < 1.10 trace (Bytes, no Total Allocated) whose capture begins by freeing memory
    allocated before it: analyse's running sum went below 0 (memory_record.csv's Total Allocated -0.000954
    MB). It starts at the least the frees show was there, as memory-timeline's sum does: Bytes -1000, +500,
    +300 give 0, 500, 800."""
    trace = cpu_trace()
    changes = [(110, -1000), (120, 500), (300, 300)]
    for ts, nbytes in changes:
        # a block's address by its size: its free has its allocation's, as torch writes them
        event = mem(ts, nbytes, 0, 0x1000 + abs(nbytes))
        event["args"] = {"Bytes": nbytes, "Device Type": 0, "Device Id": -1}
        trace["traceEvents"].append(event)
    rank_dir = write_rank_dir(tmp_path, trace)
    _summary(rank_dir)
    with (rank_dir / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv").open() as f:
        rows = list(csv.DictReader(f))
    running, lowest, sums = 0, 0, []
    for _ts, nbytes in changes:
        running += nbytes
        lowest = min(lowest, running)
        sums.append(running)
    expected = [round((total - lowest) / (1 << 20), 6) for total in sums]
    assert [float(r["Total Allocated(MB)"]) for r in rows] == expected == [0.0, 0.000477, 0.000763]


def test_the_memory_peak_holds_what_the_first_sample_shows_was_there(tmp_path: Path) -> None:
    """helper-180: a capture whose first [memory] event frees 500 MiB (Total Allocated 1000 MiB after it)
    held 1500 MiB just before, as memory-timeline's peak says (helper-179); analyse's peaks said the
    samples' most, 1100. Step 1 holds that first sample; step 2 started after it, at 1100."""
    trace = cuda_trace()
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("name") != "[memory]"]
    trace["traceEvents"] += [mem(25, -(500 << 20), 1000 << 20, 1), mem(50, 100 << 20, 1100 << 20, 2)]
    summary = _summary(write_rank_dir(tmp_path, trace))
    assert summary["memory"]["peak_allocated_mb"] == 1500.0
    assert {s["step"]: s["memory_peak_mb"] for s in summary["steps"]} == {1: 1500.0, 2: 1100.0}


def test_memory_of_device_ids_beyond_16_bits_keeps_each_its_own(tmp_path: Path) -> None:
    """helper-181: memory.py keyed a device as Device Type * 65536 + Device Id and read every id of 65535
    or more as "no id" (the rank's device): ids 65535 and 70000 were one device labelled CUDA:0, one running
    peak over both. torch writes a c10::DeviceIndex there (-1: none), but the key now holds any id the
    reader takes (an int32): each is its own device, named by its id."""
    trace = cuda_trace()

    def on(device_id: int, ts: float, allocated_mib: int) -> dict:
        event = mem(ts, 1 << 20, allocated_mib << 20, 0x1000 + int(ts))
        event["args"]["Device Id"] = device_id
        return event

    extra = [(65535, 100, 70), (70000, 150, 500), (65535, 200, 80), (70000, 250, 600), (65535, 300, 90)]
    trace["traceEvents"] += [on(*e) for e in extra]
    rank_dir = write_rank_dir(tmp_path, trace)
    summary = _summary(rank_dir)
    with (rank_dir / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["Device Type"], float(r["Total Allocated(MB)"])) for r in rows[2:]] == [
        (f"CUDA:{device}", float(mib)) for device, _ts, mib in extra
    ]
    # the device with the most events (65535: three) gives the peak; its first sample held 69 MiB before
    assert summary["memory"]["peak_allocated_mb"] == max(mib for d, _t, mib in extra if d == 65535) == 90


def test_an_event_whose_cat_is_null_has_no_category(tmp_path: Path) -> None:
    """helper-181: an event with "cat": null (some exporters write it) refused the whole trace ("an event of
    the wrong shape (Expected `str`, got `null` - at `event.cat`)"). It is an event of no category, as one
    without "cat": cpu_trace's step (docstring: computing 300 of 1000) is read, and the event is named among
    those left out; a "cat": null inside a string (its name here) is left as it is."""
    from npuprof.analysis.trace_loader import load_trace

    trace = cpu_trace()
    odd = x('Memcpy, "cat": null}', None, 700, 50)  # type: ignore[arg-type]
    trace["traceEvents"].append(odd)
    rank_dir = write_rank_dir(tmp_path, trace)
    summary = _summary(rank_dir)
    steps = [(s["step"], s["duration_us"], s["computing_us"]) for s in summary["steps"]]
    assert steps == [(7, 1000.0, 300.0)]
    assert any("(none) x1" in w for w in summary["warnings"]), summary["warnings"]
    (read,) = [e for e in load_trace(next(rank_dir.glob("*.pt.trace.json"))).events if e.name == odd["name"]]
    assert read.cat == ""


def test_export_stacks_and_memory_timeline_write_control_characters_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """helper-189: a rank dir from someone else named with an escape sequence (OSC 0, which sets the
    terminal's title, and an erase of the screen), a memory_record.csv naming its device so:
    export-stacks and memory-timeline printed them as they are in their "wrote" lines, which the
    terminal acted on. Written out as analyse writes them."""
    from npuprof.cli.export_stacks import export_stacks
    from npuprof.cli.memory_timeline import memory_timeline

    hostile = "ev\x1b]0;pwned\x07il\x1b[2J"
    shown = "ev\\x1b]0;pwned\\x07il\\x1b[2J"
    rank_dir = write_rank_dir(tmp_path, cuda_trace(), name=hostile)
    export_stacks(rank_dir, "self_cpu_time_total", tmp_path / "x.folded", None, 0.1, False, None)
    record = tmp_path / "memory_record.csv"
    with record.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)",
                         "Total Active(MB)", "Stream Ptr", "Device Type"])  # fmt: skip
        writer.writerow(["PTA", "1000000.000", "1.0", "4.0", "1.0", "", "npu:" + hostile])
    memory_timeline(record, tmp_path / "m.json", None, None)
    err = capsys.readouterr().err
    assert err.count("wrote ") == 2, err
    assert "\x1b" not in err and "\x07" not in err, err
    assert f"{shown}_ascend_pt/host.1.pt.trace.json" in err, err
    assert f"(npu:{shown.lower()}, 1 memory events" in err, err  # a device name is read lower-case


def test_operators_that_overlap_without_nesting_count_each_microsecond_once(tmp_path: Path) -> None:
    """helper-221: aten::B begins inside aten::A and ends 50 µs after it (threads interleaved, times
    rounded): B's whole 100 µs was taken from A's, A's self time 0 for the 50 µs it ran alone, the self
    times 100 µs for a thread busy 150. Each µs goes to the innermost operator open: A 50, B 100."""
    trace = {
        "traceEvents": [
            x("ProfilerStep#1", "user_annotation", 0, 1000),
            x("aten::P", "cpu_op", 50, 170, **{"External id": 3}),  # [50, 220): around A, not all of B
            x("aten::A", "cpu_op", 100, 100, **{"External id": 1}),
            x("aten::B", "cpu_op", 150, 100, **{"External id": 2}),
        ]
    }
    summary = _summary(write_rank_dir(tmp_path, trace))
    got = {op["name"]: (op["self_us"], op["total_us"]) for op in summary["operator_totals"]}
    assert got == {"aten::P": (50.0, 170.0), "aten::A": (50.0, 100.0), "aten::B": (100.0, 100.0)}
    assert summary["steps"][0]["computing_us"] == sum(s for s, _t in got.values()) == 200.0
