"""Read a plain trace into an :class:`Extract`, in parallel byte ranges when asked (fork workers)."""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from npuprof.analysis.extract import SCAN_DECODER, TYPED_DECODER, Extract
from npuprof.analysis.forked import Forked
from npuprof.analysis.trace_loader import TraceReader

MIN_PER_WORKER = 32 << 20  # below this, a worker costs more than it saves
BLOCK = 512 << 10  # bytes decoded at a time: the events of a block stay in the CPU caches (L2) while handled


def _scan_range(path: str, fd: int | None, start: int, end: int) -> Extract:
    reader = TraceReader(path, block=BLOCK, fd=fd, decoder=TYPED_DECODER, fallback=SCAN_DECODER)
    extract = Extract()
    for chunk in reader.iter_range(start, end):
        extract.add_chunk(chunk.events, chunk.text)
    return extract.finish()


def scan(
    path: Path, fd: int | None = None, workers: int = 1, during: Callable[[], None] | None = None
) -> tuple[Extract, dict[str, Any], int]:
    """(extract, top-level keys, offset just past the last event) of the plain trace at ``path`` (or the open
    descriptor ``fd``). With ``workers`` > 1, forked workers read the later byte ranges while this process
    reads the first. ``during``, when given, runs in a thread while the trace is being read: meant for I/O
    that releases the GIL, such as copying the file. Raises TraceError."""
    reader = TraceReader(path, fd=fd)
    start, end = reader.region()
    size = end - start
    workers = max(1, min(workers, size // MIN_PER_WORKER))
    cuts = [start]
    for k in range(1, workers):
        cut = reader.boundary_after(start + size * k // workers, end)
        if cut > cuts[-1]:
            cuts.append(cut)
    cuts.append(end)
    ranges = list(itertools.pairwise(cuts))
    errors: list[BaseException] = []

    def run() -> None:
        try:
            during()  # type: ignore[misc]
        except BaseException as exc:  # re-raised below, in the caller's thread
            errors.append(exc)

    helper = threading.Thread(target=run, name="npuprof-scan-during", daemon=True) if during else None
    # forked workers read the later ranges while this process reads the first; their results are read
    # once this one is done (see npuprof.analysis.forked)
    workers_ = [Forked(True, functools.partial(_scan_range, str(path), fd, a, z)) for a, z in ranges[1:]]
    try:
        if helper is not None:
            helper.start()
        merged = _scan_range(str(path), fd, *ranges[0])
        for worker in workers_:
            merged.merge(worker.result())
    except BaseException:
        for worker in workers_:
            worker.close()
        raise
    finally:
        if helper is not None and helper.is_alive():
            helper.join()
    if errors:
        raise errors[0]
    return merged, reader.meta, end
