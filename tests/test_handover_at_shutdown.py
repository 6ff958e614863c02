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

    left_for_room = ""  # written (SnapshotTask: not left for --min-free-space)

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


def test_a_full_pipe_at_shutdown_does_not_hold_the_exit(
    no_thread_starts: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A post-processor that many captures behind (its pipe full, parsing an earlier one, or stopped)
    held the exit callback's own write, and so the job's exit, until it read again: for ever if it never
    did. The hand-over thread's write is bounded by drain() (the rest goes to the spool); the exit
    callback's now writes only what the pipe takes without waiting, and leaves the rest to drain()."""
    import threading
    import time
    from contextlib import suppress

    from npuprof.results import handover as wire

    monkeypatch.setattr(wire, "job_from", lambda job: job)
    monkeypatch.setattr(wire, "job_line", lambda job: f'{{"n":{job["n"]}}}\n'.encode())
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    with suppress(BlockingIOError):
        while True:
            os.write(write_end, b"x" * 4096)
    os.set_blocking(write_end, True)
    handover = postprocess._Handover(OwnedFd(write_end))
    copy = Copy()
    putting = threading.Thread(
        target=lambda: handover.put({"exports": {TASK_KEY: copy}, "n": 0}), daemon=True
    )
    try:
        putting.start()
        putting.join(timeout=10)
        assert not putting.is_alive(), "the exit callback waits on a pipe nobody reads"
        began = time.monotonic()
        left = handover.drain(timeout_s=30)
        assert [job["n"] for job in left] == [0], left  # for the spool, its snapshot copied
        assert time.monotonic() - began < 5
        assert copy.paused is False
    finally:
        os.close(read_end)  # a write still waiting fails then (EPIPE), and the thread ends
        putting.join(timeout=10)


def test_a_drain_inside_the_exits_drain_keeps_the_exits_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """A SIGTERM landing while the exit waits for the hand-over (npuprof's handler stays installed while
    a memory snapshot is copied) drains again from its handler: that wait must end at the exit's own
    bound, not 5 s after it (the exit then took up to twice what docs/architecture.md says)."""
    import time
    import types

    read_end, write_end = os.pipe()
    handover = postprocess._Handover(OwnedFd(write_end))
    handover.thread = True  # a hand-over thread that never moves the job: the wait runs to its bound
    handover.queue.put({"n": 0})
    handover.submitted = 1
    handover.task = Copy()  # a copy under way: the wait is not cut short as a stalled pipe's
    inner: list[float] = []
    # the hand-over's clock, moved by its own pauses only: the waits are read, not a loaded machine's stalls
    clock = types.SimpleNamespace(now=time.monotonic())
    clock.monotonic = lambda: clock.now

    def signal_lands(seconds: float) -> None:  # the first pause of the exit's wait runs the handler
        if not inner:
            began = clock.now
            inner.append(0.0)
            handover.drain(timeout_s=5)
            inner[0] = clock.now - began
        clock.now += seconds

    clock.sleep = signal_lands
    monkeypatch.setattr(postprocess, "time", clock)
    try:
        began = clock.now
        handover.drain(timeout_s=0.5)
        outer = clock.now - began
    finally:
        monkeypatch.undo()
        os.close(read_end)
        os.close(write_end)
    assert inner and inner[0] < 1.0, inner
    assert outer < 1.5, outer


class SlowCopy(Copy):
    """A copy at full speed that takes ``seconds`` on the hand-over thread (a big capture's event tree), or
    lasts until ``ended`` is set (``seconds`` at most)."""

    def __init__(self, seconds: float, ended: Any = None) -> None:
        super().__init__()
        self.seconds, self.ended = seconds, ended
        self.done = False

    def run(self, pause: bool = True) -> None:
        import time

        if self.ended is not None:
            self.ended.wait(self.seconds)
        else:
            time.sleep(self.seconds)
        self.done = True


@pytest.mark.parametrize(("copies_s", "kept"), [(5.0, True), (0.0, False)])
def test_the_exit_waits_for_a_snapshot_copy_past_its_usual_bound(copies_s: float, kept: bool) -> None:
    """At its normal end a training process waited 5 s for its captures' hand-over: a memory snapshot
    whose copy took longer (175,000 events: 7 s on 2 shared cores) was lost with the process, though
    nothing trained any more. The exit now waits for the copy (EXIT_COPY_WAIT_S); a SIGTERM's drain
    (no copies_s) keeps its own bound."""
    import threading
    import time

    read_end, write_end = os.pipe()
    handover = postprocess._Handover(OwnedFd(write_end))
    sent: list[Any] = []
    handover._write = lambda job: sent.append(job) or True  # type: ignore[method-assign,func-returns-value]
    # a SIGTERM's drain: the copy lasts until it has returned (a 0.6 s copy outlasted on a loaded machine)
    ended = None if kept else threading.Event()
    copy = SlowCopy(0.6 if kept else copies_s + 5.0, ended)
    try:
        handover.put({"exports": {TASK_KEY: copy}, "n": 0})
        began = time.monotonic()
        left = handover.drain(timeout_s=0.1, copies_s=copies_s)
        took = time.monotonic() - began
        done = copy.done
    finally:
        if ended is not None:
            ended.set()
        os.close(read_end)
        os.close(write_end)
    assert done is kept, took
    assert (not left and [job["n"] for job in sent] == [0]) is kept, (left, sent)
    if kept:  # waited for the copy, not for the whole of copies_s once it ended
        assert took < copies_s, took


def test_the_job_a_copy_frees_at_exit_goes_to_the_pipe_when_the_hand_over_thread_is_late() -> None:
    """Once the copy ended, the exit gave the hand-over thread 0.5 s to put the job it freed into the pipe:
    on busy cores (a full test run beside other work) it was scheduled later, and the job went to the
    spool though the pipe had room (test_the_exit_waits_for_a_snapshot_copy_past_its_usual_bound failed
    so once). Here its write takes 0.8 s: the exit waits for it, within the copies' bound."""
    import time

    read_end, write_end = os.pipe()
    handover = postprocess._Handover(OwnedFd(write_end))
    sent: list[Any] = []

    def late_write(job: dict[str, Any]) -> bool:
        time.sleep(0.8)
        sent.append(job)
        return True

    handover._write = late_write  # type: ignore[method-assign]
    copy = SlowCopy(0.3)
    try:
        handover.put({"exports": {TASK_KEY: copy}, "n": 0})
        left = handover.drain(timeout_s=0.1, copies_s=5.0)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert copy.done
    assert left == [] and [job["n"] for job in sent] == [0], (left, sent)


def test_the_exit_does_not_wait_for_copies_no_copier_thread_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the copier's thread could not start (at shutdown on 3.12.0/3.12.1) the hand-over thread makes
    the copy and nothing counts it done: the exit's longer wait for copies would run to its end (60 s)."""
    import time

    start = threads.start

    def no_copier(target: Any, name: str) -> bool:
        return name != "npuprof-snapshots" and start(target, name)

    monkeypatch.setattr(threads, "start", no_copier)
    read_end, write_end = os.pipe()
    handover = postprocess._Handover(OwnedFd(write_end))
    handover._write = lambda job: True  # type: ignore[method-assign]
    try:
        handover.put({"exports": {TASK_KEY: SlowCopy(0.3)}, "n": 0})
        began = time.monotonic()
        handover.drain(timeout_s=0.1, copies_s=5.0)
        took = time.monotonic() - began
    finally:
        os.close(read_end)
        os.close(write_end)
    assert not handover.copier
    assert took < 2.0, took
