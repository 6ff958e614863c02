"""A capture record says the node its process ran on (``host``): a capture still "capturing" whose process
is gone reads as interrupted while its run goes on, however its directory is named (docs/formats.md, "The
capture record")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from npuprof.results import layout


def _gone_pid() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    return int(done.stdout)


def _capturing(root: Path, name: str, pid: int, host: str | None) -> Path:
    rank_dir = root / f"{name}_ascend_pt"
    rank_dir.mkdir()
    record = {"status": "capturing", "run_id": "r1", "pid": pid, "worker": name.split("_")[0], "version": 1}
    if host is not None:
        record["host"] = host
    (rank_dir / layout.CAPTURE_RECORD).write_text(json.dumps(record))
    return rank_dir


@pytest.fixture
def run_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(layout, "live_launcher", lambda output, run_id: "npuprof pid 1 on here")


def test_a_killed_process_of_a_worker_named_dir_is_not_in_progress(tmp_path: Path, run_goes_on: None) -> None:
    """--worker-name w0 (the dir is w0_PID_..., not this host's name): its process killed (kill -9) while
    the run went on (a torchrun worker restarted) read "in progress: its run is still going" until the run
    ended, hours later; only a dir named by the host was checked."""
    pid = _gone_pid()
    rank_dir = _capturing(tmp_path, f"w0_{pid}_20250101000000000", pid, os.uname().nodename)
    status = layout.capture_status(rank_dir)
    assert status.status == layout.STATUS_INCOMPLETE and status.detail == layout.NOT_FINALISED, status


def test_a_capture_of_another_host_is_not_taken_for_dead_here(tmp_path: Path, run_goes_on: None) -> None:
    pid = _gone_pid()
    name = f"{layout.short_host_name()}_{pid}_20250101000000000"  # the same short name, another node
    rank_dir = _capturing(tmp_path, name, pid, os.uname().nodename + "-other")
    assert layout.capture_status(rank_dir).status == layout.STATUS_CAPTURING


def test_an_older_record_without_host_is_judged_by_its_dir_name(tmp_path: Path, run_goes_on: None) -> None:
    pid = _gone_pid()
    named = _capturing(tmp_path, f"w0_{pid}_20250101000000000", pid, None)
    assert layout.capture_status(named).status == layout.STATUS_CAPTURING  # nothing says where it ran
    by_host = _capturing(tmp_path, f"{layout.short_host_name()}_{pid}_20250101000000001", pid, None)
    assert layout.capture_status(by_host).status == layout.STATUS_INCOMPLETE
