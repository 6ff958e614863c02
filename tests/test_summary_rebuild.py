"""A rank dir whose summary (or annotations) npuprof wrote is unreadable while its raw trace is intact is
parsed again from that trace by `npuprof analyse` itself, said once; never under another parse at work, never
over a newer npuprof's files (docs/formats.md, "npuprof_summary.json")."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from analyse_support.handmade import cpu_trace, with_steps, write_rank_dir

from npuprof.analysis.parse import SUMMARY_FILE, alone_in, parse_rank_dir
from npuprof.analysis.report import build_report

DURATIONS_US = {3: 1200, 4: 800}


@pytest.fixture
def rank_dir(tmp_path: Path) -> Path:
    rank_dir = write_rank_dir(tmp_path / "result", with_steps(cpu_trace(), DURATIONS_US))
    assert parse_rank_dir(rank_dir).ok
    return rank_dir


def _summary(rank_dir: Path) -> Path:
    return rank_dir / "ASCEND_PROFILER_OUTPUT" / SUMMARY_FILE


def _cut_in_half(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _steps(report) -> dict[int, float]:
    (rank,) = report.ranks
    return {s.step: s.duration_us for s in rank.steps}


def _older(path: Path) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), "version": 0}))


def _damaged_field(path: Path) -> None:
    summary = json.loads(path.read_text())
    summary["steps"][0]["duration_us"] = "slow"
    path.write_text(json.dumps(summary))


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (_cut_in_half, "not a summary (Input data was truncated)"),
        (_older, "written by an older npuprof (summary version 0"),
        (_damaged_field, "damaged (Expected `float`, got `str` - at `$.steps[0].duration_us`)"),
    ],
)
def test_an_unreadable_summary_is_parsed_again_from_its_trace(rank_dir: Path, damage, said: str) -> None:
    damage(_summary(rank_dir))
    notes: list[str] = []
    report = build_report(rank_dir.parent, jobs=1, on_note=notes.append)
    assert report.problems == []
    assert _steps(report) == {step: float(us) for step, us in DURATIONS_US.items()}
    (note,) = [n for n in notes if "parsed again" in n]
    assert said in note and note.endswith("parsed again from its raw trace") and "--force" not in note, note
    json.loads(_summary(rank_dir).read_text())  # rewritten whole
    notes.clear()
    build_report(rank_dir.parent, jobs=1, on_note=notes.append)
    assert not [n for n in notes if "parsed again" in n]  # said once: the next report reads the new one


def _without_parse_status(report) -> dict:
    """The report as JSON, less each rank's parse status (parsed now, or cached)."""
    data = msgspec.to_builtins(report)
    for rank in data["ranks"]:
        rank.pop("status")
    return data


def test_a_missing_summary_is_said_once_and_the_report_is_unchanged(tmp_path: Path) -> None:
    """helper-298: a rank dir whose npuprof_summary.json was deleted (its raw trace there) was parsed again
    without a word; one line says so now, for however many rank dirs, and the report is the one before."""
    trace = with_steps(cpu_trace(), DURATIONS_US)
    rank_dirs = [
        write_rank_dir(tmp_path / "result", trace, r, f"host_{r}_202501010000000{r}") for r in range(3)
    ]
    before = _without_parse_status(build_report(tmp_path / "result", jobs=1))
    for rank_dir in rank_dirs[:2]:
        _summary(rank_dir).unlink()
    notes: list[str] = []
    after = build_report(tmp_path / "result", jobs=1, on_note=notes.append)
    (note,) = [n for n in notes if "parsed again" in n]
    assert note.startswith("2 rank dirs had tables gone") and SUMMARY_FILE in note, note
    assert note.endswith("parsed again from their raw traces"), note
    assert _without_parse_status(after) == before
    _summary(rank_dirs[0]).unlink()
    notes.clear()
    build_report(tmp_path / "result", jobs=1, on_note=notes.append)
    gone = f"{SUMMARY_FILE} gone from its ASCEND_PROFILER_OUTPUT/"
    assert [n for n in notes if "parsed again" in n] == [
        f"{rank_dirs[0]}: {gone}: parsed again from its raw trace"
    ]


def test_a_summary_is_not_parsed_again_under_another_parse_at_work(rank_dir: Path) -> None:
    """A run's post-processor (or another analyse) holds the tables' folder: nothing is written under it."""
    _cut_in_half(_summary(rank_dir))
    cut = _summary(rank_dir).read_bytes()
    with alone_in(rank_dir / "ASCEND_PROFILER_OUTPUT") as alone:
        assert alone
        report = build_report(rank_dir.parent, jobs=1)
    assert _summary(rank_dir).read_bytes() == cut
    (problem,) = report.problems
    assert problem.status == "in progress"
    assert problem.reason.startswith(f"{SUMMARY_FILE}: not a summary"), problem.reason
    assert "another parse is writing its tables now" in problem.reason


def test_a_newer_npuprofs_summary_is_not_written_over(rank_dir: Path) -> None:
    path = _summary(rank_dir)
    path.write_text(json.dumps({**json.loads(path.read_text()), "version": 2}))
    newer = path.read_bytes()
    report = build_report(rank_dir.parent, jobs=1)
    assert path.read_bytes() == newer
    (problem,) = report.problems
    assert problem.status == "unreadable" and "written by a newer npuprof" in problem.reason


def test_a_cut_summary_whose_trace_is_gone_is_named_not_parsed(rank_dir: Path) -> None:
    _cut_in_half(_summary(rank_dir))
    for trace in rank_dir.glob("*.pt.trace.json*"):
        trace.unlink()
    (problem,) = build_report(rank_dir.parent, jobs=1).problems
    assert problem.status == "unreadable" and "its raw trace is gone" in problem.reason, problem.reason


def test_a_cut_summary_whose_trace_is_cut_too_says_both(rank_dir: Path) -> None:
    _cut_in_half(_summary(rank_dir))
    (trace,) = rank_dir.glob("*.pt.trace.json")
    text = trace.read_bytes()  # cut inside its first event: nothing to read (docs: "Traces cut short")
    trace.write_bytes(text[: text.index(b"{", text.index(b'"traceEvents"')) + 5])
    (problem,) = build_report(rank_dir.parent, jobs=1).problems
    assert problem.status == "truncated", problem
    # the trace cut since its parse (analyse.done says its size then) is parsed again first: the tables,
    # its damaged summary with them, are another trace's; its failure is what is said, the cut with it
    assert problem.reason.startswith(
        f"its trace {trace.name} is {trace.stat().st_size:,} bytes, {len(text):,} when its tables were made"
    ), problem.reason
    assert "; parsed again: " in problem.reason and "nothing to read" in problem.reason, problem.reason


def test_a_bare_traces_cut_summary_is_parsed_again_and_never_under_another_parse(tmp_path: Path) -> None:
    trace = tmp_path / "worker0.pt.trace.json"
    trace.write_text(json.dumps(with_steps(cpu_trace(), DURATIONS_US)))
    build_report(trace, jobs=1)
    tables = tmp_path / "worker0.pt.trace.json.npuprof"
    _cut_in_half(tables / SUMMARY_FILE)
    cut = (tables / SUMMARY_FILE).read_bytes()
    with alone_in(tables):
        (problem,) = build_report(trace, jobs=1).problems
    assert problem.status == "in progress" and (tables / SUMMARY_FILE).read_bytes() == cut
    notes: list[str] = []
    report = build_report(trace, jobs=1, on_note=notes.append)
    assert report.problems == []
    assert _steps(report) == {step: float(us) for step, us in DURATIONS_US.items()}
    assert [
        n for n in notes if n.startswith(f"{trace}: {SUMMARY_FILE}: not a summary") and "parsed again" in n
    ]


def test_a_real_torch_npu_traces_cut_summary_is_parsed_again(tmp_path: Path) -> None:
    """torch_npu's trace_view.json (tests/fixtures/ascend-real, SOURCE.md there) analysed as a bare trace."""
    real = Path(__file__).resolve().parent / "fixtures" / "ascend-real" / "trace_view.json"
    trace = tmp_path / "trace_view.json"
    trace.write_bytes(real.read_bytes())
    (step,) = [e for e in json.loads(real.read_text()) if e["name"].startswith("ProfilerStep#")]
    expected = {int(step["name"].removeprefix("ProfilerStep#")): round(float(step["dur"]), 3)}
    assert _steps(build_report(trace, jobs=1)) == expected
    _cut_in_half(tmp_path / "trace_view.json.npuprof" / SUMMARY_FILE)
    notes: list[str] = []
    report = build_report(trace, jobs=1, on_note=notes.append)
    assert report.problems == [] and _steps(report) == expected
    assert [n for n in notes if "parsed again from its raw trace" in n]


def test_annotations_an_earlier_parse_left_go_with_a_parse_that_writes_none(rank_dir: Path) -> None:
    """A capture without marks, ranges or GC pauses: a damaged npuprof_annotations.json there (an earlier
    parse's, its side files deleted since) was kept by every parse, so read as the new parse's, and analysed
    again each time; the parse removes it."""
    annotations = rank_dir / "ASCEND_PROFILER_OUTPUT" / "npuprof_annotations.json"
    annotations.write_text('{"vers')
    notes: list[str] = []
    (rank,) = build_report(rank_dir.parent, jobs=1, on_note=notes.append).ranks
    assert [n for n in notes if "parsed again" in n]
    assert not annotations.exists() and not [w for w in rank.warnings or [] if "annotations" in w]
    notes.clear()
    build_report(rank_dir.parent, jobs=1, on_note=notes.append)
    assert not [n for n in notes if "parsed again" in n]
