"""Path safety: output paths must not be, or pass through, a symbolic link."""

from __future__ import annotations

import os
from pathlib import Path


class UnsafePathError(ValueError):
    """Raised for an output path that is, or passes through, a symbolic link."""


def first_symlink(path: str | os.PathLike[str]) -> Path | None:
    """The first component of ``path`` (made absolute, not resolved) that is a symlink, if any."""
    absolute = Path(os.path.abspath(path))
    current = Path(absolute.anchor)
    for part in absolute.parts[1:]:
        current = current / part
        if current.is_symlink():
            return current
        if not current.exists():
            return None
    return None


def check_no_symlink(path: str | os.PathLike[str], what: str = "output path") -> Path:
    """Return ``path`` as an absolute Path, or raise UnsafePathError naming the link."""
    link = first_symlink(path)
    if link is not None:
        raise UnsafePathError(
            f"{what} {str(path)!r} passes through the symbolic link {str(link)!r} "
            f"(-> {os.readlink(link)!r}); give a real directory instead"
        )
    return Path(os.path.abspath(path))
