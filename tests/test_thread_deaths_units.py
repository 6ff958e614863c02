"""agent/thread_deaths.py at its edges (helper-373's mutation hunt: a message of exactly 80 characters cut,
and the except hook wrapped again by each thread that drives, passed every test)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from npuprof.agent import thread_deaths


def test_a_message_of_80_characters_is_whole_and_one_longer_is_cut_to_80() -> None:
    assert thread_deaths.exception_named(ValueError("x" * 80)) == "ValueError (" + "x" * 80 + ")"
    assert thread_deaths.exception_named(ValueError("y" * 81)) == "ValueError (" + "y" * 79 + "…)"


def test_the_except_hook_is_wrapped_once_however_many_threads_drive(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[object] = []
    monkeypatch.setattr(threading, "excepthook", seen.append)  # the script's own hook
    monkeypatch.setattr(thread_deaths._driving, "guard", None, raising=False)  # (this thread's, put back)
    for _ in range(3):
        thread_deaths.name_this_threads_death_on(SimpleNamespace(died_of=None))
    hook = threading.excepthook
    assert getattr(hook, "previous", None) == seen.append  # one wrap, around the script's hook
    guard = SimpleNamespace(died_of=None)
    thread_deaths.name_this_threads_death_on(guard)
    args = SimpleNamespace(exc_value=RuntimeError("boom"))
    hook(args)
    assert guard.died_of == "an uncaught RuntimeError (boom)" and seen == [args]
