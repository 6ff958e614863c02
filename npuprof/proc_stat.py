"""One read of /proc/PID/stat, the line Linux keeps for each process: its state (R, S, T stopped, Z ended
but not reaped, ...) and its start in clock ticks after boot. The command's name, in parentheses, may hold
spaces and parentheses itself, so the fields are those after the last ')'. Linux only; elsewhere nothing
is known and every function says so (an empty list, None)."""

from __future__ import annotations


def stat_fields(pid: int | str) -> list[bytes]:
    """The fields of /proc/PID/stat after the command's name (state, ppid, ...); [] where not readable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            text = handle.read()
    except (OSError, ValueError):
        return []
    return text[text.rfind(b")") + 2 :].split()


def state_of(pid: int | str) -> bytes | None:
    """Process ``pid``'s state letter (b"R", b"S", b"T", b"Z", ...); None where not known."""
    fields = stat_fields(pid)
    return fields[0] if fields else None


def has_ended(state: bytes | None) -> bool:
    """A state of a process that has ended: a zombie its parent has not reaped yet, or one being reaped."""
    return state in (b"Z", b"X")


def start_ticks(pid: int | str) -> int | None:
    """When process ``pid`` began, in clock ticks after boot (field 22, starttime: kept across exec, never
    the same for a later process given the same pid); None where not known."""
    fields = stat_fields(pid)
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def ticks_to_epoch(ticks: int) -> float | None:
    """The moment (epoch s) ``ticks`` clock ticks after boot (a start_ticks), to the tick: by the boot clock
    read now, where /proc/stat's boot time (whole seconds) puts it up to 1 s early. None where not known."""
    import os
    import time

    boot_clock = getattr(time, "CLOCK_BOOTTIME", None)  # the clock /proc's start times count
    if boot_clock is None:
        return None
    try:
        return time.time() - (time.clock_gettime(boot_clock) - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError):
        return None


def started_at(pid: int | str = "self", to_tick_end: bool = False) -> float | None:
    """When process ``pid`` began (epoch s, to the clock tick; ``to_tick_end``: the end of that tick, so
    that nothing that ended in it before the process began is taken as later), or None where not known."""
    ticks = start_ticks(pid)
    return None if ticks is None else ticks_to_epoch(ticks + 1 if to_tick_end else ticks)
