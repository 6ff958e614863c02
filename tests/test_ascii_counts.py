"""Counts npuprof reads back from its own files (the agents' log lines, hidden-warning marks, folded
stacks) are ASCII digits: ``"²".isdigit()`` is True and ``int("²")`` raises, so a damaged or planted
line cost the whole reader (helper-208's leftover: the same check it fixed for pids)."""

from __future__ import annotations

from pathlib import Path

from npuprof.agent import log as agent_log
from npuprof.agent.capture_exports import _npuprof_work_folded
from npuprof.reports import run_summary


def test_a_count_at_exit_that_is_no_ascii_number_is_not_a_count() -> None:
    skipped = run_summary.WINDOWS_SKIPPED_AT_EXIT
    agents = [("11", "INFO", skipped + "²"), ("12", "INFO", skipped + "3")]
    assert run_summary._windows_skipped(agents)[0] == 3
    steps = run_summary.STEPS_AT_EXIT
    assert run_summary._exit_counts([steps + "²", steps + "7", steps + "٣"], steps) == [7]


def test_a_hidden_warning_mark_whose_time_is_no_ascii_number_is_still_read(tmp_path: Path) -> None:
    marks = tmp_path / agent_log.REPORTED_DIR / "run-1"
    marks.mkdir(parents=True)
    (marks / (agent_log.HIDDEN_MARK + "a")).write_text("²\tlog-of-rank-1\tsomething went wrong")
    assert agent_log.shown_nowhere(str(tmp_path), "run-1") == [("something went wrong", "log-of-rank-1")]


def test_folded_stacks_whose_count_is_no_ascii_number_are_kept_as_written() -> None:
    content = "main;npuprof.agent.x 5\nmain;f ²\n".encode()
    assert _npuprof_work_folded(content) == content
