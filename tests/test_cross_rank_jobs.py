"""The statements across ranks of `npuprof analyse` on awkward jobs (a rank missing, ...), each checked
against what the hand-made captures hold. Rank dirs written here, analysed in this process: no torch."""

from __future__ import annotations

from pathlib import Path

from analyse_support.handmade import cpu_trace, write_rank_dir

from npuprof.analysis.report import build_report


def _rank_dir(root: Path, rank: int, world: int, durations: dict[int, int]) -> Path:
    """Rank ``rank`` of a job of ``world`` ranks (its trace's distributedInfo): one step of each number in
    ``durations`` lasting its µs, one after the other."""
    trace = cpu_trace()
    trace["distributedInfo"].update(rank=rank, world_size=world)
    (template,) = [e for e in trace["traceEvents"] if e.get("name") == "ProfilerStep#7"]
    trace["traceEvents"].remove(template)
    ts = template["ts"]
    for step, dur in durations.items():
        trace["traceEvents"].append({**template, "name": f"ProfilerStep#{step}", "ts": ts, "dur": dur})
        ts += dur
    return write_rank_dir(root, trace, rank=rank, name=f"vm_{100 + rank}_20261205182103{rank:03d}")


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
