"""One capture's files: the rank dir, its capture record, profiler_info and metadata, extras.
A capture that never finishes keeps status "capturing".

Only the raw trace export (and, for a memory timeline, a copy of what it needs from the live profiler:
npuprof.agent.capture_exports) and the capture's small files happen inside the training step: once the
trace is written, the capture's record says "complete" at once, so that a process ending right after
(os._exit, SIGKILL) leaves a complete capture. Parsing, stacks, memory timelines and gzip are the
post-processor's work (npuprof.results.postprocess), handed over as one job; what it could not do,
`npuprof analyse` / `export-stacks` / `memory-timeline` do later."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from npuprof.agent.backends.base import Backend
from npuprof.agent.capture_annotations import CaptureAnnotations
from npuprof.agent.log import AgentLog, raised_by_a_signal_handler
from npuprof.agent.metadata import build_metadata
from npuprof.agent.signals import CAPTURE_FILES, export_hold
from npuprof.config import ProfileConfig, other_device_line
from npuprof.results import handover, layout, postprocess
from npuprof.results.atomic import make_dir, write_json
from npuprof.results.logfile import KEPT_UNPARSED

if TYPE_CHECKING:
    from npuprof.agent.capture_exports import CaptureExports


class CaptureWriter:
    def __init__(
        self,
        cfg: ProfileConfig,
        run: dict[str, Any],
        backend: Backend,
        log: AgentLog,
        rank_fn: Any,
        worker: str,
        post: postprocess.Postprocessor | None = None,
        space: Any = None,
    ) -> None:
        self.cfg = cfg
        self.space = space  # the disk guard (npuprof.agent.disk_guard), or None
        self.run = run
        self.backend = backend
        self.log = log
        self.rank_fn = rank_fn
        self.worker = worker
        self.output = Path(cfg.output)
        self.rank_dir: Path | None = None
        self.first_step = 0
        self.first_step_partial = False
        # the step whose boundary started the profiler of the next capture and the ms that took (set by the
        # controller; docs/formats.md, the capture record's start_ms)
        self.start_cost: tuple[int, float] | None = None
        self.start_info: dict[str, Any] = {}
        self.post = post if post is not None else postprocess.Postprocessor(self.output, run.get("run_id"))
        self._skips_reported: set[Path] = set()  # the directories a skipped capture was recorded in
        self._roots_noted: set[Path] = set()
        self.annotations = CaptureAnnotations(backend, log)  # marks, communication ranges, GC pauses
        self._began: tuple[int, int | None] | None = None  # (pid, its start): _process_start_ns
        if handover.restart_count_from_env(os.environ) is not None:
            self._process_start_ns()  # read here, off the step that begins the first capture

    # ---- CaptureSink -----------------------------------------------------------------------------
    def begin(self, step: int, cfg: ProfileConfig | None = None) -> None:
        if cfg is not None:
            self.cfg = cfg  # this capture's configuration (a plan may change it between captures)
            self.output = Path(cfg.output)  # --dynamic: each request's prof_dir
        self.first_step = step
        self.first_step_partial = False  # set by the controller when recording began inside this step
        self.start_info = {
            "collectionTimeBegin": time.time_ns(),
            "MonotonicTimeBegin": time.monotonic_ns(),
            "syscntEnable": False,
        }
        self.annotations.begin(self.cfg)
        self._note_root(self.output)
        if self.backend.writes_own_layout:
            self.rank_dir = None
            return
        # A SIGTERM waits until the capture's directory and record are made (a few ms): its finalise,
        # run inside them, found no capture and left only the record's temporary (helper-107).
        with export_hold(CAPTURE_FILES):
            make_dir(self.output)
            rank_dir = layout.new_rank_dir(self.output, self.worker)
            try:
                write_json(
                    rank_dir / layout.CAPTURE_RECORD,
                    self._record(layout.STATUS_CAPTURING, steps=[step]),
                    fsync=False,
                )
            except OSError:  # a full disk: no empty directory left behind for each window it skips
                with contextlib.suppress(OSError):
                    rank_dir.rmdir()
                raise
            self.rank_dir = rank_dir
        self._start_postprocessor()
        self.log.info(f"capture started at step {step} into {rank_dir}")

    def _note_root(self, output: Path) -> None:
        """A capture into a directory besides the run's -o (--dynamic's prof_dir) is noted in -o, once per
        directory, so that the run's summary and report find it; one below -o too (a relative prof_dir,
        ``sub``): the summary looks into -o itself only, and said of its captures that none was written."""
        run_output, run_id = self.run.get("output"), self.run.get("run_id")
        if not run_output or not isinstance(run_id, str) or output in self._roots_noted:
            return
        self._roots_noted.add(output)
        root = Path(os.path.abspath(output))
        if root == Path(os.path.abspath(run_output)):
            return  # found there
        try:
            layout.note_capture_root(Path(run_output), run_id, root)
        except OSError as exc:
            self.log.warning(f"cannot note in {run_output} the captures made into {root}: {exc!r}")

    def _start_postprocessor(self) -> None:
        if self.post.running:
            return
        try:
            self.post.start()
        except OSError as exc:
            from npuprof.results.postprocess import not_started

            self.log.warn_once("post-not-started", not_started(exc))

    def steps_begin_at(self, step: int) -> None:
        """The capture began before the job's first step (a time window): its steps start at ``step``."""
        self.first_step = step

    def finish(
        self,
        prof: Any,
        last_step: int,
        detail: str = "",
        status: str = layout.STATUS_COMPLETE,
        last_partial: bool = False,
        ending_since: float | None = None,
    ) -> None:
        """``ending_since``: the perf_counter time the step boundary that ends the capture began (torch's
        stop and event collection come before this); the record's ``export_ms`` counts from it."""
        from npuprof.agent.signals import export_hold, script_handlers_deferred, sigint_held_back

        began = time.perf_counter() if ending_since is None else ending_since
        # A Ctrl-C, a SIGTERM or the script's own handlers now must not lose a trace that is all but
        # written: all wait for the end.
        with sigint_held_back(), export_hold(), script_handlers_deferred():
            self._finish(prof, last_step, detail, status, last_partial, began)

    def _finish(
        self, prof: Any, last_step: int, detail: str, status: str, last_partial: bool, began: float
    ) -> None:
        steps = list(range(self.first_step, last_step + 1))
        side_files = self.annotations.end()
        end_info = {"collectionTimeEnd": time.time_ns(), "MonotonicTimeEnd": time.monotonic_ns()}
        if self.backend.writes_own_layout:
            self._start_postprocessor()  # torch_npu made the dir; the capture record still goes in it
        else:
            self._say_export_began(steps, last_partial)
        try:
            rank_dir, trace = self.backend.export_raw(prof, self.rank_dir, self.worker)
        except Exception as exc:
            if raised_by_a_signal_handler(exc):
                self.abandon(f"trace export interrupted by the script's signal handler: {exc!r}", steps)
                raise
            self.log.warn_once("export", f"the trace of {_steps_text(steps)} was not written: {exc}")
            self.abandon(f"trace export failed: {exc}", steps)
            return
        from npuprof.agent.signals import note_exported

        note_exported()
        self._took_room(trace)
        self.rank_dir = rank_dir
        rank = self.rank_fn()
        chrome_copy = (
            self._export_chrome_trace(rank_dir, trace, rank, steps[0] if steps else self.first_step)
            if self.cfg.export_chrome_trace
            else None
        )
        files: dict[str, Any] = {}
        if not self.backend.writes_own_layout:
            files[layout.info_file_name(rank)] = self._info(rank, end_info)
            files[layout.METADATA_FILE] = build_metadata(self.cfg.metadata, self.log.warn_once)
            files.update(side_files)
        exports = self._extras(prof, rank_dir)
        # this capture's own start (the next one's is measured again): the step whose boundary held it
        started, self.start_cost = self.start_cost, None
        start = {"start_after_step": started[0], "start_ms": started[1]} if started is not None else {}
        record = self._record(
            status,
            steps=steps,
            trace=trace.name if trace else None,
            detail=detail,
            last_step_partial=last_partial and bool(steps),
            first_step_partial=True if self.first_step_partial and steps else None,
            extras=[p.name for p in exports.written] if exports else [],
            rank=rank,
            step_on=self.cfg.step_on,
            **start,
        )
        own = not self.backend.writes_own_layout
        job = {
            "rank_dir": str(rank_dir),
            "trace": str(trace) if trace else None,
            "files": files,
            "record": record,
            "analyse": self.cfg.analyse and own,
            "export_db": self.cfg.export_db and own,
            "gzip": self.cfg.gzip and own,
            "exports": exports.job if exports else None,
            "chrome_trace": chrome_copy,
            "min_free_space": str(getattr(self.cfg, "min_free_space", "auto")),
        }
        self._write_now(job, began)
        if not self.post.submit(job):
            write_job_files(job, self.log)
            if chrome_copy is not None:
                from npuprof.agent.chrome_trace import copy_in_background

                copy_in_background(Path(chrome_copy[0]), Path(chrome_copy[1]), self.log)
        self.log.info(
            f"capture of {_steps_text(steps)} written to {rank_dir}"
            + (f" ({detail})" if detail else "")
            + (f"; {exports.step_note}" if exports and exports.step_note else "")
        )
        self.rank_dir = None

    def _say_export_began(self, steps: list[int], last_partial: bool) -> None:
        """The record, still "capturing", rewritten with every step recorded and ``export_began`` before
        torch writes the trace (seconds for a big one): a job killed in that export leaves a record that
        names its steps, not its first alone (docs/formats.md, the capture record). A write that fails is
        left at that (the record then names the first step only): never in place over the record, whose
        "capturing" keeps the part of a trace a death leaves (results/cut_capture.py), and a disk too full
        for this small file has no room for the trace either."""
        if self.rank_dir is None:
            return
        record = self._record(
            layout.STATUS_CAPTURING,
            steps=steps,
            last_step_partial=last_partial and bool(steps),
            first_step_partial=True if self.first_step_partial and steps else None,
            export_began=True,
            exports_asked=self._made_after_the_trace() or msgspec.UNSET,
        )
        with contextlib.suppress(OSError):
            write_json(self.rank_dir / layout.CAPTURE_RECORD, record, fsync=False)

    def _made_after_the_trace(self) -> list[str]:
        """The files this capture makes once its trace is written (_extras, _export_chrome_trace), as the
        flags that asked for them: a job killed in the export never made them, which its summary says."""
        due = []
        if any(metric_fits(m, self.backend.name) for m in self.cfg.export_stacks):
            due.append("--export-stacks")
        if self.cfg.memory_timeline:
            due.append("--memory-timeline")
        if self.cfg.export_chrome_trace:
            due.append("--export-chrome-trace")
        return due

    def _export_chrome_trace(
        self, rank_dir: Path, trace: Path | None, rank: int | None, first: int
    ) -> tuple[str, str] | None:
        """--export-chrome-trace (npuprof.agent.chrome_trace): a link made now, or the (source, target) of
        a copy left to the post-processor; torch_npu's parsed trace_view.json when it wrote no raw trace
        of its own."""
        from npuprof.agent.chrome_trace import export_chrome_trace

        source = trace or rank_dir / layout.PARSED_DIR / layout.PARSED_TRACE
        if not source.is_file():
            self.log.warn_once(
                "chrome-trace",
                f"--export-chrome-trace: no Chrome trace in {rank_dir} (torch_npu without --analyse?)",
            )
            return None
        # a link is a file of its own only once the post-processor has gzipped the raw trace
        may_link = trace is not None and self.cfg.gzip and not self.backend.writes_own_layout
        start = self.run.get("start_ns")
        run_start_ns = start if isinstance(start, int) else None
        return export_chrome_trace(self.cfg, source, rank, first, self.log, may_link, run_start_ns)

    def _write_now(self, job: dict[str, Any], began: float) -> None:
        """The capture's small files and its record, written before the job is handed over: from here on
        the capture reads as complete, whatever happens to this process. The post-processor then only
        parses, gzips and rewrites the record; a failure here (a full disk) is left for it to retry. The
        record's ``export_ms``: the capture's end so far, from ``began`` (a perf_counter time)."""
        rank_dir = Path(job["rank_dir"])
        record = job["record"]
        try:
            for name, content in job["files"].items():
                write_json(rank_dir / name, content, fsync=False)
            record["export_ms"] = round((time.perf_counter() - began) * 1000, 1)
            write_json(rank_dir / layout.CAPTURE_RECORD, record, fsync=False)
        except OSError as exc:
            if record.get("export_ms") is None:
                record["export_ms"] = round((time.perf_counter() - began) * 1000, 1)
            self.log.warning(f"{rank_dir.name}: the capture's files are left to the post-processor: {exc!r}")
            return
        job["files"] = {}
        job["written"] = True

    def skipped(self, step: int, detail: str, output: str) -> None:
        """A capture that could not run (no disk space): leave one small rank dir saying so in ``output``,
        the directory it was to write into (a --dynamic request's prof_dir: the record went into the last
        capture's, where `npuprof status` / `analyse` of the prof_dir did not find it), the first time
        only for each, so that `npuprof analyse` names it. Where ``output`` takes no record (read-only), it
        goes into the run's -o, which the run's summary and `npuprof analyse` of -o read."""
        where = Path(output)
        if where in self._skips_reported or self.backend.writes_own_layout:
            return
        self._skips_reported.add(where)
        try:
            self._record_skip(where, step, detail)
        except OSError as exc:
            self._record_skip_in_the_runs_output(where, step, detail, exc)
        else:
            self._note_root(where)

    def _record_skip(self, where: Path, step: int, detail: str) -> Path:
        rank_dir = None
        try:
            make_dir(where)
            rank_dir = layout.new_rank_dir(where, self.worker)
            record = self._record(layout.STATUS_INCOMPLETE, steps=[step], detail=detail)
            write_json(rank_dir / layout.CAPTURE_RECORD, record, fsync=False)
        except OSError:
            if rank_dir is not None:  # no empty directory that analyse would call a capture
                with contextlib.suppress(OSError):
                    rank_dir.rmdir()
            raise
        return rank_dir

    def _record_skip_in_the_runs_output(self, where: Path, step: int, detail: str, exc: OSError) -> None:
        """The skip's record, which ``where`` could not take, in the run's -o, its detail naming ``where``
        and why; where -o cannot take it either, the log line is its record, and says so."""
        why = f"{where} cannot be written ({exc.strerror or repr(exc)})"
        run_output = self.run.get("output")
        if isinstance(run_output, str) and os.path.abspath(run_output) != os.path.abspath(where):
            try:
                rank_dir = self._record_skip(Path(run_output), step, f"{detail}; recorded here: {why}")
            except OSError as again:
                why += f", nor {run_output} ({again.strerror or repr(again)})"
            else:
                self.log.warning(f"the capture skipped at step {step} is recorded in {rank_dir}: {why}")
                return
        self.log.error(f"the capture skipped at step {step} has no record but this line: {why}; {detail}")

    def abandon(self, detail: str, steps: list[int] | None = None) -> None:
        """Mark the capture in flight incomplete; ``steps``: those it was to hold, when known."""
        self.start_cost = None
        self.annotations.end()
        try:
            if self.rank_dir is not None and self.rank_dir.exists():
                steps = steps or [self.first_step]
                record = self._record(layout.STATUS_INCOMPLETE, steps=steps, detail=detail)
                _write_record_even_on_a_full_disk(self.rank_dir / layout.CAPTURE_RECORD, record)
        except OSError as exc:  # the record keeps saying "capturing", which reads as incomplete
            self.log.error(f"could not mark {self.rank_dir} incomplete: {exc!r}")
        self.rank_dir = None

    # ---- files -----------------------------------------------------------------------------------
    def _record(self, status: str, **fields: Any) -> dict[str, Any]:
        """The capture record (results/handover.py's CaptureRecord) as the JSON value written."""
        record = handover.CaptureRecord(
            status=status,  # type: ignore[arg-type]
            run_id=self.run.get("run_id"),
            pid=os.getpid(),
            rank=fields.pop("rank") if "rank" in fields else self.rank_fn(),
            worker=self.worker,
            host=os.uname().nodename,
            backend=self.backend.name,
            device=self.backend.device,
            updated_ns=time.time_ns(),
            parse=bool(self.cfg.analyse),
            **fields,
        )
        # torchrun's attempt (an elastic restart starts the workers again): read when the record is made
        restart = handover.restart_count_from_env(os.environ)
        if restart is not None:
            record.restart_count = restart
            if (began := self._process_start_ns()) is not None:
                record.process_start_ns = began
        return handover.record_plain(record)

    def _process_start_ns(self) -> int | None:
        """When this process began (epoch ns, to the clock tick), read once per process (a forked child
        is another process, begun later)."""
        pid = os.getpid()
        if self._began is None or self._began[0] != pid:
            from npuprof.proc_stat import started_at

            began = started_at("self")
            self._began = (pid, None if began is None else int(began * 1e9))
        return self._began[1]

    def _info(self, rank: int | None, end_info: dict[str, int]) -> dict[str, Any]:
        info: dict[str, Any] = {
            "config": {
                "common_config": self.cfg.common_config(),
                "experimental_config": self.cfg.experimental_config(),
            },
            "start_info": self.start_info,
            "end_info": end_info,
        }
        info.update(self.backend.version_info())
        if rank is not None:
            info["rank_id"] = rank
        return info

    def _extras(self, prof: Any, rank_dir: Path) -> CaptureExports | None:
        if not (self.cfg.export_stacks or self.cfg.memory_timeline):
            return None  # and nothing imported for them in the step
        from npuprof.agent.capture_exports import export_capture_extras

        # Metrics that mean nothing on this backend were reported by Backend.ignored_flags.
        metrics = [m for m in self.cfg.export_stacks if metric_fits(m, self.backend.name)]
        for metric in metrics:
            if line := other_device_line(metric, self.backend.name == "torch_npu", "--export-stacks"):
                self.log.warn_once(f"stacks-metric:{metric}", f"--export-stacks {line}")
        written = self._written_since_measured(rank_dir)
        try:
            return export_capture_extras(
                prof,
                rank_dir,
                stacks_metrics=metrics,
                memory_formats=list(self.cfg.memory_timeline),
                device=self.backend.device,
                log=self.log.warning,
                min_free_space=str(getattr(self.cfg, "min_free_space", "auto")),
                short_of=lambda wanted: self._short_of(wanted, written),
            )
        except Exception as exc:
            self.log.warning(f"stack / memory export failed: {exc!r}")
            return None

    def _written_since_measured(self, rank_dir: Path) -> int:
        """The bytes torch_npu wrote into ``rank_dir`` since the disk guard last measured its disk: its raw
        data and parse, written in this step as the capture ended, which that measurement does not know.
        0 on torch's profiler (its exports are the post-processor's, which measures the disk itself)."""
        if not self.backend.writes_own_layout or self.space is None:
            return 0
        since = self.space.measured_at(self.cfg.output)
        if since is None:
            return 0
        from npuprof.agent.disk_guard import bytes_written_since

        return bytes_written_since(rank_dir, since)

    def _took_room(self, trace: Path | None) -> None:
        """Tell the disk guard the raw trace's size: the next capture's start is judged by its last
        measurement, up to 2 s old, less what this process wrote since (docs/architecture.md, "Disk
        space")."""
        if self.space is None or trace is None or self.backend.writes_own_layout:
            return  # torch_npu's files are counted where they are asked about (_written_since_measured)
        try:
            size = os.stat(trace).st_size
        except OSError:
            return
        self.space.took(self.cfg.output, size)

    def _short_of(self, wanted: int, written: int = 0) -> str:
        """Why writing ``wanted`` bytes into this capture's directory would take its disk below
        --min-free-space, as the disk guard last measured it less ``written`` since (in the step: no statvfs
        here)."""
        return self.space.short_of(self.cfg.output, wanted, written) if self.space is not None else ""


def _write_record_even_on_a_full_disk(path: Path, record: dict[str, Any]) -> None:
    """Atomically when there is room; else over the old record in place, in the block it already has
    (a record cut short reads as unreadable, i.e. incomplete: never as complete)."""
    import errno
    import json

    try:
        write_json(path, record, fsync=False)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.write(fd, json.dumps(record, ensure_ascii=False).encode())
        finally:
            os.close(fd)


def write_job_files(job: dict[str, Any], log: AgentLog) -> None:
    """Without a post-processor: the capture's small files and record, written here (unless they already
    were), unparsed."""
    rank_dir = Path(job["rank_dir"])
    if job.get("exports"):
        from npuprof.results.extras import unfinished_exports

        for line in unfinished_exports(rank_dir, job["exports"]):
            log.warning(f"{rank_dir.name}: {line}")
    if job.get("written"):
        log.warning(f"{rank_dir.name}{KEPT_UNPARSED}")
        return
    try:
        for name, content in job["files"].items():
            write_json(rank_dir / name, content, fsync=False)
        write_json(rank_dir / layout.CAPTURE_RECORD, job["record"], fsync=False)
    except OSError as exc:
        log.error(f"{rank_dir.name}: could not write the capture's files: {exc!r}")
        return
    log.warning(f"{rank_dir.name}{KEPT_UNPARSED}")


def metric_fits(metric: str, backend: str) -> bool:
    if metric == "self_cpu_time_total":
        return True
    # torch reads any of its device metric names as the device's time, a GPU's or an NPU's (README,
    # "export-stacks"): a device metric fits every backend with a device, and the run says once which
    # device's time is shown where the name is the other device's (CaptureWriter._extras)
    return backend in ("torch-cuda", "torch_npu")


def _steps_text(steps: list[int]) -> str:
    if not steps:
        return "a time window without steps"
    return f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}-{steps[-1]}"
