"""The training script's own torch_npu profiler: torch_npu's ``profile`` and ``_KinetoProfile`` are its
own classes (Ascend/pytorch ``torch_npu/profiler/profiler.py``), not torch's, and its profiler neither goes
through torch's nor sets torch's ``_is_profiler_enabled``. npuprof must follow their start and stop itself,
or two profilers run in one process (helper-213)."""

from __future__ import annotations

import importlib
import os
import re
import sys
import textwrap
import weakref
from pathlib import Path
from typing import Any

import pytest
from conftest import capture_record, clean_env, npuprof

from npuprof.agent import user_profiler
from npuprof.results import layout

ROOT = Path(__file__).resolve().parent.parent
STANDIN = ROOT / "tests" / "fake_torch_npu"

# torch_npu's classes as the real module shapes them: profile(_KinetoProfile) with its own start / stop,
# __enter__ / __exit__ calling them, and no base class of torch's
REAL_SHAPE = """
calls = []


class _KinetoProfile:
    def start(self):
        calls.append(("kineto.start", self))

    def stop(self):
        calls.append(("kineto.stop", self))


class profile(_KinetoProfile):
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        calls.append(("profile.start", self))

    def stop(self):
        calls.append(("profile.stop", self))
"""


class _Controller:
    backend = None
    prof: Any = object()  # a capture of npuprof's in flight

    def __init__(self) -> None:
        self.finished: list[str] = []

    def finish_early(self, reason: str) -> None:
        self.finished.append(reason)


class _Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def warn_once(self, key: str, message: str) -> None:
        self.lines.append(("warn_once", message))

    def warning(self, message: str) -> None:
        self.lines.append(("warning", message))

    def info(self, message: str) -> None:
        self.lines.append(("info", message))


def test_torch_npus_own_profiler_classes_are_followed_once_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch_npu.profiler.profiler loaded after npuprof began following: its profile (by start() and as a
    context manager) and _KinetoProfile end npuprof's capture before they start, and npuprof resumes once
    they have stopped; npuprof's own torch_npu profiler is not the script's."""
    methods = user_profiler.FOLLOWED["torch_npu.profiler.profiler"]
    name = "h213_torch_npu_profiler_shape"
    (tmp_path / f"{name}.py").write_text(REAL_SHAPE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    monkeypatch.setitem(user_profiler.FOLLOWED, name, methods)
    controller, log = _Controller(), _Log()
    monkeypatch.setattr(user_profiler, "_installed", {"controller": controller, "log": log})
    monkeypatch.setattr(user_profiler, "_running", weakref.WeakSet())
    monkeypatch.setattr(user_profiler, "_ours", weakref.WeakSet())
    try:
        user_profiler._follow_module(name)
        module = importlib.import_module(name)
        ours = module.profile()
        user_profiler.mark_ours(ours)
        ours.start()
        assert not user_profiler.running() and controller.finished == []
        with module.profile():
            assert user_profiler.running()
        assert not user_profiler.running()
        kineto = module._KinetoProfile()
        kineto.start()
        assert user_profiler.running()
        kineto.stop()
        assert not user_profiler.running()
        assert controller.finished == ["the training script started its own profiler"] * 2
        assert [c[0] for c in module.calls] == [
            "profile.start",
            "profile.start",
            "profile.stop",
            "kineto.start",
            "kineto.stop",
        ]
        assert [line for line in log.lines if line[0] == "info"] == [
            ("info", "the training script's own profiler stopped; npuprof resumes at its next window")
        ] * 2
    finally:
        sys.modules.pop(name, None)


def test_a_disabled_or_failed_start_keeps_nothing_running_and_the_last_stop_alone_resumes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A profiler made with ``enabled=False`` (torch.autograd.profiler.profile's) records nothing and a start
    that raised (torch's "Profiler is already enabled") did not start: neither keeps npuprof off. With two
    of the script's profilers running, npuprof resumes once both have stopped, said once; the warning names
    the line that started the profiler (this file's)."""
    import types

    class Backend:
        def __init__(self) -> None:
            self.told = 0

        def script_profiler_started(self) -> None:
            self.told += 1

    class Profile:
        def __init__(self, enabled: bool = True, fails: bool = False) -> None:
            self.enabled, self.fails = enabled, fails

        def __enter__(self) -> Profile:
            if self.fails:
                raise RuntimeError("Profiler is already enabled")
            return self

        def __exit__(self, *exc: object) -> None:
            pass

    module = types.ModuleType("h376_profiler_shape")
    module.profile = Profile  # type: ignore[attr-defined]
    controller, log = _Controller(), _Log()
    controller.backend = Backend()  # type: ignore[assignment]
    monkeypatch.setattr(user_profiler, "_installed", {"controller": controller, "log": log})
    monkeypatch.setattr(user_profiler, "_running", weakref.WeakSet())
    monkeypatch.setattr(user_profiler, "_ours", weakref.WeakSet())
    user_profiler._wrap_classes(module, {"profile": (("__enter__",), ("__exit__",))})

    with Profile(enabled=False):
        assert not user_profiler.running()
    assert controller.finished == [] and log.lines == []
    failing = Profile(fails=True)
    with pytest.raises(RuntimeError, match="already enabled"):
        failing.__enter__()
    assert not user_profiler.running()
    first, second = Profile(), Profile()
    started_at = sys._getframe().f_lineno + 1
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert user_profiler.running()
    assert [line for line in log.lines if line[0] == "info"] == []
    second.__exit__(None, None, None)
    first.__exit__(None, None, None)  # a stop of one stopped already says nothing more
    assert not user_profiler.running()
    stopped = ("info", "the training script's own profiler stopped; npuprof resumes at its next window")
    assert [line for line in log.lines if line[0] == "info"] == [stopped]
    warned = [message for kind, message in log.lines if kind == "warn_once"]  # (this log says each)
    assert warned[-2].endswith(f"(started at {Path(__file__).resolve()}:{started_at}, in {_test_name()})")
    assert controller.backend.told == 3  # the failed start's, and the two others'  # type: ignore[attr-defined]


def _test_name() -> str:
    return sys._getframe(1).f_code.co_name


SCRIPT = """
import os, sys
import torch
import torch_npu
import torch_npu.profiler as tp

model = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)


def step():
    model(torch.randn(4, 8)).sum().backward()
    optimizer.step()
    optimizer.zero_grad()


for _ in range(4):
    step()
# npuprof's capture records now (steps 3 to 6); the script profiles three steps itself
with tp.profile(activities=[tp.ProfilerActivity.CPU], on_trace_ready=tp.tensorboard_trace_handler("mine")):
    for _ in range(3):
        step()
for _ in range(3):
    step()
print("trained", flush=True)
import gc; gc.freeze()  # skip the exit-time collection over torch's objects (atexit runs before it)
"""


def _standin_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a job that imports the torch_npu stand-in (its calls logged in tmp_path)."""
    env = clean_env(
        PYTHONPATH=os.pathsep.join([str(STANDIN), str(ROOT)]),
        TORCH_DEVICE_BACKEND_AUTOLOAD="0",
        FAKE_TORCH_NPU_LOG=str(tmp_path / "calls.jsonl"),
    )
    return {k: v for k, v in env.items() if not k.startswith(("FAKE_TORCH_NPU_API", "KINETO_USE_DAEMON"))}


def test_a_script_running_torch_npus_profiler_makes_npuprof_step_aside(tmp_path: Path) -> None:
    """With the torch_npu stand-in, a script that profiles with torch_npu.profiler.profile while npuprof's
    capture records: npuprof's capture ends there (kept), the warning names the script's line, not
    torch_npu's, and the job is not ended by two profilers at once."""
    (tmp_path / "own.py").write_text(textwrap.dedent(SCRIPT))
    env = _standin_env(tmp_path)
    out = tmp_path / "out"
    flags = ["--skip-first", "2", "--warmup", "1", "--active", "4", "--repeat", "1"]
    proc = npuprof(
        "run", "-o", str(out), "--worker-name", "w", *flags, "--", sys.executable, "own.py",
        cwd=tmp_path, env=env, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0 and "trained" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-3000:]
    said = [line for line in proc.stderr.splitlines() if "steps aside" in line]
    assert len(said) == 1, proc.stderr
    assert re.search(r"started at \S*own\.py:\d+, in <module>\)", said[0]), said[0]
    (rank_dir,) = layout.find_rank_dirs(out)
    assert capture_record(rank_dir)["detail"] == "the training script started its own profiler"


HANDLER_SCRIPT = """
import os
import torch
import torch_npu
import torch_npu.profiler as tp

model = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for i in range(12):
    if i == 4:  # made for a profiler the script may start later: torch_npu's path creator now points there
        handler = tp.tensorboard_trace_handler(os.path.abspath("mine"), worker_name="script")
    model(torch.randn(4, 8)).sum().backward()
    optimizer.step()
    optimizer.zero_grad()
print("trained", flush=True)
import gc; gc.freeze()  # skip the exit-time collection over torch's objects (atexit runs before it)
"""


def test_a_trace_handler_the_script_makes_never_takes_npuprofs_next_capture(tmp_path: Path) -> None:
    """torch_npu's path creator is one per process and tensorboard_trace_handler points it when called:
    npuprof's later captures (one profiler for all of them) still go under -o, none into the script's dir."""
    (tmp_path / "handler.py").write_text(HANDLER_SCRIPT)
    env = _standin_env(tmp_path)
    out = tmp_path / "out"
    flags = ["--skip-first", "1", "--active", "2", "--repeat", "3"]
    proc = npuprof(
        "run", "-o", str(out), "--worker-name", "w", *flags, "--", sys.executable, "handler.py",
        cwd=tmp_path, env=env, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0 and "trained" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert not (tmp_path / "mine").exists() or not list((tmp_path / "mine").iterdir())
    assert [capture_record(d)["steps"] for d in layout.find_rank_dirs(out)] == [[2, 3], [5, 6], [8, 9]]


EARLY_SCRIPT = """
import torch
import torch_npu
import torch_npu.profiler as tp

model = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
# the script's own profiler records from before npuprof's window (steps 3 to 4) to after it
prof = tp.profile(activities=[tp.ProfilerActivity.CPU], on_trace_ready=tp.tensorboard_trace_handler("mine"))
prof.start()
print("flags while it records:", torch.autograd.profiler._is_profiler_enabled,
      torch._C._autograd._profiler_enabled(), flush=True)
for _ in range(8):
    model(torch.randn(4, 8)).sum().backward()
    optimizer.step()
    optimizer.zero_grad()
prof.stop()
print("trained", flush=True)
import gc; gc.freeze()  # skip the exit-time collection over torch's objects (atexit runs before it)
"""


def test_a_torch_npu_profiler_recording_before_npuprofs_window_keeps_npuprof_off(tmp_path: Path) -> None:
    """torch_npu's profiler never sets torch's Python flag (torch.autograd.profiler._is_profiler_enabled:
    npu_profiler.cpp starts torch_npu's own C++ profiler, whose state only libtorch's
    ``_profiler_enabled()`` sees); the stand-in, recording with torch's profiler underneath, set it, so a
    script's torch_npu profiler already recording when npuprof's window came was refused by that flag in
    the tests, never by npuprof's following of torch_npu's classes, on which the real one depends
    (helper-218: with that following off, this test passed on the old stand-in, its flag keeping npuprof
    off, where a real NPU would run two profilers). npuprof opens no capture while it records, and says so
    once."""
    (tmp_path / "early.py").write_text(EARLY_SCRIPT)
    out = tmp_path / "out"
    flags = ["--skip-first", "2", "--warmup", "1", "--active", "2", "--repeat", "1"]
    proc = npuprof(
        "run", "-o", str(out), "--worker-name", "w", *flags, "--", sys.executable, "early.py",
        cwd=tmp_path, env=_standin_env(tmp_path), timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0 and "trained" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "flags while it records: False True" in proc.stdout, proc.stdout
    # its words one space apart: the notes are wrapped where the paths in them put the breaks (the tests'
    # temporary paths are longer under xdist: the line below was split there)
    said = " ".join(proc.stderr.split())
    assert said.count(f"npuprof: {user_profiler.WARNING}") == 1, proc.stderr
    assert "no capture was written (exit code 0): the training script runs its own profiler" in said
    assert layout.find_rank_dirs(out) == []
    assert len(layout.find_rank_dirs(tmp_path / "mine")) == 1  # the script's own capture, whole
