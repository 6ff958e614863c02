"""The processes of one npuprof run on this host, wherever they are in the process tree (torchrun starts
each worker in a session of its own; a daemon the job forked outlives it): every process whose environment
holds the run's payload (``NPUPROF_CONFIG``, which names the run's id), npuprof's post-processors aside.
Linux's /proc only; elsewhere none are found."""

from __future__ import annotations

import os

ENV_MARKER = b"NPUPROF_CONFIG="
POSTPROCESS_MODULE = b"npuprof.results.postprocess"


def processes_of_the_run(run_id: str | None) -> list[int]:
    """The pids of this run's training processes still running here, in order."""
    if not run_id:
        return []
    marker = run_id.encode()
    try:
        pids = [int(e.name) for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return []
    found = []
    for pid in pids:
        if pid == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read()
            if ENV_MARKER not in environ or marker not in environ:
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if POSTPROCESS_MODULE in f.read():
                    continue
        except OSError:  # gone, or not ours to read
            continue
        found.append(pid)
    return sorted(found)


def is_a_run_process(pid: int) -> bool:
    """Whether process ``pid``'s environment holds an npuprof run's payload (a process of some run)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return ENV_MARKER in f.read()
    except OSError:
        return False
