"""Signals inside the training process (docs/architecture.md, "Safety").

SIGTERM while a capture records: the capture is finalised, then the process dies of SIGTERM as it would
have without npuprof. Python runs a signal handler only between bytecodes of the main thread, so a rank
blocked in C++ (a gloo collective whose peer never comes) would never run it and never die. A watcher
thread, woken through ``signal.set_wakeup_fd``, gives the handler ``HANDLER_GRACE_S`` to start; when it
has not, the C-level disposition is put back to the default and the signal raised again: the process
dies as without npuprof (the capture stays marked "capturing", read as interrupted).

SIGINT during a trace export is held back until the export is done, so that a Ctrl-C never turns a
finished trace into a lost one; the KeyboardInterrupt then comes as usual.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

HANDLER_GRACE_S = 1.0  # time for the main thread to start the handler before the watcher acts
HANDLER_LIMIT_S = 20.0  # the most a started handler may take to finalise the capture


class SigtermGuard:
    """Installs the finalising SIGTERM handler while a capture runs, and removes it after."""

    def __init__(self, on_term: Callable[[], None], log: Any) -> None:
        self._on_term = on_term
        self._log = log
        self._read_fd: int | None = None
        self._write_fd: int | None = None
        self._handler_started = threading.Event()
        self._installed = False

    def install(self) -> bool:
        """From the main thread, when SIGTERM has its default action and no wakeup fd is taken."""
        if self._installed:
            return True
        if threading.current_thread() is not threading.main_thread():
            return False
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return False  # the script handles SIGTERM itself: it decides
        if self._write_fd is None:
            self._read_fd, self._write_fd = os.pipe()
            os.set_blocking(self._write_fd, False)
            threading.Thread(target=self._watch, name="npuprof-sigterm", daemon=True).start()
        previous = signal.set_wakeup_fd(self._write_fd, warn_on_full_buffer=False)
        if previous != -1:  # asyncio or the script owns the wakeup fd: leave SIGTERM alone
            signal.set_wakeup_fd(previous)
            return False
        signal.signal(signal.SIGTERM, self._handle)
        self._installed = True
        return True

    def uninstall(self) -> None:
        if not self._installed or threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) == self._handle:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        with contextlib.suppress(ValueError):
            previous = signal.set_wakeup_fd(-1)
            if previous not in (self._write_fd, -1):
                signal.set_wakeup_fd(previous)  # set by someone after ours: theirs stays
        self._installed = False

    def forget_after_fork(self) -> None:
        """A forked child (a DataLoader worker) gets SIGTERM's default back and no wakeup fd of ours."""
        if self._installed:
            with contextlib.suppress(ValueError, OSError):
                if signal.getsignal(signal.SIGTERM) == self._handle:
                    signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.set_wakeup_fd(-1)
        self._installed = False
        for fd in (self._read_fd, self._write_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._read_fd = self._write_fd = None

    def _handle(self, signum: int, frame: Any) -> None:
        self._handler_started.set()
        signal.signal(signum, signal.SIG_DFL)
        try:
            self._on_term()
        finally:
            os.kill(os.getpid(), signum)

    def _watch(self) -> None:
        read_fd = self._read_fd
        assert read_fd is not None
        while True:
            try:
                data = os.read(read_fd, 64)
            except OSError:
                return
            if not data:
                return
            if signal.SIGTERM in data and signal.getsignal(signal.SIGTERM) == self._handle:
                self._give_handler_time()

    def _give_handler_time(self) -> None:
        if self._handler_started.wait(HANDLER_GRACE_S):
            threading.Event().wait(HANDLER_LIMIT_S)  # the handler kills the process before this ends
            self._log.error(f"finalising the capture on SIGTERM took over {HANDLER_LIMIT_S:.0f} s; dying now")
        else:
            self._log.warning(
                "SIGTERM while the main thread is blocked outside Python (e.g. in a collective): "
                "the process dies now, as without npuprof; the capture in flight is lost"
            )
        _die_of(signal.SIGTERM)


def _die_of(signum: int) -> None:
    """Default action for ``signum`` at the C level (Python's own table can only be changed from the
    main thread, which is blocked), then raise it."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.signal.restype = ctypes.c_void_p
    libc.signal.argtypes = (ctypes.c_int, ctypes.c_void_p)
    libc.signal(int(signum), 0)  # SIG_DFL
    os.kill(os.getpid(), signum)


@contextlib.contextmanager
def sigint_held_back() -> Iterator[None]:
    """Hold SIGINT back for the duration of the block (main thread only), then deliver it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    try:
        previous = signal.getsignal(signal.SIGINT)
    except ValueError:
        yield
        return
    if not callable(previous):
        yield
        return
    received: list[Any] = []

    def hold(signum: int, frame: Any) -> None:
        received.append(frame)

    signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received:
            previous(signal.SIGINT, received[-1])
