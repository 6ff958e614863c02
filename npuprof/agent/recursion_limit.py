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


class _Moved:
    added = 0  # frames npuprof's moves have added to the limit and not taken back ...
    left_at: int | None = None  # ... since it was this: a limit found otherwise is the job's own, set since


def move(frames: int) -> bool:
    """Move the recursion limit by ``frames``. Never waits: False, and nothing moved, when another thread or
    an interrupted call below on this one moves it now. A take-back that cannot be made (the limit would be
    under the depth now: a return at the limit's last frame) is owed and made by the next move. A limit the
    job set itself since the last move is its own: nothing added before is taken back from it (a recursive
    --step-on function setting 5000 at its deepest level was left 5000 less its depth)."""
    if not _LOCK.acquire(False):
        return False
    try:
        now = sys.getrecursionlimit()
        if now != _Moved.left_at:
            _Moved.added = 0
            del _OWED[:]  # (no call: a decision at the limit's last frames has none to spare)
        owed = 0
        while _OWED:
            owed += _OWED.pop()
        change = frames + owed if frames + owed > -_Moved.added else -_Moved.added
        try:
            sys.setrecursionlimit(now + change)
        except RecursionError:
            _OWED.append(change)
            change = 0
        _Moved.added += change
        _Moved.left_at = now + change
        return True
    finally:
        _LOCK.release()


def take_back(frames: int) -> None:
    """Take back ``frames`` that :func:`move` added; owed to the next move when the limit is being moved."""
    if not move(-frames):
        _OWED.append(-frames)
