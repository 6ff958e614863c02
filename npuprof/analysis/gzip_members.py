"""A gzipped file read as gzip(1) reads it, for every reader of traces (docs/formats.md, "Traces npuprof
reads").

Python's ``gzip`` refuses a whole file for bytes after its last member that start no member ("Not a
gzipped file"): a trace copied with padding, or with a second member cut short, could not be read at all.
:class:`GzipMembers` gives the data of every complete member, in order, and stops at bytes that start no
member (zero padding, garbage) or at a member after the first that is cut short or damaged; it counts them
in ``ignored`` and :meth:`GzipMembers.ignored_note` says so in one line. A later member's data is held back
until the member ends (up to ``HOLD_LIMIT``), so none of a member that is not whole reaches the reader; the
first member, and a later one past the limit, are read as they come, and when cut short raise EOFError as
``gzip`` does (truncated: never read as complete). For a trace reader (``cut_ok``) such a member cut short
ends the data where it stops: the JSON reader then reads the complete events of a trace cut short and says
where it was cut; NUL bytes that end the file after it are not decompressed (their bits would decode as
deflate codes: text never written). Whether the data read is a whole trace is still the
JSON reader's to say: a trace whose text goes on in a dropped member is reported as truncated there.
"""

from __future__ import annotations

import io
import os
import zlib
from pathlib import Path
from typing import BinaryIO

MAGIC = b"\x1f\x8b"
BLOCK = 1 << 20  # compressed bytes read at a time
OUT_LIMIT = 8 << 20  # decompressed bytes made at a time
HOLD_LIMIT = 64 << 20  # a later member's data held back until it ends, at most
ZERO_PROBE = 64 << 10  # NUL bytes at the file's end tried as the end of the member before them, at most


def is_gzip(path: str | Path) -> bool:
    with open(path, "rb") as probe:
        return probe.read(2) == MAGIC


class GzipMembers(io.RawIOBase):
    """The decompressed data of the gzip file at ``path`` (see the module's doc). Raises EOFError for a
    member cut short that cannot be left out, zlib.error for damaged data of one, OSError."""

    def __init__(self, path: str | Path, cut_ok: bool = False) -> None:
        """``cut_ok``: a member read as it comes (the first) cut short ends the data where it stops
        (counted in ``cut_short``, said by :meth:`ignored_note`) instead of raising EOFError: a trace
        reader reads the complete events of a trace cut short (docs/formats.md, "Traces cut short"). A
        later member cut short is left out, as without it."""
        super().__init__()
        self.cut_ok = cut_ok
        self.cut_short = 0  # compressed bytes of the member cut short, when cut_ok took it
        self.members = 0  # members read to their end
        self.path = Path(path)
        self._raw = open(path, "rb")  # noqa: SIM115 - closed by close()
        self._inflate = zlib.decompressobj(31)  # 31: a gzip member, header and trailer checked
        self._feed = b""  # compressed bytes read but not given to the decompressor yet
        self._consumed = 0  # compressed bytes read from the file
        self._member = 0  # index of the member being read
        self._member_at = 0  # where it starts in the file
        self._held = bytearray()  # a later member's data until it ends (None: passed on as it comes)
        self._holding = False
        self._out = b""
        self._out_at = 0
        self._done = False
        self._pos = 0
        self.ignored = 0  # bytes after the last member read, left out
        self.ignored_what = ""  # what they were, in a few words
        # where the NUL bytes that end the file start (its size when none): a member is not fed past it
        # until it is known to end in them (_ends_in_zeros), as their bits would decode as deflate codes
        self._size = os.fstat(self._raw.fileno()).st_size
        self._zeros_at = _zeros_start(self._raw, self._size)
        self.cut_zeros = 0  # NUL bytes after a member cut short (cut_ok), not read

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        while self._out_at >= len(self._out) and not self._done:
            self._step()
        n = min(len(buffer), len(self._out) - self._out_at)
        buffer[:n] = self._out[self._out_at : self._out_at + n]
        self._out_at += n
        self._pos += n
        return n

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            return self.readall()
        while self._out_at >= len(self._out) and not self._done:
            self._step()
        data = self._out[self._out_at : self._out_at + size]
        self._out_at += len(data)
        self._pos += len(data)
        return data

    def readall(self) -> bytes:
        parts = []
        while data := self.read(OUT_LIMIT):
            parts.append(data)
        return b"".join(parts)

    def close(self) -> None:
        if not self.closed:
            self._raw.close()
        super().close()

    def ignored_note(self) -> str | None:
        """One line for the user when bytes were left out; None when none were."""
        if self.cut_short:
            zeros = self.cut_zeros and (
                f"; the {self.cut_zeros} NUL bytes after it (a write cut short by a crash or a full disk) "
                "were not"
            )
            return (
                f"the gzip data ends early, in a member cut short ({self.cut_short} compressed bytes, no "
                f"end-of-stream marker): what it holds was decompressed and read{zeros or ''}"
            )
        if not self.ignored:
            return None
        return (
            f"{self.ignored} byte(s) after the gzip data ({self.ignored_what}) were ignored: read from the "
            "complete gzip member(s) before them"
        )

    def _emit(self, data: bytes | bytearray) -> None:
        self._out, self._out_at = bytes(data), 0

    def _step(self) -> None:
        """Decompress the next piece: into ``_out``, or into ``_held`` while a later member is held back."""
        inflate = self._inflate
        if inflate.eof:
            self._next_member(inflate.unused_data)
            return
        data = inflate.unconsumed_tail or self._feed or self._read(gated=True)
        self._feed = b""
        if not data and self._consumed == self._zeros_at < self._size:
            if self._ends_in_zeros():
                self._zeros_at = self._size  # the member's last bytes are zeros: fed as any
                return
            self.cut_zeros = self._size - self._zeros_at
        if not data:
            if not self._holding and self.cut_ok:  # the trace reader reads the complete events of its data
                self.cut_short = max(1, self._consumed - self._member_at)
                self._done = True
                return
            if not self._holding:
                raise EOFError("Compressed file ended before the end-of-stream marker was reached")
            self._ignore("a gzip member cut short")
            return
        try:
            piece = inflate.decompress(data, OUT_LIMIT)
        except zlib.error:
            if not self._holding:
                raise
            self._ignore("a damaged gzip member")
            return
        if not self._holding:
            self._emit(piece)
            return
        self._held += piece
        if len(self._held) > HOLD_LIMIT:  # too big to hold: passed on, and read as the first member is
            self._holding = False
            self._emit(self._held)
            self._held = bytearray()

    def _read(self, gated: bool = False) -> bytes:
        """The next compressed bytes; ``gated`` (a member's data): none past ``_zeros_at``."""
        size = min(BLOCK, self._zeros_at - self._consumed) if gated else BLOCK
        data = self._raw.read(size) if size > 0 else b""
        self._consumed += len(data)
        return data

    def _ends_in_zeros(self) -> bool:
        """Whether the member being read ends in the NUL bytes that end the file (its trailer's ISIZE, a
        small size, ends in zeros; the end-of-block code may be zero bits): fed to a copy of its
        decompressor, they end it with its CRC and size checked. Else they are no part of it (a file
        preallocated, or extended by a crash, whose write was cut short): decoded, their bits would give
        data never written (copies of earlier text). The first ZERO_PROBE of them are tried."""
        probe = self._inflate.copy()
        zeros = bytes(min(ZERO_PROBE, self._size - self._zeros_at))
        try:
            while zeros and not probe.eof:
                probe.decompress(zeros, OUT_LIMIT)
                zeros = probe.unconsumed_tail
        except zlib.error:
            return False
        return probe.eof

    def _next_member(self, rest: bytes) -> None:
        """After a member's end: its held data out, then the next member, or the end."""
        self.members += 1
        if self._held:
            self._emit(self._held)
            self._held = bytearray()
        while len(rest) < len(MAGIC) and (more := self._read()):
            rest += more
        if not rest:
            self._done = True
            return
        self._member += 1
        self._member_at = self._consumed - len(rest)
        if rest[: len(MAGIC)] != MAGIC:
            self._ignore("zero padding" if not rest.strip(b"\0") and self._only_zeros() else "not gzip data")
            return
        self._inflate = zlib.decompressobj(31)
        self._feed = rest
        self._holding = True

    def _only_zeros(self) -> bool:
        while data := self._read():
            if data.strip(b"\0"):
                return False
        return True

    def _ignore(self, what: str) -> None:
        self._held = bytearray()
        self._holding = False
        self._done = True
        self.ignored = os.fstat(self._raw.fileno()).st_size - self._member_at
        self.ignored_what = what


def _zeros_start(raw: BinaryIO, size: int) -> int:
    """Where the run of NUL bytes that ends the file open as ``raw`` starts (``size`` when it ends in none);
    ``raw`` is left at its start."""
    end, span = size, 4096  # a whole member ends in a few zeros at most: read little first
    while end > 0:
        start = max(0, end - span)
        raw.seek(start)
        block = raw.read(end - start)
        kept = len(block.rstrip(b"\0"))
        if kept:
            end = start + kept
            break
        end, span = start, BLOCK
    raw.seek(0)
    return end
