"""The data-loading figure of `npuprof analyse` (docs/formats.md, "Step breakdown"): each step's time on the
training thread inside the DataLoader's batch fetches (``enumerate(DataLoader)#<Iter>.__next__``), its
share, and the hint when it is a large share. The expected values are worked out here from the traces'
own events."""

from __future__ import annotations

import csv
import io
import json
import shutil
from decimal import Decimal
from pathlib import Path

import pytest
from _forked_cli import npuprof  # report commands forked from a process that imported them: see its doc
from analyse_support.handmade import (
    PID,
    T0,
    cpu_trace,
    kernel_on,
    launch_in,
    process_names,
    write_rank_dir,
    x,
)
from conftest import clean_env

from npuprof.analysis.report_schema import read_report

REAL = Path(__file__).resolve().parent / "fixtures" / "ascend-real"  # see its SOURCE.md
FETCH = "enumerate(DataLoader)#"
SINGLE = FETCH + "_SingleProcessDataLoaderIter.__next__"
MULTI = FETCH + "_MultiProcessingDataLoaderIter.__next__"
STEP_THREAD, LOADER_THREAD = 1, 2


def _inside(spans: list[tuple[float, float]], lo: float, hi: float) -> float:
    """The length of the union of ``spans`` inside [lo, hi), by walking them in order."""
    total, reach = 0.0, lo
    for start, end in sorted(spans):
        start, end = max(start, reach), min(end, hi)
        if end > start:
            total += end - start
            reach = end
    return total


def _analyse(target: Path, fmt: str, tmp: Path) -> str:
    result = npuprof(
        "analyse", str(target), "--format", fmt, env=clean_env(XDG_CACHE_HOME=str(tmp / "cache"))
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def _table_cells(text: str, first: str) -> list[str]:
    """The cells of the step table's line whose first cell is ``first`` (its rules, if drawn, left out)."""
    for line in text.splitlines():
        cells = [c for c in line.split() if c not in ("┃", "│")]
        if cells[:1] == [first]:
            return cells
    raise AssertionError(f"no line starting {first!r} in:\n{text}")


def _csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def _real_trace_view_dir(root: Path) -> Path:
    """torch_npu's real trace_view.json, kept alone in its rank dir (analysed from it)."""
    out = root / "runs" / "h_1_20240101000000000_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    shutil.copyfile(REAL / "trace_view.json", out / "trace_view.json")
    return root / "runs"


def test_the_real_torch_npu_traces_two_fetches_are_its_steps_data_time(tmp_path: Path) -> None:
    events = json.loads((REAL / "trace_view.json").read_text())
    # its ts are epoch µs as text, finer than a float of that size holds: exact decimals from the first
    base = min(Decimal(e["ts"]) for e in events if e.get("ph") == "X")
    spans = [
        (float(Decimal(e["ts"]) - base), float(Decimal(e["ts"]) - base + Decimal(str(e["dur"]))))
        for e in events
        if e.get("ph") == "X"
    ]
    names = [str(e.get("name", "")) for e in events if e.get("ph") == "X"]
    fetches = [s for s, n in zip(spans, names, strict=True) if n.startswith(FETCH)]
    steps = {
        int(n.split("#")[1]): s for s, n in zip(spans, names, strict=True) if n.startswith("ProfilerStep#")
    }
    assert len(fetches) == 2 and len(steps) == 1  # the fixture as SOURCE.md describes it
    want = {num: _inside(fetches, lo, hi) for num, (lo, hi) in steps.items()}
    assert want[1] == pytest.approx(1302.013 + 16.571, abs=0.002)
    runs = _real_trace_view_dir(tmp_path)

    (rank,) = json.loads(_analyse(runs, "json", tmp_path))["ranks"]
    got = {s["step"]: (s["data_us"], s["data_pct"]) for s in rank["steps"]}
    durations = {s["step"]: s["duration_us"] for s in rank["steps"]}
    assert got == {
        n: (pytest.approx(us, abs=0.002), pytest.approx(100 * us / durations[n], abs=0.06))
        for n, us in want.items()
    }
    (row,) = _csv(_analyse(runs, "csv", tmp_path))
    assert float(row["data_us"]) == pytest.approx(want[1], abs=0.002)
    assert float(row["data_pct"]) == pytest.approx(100 * want[1] / float(row["duration_us"]), abs=0.06)
    text = _analyse(runs, "table", tmp_path)
    header, cells = _table_cells(text, "step"), _table_cells(text, "1")
    assert cells[header.index("data")] == f"{100 * want[1] / durations[1]:.1f}%", text
    assert "data loading:" not in text  # under a fifth of the step


def _kineto_trace() -> dict:
    """Two steps on the training thread: a multi-process loader's fetch over their boundary holding a
    nested fetch (a user_annotation, as torch 2.x records it), a single-process loader's fetch inside step
    2 recorded as an operator (older releases), and a fetch on another thread (not the training thread's
    time)."""
    return {
        "schemaVersion": 1,
        "traceEvents": [
            x("ProfilerStep#1", "user_annotation", 0, 1000, tid=STEP_THREAD),
            x("ProfilerStep#2", "user_annotation", 1000, 1000, tid=STEP_THREAD),
            x("aten::mm", "cpu_op", 100, 200, tid=STEP_THREAD),
            x(MULTI, "user_annotation", 900, 400, tid=STEP_THREAD),
            x(MULTI, "user_annotation", 950, 100, tid=STEP_THREAD),
            x(SINGLE, "cpu_op", 1500, 250, tid=STEP_THREAD),
            x("aten::add", "cpu_op", 1800, 100, tid=STEP_THREAD),
            x(SINGLE, "cpu_op", 200, 500, tid=LOADER_THREAD),
        ],
    }


def _fetches_on(trace: dict, thread: int) -> list[tuple[float, float]]:
    return [
        (e["ts"] - T0, e["ts"] - T0 + e["dur"])
        for e in trace["traceEvents"]
        if e["name"].startswith(FETCH) and e["tid"] == thread
    ]


def test_fetches_are_split_at_step_boundaries_and_counted_once(tmp_path: Path) -> None:
    trace = _kineto_trace()
    write_rank_dir(tmp_path, trace)
    fetches = _fetches_on(trace, STEP_THREAD)
    want = {1: _inside(fetches, 0, 1000), 2: _inside(fetches, 1000, 2000)}
    assert want == {1: 100.0, 2: 300.0 + 250.0}  # the straddling fetch split, the nested one once
    text = _analyse(tmp_path, "json", tmp_path)
    got = {s["step"]: (s["data_us"], s["data_pct"]) for s in json.loads(text)["ranks"][0]["steps"]}
    assert got == {n: (us, round(100 * us / 1000, 1)) for n, us in want.items()}
    read_back = read_report(text).ranks[0].steps  # a tool reading the JSON back has them typed
    assert {s.step: (s.data_us, s.data_pct) for s in read_back} == got
    rows = _csv(_analyse(tmp_path, "csv", tmp_path))
    assert [(int(r["step"]), float(r["data_us"])) for r in rows] == sorted(want.items())
    # 650 of 2000 µs: over a fifth of the step time, so the hint names the knobs
    said = " ".join(_analyse(tmp_path, "table", tmp_path).split())
    share = 100 * sum(want.values()) / 2000
    assert f"data loading: {share:.1f}% of the step time" in said, said
    assert "more DataLoader workers (num_workers=) or a cheaper Dataset.__getitem__" in said, said
    assert "pin_memory" not in said  # a CPU-only trace: no copy to a device for pinned memory to speed


def test_the_data_hint_names_pin_memory_only_where_the_trace_has_a_device(tmp_path: Path) -> None:
    """helper-313: a CPU-only job (DataLoader workers sleeping in __getitem__, 91% of its steps in fetches)
    was told pin_memory=True would feed it faster; torch pins nothing without an accelerator. The same
    trace with a CUDA kernel (a device to copy batches to) is told it."""
    trace = _kineto_trace()
    trace["traceEvents"] += [
        *process_names((PID, "python"), (0, "GPU 0")),
        launch_in(PID, 110, 1, 1),
        kernel_on("kernel_a", 120, 50, 0, 1, 1),
    ]
    write_rank_dir(tmp_path, trace)
    said = " ".join(_analyse(tmp_path, "table", tmp_path).split())
    assert "more DataLoader workers (num_workers=), pin_memory=True or a cheaper" in said, said


def test_a_fifth_of_the_step_or_less_gives_no_hint(tmp_path: Path) -> None:
    trace = _kineto_trace()
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e["name"] != SINGLE]  # 100 + 300 of 2000 µs
    write_rank_dir(tmp_path, trace)
    assert _inside(_fetches_on(trace, STEP_THREAD), 0, 2000) == 0.2 * 2000
    text = _analyse(tmp_path, "table", tmp_path)
    assert "data" in _table_cells(text, "step") and "data loading:" not in text, text


def test_without_a_dataloader_the_data_time_is_unknown_not_zero(tmp_path: Path) -> None:
    """A job that loads its batches by hand has no fetch in its trace: its data time is not known, which
    a 0 would misstate (no input time at all)."""
    write_rank_dir(tmp_path, cpu_trace())
    steps = json.loads(_analyse(tmp_path, "json", tmp_path))["ranks"][0]["steps"]
    assert steps and all("data_us" not in s and "data_pct" not in s for s in steps)
    rows = _csv(_analyse(tmp_path, "csv", tmp_path))
    assert rows and all(r["data_us"] == "" and r["data_pct"] == "" for r in rows)
    text = _analyse(tmp_path, "table", tmp_path)
    assert "data" not in _table_cells(text, "step"), text


def test_a_step_of_a_loader_job_without_a_fetch_is_zero(tmp_path: Path) -> None:
    """Known zero: the trace has the DataLoader's fetches, none in this step (a batch reused)."""
    trace = _kineto_trace()
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e["name"] != MULTI]
    write_rank_dir(tmp_path, trace)
    steps = json.loads(_analyse(tmp_path, "json", tmp_path))["ranks"][0]["steps"]
    assert [(s["step"], s["data_us"], s["data_pct"]) for s in steps] == [(1, 0.0, 0.0), (2, 250.0, 25.0)]


def test_fetches_only_on_a_prefetching_thread_leave_the_data_time_unknown(tmp_path: Path) -> None:
    """A script whose own thread runs the DataLoader and hands batches over a queue: the training thread's
    wait for them is no fetch, so its data time is not known; a 0 would say the input cost nothing."""
    trace = _kineto_trace()
    trace["traceEvents"] = [
        e for e in trace["traceEvents"] if not (FETCH in e["name"] and e["tid"] == STEP_THREAD)
    ]
    write_rank_dir(tmp_path, trace)
    assert _fetches_on(trace, STEP_THREAD) == [] and _fetches_on(trace, LOADER_THREAD)
    steps = json.loads(_analyse(tmp_path, "json", tmp_path))["ranks"][0]["steps"]
    assert [s["step"] for s in steps] == [1, 2]
    assert all("data_us" not in s and "data_pct" not in s for s in steps), steps
    rows = _csv(_analyse(tmp_path, "csv", tmp_path))
    assert rows and all(r["data_us"] == "" and r["data_pct"] == "" for r in rows)
    text = _analyse(tmp_path, "table", tmp_path)
    assert "data" not in _table_cells(text, "step") and "data loading:" not in text, text


def _one_cpu_step(fetch_category: str) -> dict:
    """One CPU-only step [0, 1000): a fetch [100, 600) holding the batch's collate (aten::stack [500, 550)),
    then the model's aten::mm [700, 900); the fetch recorded as ``fetch_category``."""
    return {
        "schemaVersion": 1,
        "traceEvents": [
            x("ProfilerStep#1", "user_annotation", 0, 1000, tid=STEP_THREAD),
            x(SINGLE, fetch_category, 100, 500, tid=STEP_THREAD),
            x("aten::stack", "cpu_op", 500, 50, tid=STEP_THREAD),
            x("aten::mm", "cpu_op", 700, 200, tid=STEP_THREAD),
        ],
    }


@pytest.mark.parametrize("fetch_category", ["cpu_op", "user_annotation"])
def test_a_fetch_is_no_computing_whichever_way_the_release_records_it(
    tmp_path: Path, fetch_category: str
) -> None:
    """A CPU-only trace's computing is its operators' time; a fetch is the training thread's wait for a
    batch (its own data column): recorded as an operator (older releases) it read as computing, so the
    same script showed comp 75% on one torch release and 25% on another."""
    trace = _one_cpu_step(fetch_category)
    write_rank_dir(tmp_path, trace)
    ops = [e for e in trace["traceEvents"] if e["cat"] == "cpu_op" and not e["name"].startswith(FETCH)]
    computing = _inside([(e["ts"] - T0, e["ts"] - T0 + e["dur"]) for e in ops], 0, 1000)
    first_op = min(e["ts"] - T0 for e in ops)
    assert (computing, first_op) == (250.0, 500.0)
    (step,) = json.loads(_analyse(tmp_path, "json", tmp_path))["ranks"][0]["steps"]
    assert (step["computing_us"], step["free_us"]) == (computing, 1000 - computing)
    assert step["preparing_us"] == first_op
    assert step["data_us"] == 500.0


def _three_loader_steps(damaged: dict) -> dict:
    """Three steps of a loader job: step 1's fetch [100, 400) with ``damaged``'s fields written over its
    own (a NaN the trace's writer put there), step 2's fetch [1100, 1400) whole, step 3 without a fetch."""
    fetch = {**x(MULTI, "user_annotation", 100, 300, tid=STEP_THREAD), **damaged}
    return {
        "schemaVersion": 1,
        "traceEvents": [
            *(
                x(f"ProfilerStep#{n}", "user_annotation", 1000 * (n - 1), 1000, tid=STEP_THREAD)
                for n in (1, 2, 3)
            ),
            fetch,
            x(MULTI, "user_annotation", 1100, 300, tid=STEP_THREAD),
            x("aten::mm", "cpu_op", 500, 200, tid=STEP_THREAD),
        ],
    }


@pytest.mark.parametrize(
    "damage",
    [{"dur": float("nan")}, {"cat": "cpu_op", "args": {"External id": 1 << 64}}],  # the reader's, the tables'
)
def test_a_step_whose_fetch_is_damaged_has_its_data_time_unknown_not_zero(
    tmp_path: Path, damage: dict
) -> None:
    """A fetch whose ``dur`` is NaN is left out as damaged (said): its step's data time is not known, where
    it read as a measured 0.0 %; the other steps keep theirs (a step without a fetch a known 0)."""
    trace = _three_loader_steps(damage)
    write_rank_dir(tmp_path, trace)
    whole = _fetches_on(trace, STEP_THREAD)[1:]  # the damaged one left out
    want = {2: _inside(whole, 1000, 2000), 3: _inside(whole, 2000, 3000)}
    assert want == {2: 300.0, 3: 0.0}
    steps = json.loads(_analyse(tmp_path, "json", tmp_path))["ranks"][0]["steps"]
    assert [s["step"] for s in steps] == [1, 2, 3]
    assert "data_us" not in steps[0] and "data_pct" not in steps[0], steps[0]
    assert {s["step"]: s["data_us"] for s in steps[1:]} == want
    rows = _csv(_analyse(tmp_path, "csv", tmp_path))
    assert [(r["step"], r["data_us"], r["data_pct"]) for r in rows] == [
        ("1", "", ""),
        *((str(n), str(us), str(round(100 * us / 1000, 1))) for n, us in want.items()),
    ]
    text = _analyse(tmp_path, "table", tmp_path)
    header = _table_cells(text, "step")
    assert _table_cells(text, "1")[header.index("data")] == "-", text
    assert _table_cells(text, "2")[header.index("data")] == f"{100 * want[2] / 1000:.1f}%", text


def test_a_damaged_fetch_whose_start_is_unreadable_leaves_every_steps_data_time_unknown(
    tmp_path: Path,
) -> None:
    """Its step cannot be told: none of the steps' data times is known (any of them may have held it)."""
    write_rank_dir(tmp_path, _three_loader_steps({"ts": float("nan"), "dur": float("nan")}))
    steps = json.loads(_analyse(tmp_path, "json", tmp_path))["ranks"][0]["steps"]
    assert [s["step"] for s in steps] == [1, 2, 3]
    assert all("data_us" not in s and "data_pct" not in s for s in steps), steps
