"""Where a thread is: whether its stack runs code of some files (a signal handler looks at what it
interrupted before it starts or stops a profiler)."""

from __future__ import annotations

import _imp
import gc
import importlib
import os
import sys
import threading
from typing import Any

# Code in which a profiler must not start or stop: an import in progress (the agent wakes inside
# `import torch`; torch imports lazily during the first steps: starting the profiler there is a circular
# import), and the code of torch's profilers themselves.
IMPORTING = ("<frozen importlib", "importlib/")
PROFILER_UNSAFE = (*IMPORTING, "torch/profiler/", "torch/autograd/profiler")
# ... and, for a stop that a signal handler would make, npuprof's own capture code it may have interrupted
CAPTURE_CODE = tuple(
    os.path.join("npuprof", "agent", part) for part in ("capture", "backends", "controller.py")
)


# Python 3.11 alone builds a frame object for each thread inside ``sys._current_frames()``, with the
# interpreter's lock on its list of threads held: 3.10's frames are objects already, and from 3.12 a
# collection runs only between bytecodes, never inside an allocation (tests/test_current_frames.py).
COLLECTS_INSIDE_THE_READ = sys.version_info[:2] == (3, 11)


def current_frames() -> dict[int, Any]:
    """``sys._current_frames()``, with Python's cyclic collection held off where one can run inside it.
    There (3.11) a collection set off by one of the frame objects it builds runs finalizers with the
    interpreter's lock on its list of threads held, and one that lets another thread run, which then needs
    that list (a thread starting or ending), deadlocks the process: a test run hung in it at a
    controller's arming, every time (docs/architecture.md, "Safety").

    Collection is the process's one switch: a ``gc.disable()`` that another thread makes while it is held
    off here changes nothing that can be seen, and is undone when it is turned back on. So it is held off
    only on 3.11, where it must be."""
    if not COLLECTS_INSIDE_THE_READ:
        return sys._current_frames()
    enabled = gc.isenabled()
    gc.disable()
    try:
        return sys._current_frames()
    finally:
        if enabled:
            gc.enable()


def runs_code_of(frame: Any, parts: tuple[str, ...]) -> bool:
    """Whether ``frame`` or a frame under it runs code from a file whose name holds one of ``parts``."""
    while frame is not None:
        filename = frame.f_code.co_filename
        if any(part in filename for part in parts):
            return True
        frame = frame.f_back
    return False


def another_thread_imports() -> bool:
    """Whether a thread other than this one is inside an import. A profiler started now imports torch
    modules itself (torch._inductor): beside another thread's half-done import of torch._dynamo (an
    optimizer being made) that is a circular import, or a deadlock, in that thread."""
    me = threading.get_ident()
    return any(runs_code_of(frame, IMPORTING) for ident, frame in current_frames().items() if ident != me)


def imported_alone(names: tuple[str, ...]) -> bool:
    """Import ``names`` while no other thread is inside an import; False (nothing imported) when one is,
    or when logging's module lock is taken.

    ``another_thread_imports()`` and then an import leave a gap: a thread that begins importing
    torch._dynamo between the two closes a cycle of module locks with this thread's import of
    torch._inductor, and Python raises ``_DeadlockError`` in one of them, perhaps the job's (helper-150 saw
    it once). Python's global import lock, held here, closes the gap: no other thread can begin an import
    until it is released. It is never held while waiting for another thread, only for imports of this one.

    Those imports take logging's module lock (``logging.getLogger``), which a thread that forks holds as it
    waits for the import lock (logging's at-fork handler runs before ``os.fork`` takes it), as does one
    configuring logging while it imports its handlers: taken first, and only when free, it is never waited
    for under the import lock."""
    logging_lock = _logging_lock()
    if logging_lock is not None and not logging_lock.acquire(blocking=False):
        return False
    try:
        _imp.acquire_lock()
        try:
            if another_thread_imports():
                return False
            for name in names:
                try:
                    importlib.import_module(name)
                except Exception:  # a torch without it, or a broken one: the start meets it and says so
                    pass
            return True
        finally:
            _imp.release_lock()
    finally:
        if logging_lock is not None:
            logging_lock.release()


def _logging_lock() -> Any:
    """logging's module lock (a reentrant lock), where logging is imported (torch imports it)."""
    logging = sys.modules.get("logging")
    lock = getattr(logging, "_lock", None)
    return lock if hasattr(lock, "acquire") and hasattr(lock, "release") else None
