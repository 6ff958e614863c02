"""Free space on the output directory's filesystem against --min-free-space, as one line of text."""

from __future__ import annotations

import os
from pathlib import Path

from npuprof.byte_sizes import human_bytes
from npuprof.config import required_free_bytes


def full(output: Path) -> bool:
    """The filesystem of ``output`` has no byte left for us (whatever --min-free-space says)."""
    try:
        return os.statvfs(output).f_bavail == 0
    except OSError:
        return False


def shortfall(output: Path, spec: str) -> str | None:
    """ "only N free on the filesystem of --output ..., below --min-free-space ..." when the filesystem of
    ``output`` has less free space than ``spec`` asks; None when it has enough or cannot be asked."""
    try:
        fs = os.statvfs(output)
    except OSError:
        return None
    free, total = fs.f_bavail * fs.f_frsize, fs.f_blocks * fs.f_frsize
    need = required_free_bytes(spec, total)
    if not need or free >= need:
        return None
    return (
        f"only {human_bytes(free)} free on the filesystem of --output {str(output)!r}, below "
        f"--min-free-space {spec} ({human_bytes(need)})"
    )
