"""Free space at the output directory, watched from a background thread (docs/architecture.md, "Safety").

The training step only reads what was measured (``ok_for``): ``statvfs`` on a network filesystem can block,
so it never runs on the step path. Below ``--min-free-space`` a capture is skipped, or stopped and marked
incomplete. Each capture is judged by the filesystem it writes to: ``-o``'s, or a ``--dynamic`` request's
``prof_dir``'s, measured from the moment the request is loaded (``watch``).
"""

from __future__ import annotations

import os
import threading
from typing import Any

from npuprof.byte_sizes import human_bytes

CHECK_INTERVAL_S = 2.0
# directories measured at once: -o, the capture in flight's and the next request's, and a few before them
WATCHED_MOST = 8


class DiskGuard:
    def __init__(self, path: str, spec: str, log: Any, interval_s: float = CHECK_INTERVAL_S) -> None:
        self.path = path  # -o
        self.spec = spec
        self.log = log
        self.interval_s = interval_s
        # (free, needed) bytes last measured in each directory watched; one not measured yet is ok (the
        # launcher checked -o before the job started)
        self._room: dict[str, tuple[int, int]] = {}
        self._thread: bool | None = None  # its watcher started (npuprof.agent.threads: not listed)

    def start(self) -> None:
        if self._thread is not None or self._off():
            return
        self.check()
        from npuprof.agent import threads

        self._thread = True
        threads.start(self._watch, "npuprof-disk")

    def forget_after_fork(self) -> None:
        self._thread = None  # threads do not survive fork; start() makes a new one when needed
        self._room.clear()

    def watch(self, path: str) -> None:
        """Measure ``path`` too from now on: the directory a --dynamic request captures into (its
        ``prof_dir``, maybe on another filesystem than -o: the capture filled that one while -o's was
        watched). Measured at once, in the caller's thread (the request's watcher, never the step path)."""
        if self._off():
            return
        self._room.pop(path, None)  # the newest last: the oldest are let go first
        self._measure(path)
        while len(self._room) > WATCHED_MOST:
            del self._room[next(p for p in self._room if p != self.path)]

    def ok_for(self, path: str) -> bool:
        """Whether a capture may write into ``path``, as last measured."""
        room = self._room.get(path)
        return room is None or room[0] >= room[1]

    def short_of(self, path: str, wanted: int) -> str:
        """Why writing ``wanted`` more bytes into ``path`` would take its disk below --min-free-space, as
        last measured (the step's own writes ask here: no statvfs on the step path); "" when it would not,
        or when ``path`` is not measured. ``wanted`` 0: whether it is below already."""
        room = self._room.get(path)
        if room is None:
            return ""
        if wanted <= 0:
            return "" if self.ok_for(path) else self.describe(path)
        from npuprof.results.free_space import room_words

        return room_words(wanted, *room)

    def describe(self, path: str) -> str:
        free, needed = (human_bytes(n) for n in self._room.get(path, (0, 0)))
        return f"only {free} free at {path}, below --min-free-space ({needed})"

    def check(self) -> None:
        for path in dict.fromkeys([self.path, *self._room]):
            self._measure(path)

    def _off(self) -> bool:
        return self.spec in ("0", "")

    def _measure(self, path: str) -> None:
        try:
            from npuprof.config import required_free_bytes

            st = _statvfs_of_the_place(path)
            room = (st.f_bavail * st.f_frsize, required_free_bytes(self.spec, st.f_blocks * st.f_frsize))
        except Exception as exc:  # an unreadable filesystem: let the writes themselves fail and say so
            self.log.warning(f"free space at {path} not known: {exc!r}")
            self._room.pop(path, None)
            return
        was_ok = self.ok_for(path)
        self._room[path] = room
        if was_ok and not self.ok_for(path):
            self.log.warning(self.describe(path))

    def _watch(self) -> None:
        from npuprof.agent.untraced import leave_trace

        stop = threading.Event()
        while not stop.wait(self.interval_s):
            leave_trace()
            self.check()


def _statvfs_of_the_place(path: str) -> os.statvfs_result:
    """The filesystem ``path`` is, or will be, made on: a request's ``prof_dir`` is made at its capture's
    start, so its nearest existing parent is measured until then."""
    while True:
        try:
            return os.statvfs(path)
        except FileNotFoundError:
            parent = os.path.dirname(path)
            if parent == path:
                raise
            path = parent
