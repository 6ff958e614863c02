"""Keeps npuprof's own threads out of the user's trace (docs/architecture.md, "npuprof's own threads").

torch.profiler's Python tracer (``with_stack=True``) puts its profile function on every thread alive when a
capture starts, ours included. A thread of npuprof's that runs Python during a capture (the memory
snapshot's copy of the capture before, the dynamic-config watcher, the disk guard) was then traced: its
calls landed in the user's trace as ``python_function`` events of an extra thread (100 k of them for one
snapshot copy) and each paid the tracer's cost while holding the GIL, slowing the training step. Taking the
profile function off the calling thread (``sys.setprofile`` acts on the calling thread only) at each unit
of work keeps the thread out; the training threads keep theirs.
"""

from __future__ import annotations

import sys


def leave_trace() -> None:
    """Stop profiling hooks (torch's Python tracer, any ``setprofile`` profiler) from seeing this thread."""
    if sys.getprofile() is not None:
        sys.setprofile(None)
