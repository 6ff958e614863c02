"""trace_view.json: the raw Kineto trace copied as it is, plus the Ascend lanes (docs/formats.md,
"trace_view.json").

Appended events: an ``Overlap Analysis`` process with ``Computing``, ``Communication(Not Overlapped)`` and
``Free`` spans per step, a ``Communication`` process with the communication spans, and ``process_name``
metadata naming each device process ``Ascend Hardware`` (kernels keep their own args).
"""

from __future__ import annotations

import contextlib
import gzip
import os
import tempfile
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import msgspec
import numpy as np

from npuprof.analysis.forked import Forked
from npuprof.analysis.step_breakdown import OVERLAP_LANES
from npuprof.analysis.tables import RankTables
from npuprof.analysis.trace_loader import TraceError

OVERLAP_PID = 2_000_000_001
COMM_PID = 2_000_000_002
_LANES = {label: tid for tid, label in enumerate(OVERLAP_LANES)}


def decompress(raw: Path, out: IO[bytes]) -> None:
    """Write the decompressed ``raw`` (.gz) into ``out``, flushed as it goes (so it can be read behind).
    Raises TraceError for a damaged file."""
    try:
        with gzip.open(raw, "rb") as src:
            while data := src.read(8 << 20):
                out.write(data)
                out.flush()
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        kind = "truncated" if isinstance(exc, EOFError) else "corrupt"
        raise TraceError(kind, f"{raw}: cannot decompress the trace: {type(exc).__name__}: {exc}") from exc


class Decompression:
    """:func:`decompress` in a forked process (a thread would fight the reader for the GIL), so the trace
    can be read behind it: ``wait_for(n)`` returns the size written once it is ``n`` bytes or all of it
    (then ``done``); ``join()`` waits for the end and raises its error; ``cancel()`` stops it. Where fork
    is unavailable, all is decompressed at once, here."""

    def __init__(self, raw: Path, out: IO[bytes]) -> None:
        out.flush()
        self.out, self.done = out, False
        self.job = Forked(True, lambda: decompress(raw, out))
        if not self.job.pid:
            self.join()

    def wait_for(self, size: int) -> int:
        while True:
            if self.job.finished():
                self.join()
                return os.fstat(self.out.fileno()).st_size
            now = os.fstat(self.out.fileno()).st_size
            if now >= size:
                return now
            time.sleep(0.002)

    def join(self) -> None:
        if not self.done:
            try:
                self.job.result()
            finally:
                self.done = True

    def cancel(self) -> None:
        self.job.cancel()


@contextlib.contextmanager
def readable(out: IO[bytes], raw: Path) -> Iterator[int]:
    """A read-only descriptor with the content written to ``out`` so far (``out`` may be write-only): the
    same file reopened through /proc, or else a private temporary copy of the decompressed ``raw``."""
    out.flush()
    try:
        fd = os.open(f"/proc/self/fd/{out.fileno()}", os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        with tempfile.TemporaryFile(dir=Path(out.name).parent if isinstance(out.name, str) else None) as tmp:
            decompress(raw, tmp)  # type: ignore[arg-type]
            yield tmp.fileno()
        return
    try:
        yield fd
    finally:
        os.close(fd)


def _meta(pid: int, name: str, tid: int | None = None) -> dict[str, Any]:
    if tid is None:
        return {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}
    return {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}


_ENC = msgspec.json.Encoder()
_SEP = b",\n  "
_BATCH = 200_000


def _encode_spans(
    cat: str, labels: list[str], pid: int, lanes: np.ndarray, starts: Any, ends: Any
) -> list[bytes]:
    """``,\n  {event}`` for each span, in pieces: exactly what encoding ``{"ph": "X", "cat", "name", "pid",
    "tid", "ts", "dur"}`` one event at a time gives (``name`` = ``labels[lane]``, ``tid`` = lane),
    assembled in bulk: one %-template per lane, the times formatted by one encoder call per batch."""
    heads = []
    for tid, name in enumerate(labels):
        text = _ENC.encode({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": 0.0})
        heads.append(_SEP + text[: text.rindex(b"0.0")].replace(b"%", b"%%") + b'%s,"dur":%s}')
    out: list[bytes] = []
    codes = lanes.tolist()
    for lo in range(0, len(codes), _BATCH):
        s = starts[lo : lo + _BATCH]
        times = np.empty(2 * len(s))
        times[0::2], times[1::2] = s, ends[lo : lo + _BATCH] - s
        template = b"".join(map(heads.__getitem__, codes[lo : lo + _BATCH]))
        out.append(template % tuple(_ENC.encode(times.tolist())[1:-1].split(b",")))
    return out


def extra_events(tables: RankTables, process_names: dict[Any, str], device_pids: set[Any]) -> list[bytes]:
    """The appended events as text, in pieces: each event as ``,\n  {...}``, to follow the last raw event."""
    head: list[dict[str, Any]] = [_meta(OVERLAP_PID, "Overlap Analysis")]
    head += [_meta(OVERLAP_PID, label, tid) for label, tid in _LANES.items()]
    out = [_SEP + _ENC.encode(ev) for ev in head]
    lanes_of_steps = tables.breakdown.lanes
    lane, starts, ends = lanes_of_steps.lane, lanes_of_steps.start, lanes_of_steps.end
    keep = ends > starts
    lanes = list(OVERLAP_LANES)
    out += _encode_spans("overlap_analysis", lanes, OVERLAP_PID, lane[keep], starts[keep], ends[keep])
    cs, ce = tables.breakdown.communication_spans
    if len(cs):
        for ev in (_meta(COMM_PID, "Communication"), _meta(COMM_PID, "Communication", 0)):
            out.append(_SEP + _ENC.encode(ev))
        out += _encode_spans("communication", ["Communication"], COMM_PID, np.zeros(len(cs), np.int8), cs, ce)
    for pid in sorted(device_pids, key=str):
        if process_names.get(pid, "").startswith(("GPU", "Device")):
            out.append(_SEP + _ENC.encode(_meta(pid, "Ascend Hardware")))
    return out


def finish(out: IO[bytes], source_fd: int, events_end: int, events: list[bytes]) -> None:
    """``out`` holds a copy of the trace read from ``source_fd``: insert ``events`` (from
    :func:`extra_events`) after its last event (offset ``events_end``), followed by the original tail."""
    out.flush()
    size = os.fstat(source_fd).st_size
    tail = os.pread(source_fd, size - events_end, events_end)
    out.seek(events_end)
    out.truncate()
    for piece in events:
        out.write(piece)
    out.write(tail)
