"""agent/entry.py's look-ups for the launcher, in process (helper-373's mutation hunt: each of these could
change with tests/test_fault_bootstrap.py's first-process jobs passing): the run record of this run among
other runs' in the same output, a launcher pid of 0 taken for none, and a pid that exists but is another
user's counted as running."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from npuprof.agent import entry


def _record(output: Path, name: str, run_id: str, launcher_pid: int, age_s: float) -> None:
    path = output / name
    path.write_text(json.dumps({"run_id": run_id, "launcher_pid": launcher_pid}))
    moment = path.stat().st_mtime - age_s
    os.utime(path, (moment, moment))


def test_the_run_record_is_this_runs_not_a_newer_one_of_another_run(tmp_path: Path) -> None:
    _record(tmp_path, "npuprof_run.json", "ours", 4242, age_s=60)
    _record(tmp_path, "npuprof_run_2.json", "theirs", 5353, age_s=0)  # newer: another run in the same -o
    run = {"output": str(tmp_path), "run_id": "ours"}
    assert entry._run_record(run) == {"run_id": "ours", "launcher_pid": 4242}
    assert entry._launcher_pid_from_record(run) == 4242
    assert entry._run_record({**run, "run_id": "gone"}) is None


def test_a_launcher_pid_that_is_no_process_is_none(tmp_path: Path) -> None:
    """0 (kill(0) signals the whole group) and negative pids (a group's) name no launcher."""
    run = {"output": str(tmp_path), "run_id": "ours"}
    for pid in (0, -7):
        _record(tmp_path, "npuprof_run.json", "ours", pid, age_s=0)
        assert entry._launcher_pid_from_record(run) is None, pid


def test_a_process_another_user_owns_runs_where_proc_says_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    from npuprof import proc_stat

    monkeypatch.setattr(proc_stat, "state_of", lambda pid: None)  # no /proc here

    def kill(pid: int, signum: int) -> None:
        raise PermissionError(1, "Operation not permitted") if pid == 1 else ProcessLookupError(3, "No such")

    monkeypatch.setattr(entry.os, "kill", kill)
    assert entry._process_runs(1)
    assert not entry._process_runs(4194302)


def test_the_run_record_is_found_among_the_newest_eight(tmp_path: Path) -> None:
    for n in range(9):  # older runs' records in the same output
        _record(tmp_path, f"npuprof_run_{n}.json", f"old{n}", 100 + n, age_s=1000 - n)
    _record(tmp_path, "npuprof_run_new.json", "ours", 4242, age_s=0)
    assert entry._launcher_pid_from_record({"output": str(tmp_path), "run_id": "ours"}) == 4242
