"""Free space at the output directory, watched from a background thread (docs/architecture.md, "Safety").

The training step only reads what was measured (``ok_for``): ``statvfs`` on a network filesystem can block,
so it never runs on the step path. Below ``--min-free-space`` a capture is skipped, or stopped and marked
incomplete. Each capture is judged by the filesystem it writes to: ``-o``'s, or a ``--dynamic`` request's
``prof_dir``'s, measured from the moment the request is loaded (``watch``).
"""

from __future__ import annotations

import os
import stat
import threading
import time
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
        self._measured_at: dict[str, float] = {}  # time.time() of each directory's last measurement
        # bytes this process wrote into each directory since its last measurement (its raw traces): captures
        # a second apart (--repeat 0) were let begin on one measurement until the next, 2 s of traces below
        # --min-free-space (helper-374)
        self._taken: dict[str, int] = {}
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
        self._measured_at.clear()
        self._taken.clear()

    def watch(self, path: str) -> None:
        """Measure ``path`` too from now on: the directory a --dynamic request captures into (its
        ``prof_dir``, maybe on another filesystem than -o: the capture filled that one while -o's was
        watched). Measured at once, in the caller's thread (the request's watcher, never the step path)."""
        if self._off():
            return
        self._room.pop(path, None)  # the newest last: the oldest are let go first
        self._measure(path)
        while len(self._room) > WATCHED_MOST:
            oldest = next(p for p in self._room if p != self.path)
            del self._room[oldest]
            self._measured_at.pop(oldest, None)
            self._taken.pop(oldest, None)

    def took(self, path: str, size: int) -> None:
        """``size`` bytes were just written into ``path`` (a capture's raw trace, at its end): counted
        against its last measurement until the next one."""
        if path in self._room:
            self._taken[path] = self._taken.get(path, 0) + size

    def _free(self, path: str) -> int:
        """The bytes free at ``path`` as last measured, less what this process wrote there since (0 where it
        was never measured)."""
        return self._room.get(path, (0, 0))[0] - self._taken.get(path, 0)

    def ok_for(self, path: str) -> bool:
        """Whether a capture may write into ``path``, as last measured."""
        room = self._room.get(path)
        return room is None or self._free(path) >= room[1]

    def measured_at(self, path: str) -> float | None:
        """When ``path`` was last measured (``time.time()``), or None."""
        return self._measured_at.get(path)

    def short_of(self, path: str, wanted: int, written: int = 0) -> str:
        """Why writing ``wanted`` more bytes into ``path`` would take its disk below --min-free-space, as
        last measured (the step's own writes ask here: no statvfs on the step path) less ``written``, the
        bytes written there since; "" when it would not, or when ``path`` is not measured. ``wanted`` 0:
        whether it is below already."""
        room = self._room.get(path)
        if room is None:
            return ""
        free, needed = self._free(path) - written, room[1]
        if wanted <= 0:
            return "" if free >= needed else self._below(path, free, needed, written)
        from npuprof.results.free_space import room_words

        return room_words(wanted, free, needed)

    def _below(self, path: str, free: int, needed: int, written: int) -> str:
        if not written:
            return self.describe(path)
        return (
            f"only {human_bytes(max(free, 0))} free at {path} once the {human_bytes(written)} written there "
            f"since it was measured are counted, below --min-free-space ({human_bytes(needed)})"
        )

    def describe(self, path: str) -> str:
        free, needed = human_bytes(max(self._free(path), 0)), human_bytes(self._room.get(path, (0, 0))[1])
        return f"only {free} free at {path}, below --min-free-space ({needed})"

    def fix(self, path: str) -> str:
        """The --min-free-space values that let captures into ``path`` run, as last measured there."""
        from npuprof.results.free_space import floor_advice

        return floor_advice(max(self._free(path), 0))

    def check(self) -> None:
        for path in dict.fromkeys([self.path, *self._room]):
            self._measure(path)

    def _off(self) -> bool:
        return self.spec in ("0", "")

    def _measure(self, path: str) -> None:
        try:
            from npuprof.config import required_free_bytes

            when = time.time()
            counted = self._taken.get(path, 0)  # in what statvfs now sees; a write noted after it is not
            st = _statvfs_of_the_place(path)
            room = (st.f_bavail * st.f_frsize, required_free_bytes(self.spec, st.f_blocks * st.f_frsize))
        except Exception as exc:  # an unreadable filesystem: let the writes themselves fail and say so
            self.log.warning(f"free space at {path} not known: {exc!r}")
            self._room.pop(path, None)
            self._measured_at.pop(path, None)
            return
        was_ok = self.ok_for(path)
        self._room[path] = room
        self._taken[path] = max(self._taken.get(path, 0) - counted, 0)
        self._measured_at[path] = when
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


# file times come from the kernel's coarse clock, up to a tick behind time.time(): a file written right after
# a measurement may carry a time just before it
MTIME_SLACK_S = 0.05


def bytes_written_since(directory: str | os.PathLike[str], since: float) -> int:
    """The bytes of the regular files under ``directory`` last modified at ``since`` or later: what was
    written there after a measurement (torch_npu's data and parse, in the step that ended its capture).
    Links are not followed; an entry that cannot be read counts nothing."""
    total = 0
    for root, _dirs, files in os.walk(directory):
        for name in files:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            if st.st_mtime >= since - MTIME_SLACK_S and stat.S_ISREG(st.st_mode):
                total += st.st_size
    return total
