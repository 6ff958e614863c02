"""How npuprof names a signal in what it tells the user: ``SIGTERM``, ``SIGRTMIN+3``, or ``signal 32``."""

from __future__ import annotations

import signal


def known_signal_name(number: int) -> str | None:
    """The signal's name, the real-time ones between SIGRTMIN and SIGRTMAX (which have none of their own)
    as ``SIGRTMIN+N``, as Slurm's ``--signal`` and ``kill -l`` write them; None for a number of no signal."""
    try:
        return signal.Signals(number).name
    except ValueError:
        if hasattr(signal, "SIGRTMIN") and signal.SIGRTMIN < number < signal.SIGRTMAX:
            return f"SIGRTMIN+{number - signal.SIGRTMIN}"
        return None


def signal_name(number: int) -> str:
    return known_signal_name(number) or f"signal {number}"
