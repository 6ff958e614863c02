"""Hosts whose short names are the same: nodes named by their IP address (10.0.0.1, 10.0.0.2: "10" each) or
node1.rack-a / node1.rack-b. `npuprof status` took another node's running process (its --dynamic log in the
shared config folder) for one of this host's, found its pid gone here and called it killed; `npuprof
trigger` then said no process watched the folder."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

import pytest

from npuprof.agent import dynamic_log
from npuprof.cli import status
from npuprof.results import layout


class _Uname(NamedTuple):
    sysname: str
    nodename: str
    release: str
    version: str
    machine: str


def _on_host(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    real = os.uname()
    monkeypatch.setattr(
        os, "uname", lambda: _Uname(real.sysname, name, real.release, real.version, real.machine)
    )


@pytest.mark.parametrize(
    ("nodename", "prefix"),
    [("10.0.0.1", "10.0.0.1"), ("fd00::1", "fd00::1"), ("node1.rack-a.example", "node1"), ("gpu07", "gpu07")],
)
def test_rank_dirs_are_named_by_the_short_name_or_a_whole_address(
    monkeypatch: pytest.MonkeyPatch, nodename: str, prefix: str
) -> None:
    _on_host(monkeypatch, nodename)
    assert layout.short_host_name() == prefix


@pytest.mark.parametrize(
    ("here", "there"), [("10.0.0.1", "10.0.0.2"), ("node1.rack-a.example", "node1.rack-b.example")]
)
def test_a_process_of_another_host_with_the_same_short_name_is_not_called_gone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, here: str, there: str
) -> None:
    gone = 2**22 + 12345  # above any pid_max default: no process here has it
    logs = tmp_path / "log"
    logs.mkdir()
    watching = "2026-12-02 07:25:40,469 [INFO] [1] npuprof.dynamic: [step 0] watching it every 1 s\n"
    _on_host(monkeypatch, there)  # the other node's process writes its log into the shared folder
    host_there = dynamic_log.DynamicLogs(tmp_path, lambda: 0).host  # as the writer names its log
    (logs / f"dp_{host_there}_{gone}_rank_0.log").write_text(watching)  # running there: its pid is not ours
    _on_host(monkeypatch, here)
    (logs / f"dp_{here}_{gone}_rank_1.log").write_text(watching)  # one of this host's, killed
    states = {p["host"]: p["state"] for p in status._processes(logs)}
    assert states == {there: "running", here: "gone (no end line: killed?)"}, states
