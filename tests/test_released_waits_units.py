"""agent/released_waits.py's answer itself, asked by a thread about the main thread waiting on what it
releases, one case for each kind of wait (helper-373's mutation hunt: tests/test_controller_units.py's
take-overs passed with a bounded queue's put waiting for a get after the loop only, and with sigwait or
pthread_kill left out of the signal waits). The answer is given while the main thread is inside the wait,
then the thread's own code releases it. (Queue.join, Barrier, Semaphore, Condition.wait_for and put_nowait
taken out of the table still answer True: the wait under them is a Condition's, and the release's own
code in threading.py / queue.py, followed as a helper, calls its notify.)"""

from __future__ import annotations

import queue
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from npuprof.agent import released_waits

MAIN = threading.get_ident()  # pytest runs the tests on the main thread


def _inside(wait: str) -> None:
    """Until the main thread is in the standard library's ``wait``, called from this file."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        frame = sys._current_frames().get(MAIN)
        if frame is not None and frame.f_code.co_filename.endswith(("/threading.py", "/queue.py")):
            while frame is not None:
                if (
                    frame.f_code.co_name == wait
                    and frame.f_back
                    and frame.f_back.f_code.co_filename == __file__
                ):
                    return
                frame = frame.f_back
        time.sleep(0.001)
    raise AssertionError(f"the main thread never waited in {wait}")


def _answer(
    wait: str, ask: Callable[[Any], bool] = released_waits.waits_on_what_this_thread_releases
) -> bool:
    _inside(wait)
    return ask(sys._current_frames()[MAIN])


def _run(target: Callable[..., None], *args: Any) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, name="train", daemon=True)
    thread.start()
    return thread


def test_a_queue_get_released_by_put_nowait_after_the_loop() -> None:
    results: queue.Queue[int] = queue.Queue()
    answers: list[bool] = []

    def train(out: queue.Queue[int]) -> None:
        for _ in range(3):
            pass
        answers.append(_answer("get"))
        out.put_nowait(7)

    thread = _run(train, results)
    assert results.get(timeout=10) == 7
    thread.join(10)
    assert answers == [True]


def test_a_full_queues_put_released_by_a_get_inside_the_loop() -> None:
    batches: queue.Queue[int] = queue.Queue(maxsize=1)
    batches.put(0)
    answers: list[bool] = []

    def train(source: queue.Queue[int]) -> None:
        for step in range(2):
            if step == 0:
                answers.append(_answer("put"))
            source.get(timeout=10)

    thread = _run(train, batches)
    batches.put(1, timeout=10)
    thread.join(10)
    assert answers == [True]


def test_a_queue_join_released_by_task_done() -> None:
    work: queue.Queue[str] = queue.Queue()
    work.put("epoch")
    answers: list[bool] = []

    def train(tasks: queue.Queue[str]) -> None:
        tasks.get(timeout=10)
        answers.append(_answer("join"))
        tasks.task_done()

    thread = _run(train, work)
    work.join()
    thread.join(10)
    assert answers == [True]


def test_a_semaphore_released() -> None:
    finished, answers = threading.Semaphore(0), []

    def train(done: threading.Semaphore) -> None:
        answers.append(_answer("acquire"))
        done.release()

    thread = _run(train, finished)
    assert finished.acquire(timeout=10)
    thread.join(10)
    assert answers == [True]


def test_a_barrier_both_wait_at() -> None:
    meet, answers = threading.Barrier(2, timeout=10), []

    def train(barrier: threading.Barrier) -> None:
        answers.append(_answer("wait"))
        barrier.wait()

    thread = _run(train, meet)
    meet.wait()
    thread.join(10)
    assert answers == [True]


def test_a_condition_wait_for_notified() -> None:
    changed, state, answers = threading.Condition(), [], []

    def train(condition: threading.Condition, seen: list[str]) -> None:
        answers.append(_answer("wait_for"))
        with condition:
            seen.append("done")
            condition.notify_all()

    thread = _run(train, changed, state)
    with changed:
        assert changed.wait_for(lambda: state, 10)
    thread.join(10)
    assert answers == [True]


def test_a_sigwait_ended_by_pthread_kill_after_the_loop() -> None:
    answers: list[bool] = []

    def train(main: int) -> None:
        for _ in range(3):
            pass
        try:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # the main thread blocks in sigwait (C): seen at its line
                if released_waits.pauses_for_a_signal_this_thread_sends(sys._current_frames()[MAIN]):
                    answers.append(True)
                    break
                time.sleep(0.005)
        finally:  # whatever the answer: the main thread's wait ends
            signal.pthread_kill(main, signal.SIGUSR1)

    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    try:
        thread = _run(train, MAIN)
        assert signal.sigwait({signal.SIGUSR1}) == signal.SIGUSR1
        thread.join(10)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    assert answers == [True]
