"""`npuprof status` and `npuprof trigger`'s notes at their edges (helper-373's mutation hunt: each of these
changed at its edge, or written without its bound, and no test said so): a duration's unit, the lists cut at
a few names, a start_step equal to the step a log names, a process without a rank under a --ranks request.

The processes are of other hosts (their logs in a shared folder), heard from seconds ago: "running" by their
newest line, with no pid of this host to look at."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from npuprof.cli import status, trigger
from npuprof.job_processes import pid_alive
from npuprof.proc_stat import state_of


def _line(step: int, message: str) -> str:
    """A watcher's line of 5 s ago, as a node in UTC writes it."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(time.time() - 5))
    return f"{stamp},000 +0000 [INFO] [7] npuprof.dynamic: [step {step}] {message}\n"


def _job(tmp_path: Path, steps: dict[tuple[str, int], int], extra: dict[str, str] | None = None) -> Path:
    """DIR of a job whose processes (host, rank; -1: none) are at those steps by their logs; ``extra``:
    more lines of a host's log."""
    logs = tmp_path / "log"
    logs.mkdir(parents=True)
    for pid, ((host, rank), step) in enumerate(steps.items(), start=100):
        text = (
            _line(0, "watching it every 1 s") + _line(step, f"at step {step}") + (extra or {}).get(host, "")
        )
        (logs / f"dp_{host}_{pid}_rank_{rank}.log").write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        (0, "0 s"),
        (89, "89 s"),
        (90, "2 min"),  # 1.5 min, rounded to even
        (5399, "90 min"),
        (5400, "2 h"),
        (48 * 3600 - 1, "48 h"),
        (48 * 3600, "2 days"),
        (10 * 86400, "10 days"),
    ],
)
def test_status_says_a_silence_in_the_unit_of_its_length(seconds: int, said: str) -> None:
    assert status._duration(seconds) == said


def test_status_names_four_unchecked_hosts_and_counts_the_rest(tmp_path: Path) -> None:
    hosts = [f"node-{c}.example" for c in "abcdef"]
    job = _job(tmp_path, {(host, rank): 3 for rank, host in enumerate(hosts)})
    processes = status._processes(job / "log")
    assert [p["state"] for p in processes] == ["running"] * 6, processes
    table = status.render({"config": {"file": "f", "start_step": 0}, "processes": processes})
    assert (
        "not checked: the processes of node-a.example, node-b.example, node-c.example, node-d.example and "
        "2 more (this host's pids" in table
    ), table


def test_trigger_says_a_start_step_the_job_is_in_has_passed_and_where(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A job in step N takes a request from step N as not effective ("has already begun", the window opening
    at the boundary before its first step), as it does one from an earlier step."""
    job = _job(tmp_path, {("node-a", 0): 20, ("node-b", 1): 5, ("node-c", -1): 30})

    def note(start_step: int, ranks: set[int] | None) -> str:
        trigger._note_if_start_step_passed(job, start_step, ranks)
        return " ".join(capsys.readouterr().err.split())

    assert (
        "--start-step 20 has passed in 2 of the 3 running processes (their logs are at step 20 or later)"
    ) in note(20, None)
    assert (
        "--start-step 21 has passed in 1 of the 3 running processes (their logs are at step 30 or later)"
        in (note(21, None))
    )
    assert note(31, None) == ""
    # the process without a rank counts as rank 0, as in its job: a request for rank 0 is one for it
    assert "--start-step 25 has passed in 1 of the 2 running processes (their logs are at step 30 " in note(
        25, {0}
    )
    assert "--start-step 5 has passed in every running process (their logs are at step 5 " in note(5, {1})


def test_trigger_says_a_ranks_request_that_selects_no_running_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """helper-378: `npuprof trigger DIR --ranks 1` on a job of one process (rank 0, as it has none) was
    written without a word; the process read it and made no capture."""
    from npuprof.cli import main
    from npuprof.config import template_json

    def note(job: Path, *ranks: str) -> str:
        (job / "profiler_config.json").write_text(json.dumps(template_json()))
        (job / "profiler_config.json").chmod(0o600)

        def leave(code: int) -> None:
            raise SystemExit(code)

        monkeypatch.setattr(sys, "argv", ["npuprof", "trigger", str(job), *ranks])
        monkeypatch.setattr(main, "_leave", leave)
        monkeypatch.setattr(main, "guard_streams", lambda: None)
        with pytest.raises(SystemExit) as ended:
            main._main()
        assert ended.value.code in (0, None)  # the request is written, whatever the note says
        said = capsys.readouterr().err.split("npuprof trigger: note: ")
        return " ".join(" ".join(n.split()) for n in said if "selects none" in n)

    alone = _job(tmp_path / "alone", {("node-a", -1): 20})
    assert note(alone, "--ranks", "1") == (
        "--ranks 1 selects none of the running process its logs know of (rank(s) 0; a process without a "
        "rank counts as rank 0): none of them captures; --ranks 0 asks them, no --ranks every rank"
    )
    assert note(alone, "--ranks", "0") == "" and note(alone) == ""
    pair = _job(tmp_path / "pair", {("node-a", 0): 20, ("node-b", 1): 20})
    assert note(pair, "--ranks", "2-4") == (
        "--ranks 2-4 selects none of the 2 running processes its logs know of (rank(s) 0-1): none of them "
        "captures; --ranks 0-1 asks them, no --ranks every rank"
    )
    assert note(pair, "--ranks", "1,5") == ""  # rank 1 records
    assert note(pair, "--ranks", "3", "--cancel") == ""  # a cancel asks for no capture


def test_trigger_takes_a_capture_planned_from_the_step_a_process_is_in_as_begun() -> None:
    planned = (
        "capture planned: steps 20-21 (capture 2 step(s) from step 20 on every rank into /o (trigger t))"
    )
    process = {"last_step": 19, "capturing": None}
    assert trigger._not_begun(planned, process) == "planned: steps 20-21"
    assert trigger._not_begun(planned, {**process, "last_step": 20}) == ""
    assert trigger._not_begun(planned, {**process, "last_step": None}) == "planned: steps 20-21"


def test_triggers_notes_name_eight_processes_and_count_the_rest(tmp_path: Path) -> None:
    """Ten processes: one has read the request, nine have not; then nine have taken it and not begun."""
    hosts = [f"n{i:02d}" for i in range(10)]
    read = " loaded: capture 1 step(s) from step 50 on every rank into /o (trigger t7)\n"
    job = _job(tmp_path, {(host, rank): 10 for rank, host in enumerate(hosts)}, {"n00": _line(10, read)})
    (job / "profiler_config.json").write_text(json.dumps({"start_step": 50, "trigger_id": "t7"}))
    said = trigger._request_not_picked_up_by_some(job)
    assert (
        "request t7, which 9 of the 10 running processes had not picked up yet (rank 1, rank 2, rank 3, "
        "rank 4, rank 5, rank 6, rank 7, rank 8 and 1 more)"
    ) in said, said

    nine = _job(
        tmp_path / "nine", {(host, rank): 10 for rank, host in enumerate(hosts[:9])}, {"n00": _line(10, read)}
    )
    (nine / "profiler_config.json").write_text(json.dumps({"start_step": 50, "trigger_id": "t7"}))
    said = trigger._request_not_picked_up_by_some(nine)
    assert (
        "which 8 of the 9 running processes had not picked up yet (rank 1, rank 2, rank 3, rank 4, " in said
    )
    assert "rank 8): the last change wins" in said, said

    plan = "capture planned: steps 50-50 (capture 1 step(s) from step 50 on every rank into /o (trigger t7))"
    for rank, host in enumerate(hosts):
        with (job / "log" / f"dp_{host}_{100 + rank}_rank_{rank}.log").open("a") as log:
            log.write(_line(11, plan))
    said = trigger._request_taken_not_begun(job)
    shown = "; ".join(f"rank {r}: planned: step 50" for r in sorted(range(10), key=lambda r: f"rank {r}"))
    assert said.startswith("request t7, which 10 of the 10 running processes had taken and not begun ("), said
    assert f"({'; '.join(shown.split('; ')[:8])}; ...)" in said, said


def test_status_finds_a_killed_process_s_newest_capture_among_many_up_to_the_plans_last_step(
    tmp_path: Path,
) -> None:
    """A process killed after its "capture planned: steps 52-53" line: its newest rank dir of 20 (the newest
    16 are looked at), begun at step 53, the plan's last, is the capture it died in."""

    pid = 4194001  # beyond this host's pids: gone
    assert not pid_alive(pid)
    host, out = os.uname().nodename, tmp_path / "out"
    logs = tmp_path / "cfg" / "log"
    logs.mkdir(parents=True)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time() - 2)) + ",000"
    request = f"capture 2 step(s) from the next step on every rank into {out} (trigger t1)"
    (logs / f"dp_{host}_{pid}_rank_0.log").write_text(
        f"{stamp} [INFO] [{pid}] npuprof.dynamic: [step 0] watching it every 2 s\n"
        f"{stamp} [INFO] [{pid}] npuprof.dynamic: [step 50] capture planned: steps 52-53 ({request})\n"
    )
    for n in range(20):
        rank_dir = out / f"{host}_{pid}_202612061046{n:02d}123_ascend_pt"
        rank_dir.mkdir(parents=True)
        newest = n == 19
        record = {
            "status": "capturing" if newest else "complete",
            "pid": pid,
            "steps": [53] if newest else [n],
            "updated_ns": time.time_ns(),
        }
        (rank_dir / "npuprof_capture.json").write_text(json.dumps(record))
    (process,) = status._processes(logs)
    assert process["capturing"] == {"from_step": 53, "directory": str(rank_dir)}, process


def test_a_process_held_by_a_tracer_is_stopped() -> None:
    """A debugger's stop (state "t", ptrace) is a stop as kill -STOP's ("T") is: it neither trains nor reads
    the file until let go. The child traces itself to this process and stops."""
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import ctypes, os, signal\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            "assert libc.ptrace(0, 0, 0, 0) == 0  # PTRACE_TRACEME\nos.kill(os.getpid(), signal.SIGSTOP)\n",
        ]
    )
    try:
        deadline = time.monotonic() + 30
        while state_of(child.pid) != b"t" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert state_of(child.pid) == b"t"
        assert status._is_stopped(child.pid)
    finally:
        child.kill()
        child.wait(30)
    assert not status._is_stopped(os.getpid())


@pytest.mark.parametrize("attempt", [1, None], ids=["torchrun", "no-torchrun"])
def test_trigger_says_torchrun_may_be_restarting_when_every_process_of_its_job_has_ended(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], attempt: int | None
) -> None:
    """Between a failed torchrun attempt's end and its restarted workers' first look no process watches DIR
    (a real 2-node job: 8 s while they imported torch): the note said the request would be read by
    no one, and the restarted workers took it. Where the processes name torchrun's attempts the note says
    that restarted workers take it, and so does status's line on the unread request ("was not read: no process
    of the job runs"); status's JSON gives each process's attempt."""
    named = "" if attempt is None else f", attempt {attempt}"
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "dp_node-b_100_rank_1.log").write_text(
        _line(0, f"watching it every 1 s; host node-b, pid 100, rank 1{named}, started at tick 42")
        + _line(15, "stopped by SIGTERM: the process dies of it")
        + _line(15, "the process ends")
    )
    job = tmp_path
    (process,) = status._processes(job / "log")
    assert (process["state"], process["attempt"]) == ("ended (SIGTERM)", attempt), process
    (job / "profiler_config.json").write_text(json.dumps({"start_step": -1, "active": 2, "trigger_id": "t8"}))
    trigger._note_if_nobody_watches(job)
    said = " ".join(capsys.readouterr().err.split())
    assert f"no process watches {job} now (every process its logs know of has ended)" in said, said
    restarting = "or torchrun is restarting its workers (its processes name torchrun's attempts; with"
    assert (restarting in said) == (attempt is not None), said
    shown = status.render(
        {
            "config": {"file": "cfg", "problem": "-"},
            "processes": [process],
            "unread_request": status._unread(job),
        }
    )
    if attempt is None:
        assert "(trigger t8) was not read: no process of the job runs" in shown, shown
    else:
        assert (
            "(trigger t8) is not read yet: no process of the job runs now; if torchrun is restarting its "
            "workers (its processes name torchrun's attempts; --max-restarts), the restarted ones take it"
        ) in shown, shown
