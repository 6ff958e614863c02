"""Free space at the output directory, watched from a background thread (docs/architecture.md, "Safety").

The training step only reads ``ok``: ``statvfs`` on a network filesystem can block, so it never runs
on the step path. Below ``--min-free-space`` a capture is skipped, or stopped and marked incomplete.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from npuprof.byte_sizes import human_bytes

CHECK_INTERVAL_S = 2.0


class DiskGuard:
    def __init__(self, path: str, spec: str, log: Any, interval_s: float = CHECK_INTERVAL_S) -> None:
        self.path = path
        self.spec = spec
        self.log = log
        self.interval_s = interval_s
        self.ok = True  # until measured: the launcher checked before the job started
        self.free = 0
        self.needed = 0
        self._thread: bool | None = None  # its watcher started (npuprof.agent.threads: not listed)

    def start(self) -> None:
        if self._thread is not None or self.spec in ("0", ""):
            return
        self.check()
        from npuprof.agent import threads

        self._thread = True
        threads.start(self._watch, "npuprof-disk")

    def forget_after_fork(self) -> None:
        self._thread = None  # threads do not survive fork; start() makes a new one when needed
        self.ok = True

    def check(self) -> None:
        try:
            from npuprof.config import required_free_bytes

            st = os.statvfs(self.path)
            self.free = st.f_bavail * st.f_frsize
            self.needed = required_free_bytes(self.spec, st.f_blocks * st.f_frsize)
        except Exception as exc:  # an unreadable filesystem: let the writes themselves fail and say so
            self.log.warning(f"free space at {self.path} not known: {exc!r}")
            self.ok = True
            return
        was_ok, self.ok = self.ok, self.free >= self.needed
        if was_ok and not self.ok:
            self.log.warning(self.describe())

    def describe(self) -> str:
        free, needed = human_bytes(self.free), human_bytes(self.needed)
        return f"only {free} free at {self.path}, below --min-free-space ({needed})"

    def _watch(self) -> None:
        from npuprof.agent.untraced import leave_trace

        stop = threading.Event()
        while not stop.wait(self.interval_s):
            leave_trace()
            self.check()
