"""What a capture records besides the profiler's trace: the user's marks, ``--msprof-tx``'s communication
ranges and ``--gc-detect-threshold``'s GC pauses (README, "Marks, communication ranges and GC"). Begun and
ended with each capture by its writer (agent/capture.py); nothing here may fail a capture."""

from __future__ import annotations

from typing import Any

from npuprof import marks
from npuprof.agent.log import AgentLog

MARKS_FILE = "npuprof_marks.json"
MARKS_VERSION = 1
GC_REMOVED = (
    "GC detection: the script took npuprof's entry out of gc.callbacks during a capture "
    "(gc.callbacks.clear()?), so that capture's npuprof_gc.json misses the pauses after that (it says so: "
    "removed); fix: leave gc.callbacks' other entries in place (remove your own)"
)


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

            comm_marks.stop_collecting()  # a capture that ended without end()
            comm_marks.set_enabled(cfg.msprof_tx)
            if cfg.msprof_tx:
                comm_marks.install(self.log)  # idempotent: normally done when the agent woke
                if not self.own_layout:  # torch_npu's mstx records them itself
                    comm_marks.start_collecting()
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
            comm_record = self._stop_comm()
            names = marks.capture_ended()
            if self.own_layout:
                return {}
            if comm_record is not None:
                from npuprof.agent.comm_marks import FILE_NAME as COMM_FILE

                files[COMM_FILE] = comm_record
                self._say_dropped(
                    "comm-dropped",
                    comm_record,
                    "ranges",
                    "--msprof-tx",
                    "communication ranges",
                    "capture fewer steps",
                )
            if gc_record is not None:
                from npuprof.agent.gc_watch import FILE_NAME

                files[FILE_NAME] = gc_record
                self._say_dropped(
                    "gc-dropped", gc_record, "events", "GC detection", "pauses", "raise --gc-detect-threshold"
                )
                if gc_record.get("removed"):
                    self.log.warn_once("gc-removed", GC_REMOVED)
            if names["names"] or names["names_not_listed"]:
                files[MARKS_FILE] = {"version": MARKS_VERSION, **names}
        except Exception as exc:
            self.log.warning(f"marks / GC detection: the capture's side files were not made: {exc!r}")
        return files

    def _say_dropped(
        self, key: str, record: dict[str, Any], items: str, who: str, what: str, fix: str
    ) -> None:
        """One warning when a capture's side file kept only its first spans and counted the rest."""
        if record["dropped"]:
            self.log.warn_once(
                key,
                f"{who} kept the first {len(record[items])} {what} of a capture and counted "
                f"{record['dropped']} more; {fix}",
            )

    def _stop_comm(self) -> dict[str, Any] | None:
        """The capture's communication ranges; None without them (or when they could not be kept: the
        other side files are written all the same)."""
        try:
            from npuprof.agent import comm_marks

            return comm_marks.stop_collecting()
        except Exception as exc:
            self.log.warn_once("comm-ranges", f"--msprof-tx: the communication ranges were lost: {exc!r}")
            return None

    def _stop_gc(self) -> dict[str, Any] | None:
        watch, self._gc = self._gc, None
        return watch.stop() if watch is not None else None
