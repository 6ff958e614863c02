"""helper-299: `npuprof run -- PATH` where PATH lies behind a directory the user may not search."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# what a POSIX shell exits with for a command found but not executable (EACCES), and for one not found
SHELL_CANNOT_EXECUTE = 126


def test_a_command_behind_an_unsearchable_directory_is_not_said_not_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`npuprof run -- /home/other/venv/bin/python`, /home/other not searchable (0700, another user's): the
    launcher said "command not found" (127); exec() fails with EACCES there, as the shell says "Permission
    denied" (126). As root every directory is searchable: stat's EACCES is made here as a user meets it."""
    from npuprof.runner import command_problem

    program = tmp_path / "private" / "python"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    real_stat = os.stat

    def stat_as_a_user(path: object, *args: object, **kwargs: object) -> os.stat_result:
        if str(path) == str(program):
            raise PermissionError(13, "Permission denied", str(path))
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "stat", stat_as_a_user)
    message, code = command_problem(str(program)) or ("", 0)
    assert code == SHELL_CANNOT_EXECUTE, (code, message)
    assert "not found" not in message and "permission denied" in message, message
