"""The statements across ranks of `npuprof analyse` on awkward jobs (a rank missing, ...), each checked
against what the hand-made captures hold. Rank dirs written here, analysed in this process: no torch."""

from __future__ import annotations

from pathlib import Path

import pytest
from analyse_support.handmade import cpu_trace, with_steps, write_rank_dir, x

from npuprof.analysis.report import build_report, far_apart_steps, repeated_steps


def _rank_dir(
    root: Path, rank: int, world: int, durations: dict[int, int], host: str = "vm", base_ns: int | None = None
) -> Path:
    """Rank ``rank`` of a job of ``world`` ranks (its trace's distributedInfo) on ``host``: one step of each
    number in ``durations`` lasting its µs, one after the other; ``base_ns``: the trace's
    baseTimeNanoseconds (its clock's epoch time of ts 0)."""
    trace = cpu_trace()
    trace["distributedInfo"].update(rank=rank, world_size=world)
    if base_ns is not None:
        trace["baseTimeNanoseconds"] = base_ns
    with_steps(trace, durations)
    return write_rank_dir(root, trace, rank=rank, name=f"{host}_{100 + rank}_20261205182103{rank:03d}")


def test_a_rank_missing_from_the_job_is_said(tmp_path: Path) -> None:
    """helper-193: a job of 4 ranks whose rank 2 has no capture here (lost, or not recorded): the report
    compared ranks 0, 1 and 3 and said "slowest rank: none stands out" as of the whole job, the absent rank
    (maybe the slow one) not mentioned anywhere."""
    world, written = 4, (0, 1, 3)
    for rank in written:
        _rank_dir(tmp_path, rank, world, {6: 1000, 7: 1000, 8: 1000})
    notes: list[str] = []
    report = build_report(tmp_path, jobs=1, on_note=notes.append)
    assert sorted({k for s in report.cross_rank.steps for k in s.ranks}, key=int) == ["0", "1", "3"]
    absent = sorted(set(range(world)) - set(written))
    assert absent == [2]
    said = [n for n in notes if "world_size" in n]
    assert said == [
        f"the job had {world} ranks (its traces' world_size); rank(s) 2 (1 of them) have no capture in "
        "this report (not recorded, with --ranks; lost; not analysed; or in another run's captures): its "
        "comparison across ranks, the slowest rank and the rank the others wait for, is of the other 3"
    ], notes
    # every rank there: nothing said
    _rank_dir(tmp_path, 2, world, {6: 1000, 7: 1000, 8: 1000})
    notes.clear()
    build_report(tmp_path, jobs=1, on_note=notes.append)
    assert not [n for n in notes if "world_size" in n], notes


def test_a_rank_numbered_1000_with_one_other_names_the_999_absent(tmp_path: Path) -> None:
    """Ranks 0 and 1000 of a job of 1001: the absent ones as one span, counted."""
    for rank in (0, 1000):
        _rank_dir(tmp_path, rank, 1001, {6: 1000, 7: 1000})
    notes: list[str] = []
    report = build_report(tmp_path, jobs=1, on_note=notes.append)
    assert [r.rank for r in report.ranks] == [0, 1000]
    (said,) = [n for n in notes if "world_size" in n]
    assert (
        "the job had 1001 ranks (its traces' world_size); rank(s) 1-999 (999 of them) have no capture" in said
    )
    assert said.endswith("is of the other 2"), said


def test_ranks_on_hosts_whose_clocks_differ_are_not_said_to_be_of_different_runs(tmp_path: Path) -> None:
    """helper-193: a job on two hosts whose clocks are 5 s apart (node1's ahead): the note said the captures
    were "likely of different runs (a reused directory?)" and the skew line stated a 5000 ms skew, though the
    rank dirs say the two ranks ran on different hosts, whose clocks the starts are read on."""
    import io

    from rich.console import Console

    from npuprof.reports import terminal

    base, offset_ns = 1_780_000_000_000_000_000, 5 * 10**9
    for rank in range(4):
        host = f"node{rank // 2}"
        _rank_dir(tmp_path, rank, 4, {6: 1000, 7: 1000}, host, base + offset_ns * (rank // 2))
    report = build_report(tmp_path, jobs=1)
    # each rank's step 6 starts at its trace's first step (cpu_trace's ts), its epoch time base + that: the
    # latest start is node1's, offset_ns later
    worst = max(report.cross_rank.start_skew, key=lambda s: s.skew_us)
    assert (worst.skew_us, worst.earliest_rank, worst.latest_rank) == (offset_ns / 1000, 0, 2)
    (note,) = far_apart_steps(report)
    assert note == (
        "step 6 started 5000 ms later on rank 2 than on rank 0, far longer than the step itself (1.000 ms): "
        "their rank dirs name two workers (node1, node0; by default their hosts), whose clocks may differ by "
        "that much if they are two hosts (each rank's start is read on its own host's clock), or these "
        "captures are of different runs (a reused directory?); the step start skew across hosts means little"
    )
    out = io.StringIO()
    terminal.render_table(report, Console(file=out, width=400))
    (skew,) = [line.strip() for line in out.getvalue().splitlines() if line.startswith("step start skew")]
    assert skew == (
        "step start skew: up to 5000.000 ms (step 6: rank 2 started after rank 0; workers node1 and node0: "
        "if two hosts, their clocks' offset in it)"
    )
    # the same starts on one host: one clock, so other runs
    one = tmp_path / "one"
    for rank in range(4):
        _rank_dir(one, rank, 4, {6: 1000, 7: 1000}, "vm", base + offset_ns * (rank // 2))
    (note,) = far_apart_steps(build_report(one, jobs=1))
    assert "likely of different runs" in note and "two workers" not in note, note


def test_a_rank_here_without_a_step_compared_is_not_counted_in_the_comparison(tmp_path: Path) -> None:
    """helper-194: ranks 0, 1 and 3 of 4 here, rank 3 with no step among --steps 6-8: the note said the
    comparison "is of the other 3", where ranks 0 and 1 only were compared."""
    for rank in (0, 1):
        _rank_dir(tmp_path, rank, 4, {6: 1000, 7: 1000, 8: 1000})
    _rank_dir(tmp_path, 3, 4, {9: 1000, 10: 1000})
    notes: list[str] = []
    report = build_report(tmp_path, steps=(6, 8), jobs=1, on_note=notes.append)
    assert sorted({k for s in report.cross_rank.steps for k in s.ranks}) == ["0", "1"]
    (said,) = [n for n in notes if "world_size" in n]
    assert "rank(s) 2 (1 of them) have no capture" in said, said
    assert said.endswith("is of 2 of the other 3 (rank(s) 3 have no whole step compared)"), said


def test_a_rank_without_steps_is_not_compared_with_the_steps_of_the_others(tmp_path: Path) -> None:
    """helper-206: ranks 0-2 with steps 6-8 and rank 3 whose trace has no ProfilerStep (its one row is the
    whole capture, 3 ms): the report said "slowest rank: 3 (mean step 3.000 ms, ...): an outlier", and
    the same of the rank the others wait for, its whole capture taken for one step."""
    for rank, slow in ((0, 0), (1, 100), (2, 0)):
        _rank_dir(tmp_path, rank, 4, {6: 1000 + slow, 7: 1000 + slow, 8: 1000 + slow})
    trace = cpu_trace()
    trace["distributedInfo"].update(rank=3, world_size=4)
    with_steps(trace, {})
    trace["traceEvents"].append(
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 100, "tid": 100, "ts": 1_003_000, "dur": 1}
    )
    write_rank_dir(tmp_path, trace, rank=3, name="vm_103_20261205182103003")
    notes: list[str] = []
    report = build_report(tmp_path, jobs=1, on_note=notes.append)
    (whole,) = [r for r in report.ranks if r.rank == 3]
    assert [s.step for s in whole.steps] == [None] and whole.steps[0].duration_us > 2000
    cross = report.cross_rank
    assert cross.slowest is not None and cross.slowest.rank == 1, cross.slowest
    assert cross.slowest.mean_step_us == 1100
    assert cross.straggler is not None and cross.straggler.rank == 1, cross.straggler
    said = [n for n in repeated_steps(report.ranks) if "rank(s) 3" in n]
    assert said == [
        "rank(s) 3 have no step (no ProfilerStep: the row is the whole capture): left out of the slowest "
        "rank and the rank the others wait for"
    ]
    assert not [n for n in repeated_steps(report.ranks) if "no step was captured on every rank" in n]


def test_a_rank_without_steps_is_not_counted_in_the_comparison_of_a_job_with_a_rank_absent(
    tmp_path: Path,
) -> None:
    """helper-206: ranks 0 and 1 of 4 with steps, rank 3 without a ProfilerStep, rank 2 absent: the note
    said the comparison "is of the other 3", rank 3 left out of it."""
    for rank in (0, 1):
        _rank_dir(tmp_path, rank, 4, {6: 1000, 7: 1000})
    trace = cpu_trace()
    trace["distributedInfo"].update(rank=3, world_size=4)
    write_rank_dir(tmp_path, with_steps(trace, {}), rank=3, name="vm_103_20261205182103003")
    notes: list[str] = []
    build_report(tmp_path, jobs=1, on_note=notes.append)
    (said,) = [n for n in notes if "world_size" in n]
    assert said.endswith("is of 2 of the other 3 (rank(s) 3 have no whole step compared)"), said


def _recorded_by(rank_dir: Path, run_id: str, rank: int) -> None:
    import json

    record = {"status": "complete", "run_id": run_id, "rank": rank, "steps": [6, 7]}
    (rank_dir / "npuprof_capture.json").write_text(json.dumps(record))


def _run_record(root: Path, run_id: str, ranks: list[int] | None, name: str = "npuprof_run.json") -> None:
    import json

    record = {"run_id": run_id, "config": {"output": str(root), "ranks": ranks}, "captures": []}
    (root / name).write_text(json.dumps(record))


def test_the_ranks_that_ranks_left_out_are_named_from_the_runs_record(tmp_path: Path) -> None:
    """`npuprof run --ranks 0` of a 2-rank job: `npuprof analyse` showed rank 0 alone and said nothing of
    rank 1, as of a job of one rank. Its traces say 2 ranks, its run record --ranks 0: rank 1 is named."""
    world, picked = 2, [0]
    for rank in picked:
        _recorded_by(_rank_dir(tmp_path, rank, world, {6: 1000, 7: 1000}), "7977faaa2450", rank)
    _run_record(tmp_path, "7977faaa2450", picked)
    notes: list[str] = []
    report = build_report(tmp_path, jobs=1, on_note=notes.append)
    assert [r.rank for r in report.ranks] == picked
    left_out = sorted(set(range(world)) - set(picked))
    assert [n for n in notes if "world_size" in n] == [
        f"the job had {world} ranks (its traces' world_size); rank(s) {left_out[0]} (1 of them) were not "
        "captured: run 7977faaa2450 was started with --ranks 0 (its npuprof_run.json)"
    ], notes
    _run_record(tmp_path, "7977faaa2450", None)  # a record without --ranks: one rank here says nothing
    notes.clear()
    build_report(tmp_path, jobs=1, on_note=notes.append)
    assert not [n for n in notes if "world_size" in n], notes


def test_ranks_left_out_and_a_rank_lost_are_told_apart(tmp_path: Path) -> None:
    """--ranks 0-2 of a 5-rank job whose rank 2's capture is not here: ranks 3-4 were not asked for, rank 2
    was (its capture lost), and ranks 0 and 1 are compared."""
    world, asked, here = 5, [0, 1, 2], [0, 1]
    for rank in here:
        _recorded_by(_rank_dir(tmp_path, rank, world, {6: 1000, 7: 1000}), "aaaa11112222", rank)
    _run_record(tmp_path, "aaaa11112222", asked)
    notes: list[str] = []
    build_report(tmp_path, jobs=1, on_note=notes.append)
    left_out = [k for k in range(world) if k not in asked]
    lost = [k for k in asked if k not in here]
    assert (left_out, lost) == ([3, 4], [2])
    assert [n for n in notes if "world_size" in n] == [
        f"the job had {world} ranks (its traces' world_size); rank(s) 3-4 (2 of them) were not captured: run "
        "aaaa11112222 was started with --ranks 0-2 (its npuprof_run.json); rank(s) 2 (1 of them), which it "
        "selected, have no capture in this report (lost; not analysed; or in another run's captures); its "
        "comparison across ranks, the slowest rank and the rank the others wait for, is of the other 2"
    ], notes


def _with_start(rank_dir: Path, rank: int, steps: list[int], after: int, took_ms: float) -> None:
    """``rank_dir``'s capture record: its profiler started at the end of step ``after``, took ``took_ms``."""
    import json

    from npuprof.results import layout

    record = {
        "status": "complete",
        "rank": rank,
        "steps": steps,
        "start_after_step": after,
        "start_ms": took_ms,
    }
    (rank_dir / layout.CAPTURE_RECORD).write_text(json.dumps(record))


def test_a_skew_made_by_one_ranks_profiler_start_is_said_to_be_it(tmp_path: Path) -> None:
    """helper-275: `npuprof trigger DIR --active 3` on a 2-rank DDP job whose rank 1 had captured before:
    rank 0's first profiler start took 30.7 ms at the end of step 313, rank 1's a ms, and the report said
    "step start skew: up to 29.323 ms (step 314: rank 0 started after rank 1)" as of the job, where the
    other steps were 0.3-2.8 ms apart."""
    import io

    from rich.console import Console

    from npuprof.reports import terminal

    base, late_us, drift_us = 1_780_000_000_000_000_000, 29_000, 2_000
    steps = [314, 315, 316]
    # rank 0 starts step 314 late_us after rank 1 and ends it with rank 1 (DDP's all-reduce), then its
    # step 315 lasts drift_us longer: step 316 starts drift_us after rank 1's
    early = _rank_dir(tmp_path, 1, 2, {314: 52_500, 315: 60_000, 316: 57_000}, base_ns=base)
    late = _rank_dir(
        tmp_path,
        0,
        2,
        {314: 52_500 - late_us, 315: 60_000 + drift_us, 316: 57_000},
        base_ns=base + late_us * 1000,
    )
    _with_start(early, 1, steps, 313, 0.9)
    _with_start(late, 0, steps, 313, 30.7)
    report = build_report(tmp_path, jobs=1)
    skews = {s.step: s for s in report.cross_rank.start_skew}
    assert (skews[314].skew_us, skews[314].latest_rank, skews[314].profiler_start_ms) == (late_us, 0, 30.7)
    assert skews[316].skew_us == drift_us and "profiler_start_ms" not in _json_fields(skews[316])
    out = io.StringIO()
    terminal.render_table(report, Console(file=out, width=400))
    (line,) = [x.strip() for x in out.getvalue().splitlines() if x.startswith("step start skew")]
    assert line == (
        f"step start skew: up to {late_us / 1000:.3f} ms (step 314: rank 0 started after rank 1; its "
        "profiler started right before it, which took rank 0 30.7 ms: the profiler's cost, not the job's; "
        f"up to {drift_us / 1000:.3f} ms on the other steps (step 316))"
    )
    # both ranks' starts as slow there (their first capture), or a warm-up step after the start: the skew is
    # the job's, said as before
    for early_ms, after in ((30.0, 313), (0.9, 312)):
        _with_start(early, 1, steps, after, early_ms)
        _with_start(late, 0, steps, after, 30.7)
        report = build_report(tmp_path, jobs=1)
        skews = {s.step: s for s in report.cross_rank.start_skew}
        assert "profiler_start_ms" not in _json_fields(skews[314]), (early_ms, after)
        out = io.StringIO()
        terminal.render_table(report, Console(file=out, width=400))
        (line,) = [x.strip() for x in out.getvalue().splitlines() if x.startswith("step start skew")]
        assert (
            line == f"step start skew: up to {late_us / 1000:.3f} ms (step 314: rank 0 started after rank 1)"
        )


def _json_fields(value: object) -> dict:
    """The fields ``value`` (a msgspec Struct) would write to JSON: an unset one is absent."""
    import msgspec

    return msgspec.to_builtins(value)


def test_two_ranks_with_the_default_schedules_few_steps_get_one_line_of_information(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new user: every 2-rank run under the default schedule (3 steps) printed "not judged ... capture
    more: npuprof run --active 5 or more" twice, on the slowest rank's line and on the waited-for rank's: a
    warning every default run gives. The rank lines now give their figures, and one line says, once, that
    3 steps cannot tell an outlier and which flag captures enough (helper-313's point kept)."""
    import io

    from rich.console import Console

    from npuprof.reports import terminal

    monkeypatch.delenv("NPUPROF_COMMAND", raising=False)  # npuprof run as `npuprof` (a suite run inside one)
    slow = {6: 1500, 7: 1500, 8: 1500}  # rank 1: 50% longer in each of the 3 steps
    _rank_dir(tmp_path, 0, 2, {6: 1000, 7: 1000, 8: 1000})
    _rank_dir(tmp_path, 1, 2, slow)
    out = io.StringIO()
    terminal.render_table(build_report(tmp_path, jobs=1), Console(file=out, width=400))
    lines = [line.strip() for line in out.getvalue().splitlines()]
    # rank 1's mean 1.500 ms, the median of the two 1.250 ms: +20.0%; busy (the step less cpu_trace's 200 µs
    # of exposed all_reduce in the first step): rank 1 (1300+1500+1500)/3, rank 0 (800+1000+1000)/3
    busy1, busy0 = (1300 + 1500 + 1500) / 3, (800 + 1000 + 1000) / 3
    above = (busy1 - (busy1 + busy0) / 2) / ((busy1 + busy0) / 2) * 100
    assert "slowest rank: 1 (mean step 1.500 ms, +20.0% vs the median)" in lines, lines
    assert (
        f"rank the others wait for: 1 (busy {busy1 / 1000:.3f} ms a step outside exposed communication, "
        f"{above:+.1f}% vs the median)"
    ) in lines, lines
    told = [line for line in lines if "outlier" in line or "judged" in line]
    assert told == [
        f"whether rank 1, the slowest rank (+20.0% vs the median) and the rank the others wait for "
        f"({above:+.1f}%), is an outlier: not told by 3 steps (with 2 ranks it takes 5 whole steps both "
        "have, which npuprof run --active 5 or more captures)"
    ], lines


def test_two_ranks_undecided_on_one_question_only_are_told_which(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """helper-347: rank 1 both the slowest (by 2.4%: judged, within the normal spread) and the rank the others
    wait for (by 19.2%: 3 steps cannot tell); the line after them said "whether rank 1 is an outlier: not
    told", of the rank the line above had just judged. It names the question it cannot answer."""
    import io

    from rich.console import Console

    from npuprof.reports import terminal

    monkeypatch.delenv("NPUPROF_COMMAND", raising=False)  # npuprof run as `npuprof` (a suite run inside one)
    for rank, step_us, waits in ((0, 1000, [(1600, 400), (2600, 400)]), (1, 1050, [])):
        trace = cpu_trace()
        trace["distributedInfo"].update(rank=rank, world_size=2)
        with_steps(trace, {6: step_us, 7: step_us, 8: step_us})
        # rank 0 waits 400 µs more in an all_reduce at the end of steps 7 and 8, where no operator runs
        trace["traceEvents"] += [x("gloo:all_reduce", "user_annotation", t, d, tid=101) for t, d in waits]
        write_rank_dir(tmp_path, trace, rank=rank, name=f"vm_{100 + rank}_20261205182103{rank:03d}")
    out = io.StringIO()
    terminal.render_table(build_report(tmp_path, jobs=1), Console(file=out, width=400))
    lines = [line.strip() for line in out.getvalue().splitlines()]
    # step means 1050 and 1000 µs, median 1025: +2.4%; busy (the step less its exposed all_reduce:
    # cpu_trace's 200 µs in the first step, rank 0's 400 µs in the next two): rank 1 (850+1050+1050)/3,
    # rank 0 (800+600+600)/3
    busy1, busy0 = (850 + 1050 + 1050) / 3, (800 + 600 + 600) / 3
    above = (busy1 - (busy1 + busy0) / 2) / ((busy1 + busy0) / 2) * 100
    judged = "slowest rank: 1 (mean step 1.050 ms, +2.4% vs the median): within the normal spread"
    assert judged in lines, lines
    told = [line for line in lines if line.startswith("whether")]
    assert told == [
        f"whether the rank the others wait for (1, {above:+.1f}% vs the median) is an outlier: not told by 3 "
        "steps (with 2 ranks it takes 5 whole steps both have, which npuprof run --active 5 or more captures)"
    ], lines
