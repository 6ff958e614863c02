"""A call made on the main thread, asked for from another (docs/architecture.md, "Signals").

Only the main thread may set a signal's Python handler or the signal wakeup fd: a capture recorded by a
training thread had no SIGTERM handler, and a SIGTERM lost it. ``Py_AddPendingCall`` queues a C call that
the main thread makes at its next bytecode boundary, as it runs a signal's Python handler. A main thread
blocked on a lock in the standard library (``Thread.join``, ``Event.wait``, ``queue.get``,
``Future.result``: CPython retries the lock's wait after a signal, PEP 475, and makes the pending calls
first) is woken by ``WAKE_SIGNAL``, whose C-level handler does nothing (libc's ``getpid``). It is sent
nowhere else: a C call that does not retry on ``EINTR`` would fail, and the other waits CPython retries
(``select``, ``waitpid``, ``time.sleep``, a socket's) run only the signals' handlers there, not the pending
calls (measured on 3.11). A main thread blocked anywhere else makes the call once its wait returns.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from npuprof.agent.log import get_log

# Away from window_plan's KICK_SIGNAL and KICK_INTERRUPTING (SIGRTMIN+6, +7). Taken only while it has its
# default action in Python's table and the kernel's.
WAKE_SIGNAL = signal.SIGRTMIN + 8 if hasattr(signal, "SIGRTMIN") else None

_PendingCall = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
_queued: list[Callable[[], None]] = []
_lock = threading.Lock()
_wake_ready: bool | None = None  # WAKE_SIGNAL's no-op handler set (None: not tried yet)
_nothing: int | None = None  # the no-op handler's address


def call_soon(call: Callable[[], None]) -> bool:
    """Make ``call`` on the main thread at its next bytecode boundary (at once on the main thread itself);
    False when this Python cannot queue it. ``call`` reports its own errors."""
    if threading.get_ident() == threading.main_thread().ident:
        call()
        return True
    with _lock:
        first = not _queued
        _queued.append(call)
        if first and not _add_pending_call():
            _queued.clear()
            return False
    _wake_the_main_thread()
    return True


def _make_queued_calls(_arg: object) -> int:
    """The pending call, on the main thread: each queued call, in order. It is a C callback, whose raise
    no code of the script's would see: the script's signal handlers run after it, in the script's code
    (``_signals_next``), and a Ctrl-C that came inside it is raised again there."""
    from npuprof.agent.signals import script_handlers_deferred

    with _lock:
        calls = list(_queued)
        _queued.clear()
    came: list[int] = []
    try:
        with script_handlers_deferred(redeliver=came.extend):
            for call in calls:
                _make(call)
    except KeyboardInterrupt:
        came.append(signal.SIGINT)
    except BaseException as exc:
        get_log().error(f"a call on the main thread failed: {exc!r}")
    if came:
        _signals_next(came)
    return 0


def _make(call: Callable[[], None]) -> None:
    try:
        call()
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        get_log().error(f"a call on the main thread failed: {exc!r}")


def _signals_next(signals: list[int]) -> None:
    """The signals that came during the calls, simulated again by the pending calls that follow, and their
    handlers run there (CPython's ``PyErr_SetInterruptEx`` for each, then ``PyErr_CheckSignals``): no
    bytecode of ours runs in between, where a handler would run and what it raises be lost; a pending call
    that fails raises into the script's code as a signal handler does."""
    try:
        api = ctypes.pythonapi
        for signum in signals:
            _add_pending(api.PyErr_SetInterruptEx, signum)  # int PyErr_SetInterruptEx(int signum)
        _add_pending(api.PyErr_CheckSignals, None)
    except (AttributeError, OSError, ValueError, TypeError):
        pass


def _forget_in_child() -> None:
    """A forked child asks for its own calls: the parent's are not its own, and the lock, which a training
    thread of the parent's may have held at the fork, would stay taken in it (its main thread then hung at
    its next pending call, and at any capture a thread of its own began)."""
    global _lock
    _lock = threading.Lock()
    _queued.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)

_callback = _PendingCall(_make_queued_calls)  # kept for the process's life: the main thread may call it late


def _add_pending_call() -> bool:
    try:
        return _add_pending(_callback, None)
    except (AttributeError, OSError, ValueError, TypeError):
        return False


def _add_pending(function: Any, argument: int | None) -> bool:
    """``Py_AddPendingCall(function, argument)``: whether it was queued."""
    add = ctypes.pythonapi.Py_AddPendingCall
    add.argtypes = (ctypes.c_void_p, ctypes.c_void_p)
    add.restype = ctypes.c_int
    return add(ctypes.cast(function, ctypes.c_void_p), argument) == 0


# the standard library's files whose waits (window_plan.PYTHON_WAITS) are a lock's
_LOCK_WAITS = ("threading.py", "queue.py")


def _wake_the_main_thread() -> None:
    """WAKE_SIGNAL to the main thread when it waits on a lock of the standard library's."""
    main = threading.main_thread().ident
    if main is None or not _waits_on_a_lock(sys._current_frames().get(main)) or not _wake_handler_set():
        return
    try:
        signal.pthread_kill(main, WAKE_SIGNAL)  # type: ignore[arg-type]
    except (OSError, ValueError):
        pass


def _waits_on_a_lock(frame: Any) -> bool:
    from npuprof.agent.window_plan import in_python_wait

    return (
        in_python_wait(frame) and os.path.basename(frame.f_code.co_filename) in _LOCK_WAITS
    ) or _is_shutdown(frame)


def waits_for_threads_at_exit() -> bool:
    """On the main thread: whether it has run the script to its end and waits there for the threads left
    (``threading._shutdown``, a lock's wait), the interpreter's exit not begun: a training thread's capture
    may go on for hours, and the main thread still runs the signals' handlers."""
    frame = sys._getframe()
    while frame is not None and not _is_shutdown(frame):
        frame = frame.f_back
    return frame is not None


def _is_shutdown(frame: Any) -> bool:
    return (
        frame is not None
        and frame.f_code.co_name == "_shutdown"
        and os.path.basename(frame.f_code.co_filename) == "threading.py"
    )


def _wake_handler_set() -> bool:
    """WAKE_SIGNAL's C-level handler is one that does nothing and interrupts waits (set once a process),
    and still ours: the script may have set its own since, or put back the default action (that Python's
    table still showed), which would end the job."""
    global _wake_ready
    if _wake_ready is None:
        _wake_ready = _set_wake_handler()
    return _wake_ready and _kernels_handler() == _nothing


def _kernels_handler() -> int | None:
    """WAKE_SIGNAL's handler in the kernel's table, read with ``sigaction`` (its first member, on Linux)."""
    try:
        libc = ctypes.PyDLL(None)  # the GIL held: the main thread runs no further meanwhile
        action = ctypes.create_string_buffer(512)  # larger than any libc's struct sigaction
        if libc.sigaction(int(WAKE_SIGNAL), None, action) != 0:  # type: ignore[arg-type]
            return None
        return ctypes.c_void_p.from_buffer(action).value
    except (AttributeError, OSError, ValueError, TypeError):
        return None


def _set_wake_handler() -> bool:
    global _nothing
    if WAKE_SIGNAL is None or signal.getsignal(WAKE_SIGNAL) != signal.SIG_DFL:
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.signal.restype = ctypes.c_void_p
        libc.signal.argtypes = (ctypes.c_int, ctypes.c_void_p)
        nothing = ctypes.cast(libc.getpid, ctypes.c_void_p).value  # async-signal-safe, ignores its argument
        previous = libc.signal(int(WAKE_SIGNAL), nothing)
        if previous:  # not SIG_DFL (0) in the kernel's table: somebody's own; put back
            libc.signal(int(WAKE_SIGNAL), previous)
            return False
        libc.siginterrupt(int(WAKE_SIGNAL), 1)  # no SA_RESTART: the wait returns EINTR and CPython looks
        _nothing = nothing
        return True
    except (AttributeError, OSError, ValueError, TypeError):
        return False
