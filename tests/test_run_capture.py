"""`npuprof run` end to end on the CPU: schedules, step detection, the files written."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import (
    SCRIPTS,
    capture_record,
    clean_env,
    forked_job,
    load_trace,
    npuprof,
    profiler_steps,
    rank_dirs,
    run_trainer,
    sched,
    trainer,
    trainer_in_process,
)

SCHEDULE_9 = ["--skip-first", "1", "--wait", "1", "--warmup", "1", "--active", "2", "--repeat", "2"]


@pytest.fixture(scope="module")
def scheduled(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str], list[Path]]:
    """`npuprof run -o OUT SCHEDULE_9 -- trainer.py --steps 9 --loader-workers 2` under umask 022, its
    captures analysed: (OUT, the result, its capture directories), one job shared by the tests that read it:
    test_schedule_captures_exactly_the_scheduled_steps, test_dataloader_worker_processes_do_not_capture (its
    two DataLoader workers are forked before step 0 and live through both cycles of the schedule),
    test_files_and_dirs_modes[18], test_log_records_agent_activity, and
    test_output_directory_contents_are_never_overwritten, which runs it again into OUT."""
    out = tmp_path_factory.mktemp("scheduled") / "result"
    previous = os.umask(0o022)
    try:
        result = npuprof("run", *scheduled_run(out))
    finally:
        os.umask(previous)
    return out, result, rank_dirs(out) if out.is_dir() else []


def scheduled_run(out: Path) -> list[str]:
    """The arguments of `npuprof run` for the scheduled run into ``out``."""
    return ["-o", str(out), *SCHEDULE_9, "--", *trainer("--steps", "9", "--loader-workers", "2")]


def test_schedule_captures_exactly_the_scheduled_steps(scheduled) -> None:
    out, result, dirs = scheduled
    assert result.returncode == 0, result.stderr
    assert [profiler_steps(d) for d in dirs] == [[3, 4], [7, 8]]
    for d in dirs:
        record = capture_record(d)
        assert record["status"] == "complete"
        # where it ran (a killed capture of a --worker-name dir is told from it) and that it was to be parsed
        assert (record["host"], record["parse"]) == (os.uname().nodename, True), record
        assert record["trace"].endswith(".pt.trace.json.gz")  # gzipped in the background
        assert (d / record["trace"]).exists()
        info = json.loads((d / "profiler_info.json").read_text())
        assert info["config"]["common_config"]["schedule"] == {
            "skip_first": 1,
            "wait": 1,
            "warmup": 1,
            "active": 2,
            "repeat": 2,
        }
        assert "collectionTimeEnd" in info["end_info"]
        assert info["torch_version"]
        meta = json.loads((d / "profiler_metadata.json").read_text())
        assert set(meta["ENV_VARIABLES"]) >= {
            "ASCEND_GLOBAL_LOG_LEVEL",
            "HCCL_RDMA_TC",
            "HCCL_RDMA_SL",
            "ACLNN_CACHE_LIMIT",
        }
        assert oct(d.stat().st_mode & 0o777) == oct(0o750)
        assert oct((d / "profiler_info.json").stat().st_mode & 0o777) == oct(0o640)
    run = json.loads((out / "npuprof_run.json").read_text())
    assert run["exit_code"] == 0
    assert [c["steps"] for c in run["captures"]] == [[3, 4], [7, 8]]
    assert "npuprof analyse" in result.stderr  # the closing report names the next command
    assert not (out / ".npuprof_pending").exists()


# test_every_kind_of_optimizer_step_counts_once's optimizers trained under the same flags: they share a run
SHARED_OPTIMIZERS = ("custom", "two", "lbfgs", "scaler")
OPTIMIZER_FLAGS = [*sched(3, 1, 2), "--no-analyse", "--no-gzip"]


@pytest.fixture(scope="module")
def optimizers_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str], dict[str, int]]:
    """One `npuprof run -o OUT OPTIMIZER_FLAGS` of a forked_job whose children, one after the other, each
    run `trainer.py --steps 8 --optimizer NAME` for a NAME of SHARED_OPTIMIZERS (each a fresh training
    process to npuprof, as its own job was): (OUT, the result, each NAME's pid)."""
    root = tmp_path_factory.mktemp("optimizers")
    out = root / "result"
    scenarios = {name: trainer_in_process("--steps", "8", "--optimizer", name) for name in SHARED_OPTIMIZERS}
    job, pids = forked_job(root, scenarios)
    result = npuprof("run", "-o", str(out), *OPTIMIZER_FLAGS, "--", *job)
    return out, result, json.loads(pids.read_text()) if pids.exists() else {}


@pytest.mark.parametrize(
    ("optimizer", "extra"),
    [("custom", []), ("two", []), ("lbfgs", []), ("scaler", []), ("adam", ["--with-stack"])],
)
def test_every_kind_of_optimizer_step_counts_once(
    request: pytest.FixtureRequest, out: Path, optimizer: str, extra: list[str]
) -> None:
    """(The optimizers of SHARED_OPTIMIZERS are children of optimizers_run's job; adam, with stacks, runs
    a job of its own.)"""
    if optimizer in SHARED_OPTIMIZERS and not extra:
        out, result, pid_of = request.getfixturevalue("optimizers_run")
        assert result.returncode == 0, result.stderr
        (d,) = [d for d in rank_dirs(out) if capture_record(d)["pid"] == pid_of[optimizer]]
    else:
        flags = [*OPTIMIZER_FLAGS, *extra]
        train = trainer("--steps", "8", "--optimizer", optimizer)
        result = npuprof("run", "-o", str(out), *flags, "--", *train)
        assert result.returncode == 0, result.stderr
        (d,) = rank_dirs(out)
    assert profiler_steps(d) == [4, 5]
    names = {e.get("name") for e in load_trace(d)["traceEvents"]}
    assert any(str(n).startswith("Optimizer.step#") for n in names)


def test_step_on_counts_returns_of_a_named_function(out: Path, tmp_path: Path) -> None:
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "infer.py").write_text(
        "import torch\n"
        "class Engine:\n"
        "    def __init__(self):\n"
        "        self.model = torch.nn.Linear(8, 8)\n"
        "    @torch.no_grad()\n"
        "    def generate(self, n):\n"
        "        x = torch.randn(2, 8)\n"
        "        for _ in range(n):\n"
        "            x = self.model(x)\n"
        "        return x\n"
    )
    script = tmp_path / "serve.py"
    script.write_text(
        "from mypkg.infer import Engine\ne = Engine()\nfor _ in range(7):\n    e.generate(3)\n"
        "import gc; gc.freeze()  # skip the exit-time collection over torch's objects (atexit runs first)\n"
    )
    env = clean_env(PYTHONPATH=str(tmp_path))
    result = npuprof(
        "run",
        "-o",
        str(out),
        "--no-analyse",
        "--step-on",
        "mypkg.infer:Engine.generate",
        *sched(2, 1, 2),
        "--",
        sys.executable,
        str(script),
        env=env,
    )
    assert result.returncode == 0, result.stderr
    (d,) = rank_dirs(out)
    assert profiler_steps(d) == [3, 4]
    events = load_trace(d)["traceEvents"]
    assert sum(1 for e in events if e.get("name") == "aten::linear") == 6  # 2 steps x 3 layers


def test_interrupted_training_keeps_the_recorded_steps(run_with_umask) -> None:
    """A capture of steps 2-11 of a job that trains 5 steps (the run test_files_and_dirs_modes[63] reads
    too, under umask 077)."""
    out, result = run_with_umask(0o077)
    assert result.returncode == 0, result.stderr
    (d,) = rank_dirs(out)
    record = capture_record(d)
    assert record["status"] == "complete"
    assert "training ended" in record["detail"] and "step 5 is partial" in record["detail"]
    # Steps 2-4 completed; step 5 (the tail after the last optimizer step) is kept as the partial step.
    assert profiler_steps(d) == [2, 3, 4, 5]
    assert record["steps"] == [2, 3, 4, 5]


def test_config_file_is_the_base_and_flags_override(out: Path, tmp_path: Path) -> None:
    config = tmp_path / "profiler_config.json"
    config.write_text(
        json.dumps(
            {
                "start_step": 3,
                "active": 2,
                "record_shapes": True,
                "prof_dir": str(tmp_path / "ignored"),
                "experimental_config": {"profiler_level": "Level1", "export_type": "nonsense"},
                "metadata": {"distributed_args": {"tp": 2}},
            }
        )
    )
    result = npuprof(
        "run",
        "--config",
        str(config),
        "-o",
        str(out),
        "--active",
        "1",
        "--no-analyse",
        "--metadata",
        "team=perf",
        "--",
        *trainer("--steps", "6"),
    )
    assert result.returncode == 0, result.stderr
    (d,) = rank_dirs(out)
    assert profiler_steps(d) == [3]
    info = json.loads((d / "profiler_info.json").read_text())
    assert info["config"]["common_config"]["record_shapes"] is True
    assert info["config"]["experimental_config"]["_profiler_level"] == "Level1"
    assert info["config"]["experimental_config"]["_export_type"] == "text"  # invalid falls back to text
    meta = json.loads((d / "profiler_metadata.json").read_text())
    assert meta["team"] == "perf" and meta["distributed_args"] == {"tp": 2}
    # named as the file wrote it: the user typed no --level
    level = f'experimental_config.profiler_level "Level1" ({config})'
    assert f"ignored on the torch-cpu backend: {level}" in result.stderr, result.stderr
    assert not (tmp_path / "ignored").exists()


def test_output_directory_contents_are_never_overwritten(scheduled) -> None:
    """A second run into the output directory of the scheduled run, with the same flags, its captures
    analysed too: what the first wrote (captures, their analyses, its run record) is left as it was."""
    out, first, _dirs = scheduled
    assert first.returncode == 0, first.stderr
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    previous = os.umask(0o022)  # as the first (test_files_and_dirs_modes[18] may read this run's files too)
    try:
        second = npuprof("run", *scheduled_run(out))
    finally:
        os.umask(previous)
    assert second.returncode == 0, second.stderr
    for path, content in before.items():
        if path.name != "npuprof.log":
            assert path.read_bytes() == content, path
    assert len(rank_dirs(out)) == 4  # two captures of each run
    assert len(list(out.glob("npuprof_run*.json"))) == 2
    assert (out / "npuprof.log").read_bytes().startswith(before[out / "npuprof.log"])


def test_captures_begun_within_one_millisecond_are_all_kept(out: Path, tmp_path: Path) -> None:
    """helper-129: a capture's directory is named by its process and the millisecond it began; with
    --wait 0 --warmup 0 --active 1 and a fast step (a third of the captures of a --step-on no-op began 1 ms
    after the one before on 2 slow cores), or a clock set back, the next capture's name was taken: it was
    skipped ("File exists") and lost. Here the clock stands still, as if every capture began in one
    millisecond: each gets a directory of its own, none is skipped."""
    script = tmp_path / "still_clock.py"
    script.write_text(
        "import importlib, time, types\n"
        "import torch\n"
        "def train_step():\n"
        "    torch.ones(2) + 1\n"
        "layout = importlib.import_module('npuprof.results.layout')  # the agent's, awake since the def\n"
        "layout.time = types.ModuleType('time')\n"
        "vars(layout.time).update(vars(time), time=lambda: 1.8e9)\n"
        "for _ in range(5):\n"
        "    train_step()\n"
        "import gc; gc.freeze()  # skip the exit-time collection over torch's objects (atexit runs first)\n"
    )
    flags = ["--no-analyse", "--step-on", "__main__:train_step", *sched(0, 0, 1), "--repeat", "0"]
    result = npuprof("run", "-o", str(out), *flags, "--", sys.executable, str(script))
    assert result.returncode == 0, result.stderr
    assert "skipped" not in result.stderr and "could not record" not in result.stderr, result.stderr
    records = [capture_record(d) for d in rank_dirs(out)]
    assert sorted(r["steps"][0] for r in records) == [0, 1, 2, 3, 4, 5], records
    assert all(r["status"] == "complete" for r in records), records


OWN_PROFILER_FLAGS = ["--no-analyse", *sched(1, 0, 6)]


@pytest.fixture(scope="module")
def own_profilers_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, Path, subprocess.CompletedProcess[str], dict[str, int]]:
    """One `npuprof run -o OUT OWN_PROFILER_FLAGS` (record steps 1-6) of a forked_job whose children, one
    after the other, each start a profiler of their own (each a fresh training process to npuprof, as its
    own job was): "trainer" runs `trainer.py --steps 8 --own-profiler-at 3 --marker ROOT/done` (inside
    npuprof's capture), "scheduled" OWN_SCHEDULED (after it). (ROOT, OUT, the result, each one's pid.)"""
    root = tmp_path_factory.mktemp("own_profilers")
    out = root / "result"
    scenarios = {
        "trainer": trainer_in_process(
            "--steps", "8", "--own-profiler-at", "3", "--marker", str(root / "done")
        ),
        "scheduled": OWN_SCHEDULED,
    }
    job, pids = forked_job(root, scenarios)
    result = npuprof("run", "-o", str(out), *OWN_PROFILER_FLAGS, "--", *job, timeout=120)
    return root, out, result, json.loads(pids.read_text()) if pids.exists() else {}


def _captures_of(out: Path, pid: int) -> list[Path]:
    return [d for d in rank_dirs(out) if capture_record(d)["pid"] == pid]


def test_the_user_own_profiler_wins(own_profilers_run) -> None:
    """(own_profilers_run's "trainer" child: was a job of its own.)"""
    root, out, result, pid_of = own_profilers_run
    assert result.returncode == 0, result.stderr
    assert (root / "done").exists()
    assert (root / "own_trace.json").exists()
    assert "runs its own profiler" in result.stderr or "started its own profiler" in result.stderr
    # where it was started, which says whose it is when a framework starts one (helper-135: Lightning's
    # Trainer(profiler="pytorch"), accelerate's ProfileKwargs; "the training script" had started none)
    lines = (SCRIPTS / "trainer.py").read_text().splitlines()
    start_line = next(i for i, line in enumerate(lines, 1) if "own_profiler.start()" in line)
    said = " ".join(result.stderr.split())
    assert f"(started at {SCRIPTS / 'trainer.py'}:{start_line}, in main)" in said, result.stderr
    (d,) = _captures_of(out, pid_of["trainer"])
    assert capture_record(d)["detail"] == "the training script started its own profiler"
    assert max(profiler_steps(d)) <= 3


# (a rank --ranks does not select: test_fault_inputs' test_no_capture_because_no_rank_was_selected)


@pytest.fixture(scope="module")
def run_with_umask(tmp_path_factory: pytest.TempPathFactory, scheduled):
    """`npuprof run -o OUT` of trainer.py under a umask, its captures analysed: (OUT, the result), one run
    for each umask, shared by the tests that read it. Under 022 it is the scheduled run (SCHEDULE_9, 9
    steps); under 077, the run of test_interrupted_training_keeps_the_recorded_steps: skip 2, record 10 of a
    job that trains 5 steps."""
    runs: dict[int, tuple[Path, subprocess.CompletedProcess[str]]] = {0o022: scheduled[:2]}

    def run(umask: int) -> tuple[Path, subprocess.CompletedProcess[str]]:
        if umask not in runs:
            out = tmp_path_factory.mktemp(f"umask-{umask:03o}") / "result"
            previous = os.umask(umask)
            try:
                result = run_trainer(out, *sched(2, 0, 10), train=("--steps", "5"), analyse=True)
            finally:
                os.umask(previous)
            runs[umask] = (out, result)
        return runs[umask]

    return run


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_files_and_dirs_modes(run_with_umask, umask: int) -> None:
    """Directories at most 0o750, files at most 0o640, whatever the umask (a stricter one stays stricter)."""
    out, result = run_with_umask(umask)
    assert result.returncode == 0, result.stderr
    paths = [out, *out.rglob("*")]
    assert any(p.is_file() for p in paths) and any(p.name.endswith("_ascend_pt") for p in paths)
    for path in paths:
        allowed = (0o750 if path.is_dir() else 0o640) & ~umask
        mode = path.stat().st_mode & 0o777
        assert mode & ~allowed == 0, (path, oct(mode))
        if umask == 0o022:
            assert mode == allowed, (path, oct(mode))  # exactly what the README promises


def test_log_records_agent_activity(scheduled) -> None:
    out, result, _dirs = scheduled  # the run test_files_and_dirs_modes[18] reads too
    assert result.returncode == 0
    log = (out / "npuprof.log").read_text()
    assert "agent ready" in log and "capture of steps 3-4 written" in log
    assert "capture of steps 7-8 written" in log
    # a process without a rank (a job of one process) says it counts as rank 0, never "rank None"
    assert "rank None" not in log and ", a process without a rank counts as rank 0 (rank 0, run " in log, log


def test_dataloader_worker_processes_do_not_capture(scheduled) -> None:
    """The job's DataLoader workers record nothing: the job's captures are its two scheduled ones, each of
    the main process (the run test_schedule_captures_exactly_the_scheduled_steps reads too)."""
    _out, result, dirs = scheduled
    assert result.returncode == 0, result.stderr
    records = [capture_record(d) for d in dirs]
    assert [profiler_steps(d) for d in dirs] == [[3, 4], [7, 8]], f"a DataLoader worker captured: {records}"
    assert len({r["pid"] for r in records}) == 1, f"a DataLoader worker captured: {records}"
    assert "Traceback" not in result.stderr


# (the lines on stderr around it: the warning is this child's, not another's of own_profilers_run's job)
OWN_SCHEDULED = """
import sys, torch
print("--- scheduled begins ---", file=sys.stderr, flush=True)
model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
def train():
    opt.zero_grad(); model(torch.randn(8, 16)).sum().backward(); opt.step()
for _ in range(9):  # npuprof's capture (steps 1-6) ends before the script's profiler
    train()
window = torch.profiler.schedule(wait=1, warmup=1, active=1)  # repeats: a second cycle warns
with torch.profiler.profile(schedule=window, on_trace_ready=lambda p: None) as prof:
    for _ in range(8):
        train(); prof.step()
print("--- scheduled ends ---", file=sys.stderr, flush=True)
"""


def test_torchs_warnings_to_the_scripts_own_profiler_are_not_hidden(own_profilers_run) -> None:
    """npuprof marks torch's once-only "clears events at the end of each cycle" warning as shown for its
    own cycles; the script's own scheduled profiler, started after npuprof's capture, lost it.
    (own_profilers_run's "scheduled" child: was a job of its own.)"""
    # torch's own text, as it warns without npuprof (torch.profiler.profiler, the second cycle's start), read
    # from its source file: importing torch here would cost this test process seconds of CPU
    torch_spec = importlib.util.find_spec("torch")  # finds the package without importing it
    assert torch_spec is not None and torch_spec.submodule_search_locations
    source = Path(next(iter(torch_spec.submodule_search_locations)), "profiler", "profiler.py").read_text()
    assert "Profiler clears events at the end of each cycle" in source
    _root, out, result, pid_of = own_profilers_run
    assert result.returncode == 0, result.stderr
    (d,) = _captures_of(out, pid_of["scheduled"])  # npuprof captured before the script's profiler
    assert capture_record(d)["steps"] == [1, 2, 3, 4, 5, 6]
    child = result.stderr.split("--- scheduled begins ---", 1)[1].split("--- scheduled ends ---", 1)[0]
    assert "Profiler clears events at the end of each cycle" in child, result.stderr


def test_a_rank_still_running_when_the_first_process_ends_is_not_said_to_have_recorded_nothing(
    out: Path, tmp_path: Path
) -> None:
    """helper-131: the job's first process started rank 0 and rank 1 and ended once rank 0 had trained; rank
    1 still ran (it went on to record). The summary said "rank 1 recorded nothing: it ended without logging
    the steps it counted (by os._exit, or killed)" beside "1 process(es) of it still run": it had not ended.
    Only the second line stays."""
    go, ready = tmp_path / "go", tmp_path / "ready"
    trainer_script = trainer()[1]
    slow = tmp_path / "slow.py"  # rank 1: trains once let go, after the summary
    slow.write_text(
        "import os, runpy, sys, time\n"
        "import torch  # its agent starts: ready, rank 1\n"
        f"open({str(ready)!r}, 'w').close()\n"
        f"while not os.path.exists({str(go)!r}):\n    time.sleep(0.05)\n"
        f"sys.argv = [{trainer_script!r}, '--steps', '3']\n"
        f"runpy.run_path({trainer_script!r}, run_name='__main__')\n"
    )
    script = tmp_path / "job.py"
    script.write_text(
        "import os, subprocess, sys, time\n"
        "env = dict(os.environ, WORLD_SIZE='2')\n"
        f"subprocess.Popen([sys.executable, {str(slow)!r}], env=dict(env, RANK='1'), "
        "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"  # npuprof's output ends without it
        f"subprocess.run([sys.executable, {trainer_script!r}, '--steps', '3'], env=dict(env, RANK='0'))\n"
        f"while not os.path.exists({str(ready)!r}):\n    time.sleep(0.05)\n"
    )
    try:
        flags = ["-o", str(out), *sched(0, 0, 1), "--no-analyse"]
        result = npuprof("run", *flags, "--", sys.executable, str(script), timeout=180)
    finally:
        go.touch()
    assert result.returncode == 0, result.stderr
    said = " ".join(result.stderr.split())
    assert "1 process(es) of it still run" in said, said
    assert "recorded nothing" not in said, said
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # rank 1 records once let go (its dir is made before its record)
        recorded = [d for d in rank_dirs(out) if (d / "npuprof_capture.json").exists()]
        if len(recorded) >= 2:
            break
        time.sleep(0.2)
    assert sorted(capture_record(d)["rank"] for d in rank_dirs(out)) == [0, 1]
