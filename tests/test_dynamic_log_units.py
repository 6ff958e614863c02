"""agent/dynamic_log.py's lines and rotation at their edges (helper-373's mutation hunt: a line's UTC offset
written without its minutes, and a log rotated one line early, passed every test)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from npuprof.agent import dynamic_log


@pytest.mark.parametrize(
    ("tz", "offset"), [("IST-5:30", "+0530"), ("NPT-5:45", "+0545"), ("NST3:30", "-0330")]
)
def test_a_line_of_a_half_hour_time_zone_reads_back_at_its_moment(
    monkeypatch: pytest.MonkeyPatch, tz: str, offset: str
) -> None:
    """India (+05:30), Nepal (+05:45), Newfoundland (-03:30): POSIX TZ strings, no tzdata needed."""
    monkeypatch.setenv("TZ", tz)
    time.tzset()
    try:
        when = 1_796_000_000.25
        line = dynamic_log.format_line("INFO", "at step 3", step=3, when=when)
    finally:
        monkeypatch.undo()
        time.tzset()
    fields = dynamic_log.parse_line(line)
    assert fields is not None and fields["offset"] == offset, line
    assert dynamic_log.line_time(fields) == when


def test_a_log_rotates_only_when_a_line_would_take_it_past_the_limit(tmp_path: Path) -> None:
    path = str(tmp_path / "dp_h_1_rank_0.log")
    line = "x" * 99 + "\n"
    with open(path, "w") as log:
        log.write("y" * (1000 - len(line)))
    assert dynamic_log.append(path, line, limit=1000)  # exactly the limit: no rotation
    assert os.path.getsize(path) == 1000 and not os.path.exists(path + ".1")
    assert dynamic_log.append(path, line, limit=1000)  # past it: the log moves to .1 first
    assert os.path.getsize(path + ".1") == 1000 and os.path.getsize(path) == len(line)
