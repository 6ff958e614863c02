"""The step's part of the stacks and memory timeline of a capture (``--export-stacks``,
``--memory-timeline``): as little as possible, the rest goes to the post-processor
(npuprof.results.extras; docs/architecture.md, "The flow of a trace").

On torch.profiler (CPU, CUDA):
- stacks: nothing in the step. The post-processor rebuilds ``stacks_<metric>.folded`` from the raw trace
  (npuprof.reports.stacks), as torch's ``export_stacks`` would give them (within 1% in total).
- memory timeline: the step only takes the live profiler's event tree (its roots); the capture's
  hand-over thread copies what torch's memory profiler reads out of it into
  ``memory_timeline.snapshot.msgpack`` (npuprof.agent.memory_snapshot: one pass in slices, no analysis)
  before handing the job over; the post-processor categorises it with torch's own code and writes
  ``memory_timeline.raw.json.gz``, ``memory_timeline.meta.json`` and the requested formats.

On torch_npu the exports are torch_npu's own (``export_stacks``, ``export_memory_timeline``), made in the
step as before: they read the raw data torch_npu wrote, through the live profiler object. Stacks it gives
nothing for (its parse deleted that data) are built by the post-processor from the parse's trace_view.json.
Their files are held to --min-free-space as the post-processor's are, each made whole in memory first; in
the step the free space is the disk guard's last measurement (npuprof.agent.disk_guard: no statvfs on the
step path), less what was written into the capture's directory since: torch_npu's data and parse, written
in this very step as the capture ended (a stat of its files), and the exports themselves. The memory
snapshot is written by the hand-over thread, which asks the disk itself.

Nothing here raises: every failure goes to ``log`` and the capture goes on. What could not be produced is
logged as a "not produced" line (npuprof.results.extras.not_produced_line), which `npuprof run` shows at
the end of the run.
"""

from __future__ import annotations

import contextlib
import shlex
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from npuprof.agent import memory_snapshot
from npuprof.invocation import npuprof_cmd

STACKS_FILE = "stacks_{metric}.folded"
MEMORY_FILE = "memory_timeline.{fmt}"
# why writing that many more bytes would take the disk below --min-free-space; "" when it would not
ShortOf = Callable[[int], str]


def stacks_file_name(metric: str) -> str:
    return STACKS_FILE.format(metric=metric)


def memory_file_name(fmt: str) -> str:
    return MEMORY_FILE.format(fmt=fmt)


def memory_timeline_missing_flags(
    record_shapes: bool, profile_memory: bool, with_stack: bool, with_modules: bool, *, device: str = "cpu"
) -> list[str]:
    """The ``npuprof run`` flags that a memory timeline still needs (empty: all there).

    torch's memory profiler requires record_shapes, profile_memory and with_stack; torch_npu's accepts
    with_modules in place of with_stack."""
    missing = []
    if not profile_memory:
        missing.append("--profile-memory")
    if not record_shapes:
        missing.append("--record-shapes")
    stack_ok = with_stack or (with_modules and device.startswith("npu"))
    if not stack_ok:
        missing.append("--with-stack")
    return missing


@dataclass
class CaptureExports:
    """What the step did for the exports: files written now, and the post-processor's part (the
    ``exports`` of its job, npuprof.results.handover.ExportsJob), or None."""

    written: list[Path] = field(default_factory=list)
    job: dict[str, Any] | None = None
    step_note: str = ""  # for the capture's log line: what the step spent on them


def export_capture_extras(
    prof: Any,
    rank_dir: Path,
    *,
    stacks_metrics: list[str],
    memory_formats: list[str],
    device: str,
    log: Callable[[str], None],
    min_free_space: str = "0",
    short_of: ShortOf | None = None,
) -> CaptureExports:
    """The step's part of the requested stacks and memory timeline of the capture that just ended.
    ``min_free_space``: --min-free-space, which the memory snapshot's write keeps; ``short_of``: the step's
    own check of the same (torch_npu's exports), from the disk guard's measurement. Never raises."""
    rank_dir = Path(rank_dir)
    if device.startswith("npu"):
        room = _StepRoom(short_of)
        return _torch_npu_exports(prof, rank_dir, stacks_metrics, memory_formats, device, log, room)
    from npuprof.config import MEMORY_FORMATS  # imports on this path stay few: it is the step's

    result = CaptureExports()
    job: dict[str, Any] = {"stacks": list(dict.fromkeys(stacks_metrics))}
    formats = [f for f in dict.fromkeys(memory_formats) if f in MEMORY_FORMATS]
    unknown = [f for f in memory_formats if f not in MEMORY_FORMATS]
    if unknown:
        known = ", ".join(MEMORY_FORMATS)
        log(f"memory timeline: unknown format(s) {', '.join(unknown)} ignored; use {known}")
    if formats:
        snapshot = _memory_snapshot(prof, rank_dir, device, log, min_free_space)
        if snapshot is not None:
            path, task = snapshot
            result.written.append(path)
            result.step_note = "memory snapshot: copied in the background"
            job.update(memory_formats=formats, memory_device=device, memory_snapshot=path.name)
            job[memory_snapshot.TASK_KEY] = task
    if job["stacks"] or job.get("memory_snapshot"):
        result.job = job
    return result


def _missing_flags(prof: Any, device: str) -> list[str]:
    """The flags the profiler ``prof`` lacks for a memory timeline on ``device``."""
    return memory_timeline_missing_flags(
        _flag(prof, "record_shapes"),
        _flag(prof, "profile_memory"),
        _flag(prof, "with_stack"),
        _flag(prof, "with_modules"),
        device=device,
    )


def _flag(prof: Any, name: str) -> bool:
    """A collection flag of the profiler: torch's keeps it on the profile, torch_npu's on its interface
    (``prof.prof_if``, as its own export_memory_timeline reads it; helper-122: read on the profile alone,
    every NPU memory timeline was skipped as lacking the flags given)."""
    if hasattr(prof, name):
        return bool(getattr(prof, name))
    return bool(getattr(getattr(prof, "prof_if", None), name, False))


def _memory_snapshot(
    prof: Any, rank_dir: Path, device: str, log: Callable[[str], None], min_free_space: str
) -> tuple[Path, memory_snapshot.SnapshotTask] | None:
    """The snapshot's path and its task (the step only takes the tree's roots), or None when the capture
    cannot give a memory timeline (said in the log)."""
    missing = _missing_flags(prof, device)
    if missing:
        flags = " ".join(missing)
        why = f"torch's memory profiler needs {flags}" + (
            " (--with-modules stands in for --with-stack on Ascend NPUs only)"
            if "--with-stack" in missing and getattr(prof, "with_modules", False)
            else ""
        )
        from npuprof.results.extras import not_produced_line

        log(not_produced_line(rank_dir, "memory_timeline.*", why, f"add {flags}"))
        return None
    path = rank_dir / memory_snapshot.SNAPSHOT_FILE
    try:
        task = memory_snapshot.SnapshotTask(prof, path, log, min_free_space)
    except Exception as exc:
        from npuprof.results.extras import not_produced_line

        log(not_produced_line(rank_dir, "memory_timeline.*", f"the profiler's event tree: {exc!r}"))
        return None
    return path, task


# ---------------------------------------------------------------- torch_npu: its own exports, in the step


class _StepRoom:
    """The room the step's exports may take above --min-free-space: ``short_of`` (the disk guard's last
    measurement; None: not watched) less what they wrote since."""

    def __init__(self, short_of: ShortOf | None) -> None:
        self._short_of = short_of
        self.taken = 0

    def short_of(self, wanted: int) -> str:
        return self._short_of(self.taken + wanted) if self._short_of is not None else ""

    def below_floor(self) -> str:
        """Why nothing may be written (the disk was below --min-free-space when last measured), or ""."""
        return self._short_of(0) if self._short_of is not None else ""


def _write_held(
    rank_dir: Path, files: dict[str, bytes], room: _StepRoom, what: str, fix: str, log: Callable[[str], None]
) -> list[Path]:
    """``files`` (name: content) written into ``rank_dir``; none when together they would take the disk
    below --min-free-space, or up to one that fails: said as ``what`` "not produced", with ``fix``."""
    from npuprof.results.atomic import write_bytes
    from npuprof.results.extras import not_produced_line

    size = sum(len(content) for content in files.values())
    short = room.short_of(size)
    if short:
        log(not_produced_line(rank_dir, what, f"not written ({short})", fix))
        return []
    written = []
    try:
        for name, content in files.items():
            write_bytes(rank_dir / name, content)
            written.append(rank_dir / name)
    except OSError as exc:
        log(not_produced_line(rank_dir, what, f"it could not be written ({exc.strerror or exc})", fix))
    room.taken += sum(len(files[path.name]) for path in written)
    return written


def _torch_npu_exports(
    prof: Any,
    rank_dir: Path,
    stacks_metrics: list[str],
    memory_formats: list[str],
    device: str,
    log: Callable[[str], None],
    room: _StepRoom,
) -> CaptureExports:
    """torch_npu's own exports; the stacks it gives nothing for are left to the post-processor, which
    builds them as ``npuprof export-stacks`` does from the parse's trace_view.json (its call stacks)."""
    result = CaptureExports()
    left: list[str] = []
    for metric in dict.fromkeys(stacks_metrics):
        name = stacks_file_name(metric)
        fix = npuprof_cmd(f"export-stacks {shlex.quote(str(rank_dir))} --metric {metric} -o {name}")
        if short := room.below_floor():  # torch_npu's own scratch file would take room too
            from npuprof.results.extras import not_produced_line

            log(not_produced_line(rank_dir, name, f"not made ({short})", fix))
            continue
        try:
            content = _npu_export_stacks(prof, rank_dir, metric, log)
        except Exception as exc:
            log(
                f"export-stacks {metric}: torch_npu's export_stacks failed ({type(exc).__name__}: {exc}); "
                "npuprof builds them from trace_view.json"
            )
            left.append(metric)
            continue
        if content is None:
            left.append(metric)
        else:
            result.written += _write_held(rank_dir, {name: content}, room, name, fix, log)
    if left:
        result.job = {"stacks": left}
    if memory_formats:
        try:
            result.written.extend(_npu_export_memory(prof, rank_dir, memory_formats, device, log, room))
        except Exception as exc:
            log(f"memory timeline: failed: {type(exc).__name__}: {exc}")
    return result


@contextlib.contextmanager
def _scratch(rank_dir: Path):
    """A hidden scratch dir beside the outputs (same file system), removed afterwards."""
    import shutil
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix=".npuprof_export_", dir=rank_dir))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _npu_export_stacks(prof: Any, rank_dir: Path, metric: str, log: Callable[[str], None]) -> bytes | None:
    """torch_npu's stacks of ``metric``, folded as npuprof's own are; None when it gave none."""
    content = b""
    with _scratch(rank_dir) as tmp:
        # torch_npu writes its stacks to a ".log" file whatever the name asked (helper-122: StackViewParser
        # turns "stacks.txt" into "stacks.log"): asked so, the name is the one it writes
        scratch = tmp / "stacks.log"
        # torch_npu takes the NPU's time by its own name only (another it reads as self_cpu_time_total);
        # self_cuda_time_total is the device's time as torch's export_stacks reads it (README, export-stacks)
        if metric == "self_cuda_time_total":
            metric = "self_npu_time_total"
        try:
            prof.export_stacks(str(scratch), metric)
        except ValueError:
            if metric != "self_npu_time_total":  # the host's time has no other name: its own failure
                raise
            # upstream torch names the PrivateUse1 (NPU) device metric this way
            prof.export_stacks(str(scratch), "self_privateuse1_time_total")
        content = scratch.read_bytes() if scratch.exists() else b""
    if not content.strip():
        # torch_npu releases of 2024 delete the raw data it reads in their parse (data simplification)
        log(
            f"export-stacks {metric}: torch_npu's export_stacks gave nothing; npuprof builds them from "
            "trace_view.json"
        )
        return None
    return _npuprof_work_folded(content)


def _npuprof_work_folded(content: bytes) -> bytes:
    """torch_npu's stacks with npuprof's frames as npuprof's own stacks have them (docs: export-stacks):
    a wrapper of the script's call left out, npuprof's own work (its step boundary, helper-123: 604 of
    2,205 µs of one run) one ``[npuprof]`` frame, its frames below folded into it; equal paths summed."""
    from npuprof.analysis import vocabulary as vocab

    if b"npuprof" not in content:
        return content
    values: dict[str, int] = {}
    for line in content.decode("utf-8", "replace").splitlines():
        path, _, value = line.rpartition(" ")
        if not path or not (value.isascii() and value.isdigit()):
            return content  # not the folded form: kept as written
        frames: list[str] = []
        for frame in path.split(";"):
            if vocab.is_npuprof_wrapper_frame(frame):
                continue
            if vocab.is_npuprof_stack_frame(frame):
                frames.append(vocab.NPUPROF_WORK)
                break
            frames.append(frame)
        key = ";".join(frames)
        values[key] = values.get(key, 0) + int(value)
    return "".join(f"{key} {value}\n" for key, value in values.items()).encode()


def _npu_export_memory(
    prof: Any, rank_dir: Path, formats: list[str], device: str, log: Callable[[str], None], room: _StepRoom
) -> list[Path]:
    from npuprof.reports import memory_timeline as mt
    from npuprof.results.extras import memory_from_trace_fix, not_produced_line

    missing = _missing_flags(prof, device)
    if missing:
        log(f"memory timeline skipped: it needs {' '.join(missing)}")
        return []
    if short := room.short_of(0):  # torch_npu's own scratch file would take room too
        log(
            not_produced_line(
                rank_dir, "memory_timeline.*", f"not made ({short})", memory_from_trace_fix(rank_dir)
            )
        )
        return []
    with _scratch(rank_dir) as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch marks export_memory_timeline deprecated
        scratch = tmp / "memory.raw.json.gz"
        prof.export_memory_timeline(str(scratch), device)
        raw = mt.read_raw(scratch)
    _, sizes = mt.coalesce(raw)
    allocated = max((sum(row) for row in sizes), default=0)
    data = mt.MemoryData(device, mt.SOURCE_CATEGORISED, raw, allocated, None, devices=[device])
    base = {mt.RAW_FILE: mt.encoded(data, "raw.json.gz"), mt.META_FILE: mt.meta_bytes(data)}
    written = _write_held(rank_dir, base, room, "memory_timeline.*", memory_from_trace_fix(rank_dir), log)
    if not written:
        return []
    for fmt in dict.fromkeys(formats):
        if fmt == "raw.json.gz" or fmt not in mt.FORMATS:
            continue
        name = memory_file_name(fmt)
        try:
            content = mt.encoded(data, fmt)
        except mt.PlotUnavailableError as exc:
            log(f"memory timeline: {exc}")
            continue
        fix = npuprof_cmd(f"memory-timeline {shlex.quote(str(rank_dir))} -o {name}")
        written += _write_held(rank_dir, {name: content}, room, name, fix, log)
    return written
