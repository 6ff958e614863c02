"""Hosts whose short names are the same: nodes named by their IP address (10.0.0.1, 10.0.0.2: "10" each) or
node1.rack-a / node1.rack-b. `npuprof status` took another node's running process (its --dynamic log in the
shared config folder) for one of this host's, found its pid gone here and called it killed; `npuprof
trigger` then said no process watched the folder."""

from __future__ import annotations

import json
import os
import time
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
    watching = dynamic_log.format_line("INFO", "watching it every 1 s", step=0)  # now: not silent either
    _on_host(monkeypatch, there)  # the other node's process writes its log into the shared folder
    host_there = dynamic_log.DynamicLogs(tmp_path, lambda: 0).host  # as the writer names its log
    (logs / f"dp_{host_there}_{gone}_rank_0.log").write_text(watching)  # running there: its pid is not ours
    _on_host(monkeypatch, here)
    (logs / f"dp_{here}_{gone}_rank_1.log").write_text(watching)  # one of this host's, killed
    states = {p["host"]: p["state"] for p in status._processes(logs)}
    assert states == {there: "running", here: "gone (no end line: killed?)"}, states


def _line(moment: float, step: int, message: str, pid: int = 4242) -> str:
    """A watcher's line at ``moment`` (epoch s) as a node in UTC+09:30 writes it."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(moment + 9.5 * 3600))
    return f"{stamp},000 +0930 [INFO] [{pid}] npuprof.dynamic: [step {step}] {message}\n"


def test_a_process_of_another_host_is_shown_by_its_newest_line_and_silent_when_long_quiet(
    tmp_path: Path,
) -> None:
    """A multi-node job shares DIR: a process of another node cannot be checked by its pid here, and one whose
    newest line was from 2024 (a torch_npu log) was shown "running". Now: running as of its newest line, with
    how long ago, until it is far quieter than it has been; then "silent", which may mean ended."""
    from conftest import npuprof

    logs = tmp_path / "log"
    logs.mkdir()
    tmp_path.chmod(0o700)
    now = time.time()
    # heard 3 minutes ago, a heartbeat a minute at most: running, not checked
    recent = int(now) - 180  # a whole second, as the line writes it (its ms ",000")
    (logs / "dp_node-b.example_4242_rank_1.log").write_text(
        _line(now - 900, 0, "watching it every 1 s") + _line(recent, 50, "at step 50")
    )
    # a line of 2024 (without the offset, as torch_npu and older npuprofs write): silent
    (logs / "dp_node-c.example_4343_rank_2.log").write_text(
        "2024-03-05 10:11:12,000 [INFO] [4343] npuprof.dynamic: [step 3] watching it every 1 s\n"
    )
    old = time.mktime(time.strptime("2024-03-05 10:11:12", "%Y-%m-%d %H:%M:%S"))
    asked = time.time()
    table = npuprof("status", str(tmp_path), env={**os.environ, "COLUMNS": "300"})
    assert table.returncode == 0, table.stderr
    shown = time.strftime("%H:%M:%S", time.gmtime(recent + 9.5 * 3600))  # its writer's, as the steps column
    rows = {line.split()[1]: line for line in table.stdout.splitlines() if line[:1] in "12"}
    minutes = {round((moment - recent) / 60) for moment in (asked, time.time())}  # 3 on a host not loaded
    assert any(
        f"running as of {shown} ({m} min ago; another host: not checked)" in rows["node-b.example"]
        for m in minutes
    ), rows
    days = {round((moment - old) / 86400) for moment in (asked, time.time())}
    assert any(
        f"silent since 2024-03-05 10:11 ({d} days; may have ended)" in rows["node-c.example"] for d in days
    )
    assert "not checked: the processes of node-b.example, node-c.example" in table.stdout
    report = npuprof("status", str(tmp_path), "--format", "json")
    assert report.returncode == 0, report.stderr
    processes = {p["host"]: p for p in json.loads(report.stdout)["processes"]}
    b, c = processes["node-b.example"], processes["node-c.example"]
    assert (b["state"], b["on_this_host"], c["state"], c["on_this_host"]) == (
        "running",
        False,
        "silent",
        False,
    )
    assert 180 <= b["silent_for_s"] <= time.time() - recent + 1
    assert time.time() - old - 60 <= c["silent_for_s"] <= time.time() - old + 1
    # a request that only the silent process could read: not "stopped" (it said so before)
    (logs / "dp_node-b.example_4242_rank_1.log").unlink()
    triggered = npuprof("trigger", str(tmp_path), "--active", "2")
    assert triggered.returncode == 0, triggered.stderr
    table = npuprof("status", str(tmp_path), env={**os.environ, "COLUMNS": "300"})
    assert "is not read yet: the processes that may read it are silent (below)" in table.stdout, table.stdout


@pytest.mark.parametrize(("step_s", "state"), [(20 * 60, "running"), (1, "silent")])
def test_how_long_another_hosts_process_may_be_quiet_is_its_own_pace(
    tmp_path: Path, step_s: float, state: str
) -> None:
    """40 minutes without a line: two steps of a job whose step takes 20 minutes (it logs once a step), but
    far beyond a job that logged a heartbeat a minute (a step a second)."""
    logs = tmp_path / "log"
    logs.mkdir()
    last = time.time() - 40 * 60
    steps = [0, 3] if step_s > 60 else [0, 60, 120, 180]
    lines = [_line(last - (steps[-1] - n) * step_s, n, f"at step {n}") for n in steps]
    (logs / "dp_node-b.example_4242_rank_0.log").write_text("".join(lines))
    (process,) = status._processes(logs)
    assert process["state"] == state, process


def test_trigger_names_a_silent_process_as_status_does_not_as_running(tmp_path: Path) -> None:
    """npuprof trigger counted a process of another host that status calls silent among the running ones
    ("1 of the 2 running processes had not picked up yet (rank 2)"), and, every process silent, never said
    that no process may watch DIR."""
    from conftest import npuprof

    logs = tmp_path / "log"
    logs.mkdir()
    tmp_path.chmod(0o700)
    now = time.time()
    running = logs / "dp_node-b.example_4242_rank_1.log"  # heard 2 minutes ago: running
    running.write_text(_line(now - 900, 0, "watching it every 1 s") + _line(now - 120, 50, "at step 50"))
    (logs / "dp_node-c.example_4343_rank_2.log").write_text(  # heard last in 2024: silent
        "2024-03-05 10:11:12,000 [INFO] [4343] npuprof.dynamic: [step 3] watching it every 1 s\n"
    )
    first = npuprof("trigger", str(tmp_path))
    assert first.returncode == 0, first.stderr
    assert "no process watches" not in first.stderr, first.stderr
    trigger_id = json.loads((tmp_path / "profiler_config.json").read_text())["trigger_id"]
    with running.open("a") as log:  # rank 1 read it, rank 2 did not
        log.write(_line(time.time(), 51, f"loaded: steps 52-52 (trigger {trigger_id})"))
    second = npuprof("trigger", str(tmp_path), "--active", "2")
    assert second.returncode == 0, second.stderr
    assert (
        f"request {trigger_id}, which 1 of the 2 processes that may run (1 running, 1 silent (may have "
        "ended)) had not picked up yet (rank 2 silent (may have ended))"
    ) in " ".join(second.stderr.split()), second.stderr
    running.unlink()  # rank 2 alone, silent
    alone = npuprof("trigger", str(tmp_path))
    assert alone.returncode == 0, alone.stderr
    said = " ".join(alone.stderr.split())
    assert f"no process watches {tmp_path} for sure now" in said, alone.stderr
    assert "rank 2 on node-c.example" in said, alone.stderr
