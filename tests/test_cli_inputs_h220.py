"""Bad command-line and config-file input found by helper-220: one line naming the flag (or the file's key)
and the fix, exit 2; never a traceback, never a silent misreading. In-process: no subprocess."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from npuprof.cli import main


def _cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """``npuprof ARGS`` as main() runs it (the fast path of run included): (exit code, stderr)."""

    def leave(code: int) -> None:
        raise SystemExit(code)

    monkeypatch.setattr(sys, "argv", ["npuprof", *args])
    monkeypatch.setattr(main, "_leave", leave)
    monkeypatch.setattr(main, "guard_streams", lambda: None)
    with pytest.raises(SystemExit) as ended:
        main._main()
    return int(ended.value.code or 0), capsys.readouterr().err


def test_analyse_an_empty_run_is_refused_not_taken_for_the_latest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--run ''`` was no --run at all: the latest run was reported as if the user had picked it."""
    code, err = _cli(monkeypatch, capsys, "analyse", "--run", "", str(tmp_path))
    assert code == 2
    assert err.splitlines() == [
        "npuprof analyse: error: Invalid value for --run: is empty; give a run id (or its start), or all; "
        "see npuprof analyse --help"
    ]
