"""Read a plain trace into an :class:`Extract`, in parallel byte ranges when asked (fork workers)."""

from __future__ import annotations

import functools
import itertools
import os
from pathlib import Path
from typing import Any

from npuprof.analysis.extract import SCAN_DECODER, TYPED_DECODER, EventError, Extract, first_unreadable
from npuprof.analysis.forked import Forked
from npuprof.analysis.trace_loader import FORM_ARRAY, TraceError, TraceReader

MIN_PER_WORKER = 32 << 20  # below this, a worker costs more than it saves
BLOCK = 512 << 10  # bytes decoded at a time: the events of a block stay in the CPU caches (L2) while handled
FOLLOW_STEP = 16 << 20  # reading behind a writer: wait for this much more before reading on


def _scan_range(path: str, fd: int | None, start: int, end: int, exact_end: bool) -> Extract:
    extract = Extract()
    _scan_into(extract, path, fd, start, end, exact_end=exact_end)
    return extract.finish()


def _scan_into(
    extract: Extract,
    path: str,
    fd: int | None,
    start: int,
    end: int,
    record: bool = False,
    exact_end: bool = False,
) -> None:
    """Add the events of [start, end) to ``extract``; ``record``: keep the reader's cuts in
    ``extract.cuts`` (``start`` is the first event: they are where a serial read cuts); ``exact_end``:
    ``end`` is a guessed cut (TraceReader.iter_range: NotAnEventEnd when it is no event's end)."""
    reader = TraceReader(path, block=BLOCK, fd=fd, decoder=TYPED_DECODER, fallback=SCAN_DECODER)
    # one count of the events left out, the reader's and the tables', in the order of the file: the first
    # quoted is the first damaged (docs/formats.md, "Damaged events")
    reader.damaged, reader.first_check = extract.damaged, first_unreadable
    if record:
        reader.cuts = extract.cuts
    try:
        for chunk in reader.iter_range(start, end, exact_end):
            extract.add_chunk(chunk.events, chunk.text)
        extract.repaired_strings += reader.repaired_strings
        extract.repaired_names += reader.repaired_names
        extract.repaired_values.update(reader.repaired_values)
    except EventError as exc:
        raise TraceError("corrupt", f"{path}: {exc} (corrupt trace)") from None


def scan_behind(path: Path, fd: int, growth: Any, workers: int = 1) -> tuple[Extract, dict[str, Any], int]:
    """:func:`scan` of a plain trace that is still being written to ``fd`` (a .gz trace decompressed by
    ``growth``, a :class:`npuprof.analysis.trace_view.Decompression`): this process reads behind the
    writer, a few MB at a time; once it is done, the rest is split between this process and ``workers``
    - 1 forked readers. Raises TraceError, or what the writer raised."""
    reader = TraceReader(path, fd=fd)
    want = 4 << 20
    while True:  # the keys before traceEvents, once enough of the file is there
        size = growth.wait_for(want)
        try:
            start = reader.events_start()
            break
        except TraceError:
            if growth.done:
                raise
            want = size * 2
    extract = Extract()
    pos = target = start
    while True:
        target += FOLLOW_STEP
        frontier = growth.wait_for(target)
        if growth.done:
            break
        cut = reader.boundary_after(max(pos, frontier - (4 << 20)), frontier)
        if pos < cut < frontier:  # else (an event of over 4 MB) wait for more
            try:
                _scan_into(extract, str(path), fd, pos, cut, record=pos == start, exact_end=True)
            except TraceError:  # a cut guessed inside an event, or damage: read as -j 1 reads (_scan_ranges)
                pos, extract, workers = start, Extract(), 1
                break
            pos, target = cut, max(cut, frontier - FOLLOW_STEP)
    growth.join()
    end = max(pos, reader.events_end())
    merged, meta, _ = _scan_ranges(path, fd, reader, pos, end, workers, extract, start=start)
    return merged, meta, end


def scan(path: Path, fd: int | None = None, workers: int = 1) -> tuple[Extract, dict[str, Any], int]:
    """(extract, top-level keys, offset just past the last event) of the plain trace at ``path`` (or the open
    descriptor ``fd``). With ``workers`` > 1, forked workers read the later byte ranges while this process
    reads the first. Raises TraceError."""
    if fd is None:
        opened = _open_plain(path)
        if opened is not None:
            try:
                return scan(path, opened, workers)
            finally:
                os.close(opened)
    reader = TraceReader(path, fd=fd)
    start, end = reader.region()
    return _scan_ranges(path, fd, reader, start, end, workers, Extract(), record=True, start=start)


def _open_plain(path: Path) -> int | None:
    """A descriptor on the trace at ``path`` when it is a plain (not gzipped) regular file, opened without
    following a final symbolic link and without blocking on a FIFO; None for a gzipped one (the reader
    decompresses it from its path). Raises TraceError for anything else."""
    from npuprof.results.layout import open_regular

    try:
        fd = open_regular(path)
    except OSError as exc:
        raise TraceError("missing", f"{path}: {exc.strerror or exc}") from None
    try:
        gzipped = os.pread(fd, 2, 0) == b"\x1f\x8b"
    except OSError as exc:
        os.close(fd)
        raise TraceError("missing", f"{path}: {exc.strerror or exc}") from None
    if gzipped:
        os.close(fd)
        return None
    return fd


def _scan_ranges(
    path: Path,
    fd: int | None,
    reader: TraceReader,
    pos: int,
    end: int,
    workers: int,
    extract: Extract,
    record: bool = False,
    *,
    start: int,
) -> tuple[Extract, dict[str, Any], int]:
    """Add the events in [pos, end) to ``extract`` (which holds those before), split between this
    process and forked readers; see :func:`scan`. ``record``: as for :func:`_scan_into`, for the first
    range. ``start``: the first event (where a serial read starts)."""
    size = end - pos
    workers = max(1, min(workers, size // MIN_PER_WORKER))
    cuts = [pos]
    for k in range(1, workers):
        cut = reader.boundary_after(pos + size * k // workers, end)
        if cut > cuts[-1]:
            cuts.append(cut)
    cuts.append(end)
    ranges = list(itertools.pairwise(cuts))
    # forked workers read the later ranges while this process reads the first; their results are read
    # once this one is done (see npuprof.analysis.forked). Each range but the last must end where an
    # event ends (exact_end): its reader, from a start so checked, checks the next range's start.
    workers_ = [
        Forked(True, functools.partial(_scan_range, str(path), fd, a, z, z != end)) for a, z in ranges[1:]
    ]
    try:
        try:
            _scan_into(extract, str(path), fd, *ranges[0], record=record, exact_end=len(ranges) > 1)
            merged = extract.finish()
            for worker in workers_:
                merged.merge(worker.result())
        except TraceError:
            if len(ranges) == 1 and pos == start:
                raise
            # a cut guessed inside an event (a string of "{...}, {...}": TraceReader.boundary_after), or
            # damage: the trace is read again by one reader from its first event, so that whatever it
            # holds, it reads, or is refused, as with -j 1 (docs/formats.md, "Read in parallel")
            for worker in workers_:  # their work is read again: they stop now
                worker.cancel()
            return _scan_ranges(path, fd, reader, start, end, 1, Extract(), record=True, start=start)
        # a trace cut short: read up to its last complete event (torch_npu's form: its device work last; a
        # Kineto trace whose header names a GPU may hold device work after its operators)
        merged.take_cut(reader.cut, reader.form == FORM_ARRAY, bool(reader.meta.get("deviceProperties")))
        refused = merged.damaged.refused(merged.event_count)  # most of the trace damaged: no trace
        if refused is not None:
            raise TraceError("corrupt", f"{path}: {refused}")
    except BaseException:
        for worker in workers_:
            worker.close()
        raise
    return merged, reader.meta, end
