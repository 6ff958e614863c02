"""What one step is, checked against the trace by a method that does not use npuprof's counter: each
iteration of these scripts marks its forward pass with its own ``record_function`` range, so every
``ProfilerStep#N`` range must hold exactly one of them, consecutive ones. Also the user's own signal handling
under npuprof: a script with its own SIGTERM handler, and Ctrl-C while the schedule waits.

The scripts are written in another style than tests/scripts/trainer.py (functions, a Trainer class, no
argparse), as users write them.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from _standin_jobs import STEP_ON
from conftest import SCRIPTS, capture_record, clean_env, forked_job, load_trace, rank_dirs

ITERATION = "iteration_forward_"  # the scripts' own marks: iteration_forward_<i>


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "job.py"
    path.write_text(textwrap.dedent(body))
    return path


def _npuprof_run(
    out: Path, script: Path, *flags: str, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "npuprof",
            "run",
            "-o",
            str(out),
            "--no-analyse",
            *flags,
            "--",
            sys.executable,
            str(script),
        ],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _inside_each_step(rank_dir: Path, prefix: str) -> dict[int, list[str]]:
    """ProfilerStep#N -> the names of the ranges starting with ``prefix`` that start inside it (by time)."""
    events = [e for e in load_trace(rank_dir)["traceEvents"] if e.get("ph") == "X"]
    steps = [
        (int(e["name"].split("#")[1]), e["ts"], e["ts"] + e["dur"])
        for e in events
        if e["name"].startswith("ProfilerStep#")
    ]
    ranges = [(e["name"], e["ts"]) for e in events if e["name"].startswith(prefix)]
    return {n: sorted(name for name, ts in ranges if start <= ts < end) for n, start, end in steps}


def _iterations_per_step(rank_dir: Path) -> dict[int, list[int]]:
    """ProfilerStep#N -> the iterations whose forward mark lies inside it (the scripts' own marks)."""
    marks = _inside_each_step(rank_dir, ITERATION)
    return {n: sorted(int(name[len(ITERATION) :]) for name in names) for n, names in marks.items()}


def _optimizer_steps_per_step(rank_dir: Path) -> dict[int, list[str]]:
    """ProfilerStep#N -> the Optimizer.step# ranges inside it (torch's own ranges, not npuprof's count)."""
    return _inside_each_step(rank_dir, "Optimizer.step#")


GAN = """
import torch
from torch import nn
from torch.profiler import record_function

def make():
    torch.manual_seed(0)
    gen, disc = nn.Linear(8, 8), nn.Linear(8, 1)
    return gen, disc, torch.optim.Adam(gen.parameters()), torch.optim.SGD(disc.parameters(), lr=0.1)

def train(iterations=9):
    gen, disc, opt_g, opt_d = make()
    for i in range(iterations):
        with record_function(f"iteration_forward_{i}"):
            fake = gen(torch.randn(4, 8))
        opt_d.zero_grad()
        disc(fake.detach()).mean().backward()
        opt_d.step()
        opt_g.zero_grad()
        (-disc(fake).mean()).backward()
        opt_g.step()

if __name__ == "__main__":
    train()
"""


def _rank_dirs_of(out: Path, pid: int) -> list[Path]:
    return [d for d in rank_dirs(out) if capture_record(d)["pid"] == pid]


# an optimizer made before os.fork(), stepped by the children (plain, and through a GradScaler): each
# child's pid into the file named by the placeholder, once it ended
FORKS_AFTER_THE_OPTIMIZER = """
import json, os, sys, torch
from torch import nn

model = nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu")
children = {}
for how, steps in (("plain", 1), ("scaled", 1)):
    pid = os.fork()
    if pid == 0:
        for _ in range(steps):
            loss = model(torch.randn(4, 8)).pow(2).mean()
            if how == "plain":
                loss.backward(); opt.step()
            else:
                scaler.scale(loss).backward(); scaler.step(opt); scaler.update()
        sys.exit(0)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0, how
    children[how] = pid
json.dump(children, open(PIDS, "w"))
"""


@pytest.fixture(scope="module")
def gan_and_scaler(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    """GAN, SCALER and FORKS_AFTER_THE_OPTIMIZER as three forked children of one job (forked_job), skip 2,
    warm up 1, record 5: the output directory and each scenario's pid (the last one's children as
    forked_plain and forked_scaled)."""
    tmp_path = tmp_path_factory.mktemp("gan-and-scaler")
    out = tmp_path / "out"
    grandchildren = tmp_path / "forked.json"
    forks = FORKS_AFTER_THE_OPTIMIZER.replace("PIDS", repr(str(grandchildren)))
    (_, job), pids = forked_job(tmp_path, {"gan": GAN, "scaler": SCALER, "forks": forks})
    result = _npuprof_run(out, Path(job), "--skip-first", "2", "--warmup", "1", "--active", "5")
    assert result.returncode == 0, result.stderr
    pid_of = json.loads(pids.read_text())
    assert sorted(pid_of) == ["forks", "gan", "scaler"]
    pid_of.update({f"forked_{how}": pid for how, pid in json.loads(grandchildren.read_text()).items()})
    return out, pid_of


def test_two_optimizers_count_one_step_per_iteration(gan_and_scaler: tuple[Path, dict[str, int]]) -> None:
    """(GAN is a forked child of the job of gan_and_scaler, recorded 5 steps for SCALER's sake: was 3.)"""
    out, pid_of = gan_and_scaler
    [rank_dir] = _rank_dirs_of(out, pid_of["gan"])
    per_step = _iterations_per_step(rank_dir)
    # skip 2, warm up 1 (step 2), record steps 3-7; ProfilerStep#N is iteration N (counting from 0): one
    # iteration per step, not one optimizer step
    assert per_step == {3: [3], 4: [4], 5: [5], 6: [6], 7: [7]}, per_step
    assert "now counts steps" not in (out / "npuprof.log").read_text()  # the first to step keeps counting
    # and each step holds both optimizers' Optimizer.step# ranges (torch's own ranges)
    for n, names in _optimizer_steps_per_step(rank_dir).items():
        assert len(names) == 2 and {name.split("#")[1].split(".")[0] for name in names} == {"Adam", "SGD"}, (
            n,
            names,
        )


TWO_STAGES = """
import torch
from torch import nn
from torch.profiler import record_function

torch.manual_seed(0)
body, head = nn.Sequential(nn.Linear(16, 32), nn.ReLU()), nn.Linear(32, 1)
opt1 = torch.optim.Adam(head.parameters(), 1e-3)  # stage 1: the head; still referenced in stage 2
opt2 = torch.optim.SGD([*body.parameters(), *head.parameters()], 1e-3)  # stage 2: everything
i = 0
for opt, n in ((opt1, 7), (opt2, 8)):
    for _ in range(n):
        with record_function(f"iteration_forward_{i}"):
            loss = head(body(torch.randn(8, 16))).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        i += 1
import gc; gc.freeze()  # skip the exit-time collection over torch's objects (atexit runs before it)
"""


# TWO_STAGES with a first stage two iterations longer: the second optimizer's first two (uncounted) steps
# are iterations 9-10, where the schedule of takeovers (skip 10, warm up 1) begins its window
TWO_STAGES_LATER = TWO_STAGES.replace("(opt1, 7)", "(opt1, 9)")
# and five iterations longer: they are iterations 12-13, inside the window's recorded steps 11-12
TWO_STAGES_IN_FLIGHT = TWO_STAGES.replace("(opt1, 7)", "(opt1, 12)")
assert TWO_STAGES not in (TWO_STAGES_LATER, TWO_STAGES_IN_FLIGHT)


@pytest.fixture(scope="module")
def takeovers(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int], str]:
    """TWO_STAGES ("before": the takeover at iteration 9, before the window), TWO_STAGES_LATER ("inside":
    at iteration 11, the window's warm-up at 10 among the uncounted steps) and TWO_STAGES_IN_FLIGHT
    ("held": at iteration 14, its uncounted steps inside the capture) as three forked children of one job
    (forked_job), skip 10, warm up 1, record 2: the output directory, each scenario's pid and the run's
    stderr."""
    tmp_path = tmp_path_factory.mktemp("takeovers")
    out = tmp_path / "out"
    scenarios = {"before": TWO_STAGES, "inside": TWO_STAGES_LATER, "held": TWO_STAGES_IN_FLIGHT}
    (_, job), pids = forked_job(tmp_path, scenarios)
    result = _npuprof_run(out, Path(job), "--skip-first", "10", "--warmup", "1", "--active", "2")
    assert result.returncode == 0, result.stderr
    pid_of = json.loads(pids.read_text())
    assert sorted(pid_of) == ["before", "held", "inside"]
    return out, pid_of, result.stderr


def _log_of(out: Path, pid: int) -> str:
    lines = (out / "npuprof.log").read_text().splitlines()
    return "\n".join(line for line in lines if f"[agent pid={pid} " in line)


def test_an_optimizer_that_takes_over_keeps_the_step_numbers_the_jobs_iterations(
    takeovers: tuple[Path, dict[str, int], str],
) -> None:
    """The second optimizer takes over at its third step: its first two were not counted, so every later
    step number was two below the job's iteration (--steps and the schedule then picked other steps).
    (TWO_STAGES is the child "before" of the job of takeovers, with its flags as they were.)"""
    out, pid_of, _ = takeovers
    [rank_dir] = _rank_dirs_of(out, pid_of["before"])
    assert _iterations_per_step(rank_dir) == {11: [11], 12: [12]}
    assert "2 earlier step(s) are counted too" in _log_of(out, pid_of["before"])


def test_a_takeover_inside_a_window_is_said_in_the_capture_record(
    takeovers: tuple[Path, dict[str, int], str],
) -> None:
    """An optimizer taking over while the first is still referenced: its first two steps are counted late,
    so a window that began among them lost its warm-up and first step (asked 2, got 1, said nothing), and
    a capture in flight got one step holding three iterations, also said nowhere but npuprof.log. Both are
    in the capture's record now, shown by the run's summary and by analyse. (The lost window is the child
    "inside" of the job of takeovers: TWO_STAGES two iterations later under a window two steps later, as
    it was with --skip-first 8; the capture in flight is the child "held": TWO_STAGES five iterations
    later, as it was with --skip-first 5 and its window's steps 6-9.)"""
    out, pid_of, lost_stderr = takeovers
    [rank_dir] = _rank_dirs_of(out, pid_of["inside"])
    assert _iterations_per_step(rank_dir) == {12: [12]}  # iterations 9-11 were one step to npuprof
    said = (
        "steps 10-11 of its window passed uncounted (the optimizer SGD took over counting): "
        "recorded from step 12"
    )
    assert capture_record(rank_dir)["detail"] == said
    assert said in " ".join(lost_stderr.split())
    [rank_dir] = _rank_dirs_of(out, pid_of["held"])
    assert _iterations_per_step(rank_dir) == {11: [11], 12: [12, 13, 14]}
    said = "step 12 holds 3 steps of the optimizer SGD, which took over counting steps then"
    assert (
        capture_record(rank_dir)["detail"] == said and capture_record(rank_dir)["last_step_partial"] is False
    )
    report = subprocess.run(
        [sys.executable, "-m", "npuprof", "analyse", str(rank_dir), "--format", "json"],
        capture_output=True, text=True, env=clean_env(), timeout=120,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr
    (rank,) = json.loads(report.stdout)["ranks"]
    assert rank["warnings"] == [f"its capture record says: {said}"]
    assert not any(s.get("partial") for s in rank["steps"])


COMPILE_LINE = '@torch.compile(fullgraph=True, backend="eager")'
COMPILED_STEP = f"""
import sys
import torch

sys.path.insert(0, {str(SCRIPTS)!r})
from trainer import PlainSGD  # a custom optimizer with its own step()

torch.manual_seed(0)
model = torch.nn.Linear(16, 1)
opt = PlainSGD(model.parameters(), 0.01)

{COMPILE_LINE}  # dynamo traces the step (no inductor: seconds)
def opt_step():
    opt.step()

for _ in range(12):
    opt.zero_grad()
    model(torch.randn(8, 16)).pow(2).mean().backward()
    opt_step()
print("weights", round(model.weight.sum().item(), 5))
import gc; gc.freeze()  # skip the exit-time collection over torch's objects (atexit runs before it)
"""


def test_an_optimizer_step_compiled_with_fullgraph_runs_and_step_on_counts_it(tmp_path: Path) -> None:
    """torch.compile(fullgraph=True) traced npuprof's step wrapper and failed the job on
    threading.get_ident: the compiled step now sees no npuprof code (so it is not counted, and the
    summary says why); --step-on the compiled function counts its calls."""
    script = _script(tmp_path, COMPILED_STEP)
    # the job's own result: the same steps run eagerly, here (dynamo's eager backend runs the same ops;
    # a third process would pay dynamo's import again)
    printed = io.StringIO()
    with torch.random.fork_rng(), contextlib.redirect_stdout(printed):
        exec(textwrap.dedent(COMPILED_STEP.replace(COMPILE_LINE, "")), {"__name__": "eager_job"})
    plain = _npuprof_run(tmp_path / "plain", script)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout == printed.getvalue()  # the same weights: the job's own result
    assert "torch.compile'd code is not seen" in " ".join(plain.stderr.split())
    counted = _npuprof_run(tmp_path / "counted", script, "--step-on", "__main__:opt_step")
    assert counted.returncode == 0, counted.stderr
    (rank_dir,) = rank_dirs(tmp_path / "counted")
    assert capture_record(rank_dir)["steps"] == [6, 7, 8]


SCALER = """
import torch
from torch import nn
from torch.profiler import record_function

INF_AT = {4, 5}  # iterations whose gradients overflow: GradScaler skips optimizer.step()

class Trainer:
    def __init__(self):
        torch.manual_seed(0)
        self.model = nn.Linear(8, 2)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.scaler = torch.amp.GradScaler("cpu")
        self.skipped = 0

    def iteration(self, i):
        with record_function(f"iteration_forward_{i}"):
            loss = self.model(torch.randn(4, 8)).pow(2).mean()
        if i in INF_AT:
            loss = loss * float("inf")
        self.opt.zero_grad()
        self.scaler.scale(loss).backward()
        before = self.scaler.get_scale()
        self.scaler.step(self.opt)
        self.scaler.update()
        self.skipped += self.scaler.get_scale() < before

t = Trainer()
for i in range(10):
    t.iteration(i)
assert t.skipped == len(INF_AT), t.skipped
"""


def test_a_step_gradscaler_skips_for_inf_still_counts(gan_and_scaler: tuple[Path, dict[str, int]]) -> None:
    """(SCALER is a forked child of the job of gan_and_scaler.)"""
    out, pid_of = gan_and_scaler
    [rank_dir] = _rank_dirs_of(out, pid_of["scaler"])
    per_step = _iterations_per_step(rank_dir)
    # iterations 4 and 5 skipped the optimizer; each still ends its step
    assert per_step == {3: [3], 4: [4], 5: [5], 6: [6], 7: [7]}, per_step
    optimizer_ranges = _optimizer_steps_per_step(rank_dir)
    assert [len(optimizer_ranges[n]) for n in sorted(optimizer_ranges)] == [1, 0, 0, 1, 1]


def test_a_child_forked_after_the_optimizer_says_what_it_counted(
    gan_and_scaler: tuple[Path, dict[str, int]],
) -> None:
    """A child forked after its parent made the optimizer (os.fork, multiprocessing's fork: Hogwild) and
    stepping it was never armed: at its end it said nothing of its steps, so a run whose workers trained 4
    steps each said "the most steps a process counted: 0", and with --dynamic it never started its watcher
    (a trigger "never began, the process ending first"). Each child here stepped once, itself or through a
    GradScaler. (FORKS_AFTER_THE_OPTIMIZER is a forked child of the job of gan_and_scaler.)"""
    out, pid_of = gan_and_scaler
    for how in ("plain", "scaled"):
        assert "steps counted in this process: 1" in _log_of(out, pid_of[f"forked_{how}"]), how
    assert "steps counted in this process: 0" in _log_of(out, pid_of["forks"])  # it made it, never stepped


def _own_sigterm_script(tmp_path: Path, install_early: bool) -> Path:
    """A loop that stops at the end of the step in which SIGTERM arrived, writes a marker and exits 3. Its
    handler is installed before torch is imported (npuprof's agent then installs its own on top) or after
    the optimizer exists (the script's replaces npuprof's)."""
    install = "signal.signal(signal.SIGTERM, lambda signum, frame: stop.append(signum))"
    return _script(
        tmp_path,
        f"""
        import signal, sys, time
        stop = []
        {install if install_early else ""}
        import torch
        from torch import nn

        model = nn.Linear(8, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        {"" if install_early else install}
        i = 0
        while not stop:
            opt.zero_grad()
            model(torch.randn(4, 8)).sum().backward()
            opt.step()
            i += 1
            if i == 4:
                print("capturing", flush=True)
            time.sleep(0.02)
        with open(sys.argv[1], "w") as f:
            f.write(f"stopped gracefully after {{i}} steps\\n")
        import gc; gc.freeze()  # skip the exit-time collection over torch's objects (atexit runs before it)
        sys.exit(3)
        """,
    )


def _start(out: Path, script: Path, marker: Path, *flags: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "npuprof",
            "run",
            "-o",
            str(out),
            "--no-analyse",
            *flags,
            "--",
            sys.executable,
            str(script),
            str(marker),
        ],
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _wait_for_line(proc: subprocess.Popen[str], needle: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if needle in line:
            return
        if not line and proc.poll() is not None:
            raise AssertionError(f"job ended before {needle!r}: {proc.stderr.read() if proc.stderr else ''}")
    raise AssertionError(f"no {needle!r} within {timeout} s")


@pytest.mark.parametrize("install_early", [False, True], ids=["after-torch", "before-torch"])
def test_a_script_with_its_own_sigterm_handler_stops_its_own_way(tmp_path: Path, install_early: bool) -> None:
    """SIGTERM to npuprof reaches the job; the script's handler decides (here: finish the step, exit 3);
    npuprof keeps what was recorded and passes the exit code through."""
    out, marker = tmp_path / "out", tmp_path / "marker"
    proc = _start(
        out,
        _own_sigterm_script(tmp_path, install_early),
        marker,
        "--skip-first",
        "2",
        "--warmup",
        "1",
        "--active",
        "1000",
    )
    try:
        _wait_for_line(proc, "capturing")
        time.sleep(0.3)
        os.kill(proc.pid, signal.SIGTERM)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 3, stderr
    assert marker.read_text().startswith("stopped gracefully"), stderr
    assert "Traceback" not in stderr
    [rank_dir] = rank_dirs(out)
    record = capture_record(rank_dir)
    assert record["steps"] and record["steps"][0] == 3, record  # skip 2, warm up 1: step 3 is recorded first
    load_trace(rank_dir)  # the steps recorded until the stop are there


# A plain-Python job (tests/_standin_jobs.py): its steps are the returns of train_step (--step-on), and the
# schedule never leaves its wait, where no torch is needed (the launcher's and the job's Ctrl-C are tested)
CTRL_C = """
import sys, time

def train_step(i):
    return i * 2

try:
    for i in range(100000):
        train_step(i)
        if i == 3:
            print("waiting", flush=True)
        time.sleep(0.02)
except KeyboardInterrupt:
    with open(sys.argv[1], "w") as f:
        f.write(f"interrupted at {i}\\n")
    raise
"""


def test_ctrl_c_while_the_schedule_waits(tmp_path: Path) -> None:
    """Ctrl-C in the wait phase: the script's KeyboardInterrupt runs, the launcher dies of SIGINT as the job
    did (so a shell loop stops), and nothing that looks like a capture is left."""
    out, marker = tmp_path / "out", tmp_path / "marker"
    proc = _start(out, _script(tmp_path, CTRL_C), marker, *STEP_ON, "--skip-first", "1", "--wait", "100000")
    try:
        _wait_for_line(proc, "waiting")
        os.kill(proc.pid, signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == -signal.SIGINT, (proc.returncode, stderr)
    assert marker.read_text().startswith("interrupted at"), stderr
    assert "npuprof" not in "".join(line for line in stderr.splitlines() if "Traceback" in line)
    assert rank_dirs(out) == []
    record = json.loads((out / "npuprof_run.json").read_text())
    assert record.get("captures", []) == [], record
