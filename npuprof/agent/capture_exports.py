"""Exports made inside the training process at the end of each capture (``on_trace_ready``): torch's
``export_stacks`` and ``export_memory_timeline``, written into the rank directory.

Files (stable names, all written atomically):
- ``stacks_<metric>.folded``: the profiler's own ``export_stacks(path, metric)`` (one line per event with a
  stack: ``frame;frame;... <integer µs>``); if torch writes nothing, the stacks rebuilt from the exported
  trace (npuprof.reports.stacks) instead, and the log says so.
- ``memory_timeline.raw.json.gz``: always, when a memory timeline is asked for: torch's raw categorised data
  ``(timestamp ns, action, numbytes, category)``; ``npuprof memory-timeline`` renders any format from it.
- ``memory_timeline.meta.json``: the device and the capture's allocator peaks (for the plot's maxima).
- ``memory_timeline.<fmt>`` for each other requested format (``html``, ``json``, ``json.gz``).

Nothing here raises: every failure goes to ``log`` and the capture goes on.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

STACKS_FILE = "stacks_{metric}.folded"
MEMORY_FILE = "memory_timeline.{fmt}"


def stacks_file_name(metric: str) -> str:
    return STACKS_FILE.format(metric=metric)


def memory_file_name(fmt: str) -> str:
    return MEMORY_FILE.format(fmt=fmt)


def stacks_experimental_config(device: str = "cpu") -> Any | None:
    """The ``experimental_config`` to create the profiler with when stacks are exported.

    torch (Kineto) keeps the Python stacks that ``export_stacks`` needs only with ``verbose=True``; without it
    the export is empty. torch_npu's profiler has its own config and export, so this returns None there."""
    if device.startswith("npu"):
        return None
    import torch

    return torch._C._profiler._ExperimentalConfig(verbose=True)


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


def export_capture_extras(
    prof: Any,
    rank_dir: Path,
    *,
    stacks_metrics: list[str],
    memory_formats: list[str],
    device: str,
    log: Callable[[str], None],
) -> list[Path]:
    """Write the requested stacks and memory timeline files of the capture that just ended into
    ``rank_dir``; return the paths written. Never raises."""
    written: list[Path] = []
    rank_dir = Path(rank_dir)
    for metric in stacks_metrics:
        try:
            path = _export_stacks(prof, rank_dir, metric, log)
        except Exception as exc:
            log(f"export-stacks {metric}: failed: {type(exc).__name__}: {exc}")
        else:
            if path is not None:
                written.append(path)
    if memory_formats:
        try:
            written.extend(_export_memory(prof, rank_dir, memory_formats, device, log))
        except Exception as exc:
            log(f"memory timeline: failed: {type(exc).__name__}: {exc}")
    return written


@contextlib.contextmanager
def _scratch(rank_dir: Path):
    """A hidden scratch dir beside the outputs (same file system), removed afterwards."""
    tmp = Path(tempfile.mkdtemp(prefix=".npuprof_export_", dir=rank_dir))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _torch_export_stacks(prof: Any, path: Path, metric: str) -> None:
    try:
        prof.export_stacks(str(path), metric)
    except ValueError:
        if metric != "self_npu_time_total":
            raise
        # upstream torch names the PrivateUse1 (NPU) device metric this way
        prof.export_stacks(str(path), "self_privateuse1_time_total")


def _export_stacks(prof: Any, rank_dir: Path, metric: str, log: Callable[[str], None]) -> Path | None:
    from npuprof.results.atomic import write_bytes

    target = rank_dir / stacks_file_name(metric)
    content = b""
    problem = ""
    with _scratch(rank_dir) as tmp:
        scratch = tmp / "stacks.txt"
        try:
            _torch_export_stacks(prof, scratch, metric)
            content = scratch.read_bytes() if scratch.exists() else b""
        except Exception as exc:
            problem = f"{type(exc).__name__}: {exc}"
    if not content.strip():
        why = problem or "it wrote an empty file (profiler started without stacks_experimental_config()?)"
        content = _stacks_from_trace(rank_dir, metric, log)
        if not content:
            log(f"export-stacks {metric}: torch's export_stacks gave nothing ({why}); no stacks written")
            return None
        log(
            f"export-stacks {metric}: torch's export_stacks gave nothing ({why}); wrote the stacks rebuilt "
            "from the trace instead"
        )
    write_bytes(target, content)
    return target


def _stacks_from_trace(rank_dir: Path, metric: str, log: Callable[[str], None]) -> bytes:
    from npuprof.reports.stacks import StacksError, folded_from_trace
    from npuprof.results.layout import find_raw_trace

    trace = find_raw_trace(rank_dir)
    if trace is None:
        return b""
    try:
        return folded_from_trace(trace, metric).text().encode()
    except (StacksError, ValueError) as exc:
        log(f"export-stacks {metric}: from the trace: {exc}")
        return b""


def _export_memory(
    prof: Any, rank_dir: Path, formats: list[str], device: str, log: Callable[[str], None]
) -> list[Path]:
    from npuprof.reports import memory_timeline as mt

    missing = memory_timeline_missing_flags(
        bool(getattr(prof, "record_shapes", False)),
        bool(getattr(prof, "profile_memory", False)),
        bool(getattr(prof, "with_stack", False)),
        bool(getattr(prof, "with_modules", False)),
        device=device,
    )
    if missing:
        log(f"memory timeline skipped: it needs {' '.join(missing)}")
        return []
    unknown = [f for f in formats if f not in mt.FORMATS]
    if unknown:
        log(f"memory timeline: unknown format(s) {', '.join(unknown)} ignored; use {', '.join(mt.FORMATS)}")
    device = mt.normalise_device(device)
    with _scratch(rank_dir) as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch marks export_memory_timeline deprecated
        scratch = tmp / "memory.raw.json.gz"
        prof.export_memory_timeline(str(scratch), device)
        raw = mt.read_raw(scratch)
    allocated, reserved = _allocator_peaks(prof, device)
    _, sizes = mt.coalesce(raw)
    # the CPU allocator counts from the start of profiling only, so the categorised peak can be the larger
    allocated = max(allocated or 0, max((sum(row) for row in sizes), default=0))
    data = mt.MemoryData(device, mt.SOURCE_CATEGORISED, raw, allocated, reserved, devices=[device])
    if not raw:
        log(f"memory timeline: no memory events for {device} in this capture")
    written = [mt.render(data, rank_dir / mt.RAW_FILE)]
    mt.write_meta(data, rank_dir / mt.META_FILE)
    written.append(rank_dir / mt.META_FILE)
    for fmt in dict.fromkeys(formats):
        if fmt == "raw.json.gz" or fmt not in mt.FORMATS:
            continue
        try:
            written.append(mt.render(data, rank_dir / memory_file_name(fmt)))
        except mt.PlotUnavailableError as exc:
            log(f"memory timeline: {exc}")
    return written


def _allocator_peaks(prof: Any, device: str) -> tuple[int | None, int | None]:
    """Peak total allocated / reserved bytes on ``device`` in this capture, from the allocator records of the
    profiler's event tree (the same numbers the trace's [memory] events carry)."""
    try:
        import torch
        from torch._C._profiler import _EventType

        wanted = torch.device(device)
        roots = prof.profiler.kineto_results.experimental_event_tree()
    except Exception:
        return None, None
    allocated: int | None = None
    reserved: int | None = None
    stack = list(roots)
    while stack:
        event = stack.pop()
        stack.extend(event.children)
        if event.tag != _EventType.Allocation:
            continue
        fields = event.extra_fields
        if fields.device.type != wanted.type or (
            wanted.type != "cpu" and (wanted.index or 0) != (fields.device.index or 0)
        ):
            continue
        allocated = max(allocated or 0, int(fields.total_allocated))
        reserved = max(reserved or 0, int(fields.total_reserved))
    if device == "cpu" and not reserved:
        reserved = None  # the CPU allocator reports no reserved memory
    return allocated, reserved
