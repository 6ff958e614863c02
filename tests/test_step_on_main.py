"""`--step-on __main__:QUALNAME`: steps counted at the returns of a function or method the script itself
defines, before or after importing torch, under `python script.py`, `python -m pkg.mod` and torchrun, called
through references saved before the loop; a name the script never defines is reported with the closest ones.

Each run's schedule differs; the expected `ProfilerStep#N` are computed here from its flags, and each
recorded step must hold exactly the script's call number N (its `call#N` range): the first call is step 0,
so a missed or doubled return would shift them."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
from conftest import (
    SCRIPTS,
    capture_record,
    clean_env,
    forked_job,
    load_trace,
    npuprof,
    rank_dirs,
    sched,
    torch_native_abort,
)

from npuprof.agent.steps import missing_target_message, similar_names

BEFORE = SCRIPTS / "step_before_torch.py"  # defines train_step and Trainer before `import torch`
AFTER = SCRIPTS / "step_after_torch.py"  # the same, after `import torch`
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]


def _expected(skip_first: int, warmup: int, active: int) -> list[int]:
    first = skip_first + warmup  # steps 0..skip_first-1 skipped, then warm-up, then recorded
    return list(range(first, first + active))


def _run(
    out: Path, target: str, schedule: tuple[int, int, int], command: list[str], **kwargs
) -> subprocess.CompletedProcess[str]:
    flags = ["--no-analyse", "--no-gzip", "--step-on", f"__main__:{target}", *sched(*schedule)]
    return npuprof("run", "-o", str(out), *flags, "--", *command, timeout=240, **kwargs)


def _package(tmp: Path, script: Path) -> Path:
    """tmp/pkg/<script> as a module of a tiny package, for `python -m pkg.<name>`."""
    pkg = tmp / "pkg"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("")
    shutil.copy(script, pkg / script.name)
    return tmp


def _spans(events: list[dict], prefix: str) -> dict[str, tuple[float, float]]:
    return {
        e["name"]: (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
        for e in events
        if e.get("ph") == "X" and str(e.get("name", "")).startswith(prefix)
    }


def _calls_in_steps(rank_dir: Path) -> dict[int, list[int]]:
    """For each recorded ProfilerStep#N: the script's call numbers whose `call#k` range lies inside it."""
    events = load_trace(rank_dir)["traceEvents"]
    calls = _spans(events, "call#")
    found: dict[int, list[int]] = {}
    for name, (start, end) in _spans(events, "ProfilerStep#").items():
        inside = [int(c.split("#")[1]) for c, (s, e) in calls.items() if start <= s and e <= end]
        found[int(name.split("#")[1])] = sorted(inside)
    return found


def _assert_steps_are_calls(rank_dir: Path, expected: list[int]) -> None:
    assert _calls_in_steps(rank_dir) == {step: [step] for step in expected}


# ---- python script.py ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def before_function(tmp_path_factory) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("before_function") / "out"
    proc = _run(out, "train_step", (2, 1, 2), [sys.executable, str(BEFORE), "6"])
    return proc, out


def test_a_function_defined_before_torch_counts_through_a_saved_reference(before_function) -> None:
    proc, out = before_function
    assert proc.returncode == 0, proc.stderr
    (d,) = rank_dirs(out)
    _assert_steps_are_calls(d, _expected(2, 1, 2))
    log = (out / "npuprof.log").read_text()
    assert log.count("steps counted at each return of __main__:train_step") == 1
    assert "not found" not in proc.stderr + log


@pytest.fixture(scope="module")
def after_method(tmp_path_factory) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("after_method") / "out"
    proc = _run(out, "Trainer.step", (1, 0, 3), [sys.executable, str(AFTER), "5"])
    return proc, out


def test_a_method_defined_after_torch_counts_through_a_saved_bound_method(after_method) -> None:
    proc, out = after_method
    assert proc.returncode == 0, proc.stderr
    (d,) = rank_dirs(out)
    _assert_steps_are_calls(d, _expected(1, 0, 3))
    assert "steps counted at each return of __main__:Trainer.step" in (out / "npuprof.log").read_text()


# ---- python -m pkg.mod -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("script", "target", "schedule"),
    [(BEFORE, "Trainer.step", (3, 1, 1)), (AFTER, "train_step", (0, 1, 2))],
    ids=["before-torch-method", "after-torch-function"],
)
def test_python_dash_m(tmp_path: Path, script: Path, target: str, schedule: tuple[int, int, int]) -> None:
    root = _package(tmp_path, script)
    command = [sys.executable, "-m", f"pkg.{script.stem}", str(sum(schedule) + 1)]
    proc = _run(tmp_path / "out", target, schedule, command, cwd=root, env=clean_env(PYTHONPATH=str(root)))
    assert proc.returncode == 0, proc.stderr
    (d,) = rank_dirs(tmp_path / "out")
    _assert_steps_are_calls(d, _expected(*schedule))


# ---- torchrun, 2 ranks (gloo) ----------------------------------------------------------------------
# One job for both scripts: rank 0 runs BEFORE, rank 1 AFTER (the same model: their all-reduces pair up),
# each as the __main__ of its worker (the shell execs python on it)
TORCHRUN_SCRIPTS = {0: BEFORE, 1: AFTER}
TORCHRUN_SCHEDULE = (2, 0, 2)


@pytest.fixture(scope="module")
def torchrun_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("torchrun") / "out"
    before, after = (shlex.quote(str(TORCHRUN_SCRIPTS[rank])) for rank in (0, 1))
    pick = f'if [ "$RANK" = 0 ]; then exec "$0" {before} 5; else exec "$0" {after} 5; fi'
    command = [*TORCHRUN, "--no-python", "sh", "-c", pick, sys.executable]
    for _attempt in range(2):  # one retry, only for torch's own aborts (conftest)
        proc = _run(out, "train_step", TORCHRUN_SCHEDULE, command)
        if proc.returncode == 0 or not torch_native_abort(proc.stderr):
            break
        shutil.rmtree(out, ignore_errors=True)
    return proc, out


@pytest.mark.torchrun
@pytest.mark.parametrize("rank", [0, 1], ids=["before-torch", "after-torch"])
def test_torchrun_workers_count_their_steps(
    torchrun_job: tuple[subprocess.CompletedProcess[str], Path], rank: int
) -> None:
    proc, out = torchrun_job
    assert proc.returncode == 0, proc.stderr
    dirs = {capture_record(d)["rank"]: d for d in rank_dirs(out)}
    assert sorted(dirs) == [0, 1]  # the workers': torchrun's own process records nothing
    assert [p.name for p in dirs[rank].glob("profiler_info*.json")] == [f"profiler_info_{rank}.json"]
    _assert_steps_are_calls(dirs[rank], _expected(*TORCHRUN_SCHEDULE))
    log = (out / "npuprof.log").read_text()
    assert f"agent ready in {TORCHRUN_SCRIPTS[rank]} (rank {rank}," in log, log  # the script it names
    assert log.count("steps counted at each return of __main__:train_step") == 2
    # torchrun's own process has no train_step: said in the log, not on the terminal (the workers found it)
    assert "not found" not in proc.stderr


# ---- a name the script never defines ---------------------------------------------------------------
def test_a_missing_target_is_reported_with_the_closest_names(tmp_path: Path) -> None:
    script = tmp_path / "serve.py"  # no torch needed to define nothing
    script.write_text("def train_step():\n    pass\n\n\nclass Trainer:\n    def step(self):\n        pass\n")
    proc = _run(tmp_path / "out", "train_stpe", (0, 0, 1), [sys.executable, str(script)])
    assert proc.returncode == 0, proc.stderr
    assert rank_dirs(tmp_path / "out") == []
    text = " ".join(proc.stderr.split())
    assert "no capture was written" in text
    assert "train_stpe not found in __main__ (serve.py)" in text, proc.stderr
    assert "similar names there: train_step" in text, proc.stderr


REDEFINED = """
import torch

CALLS = []


def train_step(model, opt, x):  # a first version, replaced below before any call
    raise AssertionError("the first train_step is never called")


def train_step(model, opt, x):  # noqa: F811
    with torch.profiler.record_function(f"call#{len(CALLS)}"):
        CALLS.append(1)
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()


model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(6):
    train_step(model, opt, torch.randn(4, 8))
import gc; gc.freeze()  # skip the exit-time collection over torch's objects
"""


@pytest.fixture(scope="module")
def redefined_and_raced(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path, dict[str, int]]:
    """REDEFINED and RACED as two forked children of one job (forked_job, main_keeps), each the __main__ of
    its process, `--step-on __main__:train_step`, skip 2, warm up 1, record 2 (the flags each had as a job of
    its own): the result, the output directory and each scenario's pid."""
    root = tmp_path_factory.mktemp("redefined_and_raced")
    scenarios = {"redefined": REDEFINED, "raced": RACED}
    command, pids = forked_job(root, scenarios, main_keeps="train_step")
    proc = _run(root / "out", "train_step", (2, 1, 2), command)
    return proc, root / "out", json.loads(pids.read_text()) if pids.exists() else {}


def _captures_of(out: Path, pid: int) -> list[Path]:
    return [d for d in rank_dirs(out) if capture_record(d)["pid"] == pid]


def _log_of(out: Path, pid: int) -> str:
    lines = (out / "npuprof.log").read_text().splitlines()
    return "\n".join(line for line in lines if f"[agent pid={pid} " in line)


def test_a_function_defined_again_is_followed(redefined_and_raced) -> None:
    """The script binds the name twice: the first def woke the agent, the second replaced its wrapper;
    the steps are the second function's returns (they were not counted at all). (REDEFINED is the child
    "redefined" of the job of redefined_and_raced, with its flags as they were.)"""
    proc, out, pid_of = redefined_and_raced
    assert proc.returncode == 0, proc.stderr
    (rank_dir,) = _captures_of(out, pid_of["redefined"])
    _assert_steps_are_calls(rank_dir, _expected(2, 1, 2))


def test_a_name_first_bound_to_none_is_named_so(tmp_path: Path) -> None:
    script = tmp_path / "train.py"  # no torch needed: no step is ever counted
    script.write_text(
        "train_step = None\n\n\ndef train_step():\n    pass\n\n\nfor _ in range(3):\n    train_step()\n"
    )
    proc = _run(tmp_path / "out", "train_step", (0, 0, 1), [sys.executable, str(script)])
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stderr.split())
    assert "train_step is None in __main__ (train.py) at its first binding, not a function" in text, text
    assert "no `train_step = None` before its def" in text and "not found" not in text


# what torch.jit.script leaves of each function it compiles: a copy of the script's globals, in a cycle
HOLDER = """class Compiled:
    pass


jit = Compiled()
jit.cycle, jit.resolution_globals = jit, dict(globals())
"""


HELD = """
import gc

gc.disable()  # the cycle below is freed at a full collection, which a short job may never reach


HOLDER
del jit


def train_step():
    pass


CALLS_BEFORE_A_COLLECTION
for _ in range(12):
    train_step()
""".replace("HOLDER\n", HOLDER)


def test_a_definition_while_the_placeholder_is_held_elsewhere_is_named_so(tmp_path: Path) -> None:
    """helper-325: a `@torch.jit.script` function defined before train_step copies the script's globals,
    npuprof's placeholder with them, into a reference cycle: the def freed nothing, the agent never woke,
    and the run's end said "no process of the job defined train_step in its __main__" of a script that
    did. The end now says what held it and how to avoid it."""
    script = tmp_path / "train.py"  # no torch needed: no step is ever counted
    script.write_text(HELD.replace("CALLS_BEFORE_A_COLLECTION", ""))
    proc = _run(tmp_path / "out", "train_step", (5, 1, 3), [sys.executable, str(script)])
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stderr.split())
    assert (
        "--step-on __main__:train_step: train_step was defined in __main__ (train.py) while something else "
        "held npuprof's placeholder for it" in text
    ), text
    assert "define train_step before the script's first @torch.jit.script function" in text, text
    assert "no process of the job defined" not in text and "agent failed" not in text, text


def test_a_definition_seen_at_a_later_collection_says_earlier_calls_went_uncounted(tmp_path: Path) -> None:
    """helper-325: the placeholder held elsewhere is freed at a full collection: the agent woke there,
    mid-run, and counted step 0 at the next call, silently (a capture said steps 6-8 of the script's calls
    16-18).
    Each collection now looks for the name bound: the agent wakes at the first one after the def and says
    that earlier calls went uncounted. One call before the collection, 12 after: 12 counted."""
    script = tmp_path / "train.py"
    script.write_text(HELD.replace("CALLS_BEFORE_A_COLLECTION", "train_step()\ngc.collect()"))
    proc = _run(tmp_path / "out", "train_step", (2, 1, 2), [sys.executable, str(script)])
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stderr.split())
    assert (
        "--step-on __main__:train_step: npuprof saw the definition of train_step in __main__ (train.py) "
        "only at a garbage collection after it" in text
    ), text
    assert "calls made before were not counted" in text, text
    log = (tmp_path / "out" / "npuprof.log").read_text()
    assert "steps counted in this process: 12" in log, log
    assert len(rank_dirs(tmp_path / "out")) == 1, text


RACED = """
import gc
import threading

entered, defined = threading.Event(), threading.Event()


def slow(phase, info):  # the job's own gc callback, waiting (on a log file, say) in a worker's collection
    if phase == "start" and threading.current_thread().name == "collector" and not defined.is_set():
        entered.set()
        defined.wait(60)


gc.callbacks.append(slow)
collector = threading.Thread(target=gc.collect, name="collector")
collector.start()
entered.wait(60)


def train_step():
    pass


defined.set()
collector.join()
for _ in range(12):
    train_step()
"""


def test_a_definition_while_another_thread_collects_is_not_said_seen_late(redefined_and_raced) -> None:
    """The placeholder freed by the script's def while another thread's collection ran (its callbacks or
    finalizers let go of the GIL) was taken for one freed by that collection: the run's end said npuprof
    saw train_step only at a collection after its def, calls before uncounted, and to define it before
    the first @torch.jit.script function, of a job with no jit that had every call counted. (RACED is the
    child "raced" of the job of redefined_and_raced, with its flags as they were: nothing of the run says
    it.)"""
    proc, out, pid_of = redefined_and_raced
    assert proc.returncode == 0, proc.stderr
    assert "garbage collection" not in proc.stderr and "not counted" not in proc.stderr, proc.stderr
    log = _log_of(out, pid_of["raced"])
    assert "steps counted in this process: 12" in log, log
    assert len(_captures_of(out, pid_of["raced"])) == 1, proc.stderr


# A schedule whose window never begins in the plain-Python jobs below (12 calls; step 12 begins at the 12th
# return, and would be recorded as the partial step after it under --skip-first 12), which read no
# capture: the agent wakes, counts and logs as under a window within them, and never imports torch for a
# capture (~3 CPU-s a job; tests/_standin_jobs.py)
PAST_THE_END = (13, 0, 1)

PAIRED = """
import gc

gc.disable()
phases = []


def mine(phase, info):  # the job's own gc callback, after npuprof's: a GC pause timer, say
    phases.append(phase)


gc.callbacks.append(mine)


HOLDER


def train_step():
    pass


gc.collect()
for _ in range(12):
    train_step()
print("phases:", phases)
""".replace("HOLDER\n", HOLDER)


def test_the_jobs_own_gc_callback_gets_both_phases_of_the_collection_npuprof_wakes_at(tmp_path: Path) -> None:
    """npuprof's gc.callbacks entry took itself out of the list at the collection where it found the name
    bound, while Python was calling that list: the job's own callback after it moved into its place and
    was skipped, so it got that collection's 'stop' without its 'start' (a GC pause timer measured from
    the collection before)."""
    script = tmp_path / "train.py"
    script.write_text(PAIRED)
    proc = _run(tmp_path / "out", "train_step", PAST_THE_END, [sys.executable, str(script)])
    assert proc.returncode == 0, proc.stderr
    assert "phases: ['start', 'stop']\n" in proc.stdout, proc.stdout
    assert "only at a garbage collection after it" in " ".join(proc.stderr.split()), proc.stderr
    log = (tmp_path / "out" / "npuprof.log").read_text()
    assert "steps counted in this process: 12" in log, log


BOUND_IN_A_CALLBACK = """
import gc

gc.disable()
phases, bound = [], []


def step_function():
    pass


def binder(phase, info):  # a callback of the job's that binds the step function, while Python calls the list
    if phase == "start" and not bound:
        bound.append(True)
        globals()["train_step"] = step_function


def mine(phase, info):  # the job's own callback after it: a GC pause timer, say
    phases.append(phase)


gc.callbacks.extend([binder, mine])
gc.collect()
for _ in range(12):
    train_step()
print("phases:", phases)
"""


def test_a_name_bound_inside_a_gc_callback_skips_no_callback_after_it(tmp_path: Path) -> None:
    """The placeholder freed while a collection calls gc.callbacks (the name bound by a callback, or by
    another thread while one collects) took npuprof's entry out of that list mid-call: the callback after
    the binder moved into its place and was skipped, getting that collection's 'stop' without its 'start'."""
    script = tmp_path / "train.py"
    script.write_text(BOUND_IN_A_CALLBACK)
    proc = _run(tmp_path / "out", "train_step", PAST_THE_END, [sys.executable, str(script)])
    assert proc.returncode == 0, proc.stderr
    assert "phases: ['start', 'stop']\n" in proc.stdout, proc.stdout
    log = (tmp_path / "out" / "npuprof.log").read_text()
    assert "steps counted in this process: 12" in log, log


SCRIPTED = """
import gc

gc.disable()


class ScriptFunction:  # what @torch.jit.script makes: an object, its compilation copying the globals
    def __init__(self, fn):
        self.fn, self.cycle, self.resolution_globals = fn, self, dict(fn.__globals__)

    def __call__(self, *args):
        return self.fn(*args)


@ScriptFunction
def train_step():
    pass


COLLECT
for _ in range(12):
    train_step()
"""


@pytest.mark.parametrize("collect", ["", "gc.collect()"])
def test_a_scripted_step_function_is_refused_as_such_not_told_to_come_first(
    tmp_path: Path, collect: str
) -> None:
    """helper-325: --step-on __main__:jstep naming a @torch.jit.script function: its own compilation holds
    the placeholder, and the run's end said "define jstep before the script's first @torch.jit.script
    function" (itself); the agent's refusal of a ScriptFunction object is said instead, and a collection
    that wakes the agent adds no word of calls uncounted."""
    script = tmp_path / "train.py"  # no torch needed: no step is ever counted
    script.write_text(SCRIPTED.replace("COLLECT", collect))
    proc = _run(tmp_path / "out", "train_step", (5, 1, 3), [sys.executable, str(script)])
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stderr.split())
    assert (
        "--step-on __main__:train_step: names a ScriptFunction object, not a function: name the function or "
        "method that makes one step; no steps counted" in text
    ), text
    assert "placeholder" not in text and "before the script's first" not in text, text


REDEFINED_WHILE_HELD = """
import gc

gc.disable()  # the cycle below is freed at a full collection, which a short job may never reach


def train_step():
    pass


train_step()


HOLDER
del jit


def train_step():
    pass


for _ in range(12):
    train_step()
""".replace("HOLDER\n", HOLDER)


def test_a_step_function_defined_again_while_its_wrapper_is_held_is_said_not_followed(tmp_path: Path) -> None:
    """helper-325: npuprof's wrapper of train_step held by a copy of the script's globals (a @torch.jit.script
    function defined after it): a second def of train_step freed nothing, its 12 calls went uncounted, and
    the run's end spoke of a job that "counted 1 step" only. The process says at exit that the new
    function was not followed, and why."""
    script = tmp_path / "train.py"
    script.write_text(REDEFINED_WHILE_HELD)
    proc = _run(tmp_path / "out", "train_step", (5, 1, 3), [sys.executable, str(script)])
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stderr.split())
    assert (
        "--step-on __main__:train_step was bound again while something else still held npuprof's wrapper of "
        "the function before" in text
    ), text
    assert "the new function was not followed and its calls were not counted" in text, text
    assert "steps counted in this process: 1\n" in (tmp_path / "out" / "npuprof.log").read_text()


def test_too_few_steps_are_counted_in_the_reason(tmp_path: Path) -> None:
    script = tmp_path / "train.py"  # no torch needed: the schedule's window is never reached
    script.write_text("def train_step():\n    pass\n\n\nfor _ in range(3):\n    train_step()\n")
    proc = _run(tmp_path / "out", "train_step", (4, 1, 2), [sys.executable, str(script)])
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stderr.split())
    assert "the schedule needs 7 steps (one step is one __main__:train_step()" in text, text
    assert "the most steps a process counted: 3)" in text, text
    # its 3 steps hold the warm-up step and the 2 recorded ones when the schedule skips none
    assert "counted: 3): --skip-first 0 records within the steps it counted." in text, text


def test_a_step_function_defined_and_never_called_is_named_as_never_called(tmp_path: Path) -> None:
    """helper-130: --step-on __main__:Trainer.step where the script calls a subclass's own step (or a function
    it defines and never calls): the reason was "the job ended before the schedule's first capture ... needs
    9 steps", as if it had counted a few; no process counted one, which the reason now says."""
    script = tmp_path / "train.py"  # no torch needed: no step is ever counted
    script.write_text(
        "class Trainer:\n    def step(self):\n        pass\n\n\n"
        "class Fast(Trainer):\n    def step(self):\n        pass\n\n\n"
        "for _ in range(12):\n    Fast().step()\n"
    )
    proc = _run(tmp_path / "out", "Trainer.step", (5, 1, 3), [sys.executable, str(script)])
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stderr.split())
    assert "no step was counted: __main__:Trainer.step never returned in the job" in text, text
    assert "schedule needs" not in text, text


def test_a_job_that_failed_after_the_def_and_before_a_call_is_not_told_of_a_subclass(tmp_path: Path) -> None:
    """helper-131: a job that failed after defining its --step-on function and before calling it (the model
    did not fit) was told its function was never called because "a subclass's method that overrides it, or
    another function the script calls instead, is not it": its own error is the news, as for the default
    trigger."""
    script = tmp_path / "train.py"
    script.write_text("def train_step():\n    pass\n\n\nraise MemoryError('the model did not fit')\n")
    proc = _run(tmp_path / "out", "train_step", (0, 0, 1), [sys.executable, str(script)])
    assert proc.returncode == 1, proc.stderr
    text = " ".join(proc.stderr.split())
    assert "the job failed (exit code 1) and no step was counted: __main__:train_step never returned" in text
    assert "if it failed before training, its own error output says why" in text, text


@pytest.mark.parametrize(
    ("script", "code"),
    [(None, 2), ("def helper():\n    pass\n\n\nraise SystemError('boom')\ndef train_step():\n    pass\n", 1)],
    ids=["no-such-script", "raised-before-the-def"],
)
def test_a_job_that_failed_first_gets_a_hint_about_its_failure(
    tmp_path: Path, script: str | None, code: int
) -> None:
    path = tmp_path / "train.py"
    if script is not None:
        path.write_text(script)
    proc = _run(tmp_path / "out", "train_step", (0, 0, 1), [sys.executable, str(path)])
    assert proc.returncode == code
    text = " ".join(proc.stderr.split())
    assert f"the job failed (exit code {code}) before any of its processes defined train_step" in text, text
    assert "its own error output says why" in text and "not found" not in text


# ---- the names suggested ---------------------------------------------------------------------------
def test_similar_names_come_from_the_module_itself() -> None:
    module = types.ModuleType("script")
    exec(
        "import os\nfrom os.path import join\n"
        "def train_step(): pass\ndef evaluate(): pass\n"
        "class Trainer:\n    def step(self): pass\n    @staticmethod\n    def stop(): pass\n"
        "    size = 3\n",
        vars(module),
    )
    assert similar_names(module, "train_stp") == ["train_step"]
    assert sorted(similar_names(module, "Trainer.setp")) == ["Trainer.step", "Trainer.stop"]  # a tie
    assert similar_names(module, "join") == []  # imported, not defined there
    assert similar_names(module, "zzz") == []
    message = missing_target_message(module, "step", "script:step")
    assert message.startswith("--step-on script:step: step not found in script; no steps counted")
    assert message.endswith("similar names there: Trainer.step")  # the same last name


def test_a_property_is_named_as_one() -> None:
    """helper-124: --step-on __main__:T.pstep on a @property said "T.pstep not found ... similar names:
    T.sstep"; it is there, a property, which cannot be wrapped."""
    module = types.ModuleType("script")
    exec("class T:\n    @property\n    def pstep(self): return 1\n    def sstep(self): pass\n", vars(module))
    message = missing_target_message(module, "T.pstep", "script:T.pstep")
    assert message == (
        "--step-on script:T.pstep: T.pstep in script is a property, not a function; no steps counted; name "
        "the function it calls, or a method"
    ), message


def test_a_name_defined_inside_a_function_is_pointed_at() -> None:
    module = types.ModuleType("script")
    exec(
        "def main():\n    def helper():\n        def step(): pass\n    return helper\n"
        "class Runner:\n    def run(self):\n        def step(): pass\n",
        vars(module),
    )
    for obj in vars(module).values():
        if callable(obj):
            obj.__module__ = "script"
    message = missing_target_message(module, "step", "script:step")
    assert message.endswith(
        "step not found in script; no steps counted; a function step is defined inside main(), Runner.run(), "
        "which cannot be named (move it to module level)"
    ), message


# ---- the bootstrap's watch on every Python this machine has ----------------------------------------
FAKE_ENTRY = """
import sys
def on_trigger(name, module):
    original = module.train_step
    def counted(*args):
        module.COUNT.append(original(*args))
    module.train_step = counted
    print("woken", name, file=sys.stderr)
def on_main_target_missing(module, step_on):
    print("missing", step_on, file=sys.stderr)
def on_main_target_held(module, step_on):
    print("held", step_on, file=sys.stderr)
def on_main_target_seen_late(module, step_on):
    print("late", step_on, file=sys.stderr)
"""
JOB = """
COUNT = []
def train_step(i):
    return i
saved = train_step
for i in range(3):
    saved(i)
print(COUNT)
"""


@pytest.mark.parametrize("version", ["3.10", "3.11", "3.12", "3.13"])
def test_the_bootstrap_wakes_the_agent_at_the_def_on_each_python(tmp_path: Path, version: str) -> None:
    """The bootstrap alone, with an agent stand-in that wraps train_step when woken: the wrapper is in
    place before the statement after the `def`, so a reference saved there counts; a name never defined
    is handed to the agent at exit."""
    python = _python(version)
    fake = tmp_path / "fake" / "npuprof" / "agent"
    fake.mkdir(parents=True)
    (fake.parent / "__init__.py").write_text("")
    (fake / "__init__.py").write_text("")
    (fake / "entry.py").write_text(FAKE_ENTRY)
    (tmp_path / "job.py").write_text(JOB)
    bootstrap = Path(__file__).resolve().parent.parent / "npuprof" / "_bootstrap"
    env = clean_env(
        PYTHONPATH=f"{bootstrap}{os.pathsep}{tmp_path / 'fake'}",
        NPUPROF_CONFIG="{}",
        NPUPROF_TRIGGERS="__main__:train_step",
    )
    run = {"env": env, "cwd": tmp_path, "capture_output": True, "text": True, "timeout": 60}
    job = subprocess.run([python, "job.py"], **run)
    assert (job.returncode, job.stdout.strip()) == (0, "[0, 1, 2]"), job.stderr
    assert job.stderr.splitlines() == ["woken __main__"]
    idle = subprocess.run([python, "-c", "x = 1"], **run)
    assert (idle.returncode, idle.stderr.splitlines()) == (0, ["missing __main__:train_step"])
    # the placeholder held by a copy of the globals (as torch.jit.script's): woken at the next collection
    # and said late, or said held at exit when none came (helper-325)
    for collect, said in (("gc.collect()\n", ["woken __main__", "late __main__:train_step"]), ("", [])):
        (tmp_path / "held.py").write_text(HELD.replace("CALLS_BEFORE_A_COLLECTION", f"COUNT = []\n{collect}"))
        held = subprocess.run([python, "held.py"], **run)
        assert (held.returncode, held.stderr.splitlines()) == (0, said or ["held __main__:train_step"])


def _python(version: str) -> str:
    """pyenv's Python ``version`` (this machine has 3.10 to 3.13), else one on PATH, else skip."""
    pyenv = sorted(Path.home().glob(f".pyenv/versions/{version}.*/bin/python{version}"))
    if pyenv:
        return str(pyenv[-1])
    if sys.version_info[:2] == tuple(int(part) for part in version.split(".")):
        return sys.executable
    on_path = shutil.which(f"python{version}")
    if on_path is None:
        pytest.skip(f"no Python {version} on this machine")
    return on_path


def test_a_step_function_run_in_spawned_workers_is_told_as_such(tmp_path: Path) -> None:
    """helper-125: with mp.spawn the workers run the script as __mp_main__, where npuprof does not watch; the
    first process defined the function and never called it, and the summary blamed the schedule ("the job
    ended before the schedule's first capture"). The worker is started as torch.multiprocessing.spawn starts
    it (multiprocessing.get_context("spawn").Process), without torch: npuprof wraps nothing in __mp_main__,
    and a train_step it did wrap would count its 8 returns without torch (the agent needs none to wake)."""
    script = tmp_path / "spawned.py"
    script.write_text(
        "import multiprocessing as mp\n"
        "def train_step(losses):\n"
        "    losses.append(len(losses))\n"
        "def worker(rank):\n"
        "    losses = []\n"
        "    for _ in range(8):\n"
        "        train_step(losses)\n"
        "if __name__ == '__main__':\n"
        "    p = mp.get_context('spawn').Process(target=worker, args=(0,))\n"
        "    p.start(); p.join()\n"
        "    raise SystemExit(p.exitcode)\n"
    )
    proc = _run(tmp_path / "out", "train_step", (1, 0, 2), [sys.executable, str(script)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = " ".join(proc.stderr.split())
    assert "no capture was written" in text and "started by multiprocessing's spawn" in text, text
    assert "schedule" not in text.split("no capture was written", 1)[1], text
