"""Result trees damaged between the run and `npuprof analyse` (helper-208)."""

from __future__ import annotations

import json
from pathlib import Path

from analyse_support.handmade import cpu_trace, write_rank_dir

from npuprof.analysis.parse import SUMMARY_FILE, parse_rank_dir
from npuprof.analysis.report import build_report
from npuprof.results import layout


def _npuprof_cpu_capture(root: Path) -> Path:
    """A CPU capture as `npuprof run` leaves it, parsed by its post-processor."""
    rank_dir = write_rank_dir(root, cpu_trace(), rank=None)
    record = {"status": "complete", "backend": "torch-cpu", "device": "cpu", "steps": [7], "rank": None}
    (rank_dir / layout.CAPTURE_RECORD).write_text(json.dumps(record))
    assert parse_rank_dir(rank_dir).status == "parsed"
    return rank_dir


def test_npuprofs_own_tables_without_their_summary_and_trace_are_not_read_as_torch_npus(
    tmp_path: Path,
) -> None:
    """The raw trace deleted to save space (what the README allows) and the summary with it (a clean-up of
    ASCEND_PROFILER_OUTPUT/*.json, trace_view.json the largest file): npuprof's own tables of a CPU capture
    were read as torch_npu's, the capture reported as an NPU one, each operator counted as one call and its
    CPU operators listed as device kernels, under a note that torch_npu had parsed it."""
    rank_dir = _npuprof_cpu_capture(tmp_path / "out")
    trace = layout.find_raw_trace(rank_dir)
    assert trace is not None
    trace.unlink()
    (rank_dir / layout.PARSED_DIR / SUMMARY_FILE).unlink()
    report = build_report(tmp_path / "out", jobs=1)
    assert not report.ranks, [(r.device, r.warnings) for r in report.ranks]
    [problem] = report.problems
    assert "torch_npu" not in problem.reason
    assert SUMMARY_FILE in problem.reason and "raw trace is gone" in problem.reason
    forced = build_report(tmp_path / "out", jobs=1, force=True)
    assert not forced.ranks and forced.problems[0].status == "missing"
