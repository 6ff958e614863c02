"""A SIGTERM's clock (npuprof.agent.sigterm_clock) that moves only by the code's own pauses: the tests of a
SIGTERM's deadlines judge what the code decided, never how late a loaded machine woke one of its threads."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

# real seconds every thread may stay paused with none of them able to go on: a test that never lets one
STUCK_S = 30.0


class PausesOnlyClock:
    """Time moves only while every thread that takes part is paused on the clock (a sleep, a wait for an
    event, a join), and then to the earliest end of those pauses; never while one of them runs, or may run
    (its event set). A thread takes part from its first pause, or from ``take_part`` (a test's thread, before
    it sets what the test waits for) or ``start`` and ``timer`` (the thread made), until it ends."""

    def __init__(self, now: float = 1000.0) -> None:
        self._now = now
        self._cond = threading.Condition()
        self._parts: set[threading.Thread] = set()
        self._paused: dict[threading.Thread, tuple[float, Callable[[], bool]]] = {}

    # ---- sigterm_clock.Clock ------------------------------------------------------------------
    def monotonic(self) -> float:
        with self._cond:
            return self._now

    def sleep(self, seconds: float) -> None:
        self._pause(lambda now: now + seconds, lambda: False)

    def wait_until(self, event: threading.Event, when: float) -> bool:
        self._pause(lambda now: when, event.is_set)
        return event.is_set()

    def timer(self, when: float, call: Callable[[], None]) -> _Timer:
        return _Timer(self, when, call)

    # ---- the tests' own -----------------------------------------------------------------------
    def take_part(self) -> None:
        """This thread takes part: time stands while it runs."""
        with self._cond:
            self._parts.add(threading.current_thread())

    def start(self, thread: threading.Thread) -> None:
        """Start ``thread``, taking part from now."""
        with self._cond:
            threading.Thread.start(thread)
            self._parts.add(thread)

    def join(self, thread: threading.Thread) -> None:
        """Until ``thread`` ends, time going on meanwhile."""
        self._pause(lambda now: math.inf, lambda: not thread.is_alive())

    # ---------------------------------------------------------------------------------------------
    def _pause(self, until: Callable[[float], float], done: Callable[[], bool]) -> None:
        me = threading.current_thread()
        with self._cond:
            self._parts.add(me)
            when = until(self._now)
            self._paused[me] = (when, done)
            stuck_at = time.monotonic() + STUCK_S
            try:
                while not done() and self._now < when:
                    if self._move_on():
                        stuck_at = time.monotonic() + STUCK_S
                        continue
                    if time.monotonic() > stuck_at:
                        raise RuntimeError(f"the clock stood {STUCK_S:.0f} s: {self._describe()}")
                    self._cond.wait(0.001)  # an event set does not notify: looked at again soon
            finally:
                del self._paused[me]
                self._cond.notify_all()

    def _move_on(self) -> bool:
        """(The lock held.) Time moved to the earliest end of a pause, if every thread that takes part is
        paused and none may go on: whether it was."""
        self._parts = {thread for thread in self._parts if thread.is_alive()}
        if any(thread not in self._paused for thread in self._parts):
            return False
        if any(done() or when <= self._now for when, done in self._paused.values()):
            return False  # a pause that has ended, its thread yet to go on
        when = min(when for when, _ in self._paused.values())
        if when == math.inf:
            return False
        self._now = max(self._now, when)
        self._cond.notify_all()
        return True

    def _describe(self) -> str:
        running = [thread.name for thread in self._parts if thread not in self._paused]
        paused = {thread.name: when for thread, (when, _) in self._paused.items()}
        return f"at {self._now}, running {running}, paused until {paused}"


class _Timer(threading.Thread):
    """sigterm_clock.Clock.timer on a PausesOnlyClock: takes part from its start."""

    def __init__(self, clock: PausesOnlyClock, when: float, call: Callable[[], None]) -> None:
        super().__init__(daemon=True)
        self._clock, self._when, self._call = clock, when, call
        self._cancelled = threading.Event()

    def start(self) -> None:
        self._clock.start(self)

    def cancel(self) -> None:
        self._cancelled.set()

    def run(self) -> None:
        if not self._clock.wait_until(self._cancelled, self._when):
            self._call()
