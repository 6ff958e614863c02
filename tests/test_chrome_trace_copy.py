"""--export-chrome-trace when a hard link is not the answer (--no-gzip: it would share the result tree's
file; another filesystem: it cannot be made): the post-processor copies the trace, so that a job ending
right after its capture (here with os._exit, which runs no exit handler) still gets the whole file."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from conftest import forked_job, npuprof, rank_dirs

JOB = """
import os, torch
model = torch.nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(4):
    model(torch.randn(8, 16)).sum().backward()
    opt.step()
    opt.zero_grad()
os._exit(0)
"""


def test_no_gzip_gets_a_copy_of_its_own_even_after_an_abrupt_exit(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text(JOB)
    target = tmp_path / "exported" / "trace.json"
    target.parent.mkdir()
    flags = ["--skip-first", "1", "--warmup", "0", "--active", "2", "--no-gzip", "--no-analyse"]
    result = npuprof(
        "run", "-o", str(tmp_path / "out"), *flags, "--export-chrome-trace", str(target),
        "--", sys.executable, str(script), timeout=180,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (d,) = rank_dirs(tmp_path / "out")
    (raw,) = d.glob("*.pt.trace.json")
    log = (tmp_path / "out" / "npuprof.log").read_text()
    assert target.is_file(), log
    assert target.read_bytes() == raw.read_bytes()
    assert target.stat().st_ino != raw.stat().st_ino and raw.stat().st_nlink == 1  # not one file
    steps = [e["name"] for e in json.loads(target.read_text())["traceEvents"] if "ProfilerStep#" in e["name"]]
    assert steps == ["ProfilerStep#1", "ProfilerStep#2"]
    assert [p.name for p in target.parent.iterdir()] == ["trace.json"]  # no temporary file left
    umask = os.umask(0o022)  # (read back at once: the run inherited it)
    os.umask(umask)
    assert oct(target.stat().st_mode & 0o777) == oct(0o640 & ~umask)  # the result tree's file mode
    lines = result.stderr.splitlines()
    assert f"npuprof: --export-chrome-trace: {target}" in lines  # the summary says where, as its other notes
    assert lines[-1].startswith("next: npuprof analyse "), lines  # the summary's last line


def test_the_run_summary_names_the_chrome_traces_written() -> None:
    from npuprof.reports.run_summary import chrome_traces_written
    from npuprof.results.run_record import CaptureSummary

    def capture(pid: int, name: str) -> CaptureSummary:
        return CaptureSummary(Path("/r") / name, "complete", 0, pid, [1], 10, "", True)

    lines = [
        "2026-12-03 12:00:00 [INFO] [agent pid=7] --export-chrome-trace: /x/trace_0.json",
        "12:00:01 [INFO] [postprocess pid=8] h_7_x_ascend_pt: --export-chrome-trace: /x/a b.json (copied)",
        "12:00:02 [WARNING] [agent pid=7] --export-chrome-trace: /x/c.json not written: [Errno 28]",
        "2026-12-03 12:00:03 [INFO] [agent pid=7] --export-chrome-trace: /x/trace_0.json",
        # another run sharing -o and its log: its files are not this run's
        "2026-12-03 12:00:04 [INFO] [agent pid=9] --export-chrome-trace: /x/ct.json",
        "12:00:05 [INFO] [postprocess pid=10] h_9_y_ascend_pt: --export-chrome-trace: /x/d.json (copied)",
    ]
    ours = [capture(7, "h_7_x_ascend_pt"), capture(11, "h_11_z_ascend_pt")]
    assert chrome_traces_written(lines, ours) == ["/x/trace_0.json", "/x/a b.json"]
    assert chrome_traces_written(lines, [capture(9, "h_9_y_ascend_pt")]) == ["/x/ct.json", "/x/d.json"]
    # a host named by its IPv6 address names its rank dirs so (helper-141: the copy went unlisted)
    v6 = (
        "12:00:06 [INFO] [postprocess pid=12 run=r1] fe80::1_12_z_ascend_pt: --export-chrome-trace: "
        "/x/e.json (copied)"
    )
    assert chrome_traces_written([v6], [capture(13, "fe80::1_12_z_ascend_pt")]) == ["/x/e.json"]


def test_processes_of_one_run_one_after_the_other_keep_each_their_trace(tmp_path: Path) -> None:
    """A job of two python processes in turn (no WORLD_SIZE): the second's trace replaced the first's at
    the one name given. The first keeps the name (a file of before the run is replaced, as torch's export
    replaces it); the second's carries its pid, and the log says so. The two are forked_job's scenarios:
    each a fresh training process to npuprof, forked in turn by a job that imported torch once."""
    job = JOB.replace("os._exit(0)", "print('PID', os.getpid(), flush=True)")
    command, _pids = forked_job(tmp_path, {"first": job, "second": job})
    target = tmp_path / "exported" / "trace.json"
    target.parent.mkdir()
    target.write_text("of an earlier run")
    flags = ["--skip-first", "1", "--warmup", "0", "--active", "2", "--no-analyse"]
    result = npuprof(
        "run", "-o", str(tmp_path / "out"), *flags, "--export-chrome-trace", str(target),
        "--", *command, timeout=180,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    first, second = (int(line.split()[1]) for line in result.stdout.splitlines() if line.startswith("PID"))
    pids = {e["pid"] for e in json.loads(target.read_text())["traceEvents"] if e.get("ph") == "X"}
    assert first in pids and second not in pids
    (other,) = target.parent.glob(f"trace_pid{second}_step1.json")
    assert {e["pid"] for e in json.loads(other.read_text())["traceEvents"] if e.get("ph") == "X"} >= {second}
    log = (tmp_path / "out" / "npuprof.log").read_text()
    assert (
        f"{target} was written since this run started (by another of its processes, by this one before an "
        f"os.exec*, or by another run at the same time); this process's trace is {other}" in log
    )


class _Log:
    def __init__(self) -> None:
        self.warnings: list[str] = []

    def warn_once(self, key: str, message: str) -> None:
        self.warnings.append(message)


def test_a_process_that_replaced_itself_keeps_the_traces_of_its_first_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job that re-execs itself (os.execv: same pid, steps counted from 0 again) under --repeat 2
    captured steps 1 and 2 in each image: the second image's traces took the first's names
    (trace_pid123_step1.json) and replaced them, two of four traces lost (helper-158). A name this run
    has written gets a number; a file of before the run is still replaced."""
    from npuprof.agent.chrome_trace import _target
    from npuprof.config import ProfileConfig, Schedule

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    base = tmp_path / "trace.json"
    cfg = ProfileConfig(export_chrome_trace=str(base), schedule=Schedule(repeat=2))
    pid = os.getpid()
    before = tmp_path / f"trace_pid{pid}_step1.json"
    before.write_text("of an earlier run")
    os.utime(before, ns=(1, 1))
    log = _Log()
    start = time.time_ns() - 1
    assert _target(cfg, None, 1, start, log) == before and not log.warnings
    before.write_text("the first image's")
    (tmp_path / f"trace_pid{pid}_step1_2.json").write_text("the second image's")
    assert _target(cfg, None, 1, start, log) == tmp_path / f"trace_pid{pid}_step1_3.json"
    assert f"this process's trace is {tmp_path / f'trace_pid{pid}_step1_3.json'}" in log.warnings[0]
    # one name for the whole run: the first image keeps it, the second gets its pid, a third a number
    one = ProfileConfig(export_chrome_trace=str(tmp_path / "one" / "trace.json"))
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "trace.json").write_text("the first image's")
    assert _target(one, None, 1, start, log) == tmp_path / "one" / f"trace_pid{pid}_step1.json"
    (tmp_path / "one" / f"trace_pid{pid}_step1.json").write_text("the second image's")
    assert _target(one, None, 1, start, log) == tmp_path / "one" / f"trace_pid{pid}_step1_2.json"


class _ProcessGroup:
    """torch.distributed as the agent sees it in a rank that torch.multiprocessing.spawn started: no
    launcher variable, a process group of ``world`` ranks."""

    def __init__(self, world: int) -> None:
        self.world = world

    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return True

    def get_world_size(self) -> int:
        return self.world


def test_ranks_started_by_spawn_each_get_a_trace_named_by_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """helper-258: DDP started with torch.multiprocessing.spawn (no WORLD_SIZE) wrote rank 0's trace as
    trace.json and rank 1's as trace_rank1_pid..._step4.json, with a warning that the name was taken:
    the process group's world size says the run writes several, as WORLD_SIZE does."""
    from npuprof.agent.chrome_trace import _target
    from npuprof.config import ProfileConfig

    for name in ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "PMI_SIZE"):
        monkeypatch.delenv(name, raising=False)
    cfg = ProfileConfig(export_chrome_trace=str(tmp_path / "trace.json"))
    log = _Log()
    monkeypatch.setitem(sys.modules, "torch.distributed", _ProcessGroup(2))
    pid = os.getpid()
    assert _target(cfg, 0, 4, time.time_ns(), log) == tmp_path / f"trace_rank0_pid{pid}_step4.json"
    monkeypatch.setitem(sys.modules, "torch.distributed", _ProcessGroup(1))  # one rank: the name given
    assert _target(cfg, 0, 4, time.time_ns(), log) == tmp_path / "trace.json"
    assert not log.warnings


def test_the_name_carries_rank_pid_and_step_only_where_the_run_may_write_several(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """README, "Chrome traces": several traces are more than one process (a world size > 1) or more than
    one capture (--repeat other than 1, --dynamic); one time window (--delay/--duration) is one capture."""
    from npuprof.agent.chrome_trace import several_traces
    from npuprof.config import ProfileConfig, Schedule

    monkeypatch.setitem(sys.modules, "torch.distributed", _ProcessGroup(1))
    one = ProfileConfig(export_chrome_trace="trace.json")
    assert not several_traces(one, {})
    for name in ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "PMI_SIZE"):
        assert not several_traces(one, {name: "1"}), name
        assert not several_traces(one, {name: " 0 "}), name
        assert several_traces(one, {name: "2"}), name
    assert not several_traces(one, {"WORLD_SIZE": "²"})  # a digit to str.isdigit, no number to int()
    for repeat in (0, 2):  # 0: until training ends
        assert several_traces(ProfileConfig(schedule=Schedule(repeat=repeat)), {}), repeat
    assert several_traces(ProfileConfig(dynamic="."), {})
    assert not several_traces(ProfileConfig(delay=1.0, schedule=Schedule(repeat=0)), {})
    assert several_traces(ProfileConfig(delay=1.0), {"WORLD_SIZE": "4"})


def test_on_the_step_the_trace_is_a_hard_link_and_a_failed_one_leaves_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """agent/chrome_trace.py: on the step, a hard link of the raw trace (no copy of a trace of hundreds of
    MB in the training step); where it cannot be put in place (here a directory has the name), the copy is
    left to the post-processor and the link's temporary name is gone."""
    from npuprof.agent.chrome_trace import export_chrome_trace
    from npuprof.config import ProfileConfig

    for name in ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "PMI_SIZE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setitem(sys.modules, "torch.distributed", _ProcessGroup(1))

    class Log(_Log):
        def info(self, message: str) -> None:
            pass

    source = tmp_path / "raw" / "x.pt.trace.json"
    source.parent.mkdir()
    source.write_text('{"traceEvents": []}')
    linked = tmp_path / "linked" / "trace.json"
    linked.parent.mkdir()
    cfg = ProfileConfig(export_chrome_trace=str(linked))
    assert export_chrome_trace(cfg, source, None, 1, Log(), may_link=True) is None
    assert os.path.samefile(linked, source) and sorted(os.listdir(linked.parent)) == ["trace.json"]
    taken = tmp_path / "taken" / "trace.json"
    (taken / "inside").mkdir(parents=True)
    cfg = ProfileConfig(export_chrome_trace=str(taken))
    assert export_chrome_trace(cfg, source, None, 1, Log(), may_link=True) == (str(source), str(taken))
    assert sorted(os.listdir(taken.parent)) == ["trace.json"]
