"""Read a plain trace into an :class:`Extract`, in parallel byte ranges when asked (fork workers)."""

from __future__ import annotations

import itertools
import multiprocessing
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from npuprof.analysis.extract import SCAN_DECODER, TYPED_DECODER, Extract
from npuprof.analysis.trace_loader import TraceReader

MIN_PER_WORKER = 32 << 20  # below this, a worker costs more than it saves
BLOCK = 2 << 20  # bytes decoded at a time: the events of a block stay in the CPU caches while handled


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
    descriptor ``fd``). ``during``, when given, runs while the trace is being read (in a thread when the
    reading happens in this process): meant for I/O that releases the GIL, such as copying the file.
    Raises TraceError."""
    reader = TraceReader(path, fd=fd)
    start, end = reader.region()
    size = end - start
    workers = max(1, min(workers, size // MIN_PER_WORKER))
    if workers == 1:
        if during is None:
            return _scan_range(str(path), fd, start, end), reader.meta, end
        errors: list[BaseException] = []

        def run() -> None:
            try:
                during()
            except BaseException as exc:  # re-raised below, in the caller's thread
                errors.append(exc)

        helper = threading.Thread(target=run, name="npuprof-scan-during", daemon=True)
        helper.start()
        try:
            extract = _scan_range(str(path), fd, start, end)
        finally:
            helper.join()
        if errors:
            raise errors[0]
        return extract, reader.meta, end
    cuts = [start]
    for k in range(1, workers):
        cut = reader.boundary_after(start + size * k // workers, end)
        if cut > cuts[-1]:
            cuts.append(cut)
    cuts.append(end)
    ctx = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=len(cuts) - 1, mp_context=ctx) as pool:
        futures = [pool.submit(_scan_range, str(path), fd, a, z) for a, z in itertools.pairwise(cuts)]
        if during is not None:
            during()
        parts = [f.result() for f in futures]
    merged = parts[0]
    for part in parts[1:]:
        merged.merge(part)
    return merged, reader.meta, end
