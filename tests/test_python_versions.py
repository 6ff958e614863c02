"""What differs between the Python versions npuprof supports (>= 3.10), shown on the one the tests run on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import capture_record, clean_env, load_trace, rank_dirs, run_script, sched


def test_run_works_with_a_signal_module_without_sigstkflt(tmp_path: Path) -> None:
    """Python names signal.SIGSTKFLT only from 3.11 on: on 3.10 the launcher's import read it and every
    `npuprof run` died of an AttributeError traceback before starting the job. Here the launcher runs with
    the name taken out of its signal module, as 3.10's is; the job runs and its record is written, and the
    signal is still passed on by its number where the C library knows it (Linux's 16)."""
    out = tmp_path / "out"
    launcher = (
        "import signal, sys\n"
        "vars(signal).pop('SIGSTKFLT', None)\n"
        "from npuprof import launch\n"
        "print('forwarded 16:', 16 in launch.FORWARDED_SIGNALS, file=sys.stderr)\n"
        f"sys.argv = ['npuprof', 'run', '-o', {str(out)!r}, '--', sys.executable, '-c', 'print(42)']\n"
        "from npuprof.cli.main import main\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", launcher], env=clean_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert "42" in done.stdout
    if sys.platform == "linux":
        assert "forwarded 16: True" in done.stderr
    assert json.loads((out / "npuprof_run.json").read_text())["exit_code"] == 0


CPROFILE_EACH_STEP = """
import cProfile, json, pstats, torch

def work(x):
    return (x @ x).sum()

model = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 8)
calls = 0
for i in range(10):  # capture: steps 6-8
    action = cProfile.Profile()  # as Lightning's AdvancedProfiler profiles each action
    action.enable()
    work(x)
    action.disable()
    calls += next(s[1] for f, s in pstats.Stats(action).stats.items() if f[2] == "work")
    model(x).sum().backward()
    opt.step()
    opt.zero_grad()
print("CALLS", calls)
"""


@pytest.mark.skipif(sys.version_info < (3, 12), reason="cProfile takes sys.monitoring's slot from 3.12 on")
def test_a_cprofile_the_job_enables_during_a_with_stack_capture_runs(tmp_path: Path) -> None:
    """On Python 3.12 torch's Python tracer (--with-stack) also held sys.monitoring's profiler slot while it
    recorded: the job's cProfile.enable() inside the capture raised "ValueError: Another profiling tool is
    already active" and the job died (exit 1, step 7 partial). The slot is freed as the capture starts: the
    job runs to its end, its profiler counts every call, and the capture keeps its Python frames."""
    done, out = run_script(tmp_path, CPROFILE_EACH_STEP, "--no-analyse", "--with-stack", *sched(5, 1, 3))
    assert done.returncode == 0, done.stderr
    assert "Another profiling tool" not in done.stderr, done.stderr
    assert "CALLS 10" in done.stdout
    (d,) = rank_dirs(out)
    record = capture_record(d)
    assert record["steps"] == [6, 7, 8] and record["status"] == "complete", record
    assert "missing" not in record["detail"], record
    frames = [e for e in load_trace(d)["traceEvents"] if e.get("cat") == "python_function"]
    assert sum("work" in e["name"] for e in frames) == 3, "one frame of work() a recorded step"


@pytest.mark.skipif(sys.version_info < (3, 12), reason="cProfile takes sys.monitoring's slot from 3.12 on")
def test_frames_lost_to_a_jobs_profile_hook_do_not_blame_cprofile_from_312_on(tmp_path: Path) -> None:
    """The note of a job's sys.setprofile ending the capture's Python frames said "a cProfile enabled or
    disabled there does it" on every Python; from 3.12 on cProfile uses sys.monitoring and leaves torch's
    tracer alone (the test above), so the note names what does it there."""
    job = (
        "import sys, torch\n"
        "model = torch.nn.Linear(8, 8); opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for i in range(10):\n"
        "    if i == 7:\n"
        "        sys.setprofile(None)\n"
        "    model(torch.randn(4, 8)).sum().backward(); opt.step(); opt.zero_grad()\n"
    )
    done, out = run_script(tmp_path, job, "--no-analyse", "--with-stack", *sched(5, 1, 3))
    assert done.returncode == 0, done.stderr
    (d,) = rank_dirs(out)
    detail = capture_record(d)["detail"]
    assert "Python frames (--with-stack) are missing from step 7 on" in detail, detail
    assert "cProfile" not in detail and "that calls sys.setprofile there does it" in detail, detail


NO_THREAD_AT_EXIT = """
import atexit, _thread, threading, torch

def refuse(*args, **kwargs):
    raise RuntimeError("can't create new thread at interpreter shutdown")

def shutting_down():  # as Python 3.12.0/3.12.1 from the start of the exit callbacks
    _thread.start_new_thread = refuse
    threading.Thread.start = refuse

model = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(4):  # the capture of steps 2-6 is under way when the job ends
    opt.zero_grad(); model(torch.randn(4, 8)).sum().backward(); opt.step()
atexit.register(shutting_down)  # runs before npuprof's (registered earlier) finalises the capture
"""


def test_a_capture_finalised_at_exit_is_handed_over_where_no_thread_can_start(tmp_path: Path) -> None:
    """Python 3.12.0 and 3.12.1 start no thread once the interpreter shuts down: a job that ended inside a
    capture with --memory-timeline (its snapshot copied on a thread of its own, and the first hand-over
    starting its thread) lost the capture: 'incomplete ... finalising failed: RuntimeError("can't create
    new thread at interpreter shutdown")', no memory timeline. The exit callback now does that work
    itself; shown here on any Python by refusing threads as those releases do."""
    flags = ("--no-analyse", "--with-stack", "--record-shapes", "--profile-memory")
    flags = (*flags, "--memory-timeline", "json")
    done, out = run_script(tmp_path, NO_THREAD_AT_EXIT, *flags, *sched(1, 1, 5))
    assert done.returncode == 0, done.stderr
    (d,) = rank_dirs(out)
    record = capture_record(d)
    assert record["status"] == "complete" and record["steps"] == [2, 3, 4], record
    assert "finalising failed" not in record["detail"], record
    assert (d / "memory_timeline.json").is_file(), sorted(p.name for p in d.iterdir())
