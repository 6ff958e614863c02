"""Issue 13, the parser side: the user's marks and ranges and --msprof-tx's comm: ranges as the MsprofTx
layer of trace_view.json, --gc-detect-threshold's pauses as its GC layer, and `npuprof analyse`'s ranges
table and per-step GC time. Hand-made traces (every expected value worked out by hand below), and one real
`npuprof run --msprof-tx --gc-detect-threshold 0` of a gloo job."""

from __future__ import annotations

import csv
import io
import json
import sys
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from _forked_cli import npuprof  # report commands forked from a process that imported them: see its doc
from analyse_support.handmade import cpu_trace, write_rank_dir
from conftest import SCRIPTS, load_trace, rank_dirs

PID = 4242
BASE_NS = 1_700_000_000_000_000_000  # Kineto's baseTimeNanoseconds: a ts of T µs is at BASE_NS + T * 1000
COMM = "comm:all_reduce,default_pg,float32,1048576"
# CANN's pid of the MsprofTx layer: (pid << 10) | (6 << 5) | 31 = 4242 * 1024 + 192 + 31
MSPROFTX_PID = 4_344_031
# torch_npu's pid of the GC layer: (pid << 10) | (1 << 5) | device 0 = 4242 * 1024 + 32
GC_PID = 4_343_840


def _x(name: str, cat: str, ts: float, dur: float, tid: int = PID) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": tid, "ts": ts, "dur": dur, "args": {}}


COMM_AT = (1500.0, 2500.0)  # µs of the trace


def marked_trace(
    rank: int = 0, comm_durs: tuple[float, float] = (400.0, 1000.0), comm_in_trace: bool = True
) -> dict[str, Any]:
    """Steps 1 [1000, 2000) and 2 [2000, 4000) µs. Marks: "tick" (a mark) at 1010. Ranges: "load" at 1100
    (200.125 µs) and at 2100 on another thread (300.375 µs); the comm: range at 1500 and 2500 (as spans, as
    captures made before npuprof_comm_ranges.json have them, or not there). Not theirs: the user's own
    record_function "mine", gloo's span, the steps, the operators."""
    events = [
        {"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": "python"}},
        _x("ProfilerStep#1", "user_annotation", 1000, 1000),
        _x("aten::mm", "cpu_op", 1050, 100),
        _x("tick", "user_annotation", 1010, 5),
        _x("load", "user_annotation", 1100, 200.125),
        _x(COMM, "user_annotation", 1500, comm_durs[0]),
        _x("gloo:all_reduce", "user_annotation", 1550, 300, tid=PID + 2),
        _x("ProfilerStep#2", "user_annotation", 2000, 2000),
        _x("aten::add", "cpu_op", 2050, 100),
        _x("load", "user_annotation", 2100, 300.375, tid=PID + 1),
        _x("mine", "user_annotation", 2200, 50),
        _x(COMM, "user_annotation", 2500, comm_durs[1]),
    ]
    if not comm_in_trace:
        events = [e for e in events if e["name"] != COMM]
    return {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "gloo", "rank": rank, "world_size": 2},
        "baseTimeNanoseconds": BASE_NS,
        "traceEvents": events,
    }


def _ns(us: float) -> int:
    return BASE_NS + round(us * 1000)


# pauses at [1200, 1250) in step 1, [1990, 2030) across the boundary (10 µs in step 1, 30 in step 2),
# [4100, 4105.5) after the last step
GC_RECORD = {
    "version": 1,
    "pid": PID,
    "threshold_ms": 0.5,
    "clock": "epoch_ns",
    "events": [
        {"start_ns": _ns(1200), "end_ns": _ns(1250), "generation": 0, "collected": 10, "uncollectable": 0},
        {"start_ns": _ns(1990), "end_ns": _ns(2030), "generation": 2, "collected": 300, "uncollectable": 1},
        {"start_ns": _ns(4100), "end_ns": _ns(4105.5), "generation": 1, "collected": 5, "uncollectable": 0},
    ],
    "dropped": 0,
}


def comm_record(durs: tuple[float, float] = (400.0, 1000.0)) -> dict[str, Any]:
    """npuprof_comm_ranges.json holding marked_trace's two comm: ranges (epoch ns, on the trace's clock)."""
    ranges = [
        {"name": COMM, "tid": PID, "start_ns": _ns(at), "end_ns": _ns(at) + round(dur * 1000)}
        for at, dur in zip(COMM_AT, durs, strict=True)
    ]
    return {"version": 1, "pid": PID, "clock": "epoch_ns", "ranges": ranges, "dropped": 0}


def marked_rank_dir(
    root: Path,
    rank: int = 0,
    gz: bool = False,
    msprof_tx: bool = True,
    comm_file: bool = False,
    comm_durs: tuple[float, float] = (400.0, 1000.0),
    name: str | None = None,
) -> Path:
    """``comm_file``: the comm: ranges in npuprof_comm_ranges.json (as npuprof writes them now), not in the
    trace (as captures made before it have them). ``name``: the rank dir's, less ``_ascend_pt``."""
    trace = marked_trace(rank, comm_durs, comm_in_trace=not comm_file)
    rank_dir = write_rank_dir(root, trace, rank=rank, name=name or f"host_{rank}_2025", gz=gz)
    if comm_file:
        (rank_dir / "npuprof_comm_ranges.json").write_text(json.dumps(comm_record(comm_durs)))
    info = {"config": {"experimental_config": {"_msprof_tx": msprof_tx, "_gc_detect_threshold": 0.5}}}
    (rank_dir / f"profiler_info_{rank}.json").write_text(json.dumps(info))
    marks = {"version": 1, "names": {"tick": "mark", "load": "range"}, "names_not_listed": 0}
    (rank_dir / "npuprof_marks.json").write_text(json.dumps(marks))
    (rank_dir / "npuprof_gc.json").write_text(json.dumps(GC_RECORD))
    return rank_dir


def _trace_view(rank_dir: Path) -> list[dict[str, Any]]:
    return json.loads((rank_dir / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())


def _tx(name: str, tid: int, ts: str, dur: float, kind: str) -> dict[str, Any]:
    event_type, domain = {"mark": ("marker", "default"), "range": ("start/end", "default")}.get(
        kind, ("start/end", "communication")
    )
    return {
        "name": name,
        "pid": MSPROFTX_PID,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "ph": "X",
        "args": {"event_type": event_type, "domain": domain},
    }


def _meta(name: str, pid: int, tid: int, key: str, value: Any) -> dict[str, Any]:
    return {"name": name, "pid": pid, "tid": tid, "ph": "M", "args": {key: value}}


@pytest.mark.parametrize(("gz", "jobs", "comm_file"), [(False, 1, True), (True, 2, True), (False, 1, False)])
def test_trace_view_has_the_msprof_tx_and_gc_layers_in_torch_npus_form(
    tmp_path: Path, gz: bool, jobs: int, comm_file: bool
) -> None:
    from npuprof.analysis.report import build_report

    rank_dir = marked_rank_dir(tmp_path, gz=gz, comm_file=comm_file)
    report = build_report(rank_dir, jobs=jobs)
    assert not report.problems, report.problems
    events = _trace_view(rank_dir)
    layer = [e for e in events if e.get("pid") == MSPROFTX_PID]
    assert layer == [
        _tx("tick", PID, "1700000000001010.000", 0.0, "mark"),
        _tx("load", PID, "1700000000001100.000", 200.125, "range"),
        _tx(COMM, PID, "1700000000001500.000", 400.0, "comm"),
        _tx("load", PID + 1, "1700000000002100.000", 300.375, "range"),
        _tx(COMM, PID, "1700000000002500.000", 1000.0, "comm"),
        _meta("process_name", MSPROFTX_PID, 0, "name", "python"),
        _meta("process_labels", MSPROFTX_PID, 0, "labels", "CPU"),
        _meta("process_sort_index", MSPROFTX_PID, 0, "sort_index", 6),
        _meta("thread_name", MSPROFTX_PID, PID, "name", f"Thread {PID}"),
        _meta("thread_sort_index", MSPROFTX_PID, PID, "sort_index", PID),
        _meta("thread_name", MSPROFTX_PID, PID + 1, "name", f"Thread {PID + 1}"),
        _meta("thread_sort_index", MSPROFTX_PID, PID + 1, "sort_index", PID + 1),
    ]
    gc_layer = [e for e in events if e.get("pid") == GC_PID]
    pauses = [
        ("1700000000001200.000", 50.0, 0, 10, 0),
        ("1700000000001990.000", 40.0, 2, 300, 1),
        ("1700000000004100.000", 5.5, 1, 5, 0),
    ]
    assert gc_layer == [
        {
            "ph": "X",
            "name": "GC",
            "pid": GC_PID,
            "tid": PID,
            "ts": ts,
            "dur": dur,
            "cat": "GC",
            "args": {"generation": gen, "collected": collected, "uncollectable": lost},
        }
        for ts, dur, gen, collected, lost in pauses
    ] + [
        {"ph": "M", "name": "process_name", "pid": GC_PID, "tid": 0, "args": {"name": "Python GC"}},
        {"ph": "M", "name": "process_labels", "pid": GC_PID, "tid": 0, "args": {"labels": "CPU"}},
        {"ph": "M", "name": "process_sort_index", "pid": GC_PID, "tid": 0, "args": {"sort_index": 1}},
        {"ph": "M", "name": "thread_name", "pid": GC_PID, "tid": PID, "args": {"name": "Python GC"}},
        {"ph": "M", "name": "thread_sort_index", "pid": GC_PID, "tid": PID, "args": {"sort_index": PID}},
    ]
    # the spans stay where they were too, in the Python process (as any record_function)
    assert sum(e.get("name") == "load" and e.get("pid") == PID for e in events) == 2


def test_the_report_lists_ranges_per_name_and_gc_per_step(tmp_path: Path) -> None:
    from rich.console import Console

    from npuprof.analysis.report import NothingToAnalyse, build_report
    from npuprof.analysis.report_schema import read_report
    from npuprof.reports import terminal

    rank_dir = marked_rank_dir(tmp_path, comm_file=True)
    report = build_report(rank_dir, jobs=1)
    data = json.loads(terminal.render_json(report))
    (rank,) = data["ranks"]
    assert rank["ranges"] == [  # largest total first; the mark "tick" and the user's "mine" are not ranges
        {"name": COMM, "kind": "comm", "count": 2, "total_us": 1400.0, "mean_us": 700.0, "max_us": 1000.0},
        {
            "name": "load",
            "kind": "range",
            "count": 2,
            "total_us": 500.5,
            "mean_us": 250.25,
            "max_us": 300.375,
        },
    ]
    assert [(s["step"], s["gc_us"], s["gc_pauses"]) for s in rank["steps"]] == [(1, 60.0, 2), (2, 30.0, 1)]
    assert rank["gc"] == {"threshold_ms": 0.5, "pauses": 3, "gc_us": 90.0, "dropped": 0}
    assert data["cross_rank"]["ranges"][0] == {
        "name": COMM, "kind": "comm", "ranks": 1, "count": 2, "total_us": 1400.0, "mean_us": 700.0,
        "max_us": 1000.0, "max_rank": 0,
    }  # fmt: skip
    assert terminal.render_json(read_report(terminal.render_json(report))) == terminal.render_json(report)

    only_2 = json.loads(terminal.render_json(build_report(rank_dir, steps=(2, 2), jobs=1)))["ranks"][0]
    assert [(g["name"], g["count"], g["total_us"]) for g in only_2["ranges"]] == [
        (COMM, 1, 1000.0),
        ("load", 1, 300.375),
    ]
    assert only_2["gc"] == {"threshold_ms": 0.5, "pauses": 1, "gc_us": 30.0, "dropped": 0}

    rows = list(csv.reader(io.StringIO(terminal.render_csv(report))))
    assert rows[0][-2:] == ["gc_us", "gc_pauses"] and [r[-2:] for r in rows[1:]] == [
        ["60.0", "2"],
        ["30.0", "1"],
    ]
    ranges = list(csv.reader(io.StringIO(terminal.render_csv(report, "ranges"))))
    header = ["rank", "name", "kind", "count", "total_us", "mean_us", "max_us", "max_rank", "rank_dir"]
    assert ranges[0] == header
    assert ranges[1:] == [
        ["0", COMM, "comm", "2", "1400.0", "700.0", "1000.0", "0", str(rank_dir)],
        ["0", "load", "range", "2", "500.5", "250.25", "300.375", "0", str(rank_dir)],
        ["all", COMM, "comm", "2", "1400.0", "700.0", "1000.0", "0", ""],
        ["all", "load", "range", "2", "500.5", "250.25", "300.375", "0", ""],
    ]
    out = io.StringIO()
    terminal.render_table(report, Console(file=out, width=200))
    text = out.getvalue()
    assert "slowest ranges by total time" in text
    # 90 µs of GC in 3000 µs of steps; step 1: 60 of its 1000 µs
    gc_line = "GC: 3 pauses (threshold 0.5 ms), 0.090 ms, 3.0% of the step time; most in step 1: 0.060 ms"
    assert gc_line + " (6.0% of it)" in text
    with pytest.raises(NothingToAnalyse, match=r"no step of --steps 5-9 in .*: their steps are 1-2$"):
        build_report(rank_dir, steps=(5, 9), jobs=1)  # no empty tables of ranges and GC: what there is


def test_gc_time_of_overlapping_pauses_and_the_layer_of_another_device() -> None:
    """The file is not trusted to keep its pauses apart: pauses [0, 100), [50, 120) and [60, 80) µs of a
    step [0, 1000) are 120 µs of GC, their union; the layer of device 3 has the pid (pid << 10) | (1 << 5)
    | 3 (helper-368: the overlap counted again, 170 µs, and the device left out of the pid failed no
    test, the tests' pauses apart and their device 0)."""
    from npuprof.analysis.gc_layer import GcPause, GcRecord, layer_events, per_step
    from npuprof.analysis.step_breakdown import StepWindows

    base = 1_700_000_000_000_000_000
    spans = ((0, 100), (50, 120), (60, 80))
    pauses = [
        GcPause(start_ns=base + a * 1000, end_ns=base + b * 1000, generation=2, collected=1, uncollectable=0)
        for a, b in spans
    ]
    record = GcRecord(version=1, pid=PID, threshold_ms=0.0, clock="epoch", events=pauses)
    (step,) = per_step(record, StepWindows.of([(1, 0.0, 1000.0)]), base)
    assert (step["pauses"], step["gc_us"]) == (3, 120.0)
    pids = {json.loads(e)["pid"] for e in layer_events(record, 3)}
    assert pids == {PID * 1024 + 32 + 3}


def test_ranges_across_ranks_sum_the_ranks_and_name_the_longest(tmp_path: Path) -> None:
    from rich.console import Console

    from npuprof.analysis.report import build_report
    from npuprof.reports import terminal

    marked_rank_dir(tmp_path, rank=0, comm_file=True)
    marked_rank_dir(tmp_path, rank=1, comm_durs=(2000.0, 100.0))  # an older capture: comm: spans
    report = build_report(tmp_path, jobs=1)
    cross = json.loads(terminal.render_json(report))["cross_rank"]["ranges"]
    assert cross == [  # comm: 400 + 1000 + 2000 + 100; load: twice 500.5, its longest first seen on rank 0
        {"name": COMM, "kind": "comm", "ranks": 2, "count": 4, "total_us": 3500.0, "mean_us": 875.0,
         "max_us": 2000.0, "max_rank": 1},
        {"name": "load", "kind": "range", "ranks": 2, "count": 4, "total_us": 1001.0, "mean_us": 250.25,
         "max_us": 300.375, "max_rank": 0},
    ]  # fmt: skip
    top1 = build_report(tmp_path, jobs=1, top=1)
    assert [c.name for c in top1.cross_rank.ranges] == [COMM]
    assert all([g.name for g in r.ranges] == [COMM] for r in top1.ranks)
    out = io.StringIO()
    terminal.render_table(report, Console(file=out, width=200))
    assert "slowest ranges across ranks" in out.getvalue()
    # a partial step (the capture records say so) leaves the comparison of steps across ranks: the ranges stay
    for r in report.ranks:
        (Path(r.rank_dir) / "npuprof_capture.json").write_text(
            json.dumps({"status": "complete", "steps": [1, 2], "detail": "training ended", "version": 1})
        )
    report = build_report(tmp_path, jobs=1)
    assert report.ranks[0].partial_step == 2 and [s.step for s in report.cross_rank.steps] == [1]
    assert json.loads(terminal.render_json(report))["cross_rank"]["ranges"] == cross


def test_the_ranges_csv_tells_two_captures_of_one_rank_apart(tmp_path: Path) -> None:
    """The ranges CSV of a rank captured twice (``--repeat 2``) had a row per capture and name, both ``0,
    comm:...`` with no column telling them apart: read as the doc's "one row per rank and name", one
    capture's comm: time stood for the rank's. Each row now names its rank dir, as the steps table does."""
    first = marked_rank_dir(tmp_path, comm_file=True, name="host_4242_20250101000000001")
    second = marked_rank_dir(
        tmp_path, comm_file=True, comm_durs=(100.0, 50.0), name="host_4242_20250101000000002"
    )
    result = npuprof("analyse", str(tmp_path), "--format", "csv", "--csv-table", "ranges")
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    comm = {(r["rank"], r["rank_dir"]): (r["count"], r["total_us"]) for r in rows if r["name"] == COMM}
    # each capture's own two comm: ranges (comm_record), and both ranks' together in the "all" row
    assert comm == {
        ("0", str(first)): ("2", str(400.0 + 1000.0)),
        ("0", str(second)): ("2", str(100.0 + 50.0)),
        ("all", ""): ("4", str(400.0 + 1000.0 + 100.0 + 50.0)),
    }, result.stdout


def test_a_range_ended_by_a_thread_torch_does_not_record_ends_where_it_ended(tmp_path: Path) -> None:
    """helper-207: a range the training thread opened and another thread ended (a worker handed its id, a
    generator resumed in a thread pool): torch never sees that end and ends the span with the capture, so
    a range of 20 ms was 175 ms in analyse. The capture notes the end (``ended_elsewhere``); the parser
    ends the span there, the first of that name that holds the moment, and no other."""
    from npuprof.analysis.report import build_report
    from npuprof.reports import terminal

    trace = marked_trace(comm_in_trace=False)
    # two "load" ranges on the training thread run to the capture's end (4000 µs); one at 1100 was ended
    # at 1300 by another thread, the other (at 2100) at 2400.5; a third, ended in its own thread, stays
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e["name"] != "load"] + [
        _x("load", "user_annotation", 1100, 2900),
        _x("load", "user_annotation", 2100, 1900),
        _x("load", "user_annotation", 3000, 100.5),
    ]
    rank_dir = write_rank_dir(tmp_path, trace, rank=0, name="host_0_2025")
    marks = {
        "version": 1,
        "names": {"tick": "mark", "load": "range"},
        "names_not_listed": 0,
        "ended_elsewhere": [
            {"name": "load", "end_ns": _ns(2400.5)},
            {"name": "load", "end_ns": _ns(1300)},
            {"name": "tick", "end_ns": _ns(1500)},  # no range: ignored
            {"name": "load", "end_ns": "soon"},  # no time: ignored
        ],
    }
    (rank_dir / "npuprof_marks.json").write_text(json.dumps(marks))
    data = json.loads(terminal.render_json(build_report(rank_dir, jobs=1)))
    (ranges,) = [r for r in data["ranks"][0]["ranges"] if r["name"] == "load"]
    assert (ranges["count"], ranges["total_us"], ranges["max_us"]) == (3, 200.0 + 300.5 + 100.5, 300.5), (
        ranges
    )
    layer = sorted(
        (e["ts"], e["dur"]) for e in _trace_view(rank_dir) if e["name"] == "load" and e["pid"] == MSPROFTX_PID
    )
    assert [float(d) for _, d in layer] == [200.0, 300.5, 100.5], layer


def test_an_end_from_another_thread_ends_the_range_of_its_name_that_began_first(tmp_path: Path) -> None:
    """Two "load" ranges [1100, 4000) and [2100, 4000) both hold 2400.5, an end noted from another thread:
    it ends the one that began first (1300.5 µs); the end at 3500 then ends the other (1400 µs)
    (helper-368: ending the one that began last, 300.5 and 2400 µs, failed no test: the other test's ends
    each fell where one range alone held them)."""
    from npuprof.analysis.report import build_report
    from npuprof.reports import terminal

    trace = marked_trace(comm_in_trace=False)
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e["name"] != "load"] + [
        _x("load", "user_annotation", 1100, 2900),
        _x("load", "user_annotation", 2100, 1900),
    ]
    rank_dir = write_rank_dir(tmp_path, trace, rank=0, name="host_0_2025")
    marks = {
        "version": 1,
        "names": {"tick": "mark", "load": "range"},
        "names_not_listed": 0,
        "ended_elsewhere": [{"name": "load", "end_ns": _ns(3500)}, {"name": "load", "end_ns": _ns(2400.5)}],
    }
    (rank_dir / "npuprof_marks.json").write_text(json.dumps(marks))
    data = json.loads(terminal.render_json(build_report(rank_dir, jobs=1)))
    (ranges,) = [r for r in data["ranks"][0]["ranges"] if r["name"] == "load"]
    assert (ranges["count"], ranges["total_us"], ranges["max_us"]) == (2, 1300.5 + 1400.0, 1400.0), ranges
    layer = sorted(
        (e["ts"], e["dur"]) for e in _trace_view(rank_dir) if e["name"] == "load" and e["pid"] == MSPROFTX_PID
    )
    assert [float(d) for _, d in layer] == [1300.5, 1400.0], layer


def test_a_capture_without_marks_or_gc_keeps_its_outputs_as_they_were(tmp_path: Path) -> None:
    from npuprof.analysis.report import build_report
    from npuprof.reports import terminal

    rank_dir = write_rank_dir(tmp_path, cpu_trace())
    report = build_report(rank_dir, jobs=1)
    parsed = rank_dir / "ASCEND_PROFILER_OUTPUT"
    assert not (parsed / "npuprof_annotations.json").exists()
    assert not any(
        e.get("cat") == "GC" or e.get("args", {}).get("sort_index") == 6 for e in _trace_view(rank_dir)
    )
    data = json.loads(terminal.render_json(report))
    assert "ranges" not in data["cross_rank"] and not {"ranges", "gc"} & set(data["ranks"][0])
    assert not {"gc_us", "gc_pauses"} & set(data["ranks"][0]["steps"][0])
    header = next(csv.reader(io.StringIO(terminal.render_csv(report))))
    assert header[-2:] == ["memory_peak_mb", "rank_dir"]


def test_msprof_tx_off_leaves_comm_names_alone_and_damaged_side_files_become_warnings(tmp_path: Path) -> None:
    from npuprof.analysis.annotation_schema import AnnotationsError, read_annotations
    from npuprof.analysis.report import build_report

    rank_dir = marked_rank_dir(tmp_path, msprof_tx=False)
    (rank_dir / "npuprof_gc.json").write_text('{"version": 1, "pid": 4242}')
    report = build_report(rank_dir, jobs=1)
    (rank,) = report.ranks
    assert [g.name for g in rank.ranges] == ["load"]  # comm: spans are not ranges without --msprof-tx
    assert rank.gc is msgspec_unset() and rank.steps[0].gc_us is msgspec_unset()
    (warning,) = rank.warnings
    assert warning.startswith("npuprof_gc.json unreadable (") and warning.endswith(
        "the GC layer is not shown"
    )
    assert not [e for e in _trace_view(rank_dir) if e.get("cat") == "GC"]

    annotations = rank_dir / "ASCEND_PROFILER_OUTPUT" / "npuprof_annotations.json"
    annotations.write_text(json.dumps({"version": 2, "ranges": []}))
    with pytest.raises(AnnotationsError, match=r"newer npuprof \(version 2, this one reads 1\); upgrade"):
        read_annotations(annotations.read_bytes())
    (again,) = build_report(rank_dir, jobs=1).ranks
    assert again.ranges is msgspec_unset()
    newer = (
        "written by a newer npuprof (version 2, this one reads 1); upgrade npuprof, or re-run with --force"
    )
    assert again.warnings == [f"npuprof_annotations.json: {newer}"]


def test_cut_annotations_are_parsed_again_from_the_trace(tmp_path: Path) -> None:
    """npuprof_annotations.json cut short (its trace intact) was a warning "re-run with --force" and the
    ranges were left out; analyse parses the trace again itself and says so once."""
    from npuprof.analysis.report import build_report

    rank_dir = marked_rank_dir(tmp_path, comm_file=True)
    annotations = rank_dir / "ASCEND_PROFILER_OUTPUT" / "npuprof_annotations.json"
    build_report(rank_dir, jobs=1)
    whole = annotations.read_bytes()
    annotations.write_bytes(whole[: len(whole) // 2])
    notes: list[str] = []
    (rank,) = build_report(rank_dir, jobs=1, on_note=notes.append).ranks
    assert [(r.name, r.count, r.total_us) for r in rank.ranges] == [(COMM, 2, 1400.0), ("load", 2, 500.5)]
    assert not [w for w in rank.warnings or [] if "npuprof_annotations.json" in w]
    (note,) = [n for n in notes if "parsed again" in n]
    assert "npuprof_annotations.json: not npuprof's" in note and note.endswith(
        "parsed again from its raw trace"
    )
    assert annotations.read_bytes() == whole


@pytest.mark.parametrize("version", [0, 2])
def test_unreadable_annotations_whose_trace_is_gone_are_not_sent_to_force(
    tmp_path: Path, version: int
) -> None:
    """Their warning said "re-run with --force", which has nothing to parse again once the raw trace is
    deleted (it keeps the tables as they are): it says that instead, as the summary's does."""
    from npuprof.analysis.report import build_report

    rank_dir = marked_rank_dir(tmp_path, comm_file=True)
    build_report(rank_dir, jobs=1)
    annotations = rank_dir / "ASCEND_PROFILER_OUTPUT" / "npuprof_annotations.json"
    annotations.write_text(json.dumps({"version": version, "ranges": []}))
    for trace in rank_dir.glob("*.pt.trace.json*"):
        trace.unlink()
    (rank,) = build_report(rank_dir, jobs=1).ranks
    (warning,) = [w for w in rank.warnings or [] if w.startswith("npuprof_annotations.json: ")]
    assert "re-run with --force" not in warning, warning
    assert warning.endswith("--force has nothing to parse it again from"), warning
    older = "an npuprof of that version reads it" if version < 1 else "upgrade npuprof to read it"
    assert older in warning, warning


def test_comm_ranges_come_from_their_side_file_alone_and_then_the_trace_is_not_read(tmp_path: Path) -> None:
    from npuprof.analysis import marks_ranges
    from npuprof.analysis.report import build_report
    from npuprof.analysis.trace_loader import TraceError

    rank_dir = marked_rank_dir(tmp_path)  # the trace has comm: spans, but the side file is the capture's
    bad = comm_record()
    bad["ranges"][1]["end_ns"] = bad["ranges"][1]["start_ns"] - 1
    (rank_dir / "npuprof_comm_ranges.json").write_text(json.dumps(bad))
    (rank,) = build_report(rank_dir, jobs=1).ranks
    assert [g.name for g in rank.ranges] == ["load"]
    start = BASE_NS + 2_500_000
    assert rank.warnings == [
        f"npuprof_comm_ranges.json: a span ends before it starts ({start} > {start - 1}): "
        "the communication ranges are not shown"
    ]
    # no marks, the comm: ranges in their file: the trace is not read (a file that is no trace is no error)
    garbage = tmp_path / "not-a-trace.json"
    garbage.write_bytes(b"\x00 no trace")
    record = msgspec_convert(comm_record(), marks_ranges.CommRecord)
    with open(garbage, "rb") as handle:
        spans = marks_ranges.read_spans(garbage, handle.fileno(), marks_ranges.Wanted({}, False, record))
        assert len(spans) == 0
        with pytest.raises(TraceError):
            marks_ranges.read_spans(garbage, handle.fileno(), marks_ranges.Wanted({"load": "range"}, False))


def msgspec_convert(value: Any, kind: Any) -> Any:
    import msgspec

    return msgspec.convert(value, kind)


def msgspec_unset() -> Any:
    import msgspec

    return msgspec.UNSET


@pytest.mark.parametrize("indent", [1, None])
def test_reading_only_the_events_that_name_user_annotation_finds_every_span(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, indent: int | None
) -> None:
    """Small blocks over a trace of many other events, laid out as Kineto writes it and compact: the spans
    found are those a plain json.load finds, even where cutting an event out is unsure (a name holding
    ``},{``, args holding a list of objects: then the whole block is decoded)."""
    from npuprof.analysis import marks_ranges

    events: list[dict[str, Any]] = []
    for i in range(3000):
        args = {"Python id": i, "Python parent id": i - 1, "Python thread": 0}
        events.append({**_x(f"frame {i}", "python_function", 10 * i, 5), "args": args})
        if i % 97 == 0:
            events.append(_x("load" if i % 2 else COMM, "user_annotation", 10 * i + 1, 3))
        if i % 89 == 0:
            events.append(_x("load", "gpu_user_annotation", 10 * i + 2, 3))  # the device's copy: not a range
    events[1000]["args"] = {"list": [{"a": "user_annotation"}, {"b": 1}]}  # a python_function's args
    odd = {**_x("load", "user_annotation", 5001, 3), "args": {"nested": [{"x": 1}, {"y": 2}]}}
    events[1500:1500] = [odd, _x("a},{b", "user_annotation", 5002, 3)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"baseTimeNanoseconds": BASE_NS, "traceEvents": events}, indent=indent))
    monkeypatch.setattr(marks_ranges, "BLOCK", 4096)
    expected = [
        (e["name"], e["ts"])
        for e in json.loads(path.read_text())["traceEvents"]
        if e["cat"] == "user_annotation"
    ]
    names = {"load": "range", "a},{b": "mark"}
    with open(path, "rb") as handle:
        both = marks_ranges.read_spans(path, handle.fileno(), marks_ranges.Wanted(names, True))
        ranges_only = marks_ranges.read_spans(path, handle.fileno(), marks_ranges.Wanted(names, False))
    assert list(zip(both.name, both.ts, strict=True)) == expected and len(expected) == 33
    assert list(zip(ranges_only.name, ranges_only.ts, strict=True)) == [
        (n, t) for n, t in expected if n != COMM
    ]
    assert set(both.kind) == {"range", "comm", "mark"} and set(both.dur_ns) == {3000}


# ---- one real run ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("marks-analysis") / "out"
    result = npuprof(
        "run", "-o", str(out), "--skip-first", "1", "--warmup", "1", "--active", "3", "--msprof-tx",
        "--gc-detect-threshold", "0", "--export-type", "text,db", "--",
        sys.executable, str(SCRIPTS / "marks_gc_job.py"),
        "--steps", "5", "--gc-step", "3",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    (out.parent / "stderr.txt").write_text(result.stderr)
    (rank_dir,) = rank_dirs(out)
    return rank_dir


def test_a_real_capture_shows_its_ranges_and_gc_in_trace_view_and_in_the_report(real_run: Path) -> None:
    from npuprof.analysis.report import build_report
    from npuprof.reports import terminal

    events = _trace_view(real_run)
    processes = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    layer = [e for e in events if e.get("ph") == "X" and processes.get(e["pid"]) != "Python" and "args" in e
             and e["args"].get("event_type")]  # fmt: skip
    names = [e["name"] for e in layer]
    # steps 2, 3 and 4 recorded: each a mark, a forward range and one all_reduce of the 32 x 16 weight
    assert names.count("step begin") == 3 and names.count("forward") == 3
    assert names.count("comm:all_reduce,default_pg,float32,512") == 3
    assert {processes[e["pid"]] for e in layer} == {"python"}
    _check_comm_ranges_against_the_raw_trace(real_run, [e for e in layer if e["name"].startswith("comm:")])
    gc_events = [e for e in events if e.get("cat") == "GC"]
    assert gc_events and {processes[e["pid"]] for e in gc_events} == {"Python GC"}
    # gc.collect() (generation 2) in step 3; the 300 cycles made there are collected by it or before it
    assert any(e["args"]["generation"] == 2 for e in gc_events)
    assert sum(e["args"]["collected"] for e in gc_events) >= 300

    data = json.loads(terminal.render_json(build_report(real_run.parent, jobs=1)))
    (rank,) = data["ranks"]
    by_name = {g["name"]: g for g in rank["ranges"]}
    assert (
        by_name["forward"]["count"] == 3 and by_name["comm:all_reduce,default_pg,float32,512"]["count"] == 3
    )
    assert by_name["forward"]["kind"] == "range" and by_name["forward"]["max_us"] > 0
    gc_step = [s for s in rank["steps"] if s["step"] == 3]
    assert gc_step and gc_step[0]["gc_us"] > 0 and gc_step[0]["gc_pauses"] >= 1
    assert rank["gc"]["threshold_ms"] == 0 and rank["gc"]["gc_us"] >= gc_step[0]["gc_us"]


def _check_comm_ranges_against_the_raw_trace(rank_dir: Path, comm: list[dict[str, Any]]) -> None:
    """The comm: ranges of trace_view.json (recorded outside the trace, npuprof_comm_ranges.json), set
    against the raw trace's spans: each in one recorded step, each around the gloo collective it names."""
    from decimal import Decimal

    trace = load_trace(rank_dir)
    base = trace["baseTimeNanoseconds"]

    def interval(e: dict[str, Any]) -> tuple[int, int]:
        start = base + round(e["ts"] * 1000)
        return start, start + round(e["dur"] * 1000)

    assert not [e for e in trace["traceEvents"] if str(e.get("name", "")).startswith("comm:")]
    steps = {
        int(e["name"].removeprefix("ProfilerStep#")): interval(e)
        for e in trace["traceEvents"]
        if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
    }
    gloo = [interval(e) for e in trace["traceEvents"] if e.get("name") == "gloo:all_reduce"]
    assert sorted(steps) == [2, 3, 4] and len(gloo) == 3
    ranges = []
    for e in comm:
        start = int(Decimal(e["ts"]) * 1000)  # epoch µs, 3 decimals
        ranges.append((start, start + round(e["dur"] * 1000)))
        assert e["args"] == {"event_type": "start/end", "domain": "communication"} and e["dur"] > 0
    in_step = sorted(n for a, b in ranges for n, (s, t) in steps.items() if s <= a < b <= t)
    assert in_step == [2, 3, 4]  # one a step, inside it
    # each gloo span in one range, on the trace's clock to within 0.2 ms (Python's clock and Kineto's)
    slack = 200_000
    assert all(sum(a - slack <= s <= t <= b + slack for a, b in ranges) == 1 for s, t in gloo)
    # the report counts each in the step it lies in
    notes = json.loads((rank_dir / "ASCEND_PROFILER_OUTPUT" / "npuprof_annotations.json").read_text())
    per_step = [(r["step"], r["count"]) for r in notes["ranges"] if r["kind"] == "comm"]
    assert per_step == [(2, 1), (3, 1), (4, 1)]


def test_the_post_processor_writes_the_db_with_the_marks_and_gc(real_run: Path) -> None:
    """--export-type text,db: the db export beside the text tables, written by the run's post-processor."""
    import sqlite3

    out = real_run / "ASCEND_PROFILER_OUTPUT"
    assert (out / "trace_view.json").is_file() and (out / "analysis.db").is_file()
    con = sqlite3.connect(out / "ascend_pytorch_profiler_0.db")
    s = dict(con.execute("SELECT id, value FROM STRING_IDS"))
    marks = Counter((s[m], t) for m, t in con.execute("SELECT message, eventType FROM MSTX_EVENTS"))
    assert marks[("forward", 2)] == marks[("step begin", 3)] == 3
    assert marks[("comm:all_reduce,default_pg,float32,512", 2)] == 3
    record = json.loads((real_run / "npuprof_gc.json").read_text())
    pauses = sorted((e["start_ns"], e["end_ns"]) for e in record["events"])
    assert sorted(con.execute("SELECT startNs, endNs FROM GC_RECORD")) == pauses and pauses
    assert [r[0] for r in con.execute("SELECT id FROM STEP_TIME ORDER BY id")] == [2, 3, 4]
    stderr = (real_run.parent.parent / "stderr.txt").read_text()
    assert "msprof-analyze cluster -d" in stderr[stderr.index("next: ") :]  # the run's end points there


def test_stacks_of_trace_view_count_the_marks_and_gc_layers_nowhere(real_run: Path, tmp_path: Path) -> None:
    """helper-92: export-stacks of trace_view.json added the MsprofTx and GC layers as more busy time (root
    stacks "GC", "forward", ...): they repeat what the training thread did, which the raw trace holds."""
    totals = {}
    for name, source in (
        ("raw", real_run),
        ("trace_view", real_run / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"),
    ):
        target = tmp_path / f"{name}.stacks"
        result = npuprof("export-stacks", str(source), "-o", str(target))
        assert result.returncode == 0, result.stderr
        lines = target.read_text().splitlines()
        assert not [line for line in lines if line.split(";")[0].rsplit(" ", 1)[0] in ("GC", "forward")]
        totals[name] = sum(int(line.rsplit(" ", 1)[1]) for line in lines)
    assert totals["raw"] > 0
    assert abs(totals["trace_view"] - totals["raw"]) <= 0.01 * totals["raw"]


@pytest.mark.parametrize("metadata", ["as written", "at the end"])
def test_the_marks_layer_of_trace_view_is_not_taken_for_device_work(
    real_run: Path, tmp_path: Path, metadata: str
) -> None:
    """helper-93: analyse of npuprof's own trace_view.json warned of "possible device work" in the MsprofTx
    layer (no category, in a process named as the script's) and called the trace "CPU-only" only after it.
    Its process name at the end leaves the events pending until then: the same answer."""
    events = _trace_view(real_run)
    if metadata == "at the end":
        events = [e for e in events if e.get("ph") != "M"] + [e for e in events if e.get("ph") == "M"]
    trace = tmp_path / "tv.json"
    trace.write_text(json.dumps(events))
    result = npuprof("analyse", str(trace))
    assert result.returncode == 0, result.stderr
    assert "possible device work" not in result.stderr
    said = " ".join(result.stdout.split())
    assert "no device kernels: CPU-only trace (the CPU is the device: comp is its operators' time" in said


@pytest.mark.parametrize("metadata", ["as written", "at the end"])
def test_a_trace_view_analysed_alone_reports_the_ranges_of_its_msprof_tx_layer(
    real_run: Path, tmp_path: Path, metadata: str
) -> None:
    """helper-94: npuprof's trace_view.json analysed on its own (copied away from its rank dir and side
    files) had no ranges: the MsprofTx layer was left out as no work, and read nowhere. Its ranges are those
    of the rank dir's report; trace_view.json written for it keeps that layer once, as it was."""
    from npuprof.analysis.report import build_report
    from npuprof.reports import terminal

    def ranges(rank: dict[str, Any]) -> list[tuple[str, str, int, float]]:
        return sorted((g["name"], g["kind"], g["count"], g["total_us"]) for g in rank["ranges"])

    (own,) = json.loads(terminal.render_json(build_report(real_run.parent, jobs=1)))["ranks"]
    events = _trace_view(real_run)
    if metadata == "at the end":
        events = [e for e in events if e.get("ph") != "M"] + [e for e in events if e.get("ph") == "M"]
    trace = tmp_path / "tv.json"
    trace.write_text(json.dumps(events))
    result = npuprof("analyse", str(trace), "--format", "json")
    assert result.returncode == 0, result.stderr
    (alone,) = json.loads(result.stdout)["ranks"]
    layer = [
        e for e in events if e.get("ph") == "X" and (e.get("args") or {}).get("event_type") == "start/end"
    ]
    assert len(layer) >= 6  # 3 forward ranges, 3 comm: ranges
    got = ranges(alone)
    assert [(n, k, c) for n, k, c, _t in got] == [(n, k, c) for n, k, c, _t in ranges(own)]
    for (_n, _k, _c, mine), (_n2, _k2, _c2, theirs) in zip(got, ranges(own), strict=True):
        assert abs(mine - theirs) <= 0.002 * _c  # the layer's µs text rounds each range to the ns
    written = json.loads((tmp_path / "tv.json.npuprof" / "trace_view.json").read_text())
    rewritten = [e for e in written if e.get("ph") == "X" and (e.get("args") or {}).get("event_type")]
    assert len(rewritten) == len(
        [e for e in events if e.get("ph") == "X" and (e.get("args") or {}).get("event_type")]
    )


def test_the_msprof_tx_ranges_of_torch_npus_trace_view_are_reported_per_step(tmp_path: Path) -> None:
    """A torch_npu trace_view.json with mstx data (CANN's MsprofTx layer, as docs/formats.md shows it): its
    ranges in the report, summed per step and name, marks left out; computed here from the events."""
    real = json.loads((Path(__file__).parent / "fixtures" / "ascend-real" / "trace_view.json").read_text())
    (step,) = [e for e in real if str(e.get("name", "")).startswith("ProfilerStep#")]
    start = Decimal(step["ts"])
    pid = (4242 << 10) | (6 << 5) | 31
    layer = [
        {"name": "forward", "pid": pid, "tid": 7, "ts": str(start + Decimal("100.250")), "dur": 2400.5,
         "ph": "X", "args": {"event_type": "start/end", "domain": "default"}},
        {"name": "forward", "pid": pid, "tid": 7, "ts": str(start + Decimal("5000.125")), "dur": 1000.25,
         "ph": "X", "args": {"event_type": "start/end", "domain": "default"}},
        {"name": "step begin", "pid": pid, "tid": 7, "ts": str(start + Decimal("1.5")), "dur": 0.0, "ph": "X",
         "args": {"event_type": "marker", "domain": "default"}},
        {"name": "process_name", "pid": pid, "tid": 0, "ph": "M", "args": {"name": "python"}},
    ]  # fmt: skip
    trace = tmp_path / "trace_view.json"
    trace.write_text(json.dumps(real + layer))
    result = npuprof("analyse", str(trace), "--format", "json")
    assert result.returncode == 0, result.stderr
    (rank,) = json.loads(result.stdout)["ranks"]
    assert [(g["name"], g["kind"], g["count"], g["total_us"], g["max_us"]) for g in rank["ranges"]] == [
        ("forward", "range", 2, 2400.5 + 1000.25, 2400.5)
    ]
    assert "possible device work" not in result.stderr


def test_marks_past_the_listed_names_are_said_to_be_missing(tmp_path: Path) -> None:
    """helper-173: a capture calling 20,000 distinct names lists the first 10,000 (NAMES_LIMIT) and counts
    the rest in names_not_listed; analyse's ranges table left those out without a word."""
    from npuprof.analysis import marks_ranges

    listed = {f"r{i}": "range" for i in range(3)}
    (tmp_path / "npuprof_marks.json").write_text(
        json.dumps({"version": 1, "names": listed, "names_not_listed": 7})
    )
    warnings: list[str] = []
    want = marks_ranges.wanted(tmp_path, warnings.append)
    assert want is not None and want.names == listed
    assert warnings == [
        "7 mark(s) and range(s) recorded under names past the first 3 of the capture are not shown (their "
        "names were not listed: npuprof.marks.NAMES_LIMIT)"
    ]


def test_no_ranges_under_msprof_tx_names_the_functional_collectives_it_does_not_range(tmp_path: Path) -> None:
    """A 2-rank parallelize_module job (DTensor, gloo) under --msprof-tx: analyse said only "no ranges in
    these steps (marks and --msprof-tx ranges were looked for)", its 21 all-reduces a capture issued as
    _c10d_functional::all_reduce, with no torch.distributed call to range, _c10d_functional::wait_tensor its
    top operator."""
    from rich.console import Console

    from npuprof.analysis.report import build_report
    from npuprof.analysis.report_schema import read_report
    from npuprof.reports import terminal

    data = json.loads(terminal.render_json(build_report(marked_rank_dir(tmp_path, comm_file=True), jobs=1)))

    def said(top: str) -> str:
        data["ranks"][0]["ranges"] = []
        data["ranks"][0]["top_operators"][0]["name"] = top
        out = io.StringIO()
        terminal.render_table(read_report(json.dumps(data)), Console(file=out, width=400))
        return out.getvalue()

    text = said("_c10d_functional::wait_tensor")
    assert "no ranges in these steps" in text
    assert "functional collectives (_c10d_functional::wait_tensor)" in text, text
    assert "--msprof-tx does not range" in text
    assert "functional collectives" not in said("aten::mm")


def test_no_ranges_under_msprof_tx_names_the_collectives_issued_from_cpp(tmp_path: Path) -> None:
    """A 2-rank DDP job (gloo) under --msprof-tx (helper-366): analyse said only "no ranges in these steps
    (marks and --msprof-tx ranges were looked for)", its comm column 60-93 % of each step, c10d::allreduce_
    its second operator: DDP's gradient buckets are all-reduced from C++, with no torch.distributed call
    to range."""
    from rich.console import Console

    from npuprof.analysis.report import build_report
    from npuprof.analysis.report_schema import read_report
    from npuprof.reports import terminal

    data = json.loads(terminal.render_json(build_report(marked_rank_dir(tmp_path, comm_file=True), jobs=1)))

    def said(collectives: int) -> str:
        data["ranks"][0]["ranges"] = []
        data["ranks"][0]["top_operators"][0]["name"] = "c10d::allreduce_"
        data["ranks"][0]["communication"] = {"operators": collectives, "time_us": 9.0}
        out = io.StringIO()
        terminal.render_table(read_report(json.dumps(data)), Console(file=out, width=400))
        return " ".join(out.getvalue().split())

    text = said(3)
    assert (
        "no ranges in these steps (marks and --msprof-tx ranges were looked for): their 3 collective call(s) "
        "have none, as --msprof-tx ranges the script's torch.distributed calls, not the collectives issued "
        "from C++ (DDP's gradient buckets); their time is in the comm column"
    ) in text, text
    assert "collective call(s)" not in said(0)
