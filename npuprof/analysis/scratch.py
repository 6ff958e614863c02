"""The scratch directories `npuprof analyse` makes tables in when they can be kept nowhere else (a full disk;
read-only results and a read-only or missing home): removed once the report is made, and also when the
command is ended by SIGTERM or SIGHUP (a scheduler's time limit, a closed terminal) while they exist. They
are in /dev/shm, memory, first: nothing else would ever remove them. Ctrl-C raises KeyboardInterrupt,
which the report's ``finally`` already takes care of."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from npuprof.job_processes import pid_alive

ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
# a scratch directory's name: PREFIX, the host, the pid of the analyse that made it, then mkdtemp's letters
PREFIX = "npuprof-report-"


def remove_left_by_the_dead(base: Path) -> None:
    """Remove the scratch directories in ``base`` whose analyse, on this host, is no longer running: a
    killed one's (SIGKILL, the OOM killer, a power cut) would stay in /dev/shm, memory, for ever. Another
    host's (a TMPDIR shared between nodes) and a live process's are left, whatever that process now is."""
    mine = f"{PREFIX}{_host()}-"
    try:
        names = [entry.name for entry in os.scandir(base) if entry.name.startswith(mine)]
    except OSError:
        return
    for name in names:
        pid = name[len(mine) :].split("-", 1)[0]
        # ASCII digits only: int() refuses others that isdigit() takes ("²": helper-208)
        if pid.isascii() and pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(base / name, ignore_errors=True)


def _host() -> str:
    return os.uname().nodename.replace("-", "_")  # the name's fields are split at "-"


class ScratchDirs:
    """The scratch directories of one report. The first one made installs the signal handlers (only
    then: a report without scratch tables dies of a signal as it always did); :meth:`remove_all` removes
    the directories and puts the previous handlers back."""

    def __init__(self) -> None:
        self.made: list[Path] = []
        self._owner = os.getpid()
        self._previous: dict[int, Any] = {}

    def make(self, base: str) -> Path:
        """A new directory in ``base``; OSError when it cannot be made. Those that analyses killed on this
        host left there (SIGKILL, the OOM killer: no handler runs) are removed first."""
        if not self.made:
            self._guard()
        remove_left_by_the_dead(Path(base))
        made = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{_host()}-{os.getpid()}-", dir=base))
        self.made.append(made)
        return made

    def remove_all(self) -> None:
        for made in self.made:
            shutil.rmtree(made, ignore_errors=True)
        self.made.clear()
        self._unguard()

    def _guard(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signal.signal works in the main thread only
        for signum in ENDING_SIGNALS:
            # one the user chose (nohup's ignored SIGHUP, a handler of a program using this module) stays
            if signal.getsignal(signum) == signal.SIG_DFL:
                with contextlib.suppress(OSError, ValueError):
                    self._previous[signum] = signal.signal(signum, self._on_signal)

    def _unguard(self) -> None:
        for signum, previous in self._previous.items():
            with contextlib.suppress(OSError, ValueError, TypeError):
                signal.signal(signum, previous)
        self._previous.clear()

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        # a process forked while the handler was installed (a parse's pool worker, which the pool ends
        # by SIGTERM) dies at once: the directories are its parent's
        if os.getpid() == self._owner:
            for other in ENDING_SIGNALS:  # a second signal must not cut the removal short
                with contextlib.suppress(OSError, ValueError):
                    signal.signal(other, signal.SIG_IGN)
            for made in self.made:
                shutil.rmtree(made, ignore_errors=True)
        _die_of(signum)


def _die_of(signum: int) -> None:
    """End this process by ``signum`` at its default action, as it would have without the handler."""
    signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
    os.kill(os.getpid(), signum)
