"""A capture still "capturing" while its run goes on: its process killed (kill -9) but not reaped yet, or
its pid taken since by a process begun after the capture, is gone: interrupted, not "in progress"
(docs/formats.md, "The capture record")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from npuprof.results import layout


def _capturing(root: Path, pid: int, began_ns: int) -> Path:
    rank_dir = root / f"w0_{pid}_{began_ns}_ascend_pt"
    rank_dir.mkdir()
    record = {"status": "capturing", "run_id": "r1", "pid": pid, "worker": "w0", "host": os.uname().nodename}
    (rank_dir / layout.CAPTURE_RECORD).write_text(json.dumps({**record, "updated_ns": began_ns}))
    return rank_dir


@pytest.fixture(autouse=True)
def run_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(layout, "live_launcher", lambda output, run_id: "npuprof pid 1 on here")


def test_a_killed_process_not_reaped_yet_is_gone(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        rank_dir = _capturing(tmp_path, child.pid, time.time_ns())
        assert layout.capture_status(rank_dir).status == layout.STATUS_CAPTURING
        child.kill()  # not waited for: a zombie until its parent reaps it
        deadline = time.monotonic() + 10
        while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        status = layout.capture_status(rank_dir)
        assert status.status == layout.STATUS_INCOMPLETE and status.detail == layout.NOT_FINALISED, status
    finally:
        child.kill()
        child.wait()


def test_a_pid_taken_by_a_later_process_is_gone(tmp_path: Path) -> None:
    an_hour_ago = _capturing(tmp_path, os.getpid(), time.time_ns() - 3600 * 10**9)  # this process began since
    assert layout.capture_status(an_hour_ago).status == layout.STATUS_INCOMPLETE
    now = _capturing(tmp_path, os.getpid(), time.time_ns())
    assert layout.capture_status(now).status == layout.STATUS_CAPTURING
