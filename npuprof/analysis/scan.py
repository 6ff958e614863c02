"""Read a plain trace into an :class:`Extract`, in parallel byte ranges when asked (fork workers)."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from npuprof.analysis.extract import Extract
from npuprof.analysis.trace_loader import TraceReader

MIN_PER_WORKER = 32 << 20  # below this, a worker costs more than it saves


def _scan_range(path: str, fd: int | None, start: int, end: int) -> Extract:
    reader = TraceReader(path, fd=fd)
    extract = Extract()
    for chunk in reader.iter_range(start, end):
        extract.add_chunk(chunk.events)
    return extract


def scan(path: Path, fd: int | None = None, workers: int = 1) -> tuple[Extract, dict[str, Any], int]:
    """(extract, top-level keys, offset just past the last event) of the plain trace at ``path`` (or the open
    descriptor ``fd``). Raises TraceError."""
    reader = TraceReader(path, fd=fd)
    start, end = reader.region()
    size = end - start
    workers = max(1, min(workers, size // MIN_PER_WORKER))
    if workers == 1:
        return _scan_range(str(path), fd, start, end), reader.meta, end
    cuts = [start]
    for k in range(1, workers):
        cut = reader.boundary_after(start + size * k // workers, end)
        if cut > cuts[-1]:
            cuts.append(cut)
    cuts.append(end)
    ctx = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=len(cuts) - 1, mp_context=ctx) as pool:
        parts = list(
            pool.map(_scan_range, [str(path)] * (len(cuts) - 1), [fd] * (len(cuts) - 1), cuts[:-1], cuts[1:])
        )
    merged = parts[0]
    for part in parts[1:]:
        merged.merge(part)
    return merged, reader.meta, end
