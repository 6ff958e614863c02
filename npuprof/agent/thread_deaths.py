"""What a driving thread died of: its capture, cut short as the thread ends, names the exception (the
main thread's is named from ``sys.last_exc``; a thread's is handed to ``threading.excepthook`` and gone
by the time the thread's own values are released, where the controller hears of its end).

``threading.excepthook`` is chained, not replaced: the hook in place when a thread first drives (the
script's own, or Python's, which prints the traceback) is called after the exception is named. A hook the
script sets later replaces this one, and the capture then says only that the thread ended."""

from __future__ import annotations

import threading
from typing import Any

UNCAUGHT_TEXT_CHARS = 80  # of the exception's message in a capture's detail

# The guard of the controller this thread drives (controller._DriverGuard), told what the thread died of.
_driving = threading.local()


def uncaught_named(exc: BaseException) -> str:
    """ "an uncaught ValueError (bad batch)": the exception's type and the first line of its message."""
    return "an uncaught " + exception_named(exc)


def exception_named(exc: BaseException) -> str:
    """ "ValueError (bad batch)": the exception's type and the first line of its message, cut short."""
    try:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    except Exception:  # a __str__ of the job's that fails
        text = ""
    if len(text) > UNCAUGHT_TEXT_CHARS:
        text = text[: UNCAUGHT_TEXT_CHARS - 1] + "…"
    return type(exc).__name__ + (f" ({text})" if text else "")


def name_this_threads_death_on(guard: Any) -> None:
    """``guard.died_of`` is set to what this thread dies of, if it dies of an uncaught exception (not of
    ``SystemExit``, which ends a thread quietly)."""
    _driving.guard = guard
    if not isinstance(threading.excepthook, _NamingExceptHook):
        threading.excepthook = _NamingExceptHook(threading.excepthook)


class _NamingExceptHook:
    """``threading.excepthook`` that tells the dying thread's guard, then calls the hook it replaced."""

    def __init__(self, previous: Any) -> None:
        self.previous = previous

    def __call__(self, args: Any) -> Any:
        try:
            guard = getattr(_driving, "guard", None)
            exc = args.exc_value
            if guard is not None and isinstance(exc, BaseException) and not isinstance(exc, SystemExit):
                guard.died_of = uncaught_named(exc)
        except Exception:  # naming it is worth less than the script's own hook
            pass
        return self.previous(args)
