"""Whether a ``.gz`` holds as many bytes as the plain trace it was made from, told from its end alone: a
gzip member's last 4 bytes are the size it holds (modulo 2**32). The post-processor writes one member; a
file of several (``bgzip``, ``cat a.gz b.gz``) ends in its last member's size only, which its last members,
read whole, tell apart from a file cut short (docs/formats.md, "The result tree")."""

from __future__ import annotations

import zlib
from enum import Enum
from pathlib import Path
from typing import Any

# how much of the file's end is read to find its last whole members: bgzip's are at most 64 KiB
TAIL_BYTES = 1 << 20
_MEMBER_START = b"\x1f\x8b\x08"  # a gzip header's magic and its deflate method
_CHUNK = 1 << 20  # decompressed bytes held at a time: they are counted, never kept


class GzipSize(Enum):
    SAME = "same"  # its last 4 bytes say the size, or all its members were read and hold it
    # it does not end as a gzip of that size does: cut short, written again, or several members the last of
    # which starts before the end read
    OTHER = "other"
    WRITTEN_AGAIN = "written again"  # all its members read whole: another size
    UNCHECKED = "unchecked"  # several members, the first of them beyond what was read: no size to check


def gzip_size(packed: Path, plain_bytes: int, packed_bytes: int) -> GzipSize:
    """How ``packed`` (``packed_bytes`` long) compares with a gzip of ``plain_bytes`` bytes. A file that
    cannot be read is SAME, as a size that cannot be is (the parse says why)."""
    if packed_bytes < 18:  # a gzip's header and trailer alone
        return GzipSize.OTHER
    start = max(0, packed_bytes - TAIL_BYTES)
    try:
        with open(packed, "rb") as handle:
            handle.seek(packed_bytes - 4)  # the 4 bytes alone first: every cached analyse of a .gz reads them
            if int.from_bytes(handle.read(4), "little") == plain_bytes % (1 << 32):
                return GzipSize.SAME
            handle.seek(start)
            tail = handle.read(TAIL_BYTES)
    except OSError:
        return GzipSize.SAME
    if len(tail) != packed_bytes - start:  # it changed while read
        return GzipSize.OTHER
    at = tail.find(_MEMBER_START)
    while at != -1:
        held, failed_at = _members_to_end(tail, at)
        if held is not None:
            if start + at > 0:  # whole members to the end, after others not read
                return GzipSize.UNCHECKED
            return GzipSize.SAME if held == plain_bytes else GzipSize.WRITTEN_AGAIN
        # a member read whole is no place for another to start: past the one that failed
        at = tail.find(_MEMBER_START, failed_at + 1)
    return GzipSize.OTHER


def _members_to_end(data: bytes, at: int) -> tuple[int | None, int]:
    """The bytes that the gzip members from ``data[at:]`` to its end hold, each read whole (its CRC and
    size checked); else None and where the member that failed starts."""
    held = 0
    view = memoryview(data)
    while at < len(data):
        unpack = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            chunk = unpack.decompress(view[at:], _CHUNK)
            while chunk:
                held += len(chunk)
                chunk = unpack.decompress(unpack.unconsumed_tail, _CHUNK)
        except zlib.error:
            return None, at
        if not unpack.eof:
            return None, at
        at = len(data) - len(unpack.unused_data)
    return held, at


def changed_as_read(packed: str, name: str, then: int, read: Any) -> str:
    """How the .gz ``packed`` differs from the ``then`` bytes of ``name`` its tables were made from, as its
    parse found it (``read``: trace_view.GzipRead, every member read): its end alone cannot tell a member cut
    short from one written again or several members (their last starts before the end read), and the parse
    that follows reads them all anyway (docs/formats.md, "The result tree")."""
    its, of = f"its trace {packed}", f"the {then:,} bytes of {name} its tables were made from"
    if read.cut:
        return f"{its} is cut short: its gzip data ends early, after {read.size:,} bytes of text ({of})"
    held = f"{read.members} gzip members" if read.members > 1 else "one gzip member"
    if read.note:  # bytes after its gzip data: a damaged member, zeros, no gzip data
        return f"{its} holds {read.size:,} bytes in {held}, then bytes that are no gzip data, left out ({of})"
    if read.size == then:
        return f"{its} holds {of} in {held} (gzipped again)"
    return f"{its} holds {read.size:,} bytes in {held}, not {of} (written since)"
