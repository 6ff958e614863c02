"""agent/child_signal.py's wrap of the script's SIGCHLD handler, in process on the main thread (helper-373's
mutation hunt: each of these could change with every signal test passing): the wrap taken off only while
it is still SIGCHLD's handler, never wrapped twice, and a platform without SIGCHLD leaving nothing to do."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any

import pytest

from npuprof.agent import child_signal


def _term(signum: int, frame: Any) -> None:
    """Stands for npuprof's SIGTERM handler, whose code the wrap looks for."""


def _scripts(signum: int, frame: Any) -> None:
    """The script's SIGCHLD handler (a DataLoader's)."""


def _scripts_later(signum: int, frame: Any) -> None:
    """A handler the script set after the wrap."""


@pytest.fixture
def sigchld() -> Iterator[None]:
    kept = signal.getsignal(signal.SIGCHLD)
    signal.signal(signal.SIGCHLD, _scripts)
    try:
        yield
    finally:
        signal.signal(signal.SIGCHLD, kept)


def test_the_wrap_is_put_back_to_the_scripts_handler(sigchld: None) -> None:
    wrapped = child_signal.wrap(_term.__code__, lambda: False)
    assert wrapped is not None and signal.getsignal(signal.SIGCHLD) is wrapped
    assert child_signal.wrapped_now(wrapped)
    child_signal.unwrap(wrapped)
    assert signal.getsignal(signal.SIGCHLD) is _scripts
    assert not child_signal.wrapped_now(wrapped)


def test_a_handler_the_script_set_since_is_left_in_place(sigchld: None) -> None:
    wrapped = child_signal.wrap(_term.__code__, lambda: False)
    signal.signal(signal.SIGCHLD, _scripts_later)
    child_signal.unwrap(wrapped)
    assert signal.getsignal(signal.SIGCHLD) is _scripts_later


def test_a_wrap_is_not_wrapped_again(sigchld: None) -> None:
    wrapped = child_signal.wrap(_term.__code__, lambda: False)
    assert child_signal.wrap(_term.__code__, lambda: False) is None
    assert signal.getsignal(signal.SIGCHLD) is wrapped
    child_signal.unwrap(wrapped)
    assert signal.getsignal(signal.SIGCHLD) is _scripts


def test_without_sigchld_there_is_nothing_to_wrap(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_sigchld(signum: int) -> Any:
        raise AttributeError("SIGCHLD")

    monkeypatch.setattr(child_signal, "_getsignal", no_sigchld)
    kept = child_signal.ChildSignalWrap(_scripts, _term.__code__, lambda: False)
    assert child_signal.wrapped_now(kept)  # no wrap is asked for again at each boundary
    assert child_signal.wrap(_term.__code__, lambda: False) is None
