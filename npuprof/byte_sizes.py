"""Byte counts in words for people: one form for every message and table of npuprof's."""


def human_bytes(n: float) -> str:
    """``n`` bytes as ``512 B``, ``1.5 KiB`` ... ``2.0 TiB`` (powers of 1024, as coreutils' -h)."""
    value = float(n)
    if value < 1024:
        return f"{value:.0f} B"
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024:
            return f"{value:.1f} {unit}"
    return f"{value / 1024:.1f} TiB"
