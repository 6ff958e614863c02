"""Atomic file writes: a reader sees either nothing or the whole file, never a partial one."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

FILE_MODE = 0o640
DIR_MODE = 0o750


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str], mode: str = "wb") -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path``; rename it over ``path`` only if the block succeeds.

    On any error (a full disk included) the temporary file is removed and ``path`` is left as it was.
    """
    target = Path(path)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, mode) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise


def write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    with atomic_writer(path, "wb") as handle:
        handle.write(data)


def write_text(path: str | os.PathLike[str], text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_json(path: str | os.PathLike[str], obj: Any, indent: int | None = 4) -> None:
    """JSON with a stable layout (indent 4 as torch_npu writes its info files)."""
    import json

    write_text(path, json.dumps(obj, indent=indent, ensure_ascii=False) + "\n")


def make_dir(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` (and parents) with mode 0o750; an existing directory is kept as is."""
    target = Path(path)
    target.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    return target
