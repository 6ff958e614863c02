"""Result trees damaged between the run and `npuprof analyse` (helper-208)."""

from __future__ import annotations

import json
import os
import select
import subprocess
from pathlib import Path

import pytest
from analyse_support.handmade import cpu_trace, write_rank_dir

from npuprof.analysis.parse import SUMMARY_FILE, parse_rank_dir
from npuprof.analysis.report import build_report
from npuprof.owned_fd import OwnedFd
from npuprof.results import layout, postprocess


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


def test_a_dead_post_processor_is_not_said_to_run_beside_the_captures_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed a fourth time (not replaced: three times at most a process) with three captures handed to it
    and not done, the post-processor still counted as running beside every later capture: each record
    said "the post-processor ran during this capture (3 earlier captures waited for it): its work may have
    slowed these steps", shown by the run's summary and analyse, beside "not parsed or gzipped (no
    post-processor)"."""
    child = subprocess.Popen(["true"])
    pidfd = os.pidfd_open(child.pid)
    try:
        select.select([pidfd], [], [], 30)  # it has ended (a zombie until reaped below)
        post = postprocess.Postprocessor(tmp_path, "abcdef123456")
        post._spawned = object()  # started by `npuprof run` (holdable), its pid known, its pidfd ours
        post._pid, post._pidfd = child.pid, pidfd
        post._owned["pidfd"] = OwnedFd(pidfd)
        monkeypatch.setattr(post, "backlog", lambda: 3)  # handed over, never done
        post.hold(True)  # the next capture begins
        assert post.runs_beside == 0
    finally:
        os.close(pidfd)
        child.wait()


def test_pids_no_process_can_have_are_no_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The result tree is untrusted (README, "Safety"), and so is /dev/shm: a run record whose launcher pid
    is beyond any pid_t made every `npuprof analyse` of the directory end in a traceback (OverflowError
    from os.kill); a scratch directory planted in /dev/shm with such a pid, or with digits int() refuses
    ("²"), did the same to every analyse that needed scratch tables."""
    from npuprof.analysis import scratch

    out = tmp_path / "out"
    rank_dir = _npuprof_cpu_capture(out)
    huge = 10**20
    record = {
        "run_id": "abcdef123456",
        "start": "2026-01-01T00:00:00+0000",
        "launcher_pid": huge,
        "host": os.uname().nodename,
        "end": None,
    }
    (out / layout.RUN_RECORD).write_text(json.dumps(record))
    capture = json.loads((rank_dir / layout.CAPTURE_RECORD).read_text())
    (rank_dir / layout.CAPTURE_RECORD).write_text(
        json.dumps({**capture, "run_id": "abcdef123456", "pid": huge})
    )
    assert layout.record_launcher_alive(record) is None
    report = build_report(out, jobs=1)
    assert len(report.ranks) == 1, report.problems
    # the scratch directories of dead analyses are removed; these are no live one's
    base = tmp_path / "shm"
    planted = [base / f"{scratch.PREFIX}{scratch._host()}-{pid}-x" for pid in (str(huge), str(2**31), "²")]
    for folder in planted:
        folder.mkdir(parents=True)
    scratch.remove_left_by_the_dead(base)
    assert [f.name for f in planted if f.exists()] == [planted[2].name]  # not a pid: not ours, kept
