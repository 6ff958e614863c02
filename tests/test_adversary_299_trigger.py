"""helper-299: `npuprof trigger DIR -o PATH` where PATH is missing on the machine trigger runs on."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import typer


def _as_a_user_who_cannot_write(monkeypatch: pytest.MonkeyPatch, unwritable: Path) -> None:
    """os.access as a user (not root) sees it: ``unwritable`` is not writable, the rest as it is."""
    real_access = os.access

    def access(path: str | os.PathLike[str], mode: int, **kwargs: object) -> bool:
        if Path(path) == unwritable and mode & os.W_OK:
            return False
        return real_access(path, mode, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "access", access)


def _logs_of_a_job_on(directory: Path, host: str) -> None:
    (directory / "log").mkdir()
    line = f"{time.strftime('%Y-%m-%d %H:%M:%S')},000 [INFO] [7] npuprof.dynamic: [step 3] watching it\n"
    (directory / "log" / f"dp_{host}_7_rank_0.log").write_text(line)


def _trigger(directory: Path, output: Path) -> None:
    from npuprof.cli.trigger import trigger_command

    trigger_command(
        directory=str(directory), start_step=None, active=1, warmup=0, cancel=False, output=str(output)
    )


def test_an_output_missing_here_under_an_unwritable_parent_is_taken_for_a_job_on_another_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`npuprof trigger DIR -o /data/prof` on a login node without /data, as a user (/ not writable) was
    refused ('-o: / is not writable', exit 2), where the note for a path missing here says it may exist on
    the job's node: the job on node7 never got its request. It is written, with that note."""
    dyn, parent = tmp_path / "dyn", tmp_path / "root"
    dyn.mkdir()
    parent.mkdir()
    _logs_of_a_job_on(dyn, "node7")
    _as_a_user_who_cannot_write(monkeypatch, parent)
    missing = parent / "data" / "prof"
    _trigger(dyn, missing)
    assert json.loads((dyn / "profiler_config.json").read_text())["prof_dir"] == str(missing)
    (note,) = [x for x in capsys.readouterr().err.splitlines() if " does not exist" in x]
    assert "on the job's node (node7) it may exist" in note, note
    assert f"the job makes it there when the capture begins, if it may write there ({parent} is not" in note


def test_an_output_under_an_unwritable_parent_is_still_refused_for_a_job_on_this_machine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job's logs name this machine alone: it cannot make the directory either; refused as before."""
    dyn, parent = tmp_path / "dyn", tmp_path / "root"
    dyn.mkdir()
    parent.mkdir()
    _logs_of_a_job_on(dyn, os.uname().nodename)
    _as_a_user_who_cannot_write(monkeypatch, parent)
    with pytest.raises(typer.Exit) as exited:
        _trigger(dyn, parent / "data" / "prof")
    assert exited.value.exit_code == 2
    assert f"-o: {parent} is not writable" in capsys.readouterr().err
    assert not (dyn / "profiler_config.json").exists()
