"""What a capture records besides the profiler's trace: the user's marks, ``--msprof-tx``'s communication
ranges and ``--gc-detect-threshold``'s GC pauses (README, "Marks, communication ranges and GC"). Begun and
ended with each capture by its writer (agent/capture.py); nothing here may fail a capture."""

from __future__ import annotations

from typing import Any

from npuprof import marks
from npuprof.agent.log import AgentLog

MARKS_FILE = "npuprof_marks.json"
MARKS_VERSION = 1


class CaptureAnnotations:
    def __init__(self, backend: Any, log: AgentLog) -> None:
        self.log = log
        self.own_layout = bool(backend.writes_own_layout)  # torch_npu: marks and GC are its own
        self._gc: Any = None
        try:
            marks.use_backend(backend.name)
        except Exception as exc:
            log.warning(f"marks: {exc!r}")

    def begin(self, cfg: Any) -> None:
        try:
            self._stop_gc()
            marks.capture_began()
            from npuprof.agent import comm_marks

            comm_marks.set_enabled(cfg.msprof_tx)
            if cfg.msprof_tx:
                comm_marks.install(self.log)  # idempotent: normally done when the agent woke
            if cfg.gc_detect_threshold is not None and not self.own_layout:
                from npuprof.agent.gc_watch import GcWatch

                self._gc = GcWatch(cfg.gc_detect_threshold)
                self._gc.start()
        except Exception as exc:
            self.log.warn_once("annotations", f"marks / GC detection off for this capture: {exc!r}")

    def end(self) -> dict[str, Any]:
        """The side files of the capture that ends (name -> JSON content); {} on torch_npu."""
        files: dict[str, Any] = {}
        try:
            gc_record = self._stop_gc()
            names = marks.capture_ended()
            if self.own_layout:
                return {}
            if gc_record is not None:
                from npuprof.agent.gc_watch import FILE_NAME

                files[FILE_NAME] = gc_record
                if gc_record["dropped"]:
                    self.log.warn_once(
                        "gc-dropped",
                        f"GC detection kept the first {len(gc_record['events'])} pauses of a capture and "
                        f"counted {gc_record['dropped']} more; raise --gc-detect-threshold",
                    )
            if names["names"] or names["names_not_listed"]:
                files[MARKS_FILE] = {"version": MARKS_VERSION, **names}
        except Exception as exc:
            self.log.warning(f"marks / GC detection: the capture's side files were not made: {exc!r}")
        return files

    def _stop_gc(self) -> dict[str, Any] | None:
        watch, self._gc = self._gc, None
        return watch.stop() if watch is not None else None
