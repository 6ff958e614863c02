"""agent/polling.py: what a driving thread's frames must show to be taken for a poll of the stepping one
(docs/architecture.md, "Step boundaries"), and of a flag it sets (agent/released_waits.py); its cost, paid
on a training step of another thread."""

from __future__ import annotations

import linecache
import sys
import threading
import time
from typing import Any

from npuprof.agent import polling, released_waits


def test_a_code_object_too_big_to_read_on_a_step_is_not_read() -> None:
    """A script of thousands of lines at its top level, naming is_alive: its bytecode was decoded whole,
    0.45 s on the training thread's step for 3000 lines of comprehensions; now left unread (no poll)."""
    lines = "\n".join(f"x{i} = [t.is_alive() for t in ts] + [f(a) for a in range(3)]" for i in range(600))
    big = compile(lines, "big.py", "exec")
    assert polling._read(big) == ({}, [])
    small = compile("while t.is_alive():\n    time.sleep(1)\n", "small.py", "exec")
    names = polling._read(small)[0]
    assert {"t", "is_alive"} <= names[1] and {"time", "sleep"} <= names[2]


def test_only_the_expressions_of_a_code_objects_lines_are_its_names() -> None:
    """A generator expression's names are its line's; a function the module defines is not read with it
    (a module's would be every function's)."""
    code = compile(
        "def f():\n    return worker.is_alive()\nwhile any(t.is_alive() for t in ts):\n    sleep(1)\n",
        "m.py",
        "exec",
    )
    read = polling._read(code)
    assert {"any", "ts", "is_alive"} <= read[0][3] and 2 not in read[0]
    assert polling._read(code) is read  # kept, found again by identity


def _polled_by_this_thread(wait: Any, looked: threading.Event | None = None) -> bool:
    """Whether a thread started here finds this one polling it while this one runs ``wait(thread)``,
    looked at once this one is at the sleep or the join of ``_wait`` (a fixed sleep before the look found
    it still in the thread's ``start()`` now and then on a loaded machine); ``looked`` set after."""
    me, seen = threading.get_ident(), []

    def look() -> None:
        deadline = time.monotonic() + 10
        while not _at_the_wait(me) and time.monotonic() < deadline:
            time.sleep(0.001)
        seen.append(polling.polls_this_thread(sys._current_frames()[me]))
        if looked is not None:
            looked.set()

    thread = threading.Thread(target=look)
    thread.start()
    wait(thread)
    thread.join(10)
    return seen == [True]


def _wait(thread: threading.Thread, other: threading.Thread | None = None) -> None:
    if other is None:
        while thread.is_alive():
            time.sleep(0.002)
    else:
        other.join(10)  # the same code polls the thread, in the branch not taken


def _at_the_wait(ident: int) -> bool:
    """Whether thread ``ident`` runs ``_wait`` at its sleep or its join."""
    frame = sys._current_frames().get(ident)
    while frame is not None:
        if frame.f_code is _wait.__code__:
            line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
            return "sleep(" in line or "join(" in line
        frame = frame.f_back
    return False


def test_a_join_of_another_thread_beside_a_poll_loop_is_not_a_poll() -> None:
    """A script that polls its trainer in one branch and joins a logger in another (both at its top level,
    one code object): the join, a wait on a line of code that asks the trainer's is_alive(), was taken for
    a poll of the trainer, which took over from the main thread waiting for the logger (seen: "thread
    trainer takes over counting the steps", where a join of another thread hands nothing over). Only a
    wait inside the loop that asks is a poll."""
    assert _polled_by_this_thread(_wait)
    looked = threading.Event()
    logger = threading.Thread(target=looked.wait, args=(10,))  # joined until the look is done
    logger.start()
    assert not _polled_by_this_thread(lambda thread: _wait(thread, logger), looked)


def _asking_between_sleeps(thread: threading.Thread) -> Any:
    while thread.is_alive() and (yield):  # the frame stops here, as a look finds a poller inside is_alive()
        time.sleep(0.001)


def _asking_between_steps(thread: threading.Thread) -> Any:
    while thread.is_alive() and (yield):
        sum(range(10))  # a training step


def test_a_poller_caught_asking_between_its_sleeps_polls() -> None:
    """The driver polls ``while t.is_alive(): time.sleep(...)``; a look that lands while it runs
    ``is_alive()`` (now and then on a loaded machine: the CI host's 2 cores missed a take-over so) found it
    at the loop's asking line, not at a sleep, and judged it no poll. A loop that asks and sleeps polls
    wherever it is caught; one that trains between its asks does not."""
    me = threading.current_thread()
    for poller, polls in ((_asking_between_sleeps, True), (_asking_between_steps, False)):
        frames = poller(me)
        next(frames)
        frames.send(True)  # once round the loop: stopped at the asking line inside it
        assert polling.polls_this_thread(frames.gi_frame) is polls, poller.__name__
        frames.close()


_STATE = {"done": False}  # a flag a module's global holds, stored by the training thread after its loop


def _reading_the_flag_between_sleeps() -> Any:
    while not _STATE["done"] and (yield):  # the frame stops here, as a look finds a poller asking
        time.sleep(0.001)


def _reading_the_flag_between_steps() -> Any:
    while not _STATE["done"] and (yield):
        sum(range(10))  # a training step


def test_a_flag_poller_caught_reading_the_flag_between_its_sleeps_polls() -> None:
    """``while not state["done"]: time.sleep(1)``, the training thread storing the flag after its loop: a
    look that lands while the driver reads the flag (its loop's condition, not its sleep) judged it no
    poll, as polling.py did a poller caught inside ``is_alive()``. The same rule now: a loop that reads the
    flag and sleeps polls it wherever it is caught; one that trains between its reads does not."""
    answers: dict[str, bool] = {}

    def train() -> None:
        for poller in (_reading_the_flag_between_sleeps, _reading_the_flag_between_steps):
            frames = poller()
            next(frames)
            frames.send(True)  # once round the loop: stopped at its condition, inside it
            answers[poller.__name__] = released_waits.polls_a_flag_this_thread_sets(frames.gi_frame)
            frames.close()
        _STATE["done"] = True  # after the training loop: what the poll waits for

    _STATE["done"] = False
    thread = threading.Thread(target=train, name="train")
    thread.start()
    thread.join(10)
    assert answers == {"_reading_the_flag_between_sleeps": True, "_reading_the_flag_between_steps": False}


class _AskedInAGeneratorExpression(threading.Thread):
    """A thread that polls itself as ``while any(t.is_alive() for t in threads): time.sleep(...)`` does,
    and looks at that poll from inside the generator expression, where ``is_alive()`` runs: there a look
    of another thread lands while the poller asks."""

    def __init__(self, sleeps: bool) -> None:
        super().__init__(name="poller")
        self.sleeps, self.answers, self.asked = sleeps, list[bool](), 0

    def is_alive(self) -> bool:
        self.asked += 1
        if self.asked == 1:
            return True  # once round the loop: asked again at its end, inside it
        self.answers.append(polling.polls_this_thread(sys._getframe(1)))  # the generator expression's
        return False

    def run(self) -> None:
        threads = [self]
        if self.sleeps:
            while any(thread.is_alive() for thread in threads):
                time.sleep(0.001)
        else:
            while any(thread.is_alive() for thread in threads):
                sum(range(10))  # a training step


def test_a_poller_caught_inside_its_generator_expression_polls() -> None:
    """``while any(t.is_alive() for t in threads): time.sleep(1)``: a look landing inside the generator
    expression (its own frame, whose code neither sleeps nor holds the threads) judged it no poll. The
    line that runs the expression is the loop's: a poll, where the loop sleeps."""
    for sleeps in (True, False):
        poller = _AskedInAGeneratorExpression(sleeps)
        poller.start()
        poller.join(10)
        assert poller.answers == [sleeps], sleeps
