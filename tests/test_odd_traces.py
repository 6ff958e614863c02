"""Traces no profiler writes, edited by hand or by a script: parsed with a warning that says what was passed
over, or refused with where and why; never silently different numbers."""

from __future__ import annotations

import json
from pathlib import Path

from analyse_support.handmade import cpu_trace, write_rank_dir, x

from npuprof.analysis.parse import SUMMARY_FILE, parse_rank_dir


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


def test_a_negative_duration_is_named(tmp_path: Path) -> None:
    trace = cpu_trace()
    trace["traceEvents"].append(x("aten::relu", "cpu_op", 700, -50, **{"External id": 9}))
    trace["traceEvents"].append(x("ProfilerStep#8", "user_annotation", 1000, -100))
    (note,) = _summary(write_rank_dir(tmp_path, trace))["warnings"]
    assert note.startswith("2 step, operator or device event(s) with a negative duration"), note


def test_nan_written_by_pythons_json_is_named_where_it_stands(tmp_path: Path) -> None:
    trace = cpu_trace()
    trace["traceEvents"][2]["dur"] = float("nan")
    rank_dir = write_rank_dir(tmp_path, trace)
    text = next(rank_dir.glob("*.pt.trace.json")).read_text()
    outcome = parse_rank_dir(rank_dir, workers=1)
    assert outcome.status == "corrupt", outcome
    byte = text.encode().index(b"NaN")
    assert f"malformed JSON at byte {byte} (NaN: not a JSON number" in outcome.reason, (byte, outcome.reason)
