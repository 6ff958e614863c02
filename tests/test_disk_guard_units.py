"""agent/disk_guard.py at its edges, on a filesystem the test sizes (helper-373's mutation hunt: each of these
could change with every test passing): free space exactly at --min-free-space is enough, the warning of a
disk gone below it said once, not at every check, and a file written just before the measurement's time
(the kernel's coarse file clock) counted as written since."""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from npuprof.agent import disk_guard
from npuprof.agent.disk_guard import DiskGuard

MIB = 1 << 20


class _Log:
    def __init__(self) -> None:
        self.warnings: list[str] = []

    def warning(self, line: str) -> None:
        self.warnings.append(line)


@pytest.fixture
def free(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """The bytes free the next measurement finds (4 KiB blocks of a 1 GiB filesystem)."""
    now = {"bytes": 0}

    def statvfs(path: str) -> Any:
        return SimpleNamespace(f_bavail=now["bytes"] // 4096, f_frsize=4096, f_blocks=(1 << 30) // 4096)

    monkeypatch.setattr(disk_guard, "_statvfs_of_the_place", statvfs)
    return now


def test_free_space_exactly_at_the_floor_is_enough(free: dict[str, int], tmp_path: Path) -> None:
    guard, path = DiskGuard(str(tmp_path), "1MiB", _Log()), str(tmp_path)
    free["bytes"] = MIB
    guard.check()
    assert guard.ok_for(path) and guard.short_of(path, 0) == ""
    free["bytes"] = MIB - 4096
    guard.check()
    assert not guard.ok_for(path)
    assert guard.short_of(path, 0) == "only 1020.0 KiB free at " + path + ", below --min-free-space (1.0 MiB)"


def test_a_disk_below_the_floor_is_warned_of_once_until_it_recovers(
    free: dict[str, int], tmp_path: Path
) -> None:
    log = _Log()
    guard = DiskGuard(str(tmp_path), "1MiB", log)
    for room in (2 * MIB, MIB // 2, MIB // 4, 2 * MIB, MIB // 2):
        free["bytes"] = room
        guard.check()
    assert len(log.warnings) == 2, log.warnings  # at each fall below, not at each check while below


def test_a_file_written_a_tick_before_the_measurement_counts_as_written_since(tmp_path: Path) -> None:
    since = time.time()
    (tmp_path / "just_before").write_bytes(b"x" * 100)
    os.utime(tmp_path / "just_before", (since - 0.02, since - 0.02))  # within MTIME_SLACK_S (0.05 s)
    (tmp_path / "long_before").write_bytes(b"y" * 7)
    os.utime(tmp_path / "long_before", (since - 5, since - 5))
    assert disk_guard.bytes_written_since(tmp_path, since) == 100
