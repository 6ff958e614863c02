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


def short_of_room(directory: Path, spec: str, wanted: float) -> str:
    """Why writing ``wanted`` more bytes into ``directory`` would take its disk below --min-free-space
    (``spec``), or "" when it would not (or when that cannot be told): the job's own writes (checkpoints)
    must find the room the run promised them."""
    try:
        st = os.statvfs(directory)
        free = st.f_bavail * st.f_frsize
        needed = required_free_bytes(spec, st.f_blocks * st.f_frsize)
    except Exception:  # not known: the writes themselves fail and say so
        return ""
    return room_words(wanted, free, needed)


def room_words(wanted: float, free: int, needed: int) -> str:
    """Why writing ``wanted`` bytes where ``free`` are free would leave less than ``needed`` (the floor
    --min-free-space keeps), or "" when it would not."""
    if not needed or free - wanted >= needed:
        return ""
    # the room above the floor, not the free space: "14.9 MiB is free ... (14.9 MiB)" read as room enough
    above = human_bytes(max(free - needed, 0))
    return (
        f"it needs about {human_bytes(wanted)}, only {above} is free above what must stay free: that would "
        f"leave less than --min-free-space ({human_bytes(needed)})"
    )
