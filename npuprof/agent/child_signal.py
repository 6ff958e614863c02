"""SIGCHLD's Python handler, kept from running inside npuprof's SIGTERM handler (docs/architecture.md,
"Signals").

A SIGTERM sent to the job's process group ends its DataLoader workers within microseconds, and their SIGCHLD
can come as Python enters npuprof's SIGTERM handler: Python then runs the SIGCHLD handler (torch's DataLoader
check) at that handler's first instruction, before any of its code, and what it raises ("DataLoader worker
... is killed by signal: Terminated") leaves the handler unrun: the job died of that RuntimeError, not of
SIGTERM, its capture finalised only at exit. While the SIGTERM handler is installed, SIGCHLD's Python handler
is wrapped by :class:`ChildSignalWrap`, which runs it as before except there, when the process is about to
die of the SIGTERM being handled.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

try:  # the C function: signal.getsignal turns a callable through an enum's failed lookup, ~10 µs
    from _signal import getsignal as _getsignal
except ImportError:  # pragma: no cover - another Python
    _getsignal = signal.getsignal

# frames looked at from the one a signal came in: npuprof's SIGTERM handler, or the few calls it makes before
# it quiets the script's handlers (agent/signals.py, SigtermGuard._quieted_for_term)
NESTING_DEPTH = 4


class ChildSignalWrap:
    """The script's SIGCHLD handler, run unless the signal came inside ``term_code`` (npuprof's SIGTERM
    handler) while ``dying()`` (the SIGTERM is npuprof's, so the process dies of it)."""

    __slots__ = ("dying", "handler", "term_code")

    def __init__(self, handler: Callable[..., Any], term_code: CodeType, dying: Callable[[], bool]) -> None:
        self.handler = handler
        self.term_code = term_code
        self.dying = dying

    def __call__(self, signum: int, frame: FrameType | None) -> Any:
        if _inside(frame, self.term_code) and self.dying():
            return None
        try:
            return self.handler(signum, frame)
        except BaseException as exc:
            # what the handler raises (torch's "DataLoader worker ... is killed") shows the traceback it has
            # without npuprof: this frame taken off, as the step wrappers do (agent/steps.py,
            # _off_the_traceback; a bare raise adds no entry again on Python 3.11+)
            tb = exc.__traceback__
            if tb is not None and tb.tb_next is not None and tb.tb_frame is sys._getframe():
                exc.__traceback__ = tb.tb_next
            raise


def _inside(frame: FrameType | None, code: CodeType) -> bool:
    for _ in range(NESTING_DEPTH):
        if frame is None:
            return False
        if frame.f_code is code:
            return True
        frame = frame.f_back
    return False


def wrap(term_code: CodeType, dying: Callable[[], bool]) -> ChildSignalWrap | None:
    """Wrap SIGCHLD's handler when it is a Python callable of the script's (from the main thread); the
    wrap put in place, or None."""
    try:
        handler = _getsignal(signal.SIGCHLD)
    except (OSError, ValueError, AttributeError):  # no SIGCHLD (Windows)
        return None
    if not callable(handler) or isinstance(handler, ChildSignalWrap):
        return None
    wrapped = ChildSignalWrap(handler, term_code, dying)
    try:
        signal.signal(signal.SIGCHLD, wrapped)
    except (OSError, ValueError, TypeError):
        return None
    return wrapped


def handler_now() -> Any:
    """SIGCHLD's handler now (any thread may ask)."""
    return _getsignal(signal.SIGCHLD)


def wrapped_now(wrapped: ChildSignalWrap | None) -> bool:
    """Whether ``wrapped`` is SIGCHLD's handler now (at each recorded step boundary: cheap)."""
    try:
        return wrapped is not None and _getsignal(signal.SIGCHLD) is wrapped
    except (OSError, ValueError, AttributeError):
        return True  # nothing to wrap here


def unwrap(wrapped: ChildSignalWrap | None) -> None:
    """Put the script's handler back, unless the script set another one since (from the main thread)."""
    if wrapped is None:
        return
    with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
        if signal.getsignal(signal.SIGCHLD) is wrapped:
            signal.signal(signal.SIGCHLD, wrapped.handler)
