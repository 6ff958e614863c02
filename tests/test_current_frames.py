"""npuprof reads other threads' frames (the controller at its arming and at a hand-over of step counting,
time windows): through ``frames.current_frames``, never ``sys._current_frames`` itself, which can deadlock the
job when a collection runs inside it (docs/architecture.md, "Safety")."""

from __future__ import annotations

import gc
import subprocess
import sys
import threading
from typing import Any

import pytest
from conftest import ROOT, clean_env

from npuprof.agent import frames

# A collection inside sys._current_frames() (set off by the frame objects it builds, with the thread list's
# lock held) runs a finalizer that starts a thread, which needs that lock: with threads blocked beside the
# main one (a job's loader threads), the process hangs there for ever.
DEADLOCK = """
import gc, sys, threading
from npuprof.agent.frames import current_frames

read = sys._current_frames if sys.argv[1] == "bare" else current_frames
stop = threading.Event()
for _ in range(4):
    threading.Thread(target=stop.wait).start()


class StartsAThread:
    def __del__(self):
        thread = threading.Thread(target=int)
        thread.start()
        thread.join()


for _ in range(20):
    gc.disable()
    garbage = StartsAThread()
    garbage.cycle = garbage
    del garbage
    gc.set_threshold(1)
    gc.enable()
    read()
stop.set()
print("read", flush=True)
"""


def _reads(how: str, timeout: float) -> bool:
    try:
        done = subprocess.run(
            [sys.executable, "-c", DEADLOCK, how],
            env=clean_env(PYTHONPATH=str(ROOT)),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0 and done.stdout == "read\n"


def test_reading_other_threads_frames_never_deadlocks_in_a_collection() -> None:
    assert _reads("npuprof", timeout=30)


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="Python 3.11 builds frame objects there lazily")
def test_the_deadlock_is_python_s_own_where_collection_runs_inside_the_read() -> None:
    """The case above shows the hazard on this Python: sys._current_frames() itself hangs in it (3.11.7
    here; 3.10's frames are objects already, and 3.12.1 and 3.13.0 read the case)."""
    assert not _reads("bare", timeout=5)


def test_a_gc_disable_another_thread_makes_during_the_read_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """npuprof held collection off around every read and turned it back on after: a script's gc.disable()
    made by another thread in between was undone. Only Python 3.11 needs it held off (test above)."""
    monkeypatch.setattr(frames, "COLLECTS_INSIDE_THE_READ", False, raising=False)  # as on 3.10, 3.12+
    read = sys._current_frames

    def read_while_the_script_turns_collection_off() -> dict[int, Any]:
        script = threading.Thread(target=gc.disable)
        script.start()
        script.join()
        return read()

    monkeypatch.setattr(sys, "_current_frames", read_while_the_script_turns_collection_off)
    was_enabled = gc.isenabled()
    gc.enable()
    try:
        assert threading.get_ident() in frames.current_frames()
        assert not gc.isenabled()
    finally:
        if was_enabled:
            gc.enable()
        else:
            gc.disable()


@pytest.mark.parametrize("enabled", [True, False])
def test_the_read_that_holds_collection_off_leaves_it_as_the_job_had_it(
    monkeypatch: pytest.MonkeyPatch, enabled: bool
) -> None:
    """Where collection is held off around the read (3.11), a job that had turned it off (gc.disable() around
    its training loop) finds it off after, and one that had it on finds it on (helper-373: turned back on
    unconditionally, nothing failed)."""
    monkeypatch.setattr(frames, "COLLECTS_INSIDE_THE_READ", True, raising=False)
    was_enabled = gc.isenabled()
    seen: list[bool] = []
    read = sys._current_frames

    def read_noting_collection() -> dict[int, Any]:
        seen.append(gc.isenabled())
        return read()

    monkeypatch.setattr(sys, "_current_frames", read_noting_collection)
    (gc.enable if enabled else gc.disable)()
    try:
        assert threading.get_ident() in frames.current_frames()
        assert (seen, gc.isenabled()) == ([False], enabled)
    finally:
        (gc.enable if was_enabled else gc.disable)()


def test_a_thread_inside_an_import_is_not_another_thread_importing(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``another_thread_imports`` asked from inside an import (the agent wakes inside ``import torch``) looks
    at the other threads only: none imports here."""
    (tmp_path / "npuprof_asks_in_its_import.py").write_text(
        "from npuprof.agent import frames\nASKED = frames.another_thread_imports()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "npuprof_asks_in_its_import", raising=False)
    import npuprof_asks_in_its_import  # type: ignore[import-not-found]

    assert npuprof_asks_in_its_import.ASKED is False
