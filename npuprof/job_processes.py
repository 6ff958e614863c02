"""The processes of one npuprof run on this host, wherever they are in the process tree (torchrun starts
each worker in a session of its own; a daemon the job forked outlives it): every process whose environment
holds the run's payload (``NPUPROF_CONFIG``, which names the run's id), npuprof's post-processors aside.
Linux's /proc only; elsewhere none are found."""

from __future__ import annotations

import os
import re
import time

from npuprof.proc_stat import has_ended, state_of

ENV_MARKER = b"NPUPROF_CONFIG="
POSTPROCESS_MODULE = b"npuprof.results.postprocess"
# multiprocessing's own trackers: they never train, and end once their clients have (helper-125: mp.spawn's
# resource tracker outlived the job by a moment and read as a process still running). Not the forkserver:
# the workers it forks keep its command line (helper-127)
MP_HELPERS = (b"multiprocessing.resource_tracker", b"semaphore_tracker")


def processes_of_the_run(run_id: str | None, helpers: bool = True) -> list[int]:
    """The pids of this run's processes still running here, in order; without multiprocessing's own
    helpers unless ``helpers``."""
    if not run_id:
        return []
    try:
        pids = [int(e.name) for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return []
    found = []
    for pid in pids:
        if pid == os.getpid() or not is_a_process_of_run(pid, run_id):
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
            if POSTPROCESS_MODULE in cmdline or (not helpers and any(h in cmdline for h in MP_HELPERS)):
                continue
        except OSError:  # gone, or not ours to read
            continue
        found.append(pid)
    return sorted(found)


OUTLIVE_SETTLE_S = 1.0  # how long the processes left at the job's end may take to end before they are said
OUTLIVE_POLL_S = 0.05


def outliving_the_job(run_id: str | None) -> list[int]:
    """The processes of the run (without multiprocessing's helpers) that still run once those that were
    ending with the job have ended: a forkserver ends when the job's first process has, a few hundred ms
    later where it has imported torch (``set_forkserver_preload``: helper-158, the summary said "1
    process(es) of it still run" of it at each such run). Waits only while one is left."""
    deadline = time.monotonic() + OUTLIVE_SETTLE_S
    running = processes_of_the_run(run_id, helpers=False)
    while running and time.monotonic() < deadline:
        time.sleep(OUTLIVE_POLL_S)
        running = processes_of_the_run(run_id, helpers=False)
    return running


def is_a_process_of_run(pid: int, run_id: str | None) -> bool:
    """Whether process ``pid``'s environment holds run ``run_id``'s payload."""
    if not run_id:
        return False
    payload = _payload(_environ(pid))
    # the id whole, inside the payload: not a longer id, nor the id within another variable (a path)
    return (
        payload is not None
        and re.search(rb"(?<!\w)" + re.escape(run_id.encode()) + rb"(?!\w)", payload) is not None
    )


def is_a_run_process(pid: int) -> bool:
    """Whether process ``pid``'s environment holds an npuprof run's payload (a process of some run)."""
    return _payload(_environ(pid)) is not None


def _payload(environ: bytes) -> bytes | None:
    """The value of the ``NPUPROF_CONFIG`` variable in an environment as /proc has it (NUL-separated
    ``NAME=value`` entries), or None without one."""
    for entry in environ.split(b"\0"):
        if entry.startswith(ENV_MARKER):
            return entry[len(ENV_MARKER) :]
    return None


def _environ(pid: int) -> bytes:
    """Process ``pid``'s environment as /proc has it; empty when gone, a zombie, or not ours to read."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read()
    except OSError:
        return b""


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (another user's too; a zombie counts)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # a pid beyond any pid_t (a name planted: helper-208)
        return False
    except OSError:  # another user's: it exists
        return True
    return True


def ended_unreaped(pid: int) -> bool | None:
    """Whether process ``pid`` has ended though its parent has not reaped it yet (a zombie: killed with
    kill -9 while its parent is busy elsewhere), as /proc tells; None where /proc cannot tell (gone, or no
    /proc)."""
    state = state_of(pid)
    return None if state is None else has_ended(state)
