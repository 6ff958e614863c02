"""A job torchrun restarted (--max-restarts, TORCHELASTIC_RESTART_COUNT): each capture's record says its
attempt, the run's summary and `npuprof analyse` tell the attempts apart, and analyse compares the ranks of
the latest attempt only. Hand-made records and rank dirs: no torch process."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import msgspec
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
    # this process's start from /proc: boot time (whole seconds) + field 22's clock ticks
    stat = Path("/proc/self/stat").read_text()
    ticks = int(stat[stat.rfind(")") + 2 :].split()[19])
    boot = next(
        int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if "btime" in line
    )
    began = boot + ticks / os.sysconf("SC_CLK_TCK")
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
        # with a count, the process's start too: the rounds of a multi-node job's restarts
        assert job["record"].get("process_start_ns", 0) == capturing.get("process_start_ns", 0)
        if said == "absent":
            assert "process_start_ns" not in capturing, capturing
        else:
            assert abs(capturing["process_start_ns"] / 1e9 - began) < 1.5, (capturing, began)


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


@pytest.mark.parametrize("restart", [None, 0], ids=["not-under-torchrun", "first-attempt"])
def test_a_job_torchrun_never_restarted_is_said_nothing_of_restarts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], restart: int | None
) -> None:
    """README's first command, a plain `npuprof run -- python examples/train.py`, ended "npuprof: torchrun
    restarted the job -1 time(s)": the restarts counted from a rank's processes (none under torchrun: 0, less
    one) were taken whatever the counts said."""
    rank_dir = tmp_path / "vm_300_20261205182103994_ascend_pt"
    rank_dir.mkdir()
    _record(rank_dir, 0, [6, 7, 8], restart, 0)
    lines = _summary(tmp_path, capsys)
    assert lines[2].startswith("0 6-8 complete "), lines
    assert not [line for line in lines if "restart" in line], lines


def test_one_attempts_captures_keep_the_table_and_a_bad_count_is_no_damage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A job whose first attempt captured nothing: no attempt column, the restart said in one line; a
    record whose restart_count is not a count (written by hand, another tool) is still a complete capture."""
    for rank, restart in ((0, 2), (1, "2"), (2, True)):  # (JSON's true is no count: not attempt 1)
        rank_dir = tmp_path / f"vm_{rank}_20261205182107130_ascend_pt"
        rank_dir.mkdir()
        _record(rank_dir, rank, [1, 2], restart, 0)
        if rank == 1:  # nor is a process start that is no time
            record = json.loads((rank_dir / layout.CAPTURE_RECORD).read_text())
            (rank_dir / layout.CAPTURE_RECORD).write_text(json.dumps({**record, "process_start_ns": "x"}))
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


S = 10**9  # ns


def _node_capture(
    root: Path, node: str, pid: int, rank: int, restart: int, began: float, written: float, durations: dict
) -> Path:
    """A capture of a worker torchrun started on ``node`` with TORCHELASTIC_RESTART_COUNT ``restart``, its
    process begun at ``began`` (s) and its record last written at ``written`` (s), as npuprof writes them."""
    trace = cpu_trace()
    trace["distributedInfo"]["rank"] = rank
    with_steps(trace, durations)
    rank_dir = write_rank_dir(root, trace, rank=rank, name=f"{node}_{pid}_2026120800{int(written):04d}000")
    record = {
        "status": "complete",
        "run_id": RUN,
        "pid": pid,
        "rank": rank,
        "steps": sorted(durations),
        "updated_ns": int((1_765_000_000 + written) * S),
        "restart_count": restart,
        "process_start_ns": int((1_765_000_000 + began) * S),
        "host": node,
    }
    (rank_dir / layout.CAPTURE_RECORD).write_text(json.dumps(record))
    return rank_dir


@pytest.mark.parametrize(
    ("b_captured_again", "hosts"),
    [(True, ("node-a", "node-b")), (True, ("vm", "vm")), (False, ("node-a", "node-b"))],
    ids=["both-restarted", "both-restarted-one-host", "b-restarted-uncaptured"],
)
def test_a_node_torchrun_restarted_with_its_count_unchanged_is_compared_in_the_latest_round(
    tmp_path: Path, b_captured_again: bool, hosts: tuple[str, str]
) -> None:
    """helper-379's two-node run: node A's worker failed, torchrun restarted it as attempt 1 while node B,
    whose worker did not fail, stopped it and started it again as attempt 0 (torchrun counts restarts per
    node). Analyse compared attempt 1 alone: rank 1's capture of the restarted round was left out ("no
    capture of attempt 1 on rank(s) 1"). The round is told by the processes' start times: B's restarted
    worker (begun 10 ms before A's, as the agents' spawns go) is of the latest round, its first one is not;
    so too with both agents on one host (that run's), whose counts are no one sequence."""
    a, b = hosts
    import io

    from rich.console import Console

    from npuprof.analysis.report import build_report, repeated_steps
    from npuprof.reports import terminal

    first = {  # round 1: both begin at 0, capture steps 5-6 by 12 s; A's worker fails at 30 s
        0: _node_capture(tmp_path, a, 100, 0, 0, 0.00, 12.0, {5: 4000, 6: 4000}),
        1: _node_capture(tmp_path, b, 200, 1, 0, 0.05, 12.1, {5: 4100, 6: 4100}),
    }
    durations = {0: {5: 1000, 6: 1100}, 1: {5: 1500, 6: 1700}}  # round 2: A as attempt 1, B as attempt 0
    second = {0: _node_capture(tmp_path, a, 101, 0, 1, 32.00, 44.0, durations[0])}
    if b_captured_again:
        second[1] = _node_capture(tmp_path, b, 201, 1, 0, 31.99, 44.1, durations[1])
    said_on_stderr: list[str] = []
    report = build_report(tmp_path, jobs=1, on_note=said_on_stderr.append)
    # both ranks of the traces' world_size 2 are here, of the latest round each
    assert not [n for n in said_on_stderr if "have no capture in this report" in n], said_on_stderr
    left_out = {r.rank_dir for r in report.ranks if r.earlier_round is True}
    assert left_out == {str(d) for d in first.values()}, left_out
    expected = [(step, {str(k): float(durations[k][step]) for k in second}) for step in (5, 6)]
    assert [(s.step, s.ranks) for s in report.cross_rank.steps] == expected
    assert report.cross_rank.restart_count == 1
    out = io.StringIO()
    terminal.render_table(report, Console(file=out, width=600))
    said = [" ".join(line.split()) for line in out.getvalue().splitlines() if "across ranks" in line]
    notes = repeated_steps(report.ranks)
    if b_captured_again:
        why = (
            "attempt 1 on some nodes, 0 on others: torchrun counts each node's restarts, and a node whose "
            "workers did not fail keeps its count"
        )
        across = "across ranks: the captures of the latest attempt (torchrun restarted the job; an earlier"
        assert f"{across} attempt's are not compared; {why})" in said, said
        assert (
            f"rank 1 has step 5 in 2 captures (attempt 0: {first[1]}; attempt 0: {second[1]}): torchrun "
            f"restarted the job (TORCHELASTIC_RESTART_COUNT; attempt 0 is the first); the comparison across "
            f"ranks takes the latest attempt's captures ({why})"
        ) in notes, notes
    else:  # B's first-round capture is of a round before A's attempt 1, whatever its count
        assert said == [
            "step time across ranks: nothing to compare (no capture of attempt 1 on rank(s) 1: torchrun "
            "restarted the job, and an earlier attempt's captures are not compared)"
        ], said


def test_one_rounds_captures_on_nodes_with_different_counts_are_all_compared(tmp_path: Path) -> None:
    """The first round captured nothing (node A's worker failed before its capture): the restarted round's
    captures, attempt 1 on A and attempt 0 on B, are one round, both compared (by the counts alone rank 1
    was left out as of an earlier attempt)."""
    from npuprof.analysis.report import build_report

    _node_capture(tmp_path, "node-a", 101, 0, 1, 32.0, 44.0, {5: 1000})
    _node_capture(tmp_path, "node-b", 201, 1, 0, 31.9, 44.1, {5: 1500})
    report = build_report(tmp_path, jobs=1)
    assert [r.earlier_round for r in report.ranks] == [msgspec.UNSET, msgspec.UNSET]
    assert [(s.step, s.ranks) for s in report.cross_rank.steps] == [(5, {"0": 1000.0, "1": 1500.0})]
    assert report.cross_rank.restart_count is msgspec.UNSET


@pytest.mark.parametrize("first_round_captured", [True, False], ids=["two-rounds", "one-round"])
def test_the_run_summary_says_what_analyse_compares_when_the_nodes_counts_differ(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], first_round_captured: bool
) -> None:
    """The summary of helper-380's two-node run said "npuprof analyse compares the ranks of the latest attempt
    (1)", and analyse compares attempt 1 on node A and attempt 0 on node B (torchrun's counts per node)."""
    if first_round_captured:
        _node_capture(tmp_path, "vm", 100, 0, 0, 0.00, 12.0, {5: 4000})
        _node_capture(tmp_path, "vm", 200, 1, 0, 0.05, 12.1, {5: 4100})
    _node_capture(tmp_path, "vm", 101, 0, 1, 32.00, 44.0, {5: 1000})
    _node_capture(tmp_path, "vm", 201, 1, 0, 31.99, 44.1, {5: 1500})
    lines = _summary(tmp_path, capsys)
    what = (
        "npuprof analyse compares the ranks of the latest attempt ("
        if first_round_captured
        else "npuprof analyse compares them all, of one round of workers ("
    )
    assert (
        "npuprof: torchrun restarted the job 1 time(s): the attempt column is its TORCHELASTIC_RESTART_COUNT "
        f"(0: the first attempt); {what}attempt 1 on some nodes, 0 on others: torchrun counts each node's "
        "restarts, and a node whose workers did not fail keeps its count)"
    ) in lines, lines


def test_the_run_summary_counts_the_restarts_of_two_nodes_that_failed_in_turn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Node A's worker failed (A restarts as attempt 1, B as 0), then node B's (B as attempt 1, A keeps 1):
    two restarts, each node's count 1; the summary said "restarted the job 1 time(s)"."""
    for k, counts in enumerate([(0, 0), (1, 0), (1, 1)]):  # each round's (A's count, B's)
        began = 30.0 * k
        _node_capture(tmp_path, "node-a", 100 + k, 0, counts[0], began, began + 12, {5: 1000})
        _node_capture(tmp_path, "node-b", 200 + k, 1, counts[1], began + 0.01, began + 12, {5: 1000})
    lines = _summary(tmp_path, capsys)
    assert (
        "npuprof: torchrun restarted the job 2 time(s): the attempt column is its TORCHELASTIC_RESTART_COUNT "
        "(0: the first attempt); npuprof analyse compares the ranks of the latest attempt (1)"
    ) in lines, lines
