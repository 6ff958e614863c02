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
    measured = _below_the_floor(output, spec)
    return None if measured is None else _shortfall_words(output, spec, *measured)


def skip_warning(output: Path, spec: str) -> str | None:
    """The launcher's one line when the filesystem of ``output`` is below --min-free-space ``spec`` as the
    job starts: what is free, and the values that let the captures run; None when it is not."""
    measured = _below_the_floor(output, spec)
    if measured is None:
        return None
    short = _shortfall_words(output, spec, *measured)
    return f"{short}: captures will be skipped; the job runs ({floor_advice(measured[0])})"


def _shortfall_words(output: Path, spec: str, free: int, need: int) -> str:
    return (
        f"only {human_bytes(free)} free on the filesystem of --output {str(output)!r}, below "
        f"--min-free-space {spec} ({human_bytes(need)})"
    )


def _below_the_floor(output: Path, spec: str) -> tuple[int, int] | None:
    """(free, needed) bytes on the filesystem of ``output`` when it is below --min-free-space ``spec``."""
    try:
        fs = os.statvfs(output)
    except OSError:
        return None
    free, total = fs.f_bavail * fs.f_frsize, fs.f_blocks * fs.f_frsize
    need = required_free_bytes(spec, total)
    if not need or free >= need:
        return None
    return free, need


def floor_advice(free: int) -> str:
    """How captures run on a disk with ``free`` bytes free, below --min-free-space: a floor of half of it
    (the other half left to the captures, a value the flag takes), or the check turned off."""
    floor = _size_flag_value(free // 2)
    if floor is None:
        return "--min-free-space 0 turns the check off"
    return f"--min-free-space {floor} lets them run, half the free space left to them; 0 turns the check off"


def _size_flag_value(n: int) -> str | None:
    """``n`` bytes rounded down, as --min-free-space takes sizes (``1.9GiB``, ``450MiB``); None < 1 MiB."""
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20)):
        if n >= size:
            tenths = n * 10 // size  # tenths below 10 of the unit (1.9GiB), whole numbers above (45GiB)
            whole = tenths % 10 == 0 or tenths >= 100
            return f"{tenths // 10}{unit}" if whole else f"{tenths / 10:.1f}{unit}"
    return None


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
