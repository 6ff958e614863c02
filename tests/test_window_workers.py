"""A time window opens in the training process only: a DataLoader worker (spawned: it imports torch and
wakes npuprof's agent too) records nothing and ends as it would without npuprof (a real run)."""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_record, rank_dirs, run_script

JOB = """
import os, time, torch
from torch.utils.data import DataLoader, TensorDataset

if __name__ == "__main__":
    data = TensorDataset(torch.randn(64, 16), torch.randn(64, 4))
    loader = DataLoader(data, batch_size=8, num_workers=1, multiprocessing_context="spawn",
                        persistent_workers=True)
    model = torch.nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    print(os.getpid(), flush=True)
    end = time.monotonic() + 3.5
    while time.monotonic() < end:
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad(); loss.backward(); opt.step()
            time.sleep(0.02)
"""


def test_a_time_window_records_the_training_process_not_its_dataloader_worker(tmp_path: Path) -> None:
    result, out = run_script(tmp_path, JOB, "--delay", "1.5", "--duration", "0.5")
    assert result.returncode == 0, result.stderr
    assert "Exception ignored" not in result.stderr, result.stderr
    pid = result.stdout.split()[0]
    (rank_dir,) = rank_dirs(out)
    assert f"_{pid}_" in rank_dir.name, rank_dir.name
    assert capture_record(rank_dir)["status"] == "complete"


def _torch_file(*parts: str) -> str:
    """The path of one of torch's own modules, as its ``__file__`` (a frame's co_filename) gives it, found
    without importing torch (1.7 CPU-s in this test process: only the file names are at stake here)."""
    spec = importlib.util.find_spec("torch")  # a top-level package: found, not imported
    assert spec is not None and spec.submodule_search_locations
    path = os.path.join(spec.submodule_search_locations[0], *parts)
    assert os.path.isfile(path), path
    return path


def test_the_timer_never_signals_into_distributed_set_up_or_a_spawn_parent() -> None:
    """A --delay kick (a signal every 0.2 s) broke torch.distributed's connect with EINTR (c10d retried
    with a growing back-off: rank start-up 9 s -> 14 s), and opened an empty window in a
    torch.multiprocessing.spawn parent that only waits for its ranks; a rank (spawn's _wrap) may be
    kicked once it is past its set-up."""
    from npuprof.agent.window_plan import in_a_wait_a_signal_breaks

    c10d = _torch_file("distributed", "distributed_c10d.py")
    spawn = _torch_file("multiprocessing", "spawn.py")
    user = ("/home/me/train.py", "main")
    assert "init_process_group" in in_a_wait_a_signal_breaks([(c10d, "init_process_group"), user])
    assert "spawn" in in_a_wait_a_signal_breaks([(spawn, "join"), (spawn, "start_processes"), user])
    assert in_a_wait_a_signal_breaks([(c10d, "all_reduce"), user]) == ""  # a collective in the loop
    assert in_a_wait_a_signal_breaks([user, (spawn, "_wrap")]) == ""  # a rank's own code


def test_a_very_short_window_is_not_closed_before_its_profiler_starts() -> None:
    """--duration 0.001 wrote no capture: the window closed between two looks at the clock, before the
    profiler started; the duration counts from the start of recording."""
    import time

    from npuprof.agent.window_plan import WindowPlan
    from npuprof.config import ProfileConfig

    class Log:
        def info(self, message: str) -> None:
            pass

    plan = WindowPlan(ProfileConfig(duration=0.001), Log())
    plan.refresh(0)
    time.sleep(0.01)
    plan.refresh(0)  # the controller looks again before it opens the profiler
    assert plan.action_at(0).name == "RECORD"
    plan.recording_started()
    time.sleep(0.01)
    plan.refresh(0)
    assert plan.action_at(0).name == "NONE"


def _write_module(folder: Path, name: str, body: str) -> None:
    (folder / f"{name}.py").write_text(body)


IMPORT_THAT_WAITS = """
import threading
began = threading.Event()
go_on = threading.Event()
began.set()
go_on.wait(10)
"""


def test_no_import_of_another_thread_begins_while_the_kick_imports_what_a_start_needs(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """The kick's own import holds back another thread's new one: torch._inductor (a profiler's start) and
    torch._dynamo (an optimizer made in a worker thread) imported side by side closed a cycle of module
    locks, and Python raised _DeadlockError (helper-150)."""
    from npuprof.agent.frames import imported_alone

    _write_module(tmp_path, "kick_late_import", "X = 1\n")
    _write_module(
        tmp_path,
        "kick_first_import",
        "import threading, importlib, sys\n"
        "began = threading.Event()\n"
        "def other():\n"
        "    importlib.import_module('kick_late_import')\n"
        "    began.set()\n"
        "worker = threading.Thread(target=other)\n"
        "worker.start()\n"
        "HELD_BACK = not began.wait(0.5)\n",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert imported_alone(("kick_first_import",))
    first = sys.modules["kick_first_import"]
    first.worker.join(10)
    assert first.HELD_BACK, "another thread imported while the kick's import ran"
    assert "kick_late_import" in sys.modules  # and it did once the kick was done


def test_the_kick_starts_nothing_when_another_thread_begins_an_import_after_its_first_look(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """The gap between "no other thread imports" and the profiler's start (helper-150's _DeadlockError):
    a thread that begins an import in it is seen, and the window opens at a later kick."""
    from npuprof.agent import window_plan

    _write_module(tmp_path, "kick_slow_import", IMPORT_THAT_WAITS)
    monkeypatch.syspath_prepend(str(tmp_path))
    worker = threading.Thread(target=importlib.import_module, args=("kick_slow_import",))

    def first_look_then_an_import_begins() -> bool:
        if worker.ident is not None:
            return False
        worker.start()
        deadline = time.monotonic() + 10
        # in sys.modules before its first line runs: waited for until its events exist
        while not hasattr(sys.modules.get("kick_slow_import"), "go_on") and time.monotonic() < deadline:
            time.sleep(0.01)
        sys.modules["kick_slow_import"].began.wait(10)
        return False

    ticks: list[bool] = []

    class Controller:
        prof = None

        def tick(self) -> None:
            ticks.append(True)

    from npuprof.config import ProfileConfig

    plan = window_plan.WindowPlan(ProfileConfig(), log=None)  # not bound: no handler, no timer
    plan.controller = Controller()
    monkeypatch.setattr(window_plan, "another_thread_imports", first_look_then_an_import_begins)
    monkeypatch.setattr(window_plan, "IMPORTED_BY_A_START", ())
    try:
        plan._on_kick(0, sys._getframe())
    finally:
        sys.modules["kick_slow_import"].go_on.set()
        worker.join(10)
    assert ticks == []
    plan._on_kick(0, sys._getframe())  # the next kick, no import in flight: the window opens
    assert ticks == [True]


FORK_DURING_THE_KICKS_IMPORT = """
import logging, sys  # (torch imports logging)
sys.path.insert(0, sys.argv[1])
from npuprof.agent.frames import imported_alone
assert imported_alone(("kick_import_beside_a_fork",))
sys.modules["kick_import_beside_a_fork"].forker.join()
print("returned")
"""

MODULE_BESIDE_A_FORK = """
import logging, os, threading, time

def fork():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)

forker = threading.Thread(target=fork)
forker.start()
time.sleep(0.3)  # the fork has run logging's at-fork handler and waits for the import lock, or for logging's
logging.getLogger("kick.import.beside.a.fork")  # as torch._inductor's modules do
"""


def test_the_kicks_import_does_not_deadlock_with_a_thread_that_forks(tmp_path: Path) -> None:
    """A thread's os.fork() takes logging's module lock (its at-fork handler), then waits for the import lock
    the kick holds; the kick's import of torch._inductor calls logging.getLogger: each waited for the other,
    and the job hung for good. A plain Python process (no torch), ended after 20 s if it hangs."""

    _write_module(tmp_path, "kick_import_beside_a_fork", MODULE_BESIDE_A_FORK)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run(
            [sys.executable, "-c", FORK_DURING_THE_KICKS_IMPORT, str(tmp_path)],
            env=env,
            capture_output=True,
            text=True,
            timeout=20,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError("the kick's import and a thread's fork waited for each other") from None
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "returned"


@pytest.mark.parametrize(
    ("argv", "module"),
    [
        (["python", "-m", "torch.distributed.run", "train.py"], "torch.distributed.run"),
        (["python", "-mtorch.distributed.run"], "torch.distributed.run"),
        (
            ["python", "-u", "-X", "importtime", "-m", "deepspeed.launcher.launch"],
            "deepspeed.launcher.launch",
        ),
        (
            ["python", "-Ximporttime", "-W", "ignore", "-um", "accelerate.commands.launch"],
            "accelerate.commands.launch",
        ),
        (["python", "-E", "-s", "-I", "-m", "pkg.mod"], "pkg.mod"),
        (["python", "-EX", "dev", "-m", "torch.distributed.run"], "torch.distributed.run"),  # (helper-171)
        (["python", "-uW", "ignore", "-m", "torch.distributed.run"], "torch.distributed.run"),
        (["python", "train.py", "-m", "torch.distributed.run"], None),  # the script's own arguments
        (["python", "-c", "pass", "-m", "torch.distributed.run"], None),
        (["python", "-cimport torch", "-m", "x"], None),
        (["python", "-", "-m", "x"], None),  # a program read from stdin
        (["python"], None),
    ],
)
def test_the_module_python_runs_is_read_from_its_own_command_line(
    argv: list[str], module: str | None
) -> None:
    """`python -m torch.distributed.run`'s agent wakes while runpy still imports the module's packages
    (__main__ is not torchrun yet): its own command line says it starts workers, so that no timer, signal
    or profiler import ever runs in it (helper-167: a torchrun process under --delay hung once, its main
    thread never back from the timer's signal, and spent 1.3 CPU-s importing torch._inductor)."""
    from npuprof.agent.window_plan import module_run

    assert module_run(argv) == module


SPAWNED = ["python", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(pipe_handle=7)"]
FORKSERVER = ["python", "-c", "from multiprocessing.forkserver import main; main(5, 6, ['__main__'])"]


@pytest.mark.parametrize("orig_argv", [[*SPAWNED, "--multiprocessing-fork"], FORKSERVER])
def test_a_worker_spawned_by_a_launcher_is_not_taken_for_it(monkeypatch: Any, orig_argv: list[str]) -> None:
    """`torchrun --run-path` runs the script in workers multiprocessing starts (spawn by default): spawn gives
    the child torchrun's sys.argv before its `import torch` wakes npuprof, and the worker, taken for
    torchrun, lost its window ("the job ended before the --delay window began", helper-171)."""
    from npuprof.agent import window_plan

    monkeypatch.delitem(sys.modules, window_plan._LAUNCHER_API, raising=False)
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    monkeypatch.setattr(sys, "argv", ["/venv/bin/torchrun", "--run-path", "/abs/train.py"])
    monkeypatch.setattr(sys, "orig_argv", ["python", "/venv/bin/torchrun", "--run-path", "/abs/train.py"])
    assert window_plan.starts_workers()  # torchrun itself
    monkeypatch.setattr(sys, "orig_argv", orig_argv)
    assert not window_plan.starts_workers()  # the worker it spawned


class _InfoLog:
    def info(self, message: str) -> None:
        pass


def _in_torchrun_forking_workers(monkeypatch: Any) -> list[Any]:
    """This process as `python -m torch.distributed.run --run-path`, whose at-fork hooks are kept (returned)
    rather than registered."""
    from npuprof.agent import window_plan

    hooks: list[Any] = []
    monkeypatch.setattr(os, "register_at_fork", lambda after_in_child: hooks.append(after_in_child))
    monkeypatch.delitem(sys.modules, window_plan._LAUNCHER_API, raising=False)
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    monkeypatch.setattr(sys, "orig_argv", ["python", "-m", "torch.distributed.run", "--run-path", "/t.py"])
    return hooks


def test_a_worker_forked_by_a_launcher_waits_for_its_window(monkeypatch: Any) -> None:
    """`python -m torch.distributed.run --run-path --start-method fork`: the worker is a fork of torchrun's
    process, whose plan was done when npuprof woke (no window there), and whose command line it keeps: the
    worker's window waits again, and torchrun's command line does not end it."""
    from npuprof.agent import window_plan
    from npuprof.config import ProfileConfig

    hooks = _in_torchrun_forking_workers(monkeypatch)
    plan = window_plan.WindowPlan(ProfileConfig(duration=1.0), _InfoLog())
    plan.bind(controller=None)
    assert plan.state == window_plan.DONE and len(hooks) == 1
    monkeypatch.setattr(window_plan, "_LOADED_IN", os.getpid() + 1)  # this process is now its child
    hooks[0]()
    assert plan.state == window_plan.WAITING
    assert not window_plan.starts_workers()
    plan.refresh(0)
    assert plan.action_at(0).name == "RECORD"


def test_a_worker_forked_by_a_launcher_counts_its_delay_from_the_fork(monkeypatch: Any) -> None:
    """--delay counts from npuprof's wake in each process; a worker forked by torchrun (`--start-method
    fork`) counted it from torchrun's own wake (helper-171), its window that much sooner."""
    from npuprof.agent import window_plan
    from npuprof.config import ProfileConfig

    hooks = _in_torchrun_forking_workers(monkeypatch)
    plan = window_plan.WindowPlan(ProfileConfig(delay=2.0, duration=1.0), _InfoLog())
    plan.bind(controller=None)
    plan.woke -= 10  # the launcher woke 10 s before it forks the worker
    plan.start_at, plan.end_at = plan.woke + 2, plan.woke + 3
    monkeypatch.setattr(window_plan, "_LOADED_IN", os.getpid() + 1)
    forked_at = time.monotonic()
    hooks[0]()
    assert plan.start_at == pytest.approx(forked_at + 2, abs=0.5) and plan.end_at == plan.start_at + 1
    plan.refresh(0)  # its first step, at once: before its window's start
    assert plan.action_at(0).name == "NONE"
