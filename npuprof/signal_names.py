"""How npuprof names a signal in what it tells the user: ``SIGTERM``, ``SIGRTMIN+3``, or ``signal 32``."""

from __future__ import annotations

import signal
import sys

# Python names SIGSTKFLT only from 3.11 on (Linux's 16 on x86, Arm, POWER, s390, RISC-V; other
# architectures and systems have none): on 3.10 it is found by what the C library calls it.
SIGSTKFLT: int | None = getattr(signal, "SIGSTKFLT", None)
if SIGSTKFLT is None and sys.platform == "linux" and signal.strsignal(16) == "Stack fault":
    SIGSTKFLT = 16


def known_signal_name(number: int) -> str | None:
    """The signal's name, the real-time ones between SIGRTMIN and SIGRTMAX (which have none of their own)
    as ``SIGRTMIN+N``, as Slurm's ``--signal`` and ``kill -l`` write them; None for a number of no signal."""
    try:
        return signal.Signals(number).name
    except ValueError:
        if number == SIGSTKFLT:
            return "SIGSTKFLT"
        if hasattr(signal, "SIGRTMIN") and signal.SIGRTMIN < number < signal.SIGRTMAX:
            return f"SIGRTMIN+{number - signal.SIGRTMIN}"
        return None


def signal_name(number: int) -> str:
    return known_signal_name(number) or f"signal {number}"
