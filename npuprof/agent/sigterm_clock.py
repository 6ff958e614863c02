"""The clock of a SIGTERM's way to the process's death (docs/architecture.md, "Signals").

Every deadline on that way counts from the signal's arrival (``SigtermGuard._note_arrival``): a hold's end,
the watcher's grace, a started handler's limit, the controller's waits for the thread that records, the
hand-over's wait for the pipe. They all read and wait on ``CLOCK``, time.monotonic and the threading
module's own waits here; one clock for them all is what lets a test put in its own (one that moves only by
the code's pauses) and judge what the code decided, not how late a loaded machine woke a thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol


class Timer(Protocol):
    daemon: bool

    def start(self) -> None: ...

    def cancel(self) -> None: ...


class Clock:
    """time.monotonic, and the waits of threading, counted on it."""

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def wait_until(self, event: threading.Event, when: float) -> bool:
        """Until ``event`` is set or the clock reads ``when``: whether it was set."""
        return event.wait(max(0.0, when - self.monotonic()))

    def timer(self, when: float, call: Callable[[], None]) -> Timer:
        """A daemon thread, not yet started, that calls ``call`` when the clock reads ``when`` unless
        cancelled first."""
        timer = threading.Timer(max(0.0, when - self.monotonic()), call)
        timer.daemon = True
        return timer


CLOCK = Clock()
