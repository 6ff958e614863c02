"""A job torchrun restarted (--max-restarts, TORCHELASTIC_RESTART_COUNT): each capture's record says its
attempt, the run's summary and `npuprof analyse` tell the attempts apart, and analyse compares the ranks of
the latest attempt only. Hand-made records and rank dirs: no torch process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _forked_cli import npuprof  # report commands forked from a process that imported them: see its doc
from analyse_support.handmade import cpu_trace, with_steps, write_rank_dir
from conftest import clean_env
from test_export_type import _Backend, _NoAnnotations, _Post

from npuprof.config import ProfileConfig
from npuprof.results import layout

RUN = "aaaa11112222"


def test_the_capture_record_says_torchruns_attempt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The record the capture starts with and the one handed to the post-processor: torchrun's count where
    it gives one; absent outside torchrun, and where the variable holds no count."""
    from npuprof.agent import capture
    from npuprof.agent.log import AgentLog

    monkeypatch.setattr(capture, "CaptureAnnotations", _NoAnnotations)  # marks are process-wide state
    for env, said in (("1", 1), ("0", 0), (None, "absent"), ("one", "absent"), ("-1", "absent")):
        if env is None:
            monkeypatch.delenv("TORCHELASTIC_RESTART_COUNT", raising=False)
        else:
            monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", env)
        output = tmp_path / f"env-{env}"
        cfg = ProfileConfig(output=str(output)).validate()
        post = _Post()
        log = AgentLog(None, "t")
        writer = capture.CaptureWriter(
            cfg, {"run_id": "r"}, _Backend(False, output), log, lambda: 0, "w", post
        )
        writer.begin(2)
        (rank_dir,) = layout.find_rank_dirs(output)
        capturing = json.loads((rank_dir / layout.CAPTURE_RECORD).read_text())
        writer.finish(None, 4)
        (job,) = post.jobs
        assert capturing.get("restart_count", "absent") == said, (env, capturing)
        assert job["record"].get("restart_count", "absent") == said, (env, job)


def _record(rank_dir: Path, rank: int, steps: list[int], restart: Any, began_ns: int) -> None:
    record = {
        "status": "complete",
        "run_id": RUN,
        "rank": rank,
        "steps": steps,
        "updated_ns": began_ns + 10**9,
        "restart_count": restart,
    }
    if restart is None:
        del record["restart_count"]
    (rank_dir / layout.CAPTURE_RECORD).write_text(json.dumps(record))


def _summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import captures_of_run

    captures = captures_of_run(tmp_path, RUN)
    log = tmp_path / "npuprof.log"
    log.write_text("")
    print_run_summary(tmp_path, captures, 0, ProfileConfig(), log, run_id=RUN)
    return [" ".join(line.split()) for line in capsys.readouterr().err.splitlines()]


def test_the_run_summary_names_each_captures_attempt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """helper-163: the summary of a job torchrun restarted listed "0 1-2 complete" twice, nothing telling
    the failed attempt's captures from the restarted one's."""
    names = {
        (0, 0): "vm_200_20261205182103994",
        (1, 0): "vm_201_20261205182104012",
        (0, 1): "vm_100_20261205182107130",  # pids lower in the second attempt: the order is by attempt
        (1, 1): "vm_101_20261205182107136",
    }
    for (rank, attempt), name in names.items():
        rank_dir = tmp_path / f"{name}_ascend_pt"
        rank_dir.mkdir()
        _record(rank_dir, rank, [1, 2], attempt, 0)
    lines = _summary(tmp_path, capsys)
    assert lines[1] == "rank attempt steps status size parsed directory", lines
    assert lines[2:6] == [
        # 122 B: the record alone, {"status": "complete", "run_id": "aaaa11112222", "rank": 0,
        # "steps": [1, 2], "updated_ns": 1000000000, "restart_count": 0}
        f"{rank} {attempt} 1-2 complete 122 B no {names[rank, attempt]}_ascend_pt"
        for rank, attempt in ((0, 0), (0, 1), (1, 0), (1, 1))
    ], lines
    assert (
        "npuprof: torchrun restarted the job 1 time(s): the attempt column is its TORCHELASTIC_RESTART_COUNT "
        "(0: the first attempt); npuprof analyse compares the ranks of the latest attempt (1)"
    ) in lines, lines


def test_one_attempts_captures_keep_the_table_and_a_bad_count_is_no_damage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A job whose first attempt captured nothing: no attempt column, the restart said in one line; a
    record whose restart_count is not a count (written by hand, another tool) is still a complete capture."""
    for rank, restart in ((0, 2), (1, "2"), (2, True)):  # (JSON's true is no count: not attempt 1)
        rank_dir = tmp_path / f"vm_{rank}_20261205182107130_ascend_pt"
        rank_dir.mkdir()
        _record(rank_dir, rank, [1, 2], restart, 0)
        (rank_dir / "w.1.pt.trace.json").write_text('{"traceEvents": []}')
    assert layout.capture_status(tmp_path / "vm_1_20261205182107130_ascend_pt").status == "complete"
    lines = _summary(tmp_path, capsys)
    assert lines[1] == "rank steps status size parsed directory", lines
    assert lines[2].startswith("0 1-2 complete ") and lines[3].startswith("1 1-2 complete "), lines
    assert lines[4].startswith("2 1-2 complete "), lines
    assert (
        "npuprof: torchrun restarted the job 2 time(s): these captures are all of attempt 2 "
        "(TORCHELASTIC_RESTART_COUNT; 0: the first)"
    ) in lines, lines


def _capture(root: Path, rank: int, restart: int | None, durations: dict[int, int], stamp: str) -> Path:
    """A finished capture of rank ``rank`` in attempt ``restart``: one step of each number in
    ``durations`` lasting its µs, one after the other."""
    trace = cpu_trace()
    trace["distributedInfo"]["rank"] = rank
    with_steps(trace, durations)
    rank_dir = write_rank_dir(root, trace, rank=rank, name=f"vm_{rank}{restart}_{stamp}")
    _record(rank_dir, rank, sorted(durations), restart, 0)
    return rank_dir


def test_analyse_names_the_attempts_and_compares_the_latest(tmp_path: Path) -> None:
    """helper-163: analyse only said "rank N has step 7 in 2 captures ... they may be different runs", and
    its comparison across ranks kept the first attempt's steps the restarted one had not captured again
    (step 8 here, of ranks that ran before the restart)."""
    first = [_capture(tmp_path, r, 0, {7: 5000, 8: 6000}, "20261205182103994") for r in (0, 1)]
    second = [_capture(tmp_path, r, 1, {7: 1000 + 500 * r}, "20261205182107130") for r in (0, 1)]
    result = npuprof("analyse", str(tmp_path), "--format", "json", env=clean_env())
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    attempts = {r["rank_dir"]: r.get("restart_count") for r in report["ranks"]}
    assert attempts == {str(first[0]): 0, str(first[1]): 0, str(second[0]): 1, str(second[1]): 1}
    cross = report["cross_rank"]
    assert cross["restart_count"] == 1
    assert [(s["step"], s["ranks"]) for s in cross["steps"]] == [(7, {"0": 1000.0, "1": 1500.0})]
    for rank in (0, 1):
        note = (
            f"rank {rank} has step 7 in 2 captures (attempt 0: {first[rank]}; attempt 1: {second[rank]}): "
            "torchrun restarted the job (TORCHELASTIC_RESTART_COUNT; attempt 0 is the first); the comparison "
            "across ranks takes attempt 1's captures"
        )
        assert note in result.stderr, result.stderr
    text = npuprof("analyse", str(tmp_path), env=clean_env())
    said = "".join(text.stdout.split())  # a line may be folded at any width
    for rank_dir, attempt in attempts.items():
        assert "".join(f"(CPU, attempt {attempt}, {rank_dir})".split()) in said, said
    across = (
        "across ranks: the captures of attempt 1 (torchrun restarted the job; an earlier attempt's are not"
    )
    assert "".join(f"{across} compared)".split()) in said, said


def test_a_rank_only_an_earlier_attempt_captured_is_not_said_to_lack_whole_steps(tmp_path: Path) -> None:
    """helper-193: torchrun's attempt 1 captured rank 0 only (rank 1's capture of it lost); the comparison
    across ranks takes attempt 1 alone, and the line in its place said "no whole step on rank(s) 1; a
    partial step is left out" of a rank with 2 whole steps, left out for its attempt."""
    import io

    from rich.console import Console

    from npuprof.analysis.report import build_report
    from npuprof.reports import terminal

    for rank in (0, 1):
        _capture(tmp_path, rank, 0, {7: 5000, 8: 6000}, "20261205182103994")
    _capture(tmp_path, 0, 1, {7: 1000}, "20261205182107130")
    report = build_report(tmp_path, jobs=1)
    whole = {
        (r.rank, r.restart_count): [s.step for s in r.steps if s.partial is not True] for r in report.ranks
    }
    assert whole == {(0, 0): [7, 8], (1, 0): [7, 8], (0, 1): [7]}, whole  # rank 1: whole steps, attempt 0
    assert report.cross_rank.restart_count == 1
    assert [(s.step, s.ranks) for s in report.cross_rank.steps] == [(7, {"0": 1000.0})]
    out = io.StringIO()
    terminal.render_table(report, Console(file=out, width=400))
    said = [line.strip() for line in out.getvalue().splitlines() if "across ranks" in line]
    assert said == [
        "step time across ranks: nothing to compare (no capture of attempt 1 on rank(s) 1: torchrun "
        "restarted the job, and an earlier attempt's captures are not compared)"
    ], said
