"""One capture's files: the rank dir, its capture record, profiler_info and metadata, extras,
then the background post-processing. A capture that never finishes keeps status "capturing".

These run inside a training step, so the small files skip fsync (~5 ms each here): still atomic for
readers; the background job rewrites the capture record, with fsync, once it has gzipped the trace."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from npuprof.agent.backends.base import Backend
from npuprof.agent.log import AgentLog
from npuprof.agent.metadata import build_metadata
from npuprof.config import ProfileConfig
from npuprof.results import layout, postprocess
from npuprof.results.atomic import make_dir, write_json


class CaptureWriter:
    def __init__(
        self,
        cfg: ProfileConfig,
        run: dict[str, Any],
        backend: Backend,
        log: AgentLog,
        rank_fn: Any,
        worker: str,
    ) -> None:
        self.cfg = cfg
        self.run = run
        self.backend = backend
        self.log = log
        self.rank_fn = rank_fn
        self.worker = worker
        self.output = Path(cfg.output)
        self.rank_dir: Path | None = None
        self.first_step = 0
        self.start_info: dict[str, Any] = {}
        self.captures = 0

    # ---- CaptureSink -----------------------------------------------------------------------------
    def begin(self, step: int) -> None:
        self.first_step = step
        self.start_info = {
            "collectionTimeBegin": time.time_ns(),
            "MonotonicTimeBegin": time.monotonic_ns(),
            "syscntEnable": False,
        }
        if self.backend.writes_own_layout:
            self.rank_dir = None
            return
        name = layout.rank_dir_name(self.worker, os.getpid(), layout.timestamp_ms())
        make_dir(self.output)
        rank_dir = self.output / name
        rank_dir.mkdir(mode=0o750)
        self.rank_dir = rank_dir
        self._record(layout.STATUS_CAPTURING, steps=[step])
        self.log.info(f"capture started at step {step} into {rank_dir}")

    def finish(self, prof: Any, last_step: int, detail: str = "") -> None:
        steps = list(range(self.first_step, last_step + 1))
        rank_dir, trace = self.backend.export_raw(prof, self.rank_dir, self.worker)
        self.rank_dir = rank_dir
        rank = self.rank_fn()
        if not self.backend.writes_own_layout:
            self._write_info(rank)
            write_json(rank_dir / layout.METADATA_FILE, build_metadata(self.cfg.metadata), fsync=False)
        written = self._extras(prof, rank_dir)
        self._record(
            layout.STATUS_COMPLETE,
            steps=steps,
            trace=trace.name if trace else None,
            detail=detail,
            extras=[p.name for p in written],
            rank=rank,
        )
        self.captures += 1
        self.log.info(
            f"capture of steps {steps[0]}-{steps[-1]} written to {rank_dir}"
            + (f" ({detail})" if detail else "")
        )
        analyse = self.cfg.analyse and not self.backend.writes_own_layout
        try:
            postprocess.spawn(self.output, rank_dir, trace, gzip_trace=self.cfg.gzip, analyse=analyse)
        except OSError as exc:
            self.log.warning(f"could not start background post-processing for {rank_dir}: {exc!r}")
        self.rank_dir = None

    def abandon(self, detail: str) -> None:
        try:
            if self.rank_dir is not None and self.rank_dir.exists():
                self._record(layout.STATUS_INCOMPLETE, steps=[self.first_step], detail=detail)
        except OSError as exc:  # a full disk: the record keeps saying "capturing", which reads as incomplete
            self.log.error(f"could not mark {self.rank_dir} incomplete: {exc!r}")
        self.rank_dir = None

    # ---- files -----------------------------------------------------------------------------------
    def _record(self, status: str, **fields: Any) -> None:
        if self.rank_dir is None:
            return
        record = {
            "status": status,
            "run_id": self.run.get("run_id"),
            "pid": os.getpid(),
            "rank": self.rank_fn(),
            "worker": self.worker,
            "backend": self.backend.name,
            "device": self.backend.device,
            "updated_ns": time.time_ns(),
        }
        record.update(fields)
        write_json(self.rank_dir / layout.CAPTURE_RECORD, record, fsync=False)

    def _write_info(self, rank: int | None) -> None:
        assert self.rank_dir is not None
        info: dict[str, Any] = {
            "config": {
                "common_config": self.cfg.common_config(),
                "experimental_config": self.cfg.experimental_config(),
            },
            "start_info": self.start_info,
            "end_info": {"collectionTimeEnd": time.time_ns(), "MonotonicTimeEnd": time.monotonic_ns()},
        }
        info.update(self.backend.version_info())
        if rank is not None:
            info["rank_id"] = rank
        write_json(self.rank_dir / layout.info_file_name(rank), info, fsync=False)

    def _extras(self, prof: Any, rank_dir: Path) -> list[Path]:
        if not (self.cfg.export_stacks or self.cfg.memory_timeline):
            return []
        # Metrics that mean nothing on this backend were reported by Backend.ignored_flags.
        metrics = [m for m in self.cfg.export_stacks if metric_fits(m, self.backend.name)]
        try:
            from npuprof.agent.capture_exports import export_capture_extras

            return export_capture_extras(
                prof,
                rank_dir,
                stacks_metrics=metrics,
                memory_formats=list(self.cfg.memory_timeline),
                device=self.backend.device,
                log=self.log.warning,
            )
        except Exception as exc:
            self.log.warning(f"stack / memory export failed: {exc!r}")
            return []


def metric_fits(metric: str, backend: str) -> bool:
    if metric == "self_cpu_time_total":
        return True
    if metric == "self_cuda_time_total":
        return backend == "torch-cuda"
    return backend == "torch_npu"
