"""npuprof's moves of the job's recursion limit (docs/architecture.md, "The job's stack"): the frame a
--step-on wrapper adds to each level of a recursion through the function, and the headroom a decision at a
step boundary takes. Every move is by a number of frames, made and taken back through :func:`move`, so that
moves of several threads at once compose: a decision that put back the limit it had read would undo, or
keep, another thread's moves made meanwhile (the limit drifted by 200 frames at a time)."""

from __future__ import annotations

import sys
from _thread import allocate_lock

# Guards the limit's read and write (never waited for: the step path); what a move that found it taken owes
_LOCK = allocate_lock()
_OWED: list[int] = []


def move(frames: int) -> bool:
    """Move the recursion limit by ``frames``. Never waits: False, and nothing moved, when another thread or
    an interrupted call below on this one moves it now. A take-back that cannot be made (the limit would be
    under the depth now: a return at the limit's last frame) is owed and made by the next move."""
    if not _LOCK.acquire(False):
        return False
    try:
        owed = 0
        while _OWED:
            owed += _OWED.pop()
        try:
            sys.setrecursionlimit(sys.getrecursionlimit() + frames + owed)
        except RecursionError:
            _OWED.append(frames + owed)
        return True
    finally:
        _LOCK.release()


def take_back(frames: int) -> None:
    """Take back ``frames`` that :func:`move` added; owed to the next move when the limit is being moved."""
    if not move(-frames):
        _OWED.append(-frames)
