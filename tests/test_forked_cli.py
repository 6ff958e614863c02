"""_forked_cli.npuprof answers as conftest.npuprof (a real `python -m npuprof`) does: the tests that read
npuprof's reports through it check what a user's command gives."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _forked_cli import npuprof as forked
from analyse_support.handmade import cpu_trace, write_rank_dir
from conftest import clean_env
from conftest import npuprof as real


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["analyse", "r_ascend_pt", "--format", "json"], 0),
        (["analyse", "r_ascend_pt"], 0),  # the table, laid out for COLUMNS
        (["export-stacks", "r_ascend_pt", "-o", "-"], 0),
        (["analyse", "missing"], 1),
        (["analyse", "r_ascend_pt", "--top", "x"], 2),
    ],
)
def test_a_forked_command_gives_what_the_real_one_gives(tmp_path: Path, args: list[str], code: int) -> None:
    """Each in a folder of its own holding the same rank dir (analyse writes its tables there), named by the
    same relative path."""
    env = clean_env(COLUMNS="97")
    answers = []
    for run, where in ((real, tmp_path / "real"), (forked, tmp_path / "forked")):
        write_rank_dir(where, cpu_trace(), name="r")
        done = run(*args, cwd=where, env=env)
        answers.append((done.returncode, done.stdout, done.stderr))
    assert answers[0][0] == code, answers[0][2]
    assert answers[1] == answers[0]


def test_a_forked_command_runs_in_its_working_directory_under_its_umask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The working directory given relative to the test's own, which the test changed after the server
    started (in another)."""
    assert forked("analyse", str(tmp_path / "none")).returncode == 1  # the server runs
    rank = write_rank_dir(tmp_path / "w", cpu_trace())
    monkeypatch.chdir(tmp_path)
    previous = os.umask(0o077)
    try:
        done = forked("export-stacks", str(rank), "-o", "s.folded", cwd=Path("w"))
    finally:
        os.umask(previous)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "w" / "s.folded").stat().st_mode & 0o077 == 0
