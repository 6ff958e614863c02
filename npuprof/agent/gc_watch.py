"""``--gc-detect-threshold MS`` on torch.profiler backends: the Python GC pauses of a capture at or above
the threshold (0 = all), written at the capture's end into its rank dir as ``npuprof_gc.json``
(docs/formats.md, "npuprof_gc.json"), which the parser turns into the ``GC`` layer of trace_view.json.

torch_npu detects GC itself (``gc_detect_threshold`` is handed to it). Here a ``gc.callbacks`` entry
notes each collection's start and end with ``time.perf_counter_ns`` (one call and, at the end, one compare
and one append: it runs inside every collection), only while a capture records; the times become epoch
nanoseconds when the capture ends, so that they line up with the trace (Kineto's
``baseTimeNanoseconds`` + ``ts``)."""

from __future__ import annotations

import gc
import os
import time
from typing import Any

from npuprof.agent import epoch_clock

FILE_NAME = "npuprof_gc.json"
VERSION = 1
# at most this many pauses a capture (a threshold of 0 on a job that allocates many small objects sees
# thousands of generation-0 collections a second); the rest are counted
EVENTS_LIMIT = 50_000

_watches: list[GcWatch] = []  # the one running in this process, if any (forked children drop it)


class GcWatch:
    def __init__(self, threshold_ms: float, limit: int = EVENTS_LIMIT) -> None:
        self.threshold_ms = float(threshold_ms)
        self._threshold_ns = int(self.threshold_ms * 1_000_000)
        self._limit = limit
        self._events: list[tuple[int, int, int, int, int]] = []
        self._started_ns = 0  # the collection in progress, 0 when none
        self.dropped = 0
        self._offset: epoch_clock.EpochOffset | None = None
        # the list the callback went into: the one Python calls, which a script may have put another in
        # gc.callbacks' place for (``gc.callbacks = []``) before the capture or during it
        self._callbacks: list[Any] | None = None

    def start(self) -> None:
        for other in list(_watches):
            other.stop()
        self._offset = epoch_clock.read()
        self._callbacks = _called_callbacks()
        # first, not last (helper-215): a script's ``gc.callbacks.append(cb)`` ... ``gc.callbacks.pop()``
        # around a step popped the watch's entry when a capture began between the two, leaving the
        # script's callback in for good (its own counts doubled, npuprof's pauses gone); and Python walks
        # the list as it changes, so a callback before the watch's that removed itself (a one-shot) made
        # the watch miss that collection's start or end, its pause lost without a word
        self._callbacks.insert(0, self._callback)
        _watches.append(self)

    def stop(self) -> dict[str, Any]:
        """Stop watching; the capture's pauses as ``npuprof_gc.json`` holds them. ``removed`` when the
        script took the callback out of ``gc.callbacks`` during the capture (``gc.callbacks.clear()``): the
        pauses after that are missing, which the file says (docs/formats.md, "npuprof_gc.json")."""
        callbacks, self._callbacks = self._callbacks, None
        removed = False
        if callbacks is not None:
            try:
                callbacks.remove(self._callback)
            except ValueError:
                removed = True
        if self in _watches:
            _watches.remove(self)
        offset = epoch_clock.over_a_capture(self._offset, epoch_clock.read())
        events = [
            {
                "start_ns": start + offset,
                "end_ns": end + offset,
                "generation": generation,
                "collected": collected,
                "uncollectable": uncollectable,
            }
            for start, end, generation, collected, uncollectable in self._events
        ]
        self._events = []
        record = {
            "version": VERSION,
            "pid": os.getpid(),
            "threshold_ms": self.threshold_ms,
            "clock": "epoch_ns",
            "events": events,
            "dropped": self.dropped,
        }
        if removed:
            record["removed"] = True
        return record

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started_ns = time.perf_counter_ns()
            return
        end = time.perf_counter_ns()
        start, self._started_ns = self._started_ns, 0
        if start and end - start >= self._threshold_ns:
            if len(self._events) < self._limit:
                self._events.append(
                    (start, end, info["generation"], info["collected"], info["uncollectable"])
                )
            else:
                self.dropped += 1


def _called_callbacks() -> list[Any]:
    """The list Python calls at each collection. ``gc.callbacks`` is only the gc module's name for it: a
    script that bound the name to a list of its own (``gc.callbacks = []``) before the capture left the
    watch in a list Python never calls, its capture's npuprof_gc.json without a pause and without a word
    (helper-186). A new instance of the builtin module (multi-phase, ~10 µs) is given the list Python
    calls under that name again; where it cannot be made, ``gc.callbacks``."""
    try:
        import importlib.util

        spec = importlib.util.find_spec("gc")
        if spec is not None and spec.loader is not None:
            fresh = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(fresh)
            called = getattr(fresh, "callbacks", None)
            if called.__class__ is list:
                return called
    except Exception:
        pass
    return gc.callbacks


def _forget_in_child() -> None:
    """A forked child (a DataLoader worker) does not record the parent's capture."""
    for watch in list(_watches):
        callbacks, watch._callbacks = watch._callbacks, None
        if callbacks is not None and watch._callback in callbacks:
            callbacks.remove(watch._callback)
    _watches.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
