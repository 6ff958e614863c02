"""helper-299: the exit's wait for --export-chrome-trace copies made without a post-processor."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from npuprof.agent import chrome_trace


class _SaidLog:
    def __init__(self) -> None:
        self.said: list[str] = []

    def warn_once(self, key: str, message: str) -> None:
        self.said.append(message)


class _StalledCopy(threading.Thread):
    """A copy that never ends (a stalled filesystem) until ``release`` is set; the waits it was joined for."""

    def __init__(self, release: threading.Event) -> None:
        super().__init__(target=release.wait, daemon=True)
        self.waited: list[float | None] = []

    def join(self, timeout: float | None = None) -> None:
        self.waited.append(timeout)
        super().join(timeout)


@pytest.fixture
def stalled_copies(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[_StalledCopy]]:
    """Copies that never end (a stalled filesystem), in chrome_trace's list of copies under way."""
    release = threading.Event()
    copies = [_StalledCopy(release) for _ in range(4)]
    for copy in copies:
        copy.start()
    monkeypatch.setattr(chrome_trace, "_copying", list(copies))
    # the exit's wait is once a process: another test in this worker may have begun it already
    monkeypatch.setattr(chrome_trace, "_exit_wait_began", [])
    yield copies
    release.set()
    for copy in copies:
        copy.join(5)


def test_the_exit_waits_for_stalled_copies_once_in_all_and_says_so(
    stalled_copies: list[_StalledCopy], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each copy was waited EXIT_WAIT_S (120 s) in turn, silently: four stalled copies held a finished job's
    exit eight minutes. The wait is EXIT_WAIT_S in all, said once, and the copies left unwritten are said."""
    from npuprof.agent import log as agent_log

    wait_s = 0.6
    said = _SaidLog()
    monkeypatch.setattr(chrome_trace, "EXIT_WAIT_S", wait_s)
    monkeypatch.setattr(chrome_trace, "EXIT_SAID_AFTER_S", 0.1)
    monkeypatch.setattr(agent_log, "get_log", lambda: said)
    started = time.monotonic()
    chrome_trace._join_copies()
    took = time.monotonic() - started
    # the joins' waits, not the wall time (a loaded machine stretches it): each in turn was 4 x 0.6 s
    waited = [timeout for copy in stalled_copies for timeout in copy.waited]
    assert took >= wait_s and sum(timeout or 0.0 for timeout in waited) <= wait_s, (took, waited)
    assert None not in waited, waited
    assert len(said.said) == 2, said.said
    assert "--export-chrome-trace copies (4)" in said.said[0] and f"at most {wait_s:g} s" in said.said[0]
    assert said.said[1].startswith("--export-chrome-trace: 4 of its copies not written"), said.said[1]
    # the agent's own exit waits again once its last capture is finalised (wait_for_copies_at_exit):
    # within the same bound, never a second one
    chrome_trace.wait_for_copies_at_exit()
    waited = [timeout for copy in stalled_copies for timeout in copy.waited]
    assert sum(timeout or 0.0 for timeout in waited) <= wait_s, waited


def test_copies_done_before_the_exit_cost_no_wait_and_no_word(monkeypatch: pytest.MonkeyPatch) -> None:
    from npuprof.agent import log as agent_log

    said = _SaidLog()
    done = [threading.Thread(target=lambda: None) for _ in range(3)]
    for copy in done:
        copy.start()
    monkeypatch.setattr(chrome_trace, "_copying", done)
    monkeypatch.setattr(agent_log, "get_log", lambda: said)
    started = time.monotonic()
    chrome_trace._join_copies()
    assert time.monotonic() - started < chrome_trace.EXIT_SAID_AFTER_S
    assert said.said == []
