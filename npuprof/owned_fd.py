"""A descriptor npuprof keeps open for the job's whole life (the post-processor's pipe and pidfd, the SIGTERM
guard's wakeup pipe, the agent's log kept for when no other can be opened), known by what it is as well as
by its number: a script that closes every descriptor it does not know (``os.closerange(3, ...)``, as
daemonising code does) may have the number for a file or socket of its own since, which npuprof must then
never write to, select on or close. Told by the device and inode of what the number holds (anonymous
inodes, pidfds before Linux 6.9, share one: a script that reopened the number as such a one would not be
told apart)."""

from __future__ import annotations

import contextlib
import os


class OwnedFd:
    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._key = _key_of(fd)

    def ours(self) -> bool:
        """Whether the number still holds what we opened."""
        return self._key is not None and _key_of(self.fd) == self._key

    def close(self) -> None:
        """Close it if it is still ours; else leave the number to whoever has it now."""
        if self.ours():
            with contextlib.suppress(OSError):
                os.close(self.fd)
        self._key = None


def above_stdio(fd: int) -> int:
    """``fd`` moved to 3 or above (close-on-exec), closed where that fails (then OSError). A job started with
    its stdout or stderr closed gets npuprof's descriptors on those numbers otherwise: the job's own
    writes to them (C's printf, ``os.write(1, ...)``) land in npuprof's file or pipe (helper-124: in
    npuprof.log), and a spawn's /dev/null on 1 and 2 replaces them."""
    if fd > 2:
        return fd
    import fcntl

    try:
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    finally:
        os.close(fd)


def _key_of(fd: int) -> tuple[int, int] | None:
    try:
        st = os.fstat(fd)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def room_for(count: int) -> bool:
    """Whether ``count`` more descriptors can be opened now (each opened, then closed)."""
    probes: list[int] = []
    try:
        for _ in range(count):
            probes.append(os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC))
        return True
    except OSError:
        return False
    finally:
        for fd in probes:
            os.close(fd)


HIGH_FD_CEILING = 8192  # a floor of at most this: the kernel grows a process's descriptor table to the number
HIGH_FD_MARGIN = 64  # numbers left above it for the job's own high ones


def moved_high(fd: int) -> int:
    """``fd`` moved to a number near the top of the job's descriptor table (close-on-exec), ``fd`` itself
    where none is free there. The kernel gives a process the lowest free number: a script that closes
    every descriptor (``os.closerange``) and opens files of its own gets low numbers back first, so a
    descriptor npuprof cannot guard (the signal wakeup pipe, written by Python's C signal handler) is
    reused only by a script that opens nearly ``ulimit -n`` files after the close (helper-110: each signal
    a byte in the script's file, at the number right after its log's)."""
    import fcntl
    import resource

    with contextlib.suppress(OSError, ValueError):
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        top = HIGH_FD_CEILING if soft in (resource.RLIM_INFINITY, -1) else min(soft, HIGH_FD_CEILING)
        floor = top - HIGH_FD_MARGIN
        if floor > fd:
            high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, floor)
            os.close(fd)
            return high
    return fd
