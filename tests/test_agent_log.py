"""The agent's warnings: every one in the log, each shown once per run on stderr."""

from __future__ import annotations

from pathlib import Path

import pytest

from npuprof.agent.log import AgentLog, never_raise, set_log


def test_a_warning_is_shown_once_per_run_across_processes(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    log_path = tmp_path / "npuprof.log"
    rank0 = AgentLog(str(log_path), "agent", "run1")
    rank1 = AgentLog(str(log_path), "agent", "run1")  # another process of the same run
    rank0.warn_once("k", "flag X ignored")
    rank1.warn_once("k", "flag X ignored")
    rank0.warn_once("k", "flag X ignored")
    assert capsys.readouterr().err.count("flag X ignored") == 1
    assert log_path.read_text().count("flag X ignored") == 3
    AgentLog(str(log_path), "agent", "run2").warn_once("k", "flag X ignored")  # a later run says it again
    assert capsys.readouterr().err.count("flag X ignored") == 1


def test_never_raise_logs_reports_and_returns_none(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    log = AgentLog(str(tmp_path / "npuprof.log"), "agent", "r")
    set_log(log)
    switched_off = []

    @never_raise("the step hook", on_error=lambda: switched_off.append(True))
    def hook() -> int:
        raise RuntimeError("boom")

    assert hook() is None and hook() is None
    assert switched_off == [True, True]
    assert capsys.readouterr().err.count("the step hook failed") == 1
    assert "RuntimeError: boom" in (tmp_path / "npuprof.log").read_text()
