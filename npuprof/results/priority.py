"""The post-processors' CPU priority once the job has ended (docs/architecture.md, "Process model").

While the job trains, a post-processor runs at SCHED_IDLE and nice 19 in an autogroup of nice 19
(postprocess.yield_to_training): it only takes CPU time the job leaves. Once the job has ended, `npuprof
run` waits for it, and on a machine shared with other work an idle-priority parse took 7-8 s where it
takes 0.3 s (helper-111): the launcher gives each of its run's post-processors, and the processes they
forked (the side tables, the `-j` readers), normal priority back. Leaving SCHED_IDLE and lowering a
thread's nice value need CAP_SYS_NICE (root in most containers); an autogroup's nice of 0 does not, and it is
what ranks the post-processor against other sessions' work: without the capability that part still helps
(helper-113, 2 busy loops beside: a 54 s wait became 6 s).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

NORMAL_NICE = 0
AUTOGROUP_RETRY_S = 0.11


def _tasks(pid: int) -> list[int]:
    try:
        return [int(name) for name in os.listdir(f"/proc/{pid}/task")]
    except (OSError, ValueError):
        return []


def _children(pid: int) -> Iterator[int]:
    """The processes whose parent is ``pid`` (forked by any of its threads)."""
    for tid in _tasks(pid):
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as handle:
                text = handle.read()
        except OSError:
            continue
        yield from (int(child) for child in text.split())


def with_descendants(pid: int, limit: int = 256) -> list[int]:
    """``pid`` and every process below it, parents first (at most ``limit``)."""
    found, queue = [], [pid]
    while queue and len(found) < limit:
        current = queue.pop(0)
        if current in found:
            continue
        found.append(current)
        queue.extend(_children(current))
    return found


def _autogroup(pid: int) -> tuple[str, int] | None:
    """(the autogroup's name, its nice) of ``pid``, as /proc/PID/autogroup says "/autogroup-N nice X"; None
    where the kernel has no autogroups or the process has ended."""
    try:
        with open(f"/proc/{pid}/autogroup") as handle:
            name, _, nice = handle.read().split()
        return name, int(nice)
    except (OSError, ValueError):
        return None


def set_autogroup_nice(pid: int, nice: int = NORMAL_NICE) -> bool:
    """Its autogroup to ``nice``. Without CAP_SYS_ADMIN the kernel takes one such write every 100 ms on the
    whole machine and answers EAGAIN between (a post-processor starting elsewhere lowers its own): tried
    again for up to half a second."""
    for attempt in range(6):
        try:
            with open(f"/proc/{pid}/autogroup", "w") as autogroup:
                autogroup.write(str(nice))
            return True
        except BlockingIOError:
            if attempt < 5:
                time.sleep(AUTOGROUP_RETRY_S)
        except OSError:
            break
    return _autogroup(pid) is None  # ended meanwhile: nothing was left to change


def own_priority() -> tuple[int, int]:
    """(this process's nice, its autogroup's nice): the priority the user gave ``npuprof run`` (``nice -n
    10 npuprof run ...``), which its post-processors get back, never more (helper-121: they got nice 0)."""
    try:
        nice = os.getpriority(os.PRIO_PROCESS, 0)
    except OSError:
        nice = NORMAL_NICE
    group = _autogroup(os.getpid())
    return nice, group[1] if group is not None else NORMAL_NICE


def restore_normal_priority(pid: int, priority: tuple[int, int] | None = None) -> tuple[bool, bool]:
    """Every thread of ``pid`` and of the processes below it to SCHED_OTHER at the launcher's nice, their
    autogroups to the launcher's autogroup's nice (``priority``, default :func:`own_priority`): (whether
    the threads' change was allowed: not without CAP_SYS_NICE, whether the autogroups' was: a nice of 0
    needs no privilege, and it is most of the gain against other sessions' work). An autogroup is a
    session's: the processes a post-processor forks share its own, which is written once."""
    nice, group_nice = own_priority() if priority is None else priority
    threads_raised, autogroups_raised = True, True
    autogroups_seen: set[str] = set()
    for process in with_descendants(pid):
        for tid in _tasks(process):
            try:
                if os.sched_getscheduler(tid) == os.SCHED_IDLE:
                    os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
                if os.getpriority(os.PRIO_PROCESS, tid) > nice:
                    os.setpriority(os.PRIO_PROCESS, tid, nice)
            except PermissionError:
                threads_raised = False
            except OSError:  # the thread has just ended
                continue
        group = _autogroup(process)
        if group is None or group[0] in autogroups_seen:
            continue  # no autogroups in this kernel, the process has ended, or its group is done
        autogroups_seen.add(group[0])
        if group[1] > group_nice and not set_autogroup_nice(process, group_nice):
            autogroups_raised = False
    return threads_raised, autogroups_raised
