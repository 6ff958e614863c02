"""The profiler's start runs at the step boundary before the capture's warm-up (or first recorded) step,
inside the optimizer.step() (or --step-on function's) call that ends the step before it: a timer of the
user's around that step counts it, and no table shows that step. The first start of a process that made
no optimizer takes torch seconds (it imports torch._dynamo then). The capture's record keeps the start's
cost (``start_after_step``, ``start_ms``) and `npuprof analyse` names it beside the step table
(README, "Comparing with your own timer"; docs/formats.md, the capture record).

helper-231: a manual SGD loop (backward, no optimizer) under --step-on, timed by its own timer: step 4
took 1816 ms, steps 5-8 18-62 ms; analyse showed steps 6-8 and said nothing of step 4's 1.8 s."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
from analyse_support.handmade import cpu_trace, with_steps, write_rank_dir
from rich.console import Console
from test_controller_units import RecordingProfile, Rig, TorchPlan
from test_export_type import _Backend, _NoAnnotations, _Post

from npuprof.config import ProfileConfig
from npuprof.results import layout


def test_a_start_at_a_boundary_is_the_step_before_its_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    """skip 2, warm up 1, record 2: the profiler starts at the boundary that ends step 1 (warm-up step 2)."""

    def slow_prepare(self: RecordingProfile) -> None:  # torch's start() of a warm-up prepares (Kineto's init)
        time.sleep(0.02)
        self.trace.append(("prepare", self.step_num))

    monkeypatch.setattr(RecordingProfile, "prepare_trace", slow_prepare)
    rig = Rig(TorchPlan(skip_first=2, wait=0, warmup=1, active=2, repeat=1))
    rig.run(1)
    assert rig.backend.created == []  # nothing started yet
    rig.run(1)
    after, took = rig.sink.start_cost
    assert after == 1 and took >= 20, rig.sink.start_cost


def test_the_captures_set_up_before_torchs_start_counts_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """helper-231: a job that makes an optimizer: its timer's step 3 took 91-99 ms (others 20-60), torch's
    start() 0.8 ms of it, npuprof's set-up of the first capture (the sink, the profiler object, the hooks
    of a running profiler) 21-37 ms: the record said 0.8 ms."""
    rig = Rig(TorchPlan(skip_first=2, wait=0, warmup=1, active=2, repeat=1))
    create = rig.backend.create_profiler

    def slow_create(*args: Any) -> RecordingProfile:
        time.sleep(0.02)
        return create(*args)

    monkeypatch.setattr(rig.backend, "create_profiler", slow_create)
    rig.run(2)
    after, took = rig.sink.start_cost
    assert after == 1 and took >= 20, rig.sink.start_cost


def test_a_start_inside_step_0_has_no_step_before_it() -> None:
    """No warm-up nor skip: the first optimizer's creation (inside step 0) starts the profiler; no step of
    the user's holds that start at its end."""
    rig = Rig(TorchPlan(skip_first=0, wait=0, warmup=0, active=2, repeat=1))
    assert rig.backend.created and rig.sink.start_cost is None


def test_the_record_keeps_its_captures_start_and_the_next_capture_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from npuprof.agent import capture
    from npuprof.agent.log import AgentLog

    monkeypatch.setattr(capture, "CaptureAnnotations", _NoAnnotations)  # marks are process-wide state
    cfg = ProfileConfig(output=str(tmp_path)).validate()
    post = _Post()
    writer = capture.CaptureWriter(
        cfg, {"run_id": "r"}, _Backend(False, tmp_path), AgentLog(None, "t"), lambda: 0, "w", post
    )
    writer.start_cost = (4, 1815.9)
    writer.begin(6)
    writer.finish(None, 8)
    writer.begin(9)  # a second cycle of a profiler kept running: no start of its own measured
    writer.finish(None, 11)
    first, second = (job["record"] for job in post.jobs)
    assert (first["start_after_step"], first["start_ms"]) == (4, 1815.9), first
    assert "start_ms" not in second and "start_after_step" not in second, second
    assert first["step_on"] is None and second["step_on"] is None  # optimizer.step() counted the steps


def test_the_record_names_the_step_on_function_its_steps_ended_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An evaluation job with no optimizer (--step-on): analyse said its start ran "inside its
    optimizer.step() (or --step-on function's) call"; the record says which function."""
    from npuprof.agent import capture
    from npuprof.agent.log import AgentLog

    monkeypatch.setattr(capture, "CaptureAnnotations", _NoAnnotations)
    cfg = ProfileConfig(output=str(tmp_path), step_on="evalpkg.run:Evaluator.batch").validate()
    post = _Post()
    writer = capture.CaptureWriter(
        cfg, {"run_id": "r"}, _Backend(False, tmp_path), AgentLog(None, "t"), lambda: 0, "w", post
    )
    writer.start_cost = (4, 12.5)
    writer.begin(6)
    writer.finish(None, 8)
    (job,) = post.jobs
    assert job["record"]["step_on"] == "evalpkg.run:Evaluator.batch"


def test_a_one_step_capture_is_logged_as_that_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """npuprof.log said "capture of steps 275-275 written to D" of a capture of one step; "step 275"."""
    from npuprof.agent import capture
    from npuprof.agent.log import AgentLog

    said: list[str] = []

    class Log(AgentLog):
        def info(self, message: str) -> bool:
            said.append(message)
            return True

    monkeypatch.setattr(capture, "CaptureAnnotations", _NoAnnotations)
    cfg = ProfileConfig(output=str(tmp_path)).validate()
    writer = capture.CaptureWriter(
        cfg, {"run_id": "r"}, _Backend(False, tmp_path), Log(None, "t"), lambda: 0, "w", _Post()
    )
    for first, last in ((275, 275), (276, 277)):
        writer.begin(first)
        writer.finish(None, last)
    written = [line.split(" written to ")[0] for line in said if " written to " in line]
    assert written == ["capture of step 275", "capture of steps 276-277"], said


def _start_line(tmp_path: Path, record: dict[str, Any]) -> str:
    """analyse's line of the profiler's start, for a rank dir with this capture record."""
    from npuprof.analysis.report import build_report
    from npuprof.reports import terminal

    rank_dir = next(tmp_path.glob("*_ascend_pt"), None) or write_rank_dir(
        tmp_path, with_steps(cpu_trace(), {6: 24000, 7: 18000, 8: 38000}), rank=0
    )
    (rank_dir / layout.CAPTURE_RECORD).write_text(json.dumps(record))
    out = io.StringIO()
    terminal.render_table(build_report(tmp_path, jobs=1), Console(file=out, width=400))
    said = " ".join(out.getvalue().split())
    start = said.index("the profiler started")
    return said[start : said.index("no table shows", start)]


def test_analyse_names_the_call_the_start_ran_inside_as_the_record_says(tmp_path: Path) -> None:
    record = {"status": "complete", "rank": 0, "steps": [6, 7, 8], "start_after_step": 4, "start_ms": 40.0}
    took = "that took the training process 40.0 ms, which a timer of your own around step 4 counts and "
    old = _start_line(tmp_path, record)  # a record of older npuprof: both said, as before
    assert old == "the profiler started at the end of step 4, inside its optimizer.step() (or --step-on " + (
        f"function's) call: {took}"
    )
    assert _start_line(tmp_path, {**record, "step_on": None}) == (
        f"the profiler started at the end of step 4, inside its optimizer.step() call: {took}"
    )
    assert _start_line(tmp_path, {**record, "step_on": "__main__:evaluate"}) == (
        f"the profiler started at the end of step 4, inside its call of __main__:evaluate (--step-on): {took}"
    )


def test_analyse_names_the_start_and_the_step_that_holds_it(tmp_path: Path) -> None:
    from npuprof.analysis.report import build_report
    from npuprof.reports import terminal

    trace = with_steps(cpu_trace(), {6: 24000, 7: 18000, 8: 38000})
    rank_dir = write_rank_dir(tmp_path, trace, rank=0)
    record = {"status": "complete", "rank": 0, "steps": [6, 7, 8], "start_after_step": 4, "start_ms": 1815.9}
    (rank_dir / layout.CAPTURE_RECORD).write_text(json.dumps(record))
    report = build_report(tmp_path, jobs=1)
    [rank] = report.ranks
    assert (rank.start_after_step, rank.start_ms) == (4, 1815.9)
    out = io.StringIO()
    terminal.render_table(report, Console(file=out, width=400))
    said = " ".join(out.getvalue().split())
    assert (
        "the profiler started at the end of step 4, inside its optimizer.step() (or --step-on function's) "
        "call: that took the training process 1815.9 ms, which a timer of your own around step 4 counts"
    ) in said, said
    # a start of a ms or so (a later one in the process) is no news beside a step: in the JSON only
    record["start_ms"] = 0.8
    (rank_dir / layout.CAPTURE_RECORD).write_text(json.dumps(record))
    report = build_report(tmp_path, jobs=1)
    assert report.ranks[0].start_ms == 0.8
    out = io.StringIO()
    terminal.render_table(report, Console(file=out, width=400))
    assert "the profiler started" not in out.getvalue()
    # a record without them (older npuprof, a start inside a step): nothing said
    (rank_dir / layout.CAPTURE_RECORD).write_text(
        json.dumps({"status": "complete", "rank": 0, "steps": [6, 7, 8]})
    )
    report = build_report(tmp_path, jobs=1)
    assert report.ranks[0].start_ms is msgspec.UNSET and report.ranks[0].start_after_step is msgspec.UNSET
    out = io.StringIO()
    terminal.render_table(report, Console(file=out, width=400))
    assert "the profiler started" not in out.getvalue()
