"""The hand-over at the interpreter's shutdown where Python starts no thread (3.12.0/3.12.1): the exit
callback that finalises the capture the job ended inside hands its job over itself."""

from __future__ import annotations

import os
from typing import Any

import pytest

from npuprof.agent import threads
from npuprof.agent.memory_snapshot import TASK_KEY
from npuprof.owned_fd import OwnedFd
from npuprof.results import postprocess


@pytest.fixture
def no_thread_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threads, "start", lambda target, name: False)


class Copy:
    """A memory snapshot's copy, which says how it was run."""

    def __init__(self) -> None:
        self.hurried = False
        self.paused: bool | None = None

    def hurry(self) -> None:
        self.hurried = True

    def run(self, pause: bool = True) -> None:
        self.paused = pause and not self.hurried


def test_a_snapshot_handed_over_at_shutdown_is_copied_without_pauses(no_thread_starts: None) -> None:
    """The copy pauses 49x its CPU time after each slice of 10 events so as to leave the GIL to training;
    at the shutdown training has ended, and the exit callback's own copy paused all the same: the job's
    exit waited that long (0.5 ms at least each 10 events: 5 s or more for 100,000)."""
    read_end, write_end = os.pipe()
    handover = postprocess._Handover(OwnedFd(write_end))
    sent: list[Any] = []
    handover._write = lambda job: sent.append(job) or True  # type: ignore[method-assign,func-returns-value]
    copy = Copy()
    try:
        handover.put({"exports": {TASK_KEY: copy}, "n": 0})
        assert [job["n"] for job in sent] == [0]
        assert copy.paused is False, "copied with pauses at the interpreter's shutdown"
    finally:
        os.close(read_end)
