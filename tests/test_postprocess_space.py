"""The post-processor never takes the disk below --min-free-space: a parse writes ~1.5x the trace
(trace_view.json and the tables), a gzip ~0.25x; the job's own writes (a checkpoint) must find the room the
run promised them (a 20-step capture's parse took a 200 MiB tmpfs to 0 bytes and the job's checkpoint
failed). The free space is set here by replacing statvfs; the capture is a real file, parsed for real."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from analyse_support.handmade import cpu_trace, write_rank_dir

from npuprof.results import handover, layout, postprocess

MIB = 1 << 20


def _job(rank_dir: Path) -> handover.CaptureJob:
    (trace,) = rank_dir.glob("*.pt.trace.json")
    return handover.CaptureJob(
        rank_dir=str(rank_dir),
        trace=str(trace),
        record=handover.CaptureRecord(status="complete", trace=trace.name),
        analyse=True,
        gzip=True,
        min_free_space="10MiB",
    )


def _free(monkeypatch: pytest.MonkeyPatch, free_bytes: int) -> None:
    blocks = SimpleNamespace(f_bavail=free_bytes, f_frsize=1, f_blocks=1 << 30)
    monkeypatch.setattr(postprocess.os, "statvfs", lambda path: blocks)


@pytest.mark.parametrize(
    ("room", "parsed", "gzipped"),
    [
        (1000 * MIB, True, True),  # room for both
        # 10 MiB must stay free: the parse (1.5x the trace) would take the disk below it, the gzip not
        (10 * MIB, False, True),
        (0, False, False),  # room for neither: the plain trace is kept
    ],
)
def test_parse_and_gzip_keep_the_free_space_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, room: int, parsed: bool, gzipped: bool
) -> None:
    rank_dir = write_rank_dir(tmp_path, cpu_trace())
    job = _job(rank_dir)
    size = os.path.getsize(job.trace or "")
    # free: 10 MiB, plus what the check lets through: a parse needs 1.5x the trace, a gzip 0.25x
    extra = {1000 * MIB: 1000 * MIB, 10 * MIB: int(size * 1.0), 0: int(size * 0.1)}[room]
    _free(monkeypatch, 10 * MIB + extra)
    status = postprocess.run_job(job)
    assert (rank_dir / layout.PARSED_DIR).exists() is parsed
    assert any(rank_dir.glob("*.pt.trace.json.gz")) is gzipped
    assert any(rank_dir.glob("*.pt.trace.json")) is not gzipped
    log = (tmp_path / layout.RUN_LOG).read_text() if (tmp_path / layout.RUN_LOG).exists() else ""
    if not parsed:
        assert status == 1
        assert "not analysed (it needs about" in log and "less than --min-free-space (10.0 MiB)" in log, log
        assert "run npuprof analyse on it later" in log
    if not gzipped:
        assert "not gzipped (it needs about" in log and "the plain trace is kept" in log, log
