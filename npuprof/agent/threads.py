"""npuprof's own threads in the training process, out of the script's sight (docs/architecture.md,
"npuprof's own threads").

A script may look at its threads: ``threading.enumerate()``, ``active_count()``, or a join of every thread
but its own at its end. A daemon of npuprof's there (the disk guard, the SIGTERM watcher, the hand-over)
never ends: such a join waited for ever (helper-98), a count was off. So they are started with ``_thread``,
which ``threading`` never registers. What runs in them must not call ``threading.current_thread()``: that
registers a dummy thread, which ``join()`` refuses; :func:`on_main_thread` asks the same without it.
"""

from __future__ import annotations

import _thread
import threading
from collections.abc import Callable


def start(target: Callable[[], object], name: str) -> bool:
    """Run ``target`` on a daemon thread that ``threading`` does not list (``name``: for readers of this
    code; an exception is dropped, as the targets report their own). False when Python starts no thread:
    3.12.0 and 3.12.1 refuse one once the interpreter shuts down (an exit callback, where a capture the job
    ended inside is finalised: "can't create new thread at interpreter shutdown"); the caller then does
    the work itself."""
    try:
        _thread.start_new_thread(_run, (target, name))
    except RuntimeError:
        return False
    return True


def _run(target: Callable[[], object], name: str) -> None:
    try:
        target()
    except Exception:  # an unlisted thread's error would be printed into the script's stderr
        pass


def on_main_thread() -> bool:
    """Whether the caller runs on the main thread (without registering a thread ``threading`` does not
    know, as ``threading.current_thread()`` would)."""
    return _thread.get_ident() == threading.main_thread().ident
