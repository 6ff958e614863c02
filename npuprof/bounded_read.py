"""Reading an open file up to a limit: a file npuprof reads whole (a record, a payload, a config file)
could be a planted endless one (``/dev/zero``) or a huge one; one byte past the limit says it is over."""

from __future__ import annotations

import os


def read_at_most(fd: int, limit: int, chunk_size: int = 1 << 20) -> bytes:
    """The bytes of ``fd`` from its position, at most ``limit + 1``: more than ``limit`` means over it."""
    chunks: list[bytes] = []
    left = limit + 1
    while left > 0:
        chunk = os.read(fd, min(left, chunk_size))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
