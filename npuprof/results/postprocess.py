"""After a capture: write its small files, parse the trace and gzip it, in a background process,
never in the training step (docs/architecture.md, "Process model").

Each training process has one post-processor, started when training starts (``Postprocessor.start``) by
`npuprof run` (npuprof.results.spawner: never a child of the script), else by the process itself. At the
end of a capture the step only exports the raw trace and queues one job (a dict); a hand-over thread
writes it as one JSON line into the post-processor's stdin pipe, so a slow or stopped post-processor
never blocks a training step. The post-processor writes ``profiler_info``, ``profiler_metadata.json``
and the capture record, then parses and gzips. It ends when the pipe closes (the training process has
ended) or when the training process has died.

It holds an exclusive lock on ``<output>/.npuprof_pending/<run_id>.<host>.<pid>.<random>.lock``: the
name is unique across hosts and PID namespaces sharing the directory, the training process takes the
lock without waiting on a file nobody else can hold, and `npuprof run` waits only for its own run's
locks. The post-processor's pid is written into the lock file, so that a wait for one that was stopped
(SIGSTOP, Ctrl-Z) can name it. A killed post-processor releases its lock by dying. Nothing under the
pending directory is followed if it is a symlink, nor opened if it is not a regular file.

The post-processor inherits none of the training process's descriptors (gloo's sockets would keep a
dead rank's peers waiting) and writes nothing to its stdout/stderr (a ``| tee`` would wait for it).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import stat
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npuprof.invocation import ENV_COMMAND, npuprof_cmd
from npuprof.owned_fd import OwnedFd, above_stdio
from npuprof.proc_stat import stat_fields
from npuprof.results import layout, logfile, spawner
from npuprof.results.atomic import atomic_writer

if TYPE_CHECKING:
    from npuprof.results.handover import CaptureJob

GZIP_LEVEL = 6
HANDOVER_DRAIN_S = 5.0  # at exit, how long the training process waits for queued jobs to reach the pipe
DRAIN_STALLED_S = 0.5  # ... and how long for a pipe that stays full (the rest goes to the spool)
# At a normal exit, how long in all (HANDOVER_DRAIN_S included) it waits while a memory snapshot is copied
# (at full speed, nothing else left to run): ~12 µs of CPU an event, 2.1 s for 175,000 events measured, 7 s
# on 2 shared cores; 60 s covers millions of events, a tree of several GB. Not after a SIGTERM (its own 5 s).
EXIT_COPY_WAIT_S = 60.0
SPOOL_PREFIX = ".npuprof_spool."  # + pid.restart.random (an exec keeps the pid).jsonl: jobs left at its end
# (and those past QUEUE_LIMIT, appended during the run)
SPOOL_LIMIT = 256 << 20  # a spool file larger than this is not one npuprof wrote
# Jobs a training process keeps in memory for a post-processor that is behind (its pipe full); the next ones
# go straight to its spool, parsed after the job as those left at its end: a CPU-bound job of days starves
# the post-processor (SCHED_IDLE), and its queue grew by every capture (helper-187: 300 jobs queued after
# 15,000 steps with a capture every 50, +6.5 MB RSS)
QUEUE_LIMIT = 64
POST_NOT_STARTED = "no post-processor could be started"  # logged by the agent, read by the run summary


# what the process lacks, not the path it was opening then: said without the path
_LACKING_RESOURCES = (errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EAGAIN)


def not_started(exc: OSError) -> str:
    """The agent's warning when it could start no post-processor (no descriptor or process left, or a file
    planted where its lock folder goes: the path is said, "Not a directory" alone named nothing to fix)."""
    named = exc.strerror and exc.filename and exc.errno not in _LACKING_RESOURCES
    where = f": {exc.filename}" if named else ""
    return (
        f"{POST_NOT_STARTED} ({exc.strerror or exc}{where}): captures are written in the step, unparsed; "
        "npuprof analyse parses them after the job"
    )


RESTARTS = 3  # post-processors started again after one died, per training process
# Captures that may wait for a post-processor held while the next one records; past that (captures back
# to back: --repeat 0 --wait 0 never stops the profiler) it runs, at SCHED_IDLE, or none would be parsed
# before the job's end (helper-133: 1400 captures, 0 parsed in training, `npuprof run` 82 s after it).
HOLD_BACKLOG = 2
JOB_DONE = b"."  # the post-processor's word on its ready pipe for each job done
# the agent's log lines that say a post-processor was found dead (read back by the run summary) ...
_DEATH_RE = re.compile(r"post-processor(?: pid (?P<a>\d+) had ended| \(pid (?P<b>\d+)\) has ended)")
# ... and those that say the script closed npuprof's pipe to one (os.closerange), which then ended at EOF
PIPE_CLOSED = "the script closed npuprof's pipe to"
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@contextlib.contextmanager
def _sigpipe_held_back() -> Iterator[None]:
    """A dead post-processor raises SIGPIPE in the thread that writes to it: held back while writing, then
    taken, never delivered (its default would kill the job)."""
    import signal

    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPIPE})
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            if signal.SIGPIPE in signal.sigpending():
                signal.sigtimedwait({signal.SIGPIPE}, 0)
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class Postprocessor:
    """The training process's handle on its background post-processor."""

    def __init__(self, output: Path, run_id: str | None = None) -> None:
        self.output = output
        self.run_id = run_id or "run"
        self._pid: int | None = None
        self._pipe: int | None = None
        # the descriptors kept for the job's life, known by what they are (npuprof.owned_fd): a script that
        # closed them may have their numbers for its own files since
        self._owned: dict[str, OwnedFd] = {}
        self._handover: _Handover | None = None
        self._restarts = 0
        self._given_up = False  # said: its post-processor ended with RESTARTS replacements made
        self.spool: Path | None = None  # where the jobs still queued at the process's end go (spool_left)
        # spools with jobs spilled to a post-processor that ended and was not replaced (or whose replacement
        # could not take them): taken back at the process's end (spool_left), kept unparsed
        self._orphaned: list[Path] = []
        self._pidfd: int | None = None  # signals reach our post-processor only, never a pid taken again
        self._ready_fd: int | None = None  # its line: its pid, and whether it may be held (_read_ready)
        self._ready = False
        self._held = False
        self._spawned: spawner.Spawned | None = None  # started by `npuprof run`: its reply
        self._shell: int | None = None  # else the sh that started it, until reaped
        self._ready_pid: int | None = None  # its pid as it said on the ready pipe (0: it said none)
        self._done = 0  # the jobs it said it has done (JOB_DONE bytes after its line)
        self._lagging = False  # said once: captures came faster than it parsed them while held
        # captures that waited for it when the capture beginning now would have held it: it runs beside that
        # capture instead, whose steps its work may slow (said in the capture's record: agent/entry.py)
        self.runs_beside = 0

    @property
    def pid(self) -> int | None:
        """Its pid, once known (`npuprof run`'s reply is read here, never waited for)."""
        self._known_spawn()
        return self._pid

    @property
    def running(self) -> bool:
        return self._pipe is not None

    def start(self) -> None:
        """Start the post-processor (once): by `npuprof run` (npuprof.results.spawner: never a child of the
        training process), else here. posix_spawn (vfork + exec) costs ~0.1 ms in a big process."""
        if self._pipe is not None:
            return
        lock, lock_name = _create_lock(self.output, self.run_id)
        # Every descriptor made here is closed whatever fails (EMFILE in a job that holds nearly all of
        # its own): one left open would hold the next try's, and the job's, last descriptors.
        passed: list[int] = [lock]  # the post-processor's copies; ours are closed once it has them
        kept: list[int] = []  # ours: the job pipe's write end, the ready pipe's read end
        handed = False  # a post-processor has the lock: it is a job to wait for
        try:
            lock = _lift_last(passed)
            read_end, write_end = os.pipe()
            kept.append(write_end)
            write_end = _lift_last(kept)
            passed.append(read_end)
            read_end = _lift_last(passed)
            ready_read, ready_write = os.pipe()  # its line: its pid, "r" once it may be held (_read_ready)
            kept.append(ready_read)
            ready_read = _lift_last(kept)
            passed.append(ready_write)
            ready_write = _lift_last(passed)
            os.set_blocking(ready_read, False)
            spool = self.output / f"{SPOOL_PREFIX}{os.getpid()}.{self._restarts}.{os.urandom(3).hex()}.jsonl"
            self._close_pidfd()
            self._pid = None
            # its way to see our end (its parent is not us); the launcher continues it when we die
            itself = os.pidfd_open(os.getpid())
            passed.append(itself)
            fds = [read_end, lock, ready_write, itself]
            self._spawned = _start_by_launcher(fds, spool, self.run_id)
            if self._spawned is None:
                self._start_here(fds, spool)
            handed = True
            self._ready_fd = ready_read
            self._owned["ready"] = OwnedFd(ready_read)
        except BaseException:
            _close_all(kept)
            if not handed:
                with contextlib.suppress(OSError):
                    os.unlink(self.output / layout.PENDING_DIR / lock_name)
            raise
        finally:
            _close_all(passed)
        self._pipe = write_end
        self._owned["pipe"] = OwnedFd(write_end)
        self._handover = _Handover(self._owned["pipe"], self)
        self.spool = spool

    def _start_here(self, fds: list[int], spool: Path) -> None:
        """Where `npuprof run` cannot be asked: through ``sh``, which starts it in the background and
        leaves at once, so it is not our child (a script that waits for all its children would wait for
        it for ever). It is never held then: nothing would continue it after our death. ``fds``: the job
        pipe, lock, ready pipe and our pidfd; there on 3, 4, 5, 6 (sh takes one-digit descriptors only),
        the pipe then made its stdin (a background list's own stdin is /dev/null)."""
        high, placed = spawner.placed(fds, [3, 4, 5, 6])
        try:
            argv = ["sh", "-c", '"$@" <&3 3<&- &', "sh", *_postprocessor_argv(spool, 4, 5, 6, self.run_id)]
            actions = _spawn_file_actions(set(high)) + placed
            self._shell = os.posix_spawn("/bin/sh", argv, _child_env(), file_actions=actions, setsid=True)
        finally:
            for fd in high:
                os.close(fd)

    def _known_spawn(self) -> bool:
        """Whether the post-processor's pid is known: `npuprof run`'s reply read, or the post-processor's
        own word on the ready pipe (never waited for)."""
        if self._pid is not None:
            return True
        spawned = self._spawned
        if spawned is not None:
            if spawned.poll():
                self._pid, self._pidfd = spawned.pid, spawned.pidfd
                if self._pidfd is not None:
                    self._owned["pidfd"] = OwnedFd(self._pidfd)
            return self._pid is not None
        if self._shell is not None:
            try:
                done = os.waitpid(self._shell, os.WNOHANG)[0]
            except OSError:  # reaped by the script (its own os.wait())
                done = self._shell
            if done:
                self._shell = None
        pid = self._read_ready()
        if pid is not None:
            self._pid = pid
            with contextlib.suppress(OSError, AttributeError):  # alive: it ends only after us
                self._pidfd = above_stdio(os.pidfd_open(pid))
                self._owned["pidfd"] = OwnedFd(self._pidfd)
        return self._pid is not None

    def _read_ready(self) -> int | None:
        """The post-processor's line on the ready pipe, once there: ``r`` (it asked for its parent-death
        signal: it may be held) or ``-``, then its pid; then a JOB_DONE byte per job done, counted. Its pid,
        or None."""
        if self._ready_fd is None or self._ready_pid == 0:
            return self._ready_pid or None
        if not self._owns("ready"):
            self._ready_pid = 0  # closed by the script: its number may be a file of the script's now
            return None
        for _ in range(16):  # 64 KiB at most a call: a pipe's worth
            try:
                data = os.read(self._ready_fd, 4096)
            except OSError:  # nothing more written yet
                break
            if not data:
                break
            if self._ready_pid is None:
                line, _, data = data.partition(b"\n")  # written whole, before any job
                self._ready = line.startswith(b"r")
                digits = line[1:].strip()
                self._ready_pid = int(digits) if digits.isdigit() else 0
            self._done += data.count(JOB_DONE)
        return self._ready_pid or None

    def backlog(self) -> int:
        """Captures handed over that the post-processor has not done yet (as far as it has said)."""
        if self._handover is None:
            return 0
        self._read_ready()
        return max(0, self._handover.submitted - self._done)

    def submit(self, job: dict[str, Any]) -> bool:
        """Queue one job (never blocks); False when no post-processor is there to take it (one that has
        died is found out by the hand-over thread, which then keeps the jobs as files itself). A dead one
        is replaced, RESTARTS times at most in a process: a job of days would otherwise leave every later
        capture unparsed and ungzipped after one kill (one that dies of each trace stops being replaced)."""
        if self._handover is not None and not self._handover.broken and self._has_exited():
            self._handover.broken = True  # found before a job is lost to its closed pipe
        if self._handover is not None and self._handover.broken and self._restarts < RESTARTS:
            self._restarts += 1
            dead, pipe_lost = self.pid, self._pipe is not None and not self._owns("pipe")
            # the jobs spilled to its spool (_Handover._spill) go to the next one's, unless it lives on to
            # read them itself (the script closed our pipe to it: it reads its spool at that EOF)
            spilled = self.spool if self._handover.spilled and self._has_exited() else None
            self._let_go()  # held: the capture's end would continue it only after this
            self.forget()  # the old hand-over thread keeps what it still holds as files
            if spilled is not None:
                self._orphaned.append(spilled)  # until the next one has it
            try:
                self.start()
            except OSError as exc:
                _agent_log().warning(f"no new post-processor ({exc!r}); captures are kept unparsed")
                return False
            if spilled is not None and self.spool is not None:
                with contextlib.suppress(OSError):
                    os.rename(spilled, self.spool)  # (a fresh name: nothing there yet)
                    self._orphaned.remove(spilled)
            _agent_log().info(
                replaced_because(dead, pipe_lost, dead is not None and _is_post_processor(dead))
            )
        elif self._handover is not None and self._handover.broken and not self._given_up:
            # the one that ended after RESTARTS replacements is said too (the run summary counts these
            # lines: helper-216, 4 kills read "found dead 3 time(s)"), once
            self._given_up = True
            dead, pipe_lost = self.pid, self._pipe is not None and not self._owns("pipe")
            self._let_go()
            _agent_log().warning(
                replaced_because(dead, pipe_lost, dead is not None and _is_post_processor(dead), NOT_REPLACED)
            )
        if self._pipe is None or self._handover is None or self._handover.broken:
            return False
        self._handover.put(job)
        return True

    def hold(self, held: bool) -> None:
        """Stop the post-processor while a capture records and continue it after: its work on an earlier
        capture (a parse, a memory timeline: disk writes and their kernel threads, which no CPU priority
        holds back) made the steps of the capture in flight 3-25x slower on 2 cores. Not while more than
        HOLD_BACKLOG captures wait for it: asked again at each capture's start, so that captures back to
        back do not all wait for the job's end. One system call, nothing waits. Only one `npuprof run`
        started is held, while that launcher lives: should this process die first, the launcher continues
        it, and the kernel when the launcher dies (its parent-death signal, set in :func:`main`)."""
        import signal

        waiting = self.backlog() if held else 0
        if waiting > HOLD_BACKLOG:  # captures back to back: it runs until few wait
            held = False
            if not self._lagging:
                self._lagging = True
                _agent_log().info(
                    f"captures come faster than the post-processor parses them ({waiting} waiting): "
                    "it runs during captures (at idle priority) while more than "
                    f"{HOLD_BACKLOG} wait, so that they do not all wait for the job's end"
                )
        holdable = self._spawned is not None and self._known_spawn() and self._owns("pidfd")
        # a post-processor that has died (killed, and not replaced: RESTARTS) runs beside no capture, though
        # the captures it held still count as waiting (helper-208: each later capture said it had run)
        beside = waiting > HOLD_BACKLOG and holdable and not self._has_exited()
        self.runs_beside = waiting if beside else 0
        if not held and not holdable:
            self._let_go()  # the script closed our pidfd of it (os.closerange) while it was held
            return
        if held == self._held or not holdable:
            return
        if held and not self._spawned.launcher_lives():
            return  # `npuprof run` was killed: should we die now, nobody would continue it
        if held and not self._ready:
            # Held only once it asked for its parent-death signal: before that (its first moments, with no
            # capture of ours to work on yet) a stop could outlive us.
            self._read_ready()
            if not self._ready:
                return
        self._held = held
        with contextlib.suppress(OSError, AttributeError):
            signal.pidfd_send_signal(self._pidfd, signal.SIGSTOP if held else signal.SIGCONT)
            if held and not self._spawned.launcher_lives():
                # it died between the look and the stop (its descriptors close before the kernel's
                # SIGCONT to its children is sent): that SIGCONT may have come first
                signal.pidfd_send_signal(self._pidfd, signal.SIGCONT)
                self._held = False

    def _let_go(self) -> None:
        """Continue the post-processor we hold, before it is replaced or where our pidfd of it is lost: left
        stopped, it would parse the captures it was handed only after this process's end (helper-151: a
        script that closed every descriptor during a capture). By pid where the script closed our pidfd: a
        stopped process does not end by itself, and one that serves this process is ours."""
        if not self._held:
            return
        import signal

        self._held = False
        with contextlib.suppress(OSError, AttributeError, ValueError):
            if self._owns("pidfd"):
                signal.pidfd_send_signal(self._pidfd, signal.SIGCONT)
            elif self._pid is not None and _serves_us(self._pid):
                os.kill(self._pid, signal.SIGCONT)

    def _owns(self, name: str) -> bool:
        owned = self._owned.get(name)
        return owned is not None and owned.ours()

    def _close_pidfd(self) -> None:
        for name in ("pidfd", "ready"):
            owned = self._owned.pop(name, None)
            if owned is not None:
                owned.close()
        if self._spawned is not None:
            self._spawned.close()
        self._pidfd, self._ready_fd, self._ready, self._held, self._spawned = None, None, False, False, None
        self._ready_pid = None
        self._done = 0  # a new post-processor, a new hand-over: both count from 0

    def _has_exited(self) -> bool:
        """Our post-processor has ended (its pidfd says so), or is lost to us: the script closed our end of
        its pipe. One whose pid is not known yet has not ended."""
        if self._pipe is not None and not self._owns("pipe"):
            return True
        if not self._known_spawn() or self._pidfd is None:
            return False
        if not self._owns("pidfd"):
            return True  # closed by the script (and our pipe with it, surely): it is lost to us
        import select

        try:
            return bool(select.select([self._pidfd], [], [], 0)[0])
        except (OSError, ValueError):
            return False

    def drain(self, timeout_s: float = HANDOVER_DRAIN_S, copies_s: float = 0.0) -> list[dict[str, Any]]:
        """At exit: wait (bounded) until every queued job reached the pipe; the jobs that did not.
        ``copies_s``: how long a memory snapshot's copy still under way is waited for (see _Handover)."""
        if self._handover is None:
            return []
        return self._handover.drain(timeout_s, copies_s)

    def copying(self) -> bool:
        """A memory snapshot of this process's captures is still being copied, or waits for its copy."""
        return self._handover is not None and self._handover.copying()

    def finish_copies(self, timeout_s: float) -> bool:
        """From any thread (a SIGTERM's watcher while the main thread is blocked): the snapshots' copies at
        full speed, then their jobs into the pipe, waited for at most ``timeout_s`` (0: only hurried);
        whether no copy is left."""
        return self._handover is None or self._handover.finish_copies(timeout_s)

    def when_copied(self, callback: Callable[[], None]) -> None:
        """``callback`` is called (from the copying thread, once) when no snapshot copy is left."""
        if self._handover is not None:
            self._handover.when_copied(callback)

    def spool_left(self, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """At the process's end, the jobs the pipe could not take in time (captures came faster than they
        were parsed) go to the post-processor through its spool file, which it reads once the pipe is
        closed (so it is whole by then): they are parsed after the job, as the others, and `npuprof run`
        waits for them. The jobs that could not be spooled (no post-processor, a full disk)."""
        handover = self._handover
        gone = handover is None or handover.broken or self._has_exited()
        if handover is not None and handover.spilled and gone and self.spool is not None:
            self._orphaned.append(self.spool)  # its spilled jobs: no post-processor reads them now
        jobs = jobs + self._take_back_spilled()
        if not jobs or self.spool is None or gone:
            return jobs
        from npuprof.agent.memory_snapshot import pop_task
        from npuprof.results import handover as wire

        try:
            # a memory snapshot not copied yet cannot travel: that export is said missing
            spooled = [without_uncopied_snapshot(job, pop_task(job)) for job in jobs]
            # after the jobs spilled there during the run (_Handover.put), if any
            append_to_spool(self.spool, b"".join(wire.job_line(wire.job_from(job)) for job in spooled))
        except (OSError, TypeError, ValueError) as exc:
            _agent_log().warning(f"the captures left at the end could not be spooled ({exc!r})")
            return jobs
        return []

    def _take_back_spilled(self) -> list[dict[str, Any]]:
        """The jobs spilled (_Handover._spill) to spools no post-processor will read (it ended, none took
        its place): taken back, to be kept unparsed as the jobs left in memory are, said; else they stayed in
        a spool nobody reads, their captures neither parsed nor said (helper-188). Each spool is first
        renamed to a name of ours, so that one still alive (the script closed our pipe to it) cannot read
        it too."""
        import msgspec

        from npuprof.results import handover as wire

        taken: list[dict[str, Any]] = []
        orphaned, self._orphaned = self._orphaned, []
        for spool in dict.fromkeys(orphaned):
            ours = spool.with_name(f"{spool.name}.{os.getpid()}.taken")
            try:
                os.rename(spool, ours)
            except OSError:  # none (read already, or nothing spilled)
                continue
            try:
                data = layout.read_small(ours, SPOOL_LIMIT)
            except OSError as exc:
                _agent_log().warning(f"the captures spilled to {spool} could not be read back ({exc!r})")
                continue
            with contextlib.suppress(OSError):
                os.unlink(ours)
            bad = 0
            for line in data.split(b"\n"):
                if not line.strip():
                    continue
                try:
                    taken.append(msgspec.to_builtins(wire.job_from_line(line)))
                except (wire.HandoverError, TypeError, ValueError):
                    bad += 1
            if bad:
                _agent_log().warning(f"{bad} capture job(s) spilled to {spool} could not be read back")
        if taken:
            _agent_log().warning(
                f"{len(taken)} capture(s) spilled to the spool of a post-processor that has ended are kept "
                "unparsed"
            )
        return taken

    def forget(self) -> None:
        """Close our end (in a forked child, only the child's copy): the post-processor then sees EOF
        once every owner has closed it. The hand-over thread does not exist in a forked child."""
        self._handover = None
        self._close_pidfd()
        if self._pipe is not None:
            owned = self._owned.pop("pipe", None)
            if owned is not None:
                owned.close()
            self._pipe = None


class _Handover:
    """Writes queued jobs into the pipe from a daemon thread; the training step only appends to a queue.

    SIGPIPE is blocked in this thread: a post-processor that has died (killed, out of memory) makes the
    write fail with EPIPE, never kills the training process (whose script may have put SIGPIPE back to its
    default action). From then on the thread keeps the jobs itself: their files are written, unparsed, for
    a later ``npuprof analyse`` (said once)."""

    def __init__(self, pipe: OwnedFd, owner: Postprocessor | None = None) -> None:
        import queue

        self.pipe = pipe  # never written once the script has its number (npuprof.owned_fd)
        self.fd = pipe.fd
        self.owner = owner  # for its post-processor's pid, in messages
        self.queue: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
        self.submitted = 0  # only the training thread counts up ...
        self.sent = 0  # ... and only the hand-over thread counts here (piped, or kept as files) ...
        self.sent_at_once = 0  # ... and the training thread here (written into the pipe by put())
        self.spilled = 0  # ... and here (appended to the spool by put(): QUEUE_LIMIT jobs were waiting)
        self.broken = False
        self.current: dict[str, Any] | None = None
        self.thread: bool | None = None  # its thread started (npuprof.agent.threads: not listed)
        self.task: Any = None  # the memory snapshot being copied (npuprof.agent.memory_snapshot)
        self.hurry = False  # training has ended: snapshots are copied without pauses
        self.snapshots_put = 0  # jobs with a memory snapshot to copy: counted by the training thread ...
        self.snapshots_taken = 0  # ... and by the copier as it takes them
        self.copies: queue.SimpleQueue[Any] = queue.SimpleQueue()  # the snapshots to copy, in order
        self.copier = False  # its thread started
        self.copied_callback: Callable[[], None] | None = None  # when_copied's, called once
        self.deadline: float | None = None  # the exit's bound, while drain() waits (one for nested calls)

    def out(self) -> int:
        """The jobs no longer this object's: piped (by either thread) or spilled to the spool."""
        return self.sent + self.sent_at_once + self.spilled

    def put(self, job: dict[str, Any]) -> None:
        self.submitted += 1
        if self._write_at_once(job):
            self.sent_at_once += 1
            return
        if self._spill(job):
            self.spilled += 1
            return
        self._queue_snapshot(job)
        self.queue.put(job)
        if self.thread is None:
            from npuprof.agent import threads

            self.thread = True
            if not threads.start(self._run, "npuprof-handover"):  # at shutdown on Python 3.12.0/3.12.1
                self.thread = None
                self._hand_over_here()

    def _spill(self, job: dict[str, Any]) -> bool:
        """Past QUEUE_LIMIT jobs waiting for the pipe (a post-processor far behind: a CPU-bound job starves
        it), append this one to the post-processor's spool, read once the pipe is closed (parsed after the
        job, as those left at its end), so that the jobs kept in memory stay bounded over days of captures.
        Not a job with a memory snapshot to copy (it must reach the copier), nor when the spool cannot take
        it (then it waits in memory, as before). One small append, at a capture's end only."""
        spool = self.owner.spool if self.owner is not None else None
        if spool is None or self.broken or self.submitted - 1 - self.out() < QUEUE_LIMIT:
            return False
        from npuprof.agent.memory_snapshot import TASK_KEY
        from npuprof.results import handover

        exports = job.get("exports")
        if isinstance(exports, dict) and TASK_KEY in exports:
            return False
        try:
            append_to_spool(spool, handover.job_line(handover.job_from(job)))
        except (OSError, TypeError, ValueError):
            return False
        if not self.spilled:
            _agent_log().info(
                f"{QUEUE_LIMIT} captures wait for the post-processor (it is behind: the job leaves it little "
                f"CPU): the next ones go to its spool {spool}, parsed after the job ends"
            )
        return True

    def _copy_apart(self, task: Any) -> None:
        """A memory snapshot copied by a thread of its own, in the order captures ended: a pipe the
        post-processor does not empty (stopped while captures record back to back) blocks the hand-over
        thread, and every capture's event tree stayed alive behind it (helper-100: 357 -> 868 MB over 100
        captures). The hand-over thread, reaching that job, waits for the copy (or makes it: run once)."""
        self.copies.put(task)
        if not self.copier:
            from npuprof.agent import threads

            # not started (at shutdown on Python 3.12.0/3.12.1): the hand-over makes the copy
            self.copier = threads.start(self._copy_in_order, "npuprof-snapshots")

    def _copy_in_order(self) -> None:
        from npuprof.agent.memory_snapshot import WAITING_SNAPSHOTS
        from npuprof.agent.untraced import leave_trace

        while True:
            task = self.copies.get()
            leave_trace()
            self.task = task  # before it is counted taken: copying() is never False in between
            self.snapshots_taken += 1
            # more waiting behind it than the bound: no pauses from its start (helper-102: each copy began
            # slow, and the waiting ones grew with every capture)
            behind = self.snapshots_put - self.snapshots_taken
            try:
                task.run(pause=not self.hurry and behind <= WAITING_SNAPSHOTS)
            except Exception as exc:  # never a traceback from this thread (run itself never raises)
                _agent_log().error(f"copying a memory snapshot failed: {exc!r}")
            self.task = None
            if not self.copying():
                self._tell_copied()

    def copying(self) -> bool:
        """A snapshot is being copied, or waits for its copy."""
        return self.task is not None or self.snapshots_taken < self.snapshots_put

    def finish_copies(self, timeout_s: float) -> bool:
        """No more pauses; the jobs handed over (drain's wait, nothing taken back), at most ``timeout_s``;
        whether no copy is left."""
        self.hurry = True
        task = self.task
        if task is not None:
            task.hurry()
        now = time.monotonic()
        self._wait_for_the_pipe(now, now + timeout_s)
        return not self.copying()

    def when_copied(self, callback: Callable[[], None]) -> None:
        """``callback`` once no copy is left: at once when none is."""
        self.copied_callback = callback
        if not self.copying():
            self._tell_copied()

    def _tell_copied(self) -> None:
        callback, self.copied_callback = self.copied_callback, None
        if callback is None:
            return
        try:
            callback()
        except Exception as exc:  # never a traceback from this thread
            _agent_log().error(f"the end of the memory snapshots' copy could not be told: {exc!r}")

    def _run(self) -> None:
        with contextlib.suppress(AttributeError, OSError, ValueError):
            import signal

            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPIPE})
        from npuprof.agent.untraced import leave_trace

        while True:
            job = self.queue.get()
            leave_trace()
            self._hand_over(job)

    def _hand_over(self, job: dict[str, Any]) -> None:
        self.current = job
        try:
            self._copy_snapshot(job)
            if self.broken or not self._write(job):
                _keep_unparsed(job)
        except Exception as exc:  # never a traceback from the hand-over
            _agent_log().error(f"handing a capture over failed: {exc!r}")
        self.current = None
        self.sent += 1

    def _hand_over_here(self) -> None:
        """The queued jobs handed over by the calling thread, when no thread could be started for them;
        SIGPIPE held back and taken, as in :meth:`_write_at_once`. That is at the interpreter's shutdown:
        training has ended, so a memory snapshot is copied without the pauses left to training steps (49x
        the copy's CPU time, 0.5 ms at least each 10 events: 5 s or more of the exit for 100,000 events).
        Only what the pipe takes without waiting is written: a post-processor that many captures behind
        (its pipe full) held the exit until it read again, for ever if it never did; the jobs from the
        first that does not fit on stay queued, in order, for :meth:`drain` (the spool)."""
        import queue

        self.hurry = True
        jobs: list[dict[str, Any]] = []
        while True:
            try:
                jobs.append(self.queue.get_nowait())
            except queue.Empty:
                break
        with _sigpipe_held_back():
            left: list[dict[str, Any]] = []
            for job in jobs:
                try:
                    self._copy_snapshot(job)
                except Exception as exc:  # never a traceback from the hand-over
                    _agent_log().error(f"handing a capture over failed: {exc!r}")
                if left or not self._takes_at_once(job):
                    left.append(job)
                else:
                    self._hand_over(job)
            for job in left:
                self.queue.put(job)

    def _takes_at_once(self, job: dict[str, Any]) -> bool:
        """Whether :meth:`_hand_over` deals with ``job`` without waiting: a broken pipe or a job that does
        not encode (kept unparsed), or at most PIPE_BUF bytes with that much room in the pipe."""
        if self.broken or not self._ours():
            return True
        from npuprof.results import handover

        try:
            data = handover.job_line(handover.job_from(job))
        except (TypeError, ValueError):
            return True
        try:
            return self._room_for(data)
        except (OSError, ValueError):
            return True  # the write says why

    def _room_for(self, data: bytes) -> bool:
        """Whether ``data`` goes into the pipe without waiting: at most PIPE_BUF bytes (written whole) and
        that much room there."""
        import select

        return len(data) <= select.PIPE_BUF and bool(select.select([], [self.fd], [], 0)[1])

    def _queue_snapshot(self, job: dict[str, Any]) -> None:
        """A job's memory snapshot, if it has one, to the copier (:meth:`_copy_apart`). A copy goes slowly,
        to leave the GIL to training; each one waiting keeps its capture's event tree alive. Past
        WAITING_SNAPSHOTS waiting (captures back to back), the copy under way goes at full speed, so the
        trees held stay bounded."""
        from npuprof.agent.memory_snapshot import TASK_KEY, WAITING_SNAPSHOTS

        exports = job.get("exports")
        if not isinstance(exports, dict) or TASK_KEY not in exports:
            return
        self.snapshots_put += 1
        task = self.task
        if task is not None and self.snapshots_put - self.snapshots_taken > WAITING_SNAPSHOTS:
            task.hurry()
        self._copy_apart(exports[TASK_KEY])

    def _copy_snapshot(self, job: dict[str, Any]) -> None:
        """A job asking for a memory timeline carries the copy of the profiler's tree still to make:
        made here, off the training step, before the post-processor is told (it reads the file)."""
        if not job.get("exports"):
            return
        from npuprof.agent.memory_snapshot import pop_task

        task = pop_task(job)
        if task is None:
            return
        task.run(pause=not self.hurry)  # done by the copier already, or under way there (waited for)
        if task.left_for_room:  # said by the task: the post-processor must not look for the file
            job.update(without_snapshot(job))

    def _write_at_once(self, job: dict[str, Any]) -> bool:
        """Write a small job straight into the pipe when that cannot block: nothing queued before it, no
        memory snapshot to copy, at most PIPE_BUF bytes (written whole) and that much room in the pipe.
        A process that ends right after its capture (``os._exit``) then loses nothing; else False."""
        if self.broken or job.get("exports") or self.out() != self.submitted - 1:
            return False
        from npuprof.results import handover

        try:
            data = handover.job_line(handover.job_from(job))
            if not self._ours() or not self._room_for(data):
                return False
        except (TypeError, ValueError, OSError):
            return False  # the hand-over thread says why
        with _sigpipe_held_back():
            try:
                os.write(self.fd, data)
                return True
            except OSError:
                return False  # the hand-over thread finds the pipe broken and says so

    def _write(self, job: dict[str, Any]) -> bool:
        """Write one job into the pipe; False when the post-processor cannot take it."""
        from npuprof.results import handover

        try:
            data = handover.job_line(handover.job_from(job))
        except (TypeError, ValueError) as exc:
            _agent_log().error(f"a capture's job could not be encoded: {exc!r}")
            return False
        pid = self.owner.pid if self.owner is not None else None
        who = f" (pid {pid})" if pid else ""
        kept = "the capture handed to it is kept unparsed (npuprof analyse parses it); training goes on"
        if not self._ours():  # not a death: the summary must not count it as one (helper-151)
            self.broken = True
            _agent_log().warn_once(
                "post-processor-pipe-closed",
                f"{PIPE_CLOSED} the background post-processor{who} (os.closerange?); {kept}",
            )
            return False
        try:
            while data:
                data = data[os.write(self.fd, data) :]
        except OSError as exc:
            self.broken = True
            _agent_log().warn_once(
                "post-processor-gone",
                f"the background post-processor{who} has ended ({exc.strerror or exc}); {kept}",
            )
            return False
        return True

    def _ours(self) -> bool:
        return self.pipe.ours()

    def _stalled(self) -> bool:
        """No room in the pipe and no memory snapshot being copied or waiting: waiting moves no job."""
        if self.task is not None or self.snapshots_taken < self.snapshots_put or not self._ours():
            return False
        import select

        try:
            return not select.select([], [self.fd], [], 0)[1]
        except (OSError, ValueError):
            return False

    def _wait_for_the_pipe(self, now: float, deadline: float) -> None:
        moving = now
        while self.out() < self.submitted and now < deadline:
            if self.thread is None:  # none could start (at shutdown): nothing moves the jobs left
                break
            if not self._stalled():
                moving = now
            elif now - moving >= DRAIN_STALLED_S:
                break
            time.sleep(0.01)
            now = time.monotonic()

    def _wait_for_the_copies(self, until: float, copies_s: float) -> None:
        """The copies under way past the exit's usual wait, said once on stderr (the exit seems to hang);
        the jobs they free go to the pipe or, past the wait, the spool."""
        _agent_log().warn_once(
            "snapshot-copy-at-exit",
            f"the process ends once its memory snapshot (--profile-memory) is copied, at most {copies_s:g} s "
            "(the categorised memory timeline needs it; the trace is saved already)",
        )
        now = time.monotonic()
        while self.copying() and now < until:
            time.sleep(0.01)
            now = time.monotonic()
        # within the same bound: on busy cores the hand-over thread took over 0.5 s to be scheduled once the
        # copy ended, and the job it freed went to the spool (a pipe that stays full still ends the wait)
        self._wait_for_the_pipe(now, until)

    def drain(self, timeout_s: float, copies_s: float = 0.0) -> list[dict[str, Any]]:
        """Wait for the queued jobs to reach the pipe, at most ``timeout_s``, and not once the pipe has stayed
        full for DRAIN_STALLED_S with no snapshot being copied: a post-processor that many captures behind
        takes the rest from the spool all the same, and every process of the job waited the whole 5 s at its
        exit (helper-133: 344 captures queued). Past ``timeout_s``, while a memory snapshot is still being
        copied, up to ``copies_s`` (a normal exit: EXIT_COPY_WAIT_S): the copy needs the live event tree,
        which nothing can take over once the process ends (helper-281: 175,000 events: 7 s, 2 busy cores)."""
        self.hurry = True
        task = self.task
        if task is not None:
            task.hurry()
        now = time.monotonic()
        # a SIGTERM landing in the exit's own wait drains again from its handler: within the same bound
        outer = self.deadline is None
        deadline = now + timeout_s if outer else min(now + timeout_s, self.deadline or now)
        copies_until = now + copies_s if outer else deadline
        self.deadline = max(deadline, copies_until)
        try:
            self._wait_for_the_pipe(now, deadline)
            # (only the copier's own thread counts a copy done: without it, nothing would say so)
            if self.copier and self.copying() and time.monotonic() < copies_until:
                self._wait_for_the_copies(copies_until, copies_s)
        finally:
            if outer:
                self.deadline = None
        if self.out() >= self.submitted:
            return []
        left: list[dict[str, Any]] = [] if self.current is None else [self.current]
        while not self.queue.empty():
            left.append(self.queue.get_nowait())
        self.submitted = self.out()  # these are the caller's now
        return left


def uncopied_snapshot(job: dict[str, Any]) -> str | None:
    """The memory snapshot ``job`` asks the post-processor to read and this process has not written (its
    copy still under way, or not begun), by name; None when the job asks for none or it is written (the
    copy is renamed into place whole: results/atomic.py)."""
    exports = job.get("exports")
    name = exports.get("memory_snapshot") if isinstance(exports, dict) else None
    if not isinstance(name, str) or not name or (Path(job["rank_dir"]) / name).exists():
        return None
    return name


def without_uncopied_snapshot(job: dict[str, Any], task: Any = None) -> dict[str, Any]:
    """``job`` as spooled at the process's end. One whose memory snapshot is still being copied
    (HANDOVER_DRAIN_S ran out: a big capture's event tree, its copy begun late) loses it with the process: the
    categorised timeline is said lost here, for that reason, and a copy of the job without the snapshot is
    spooled, its record naming no such file. The post-processor looked for the file and said the training
    process had not written it ("a full disk? npuprof.log says why"), and the record named a file that never
    was. (A copy: the hand-over thread may still hold the job.) ``task``: the job's snapshot task; one that
    left the file unwritten for --min-free-space has said so."""
    if uncopied_snapshot(job) is None:
        return job
    if task is not None and task.left_for_room:
        return without_snapshot(job)
    from npuprof.results.extras import memory_from_trace_fix, not_produced_line

    rank_dir = Path(job["rank_dir"])
    why = (
        f"the process ended before the copy of its memory snapshot was done (at its exit a training process "
        f"waits at most {EXIT_COPY_WAIT_S:g} s for the copy, after a SIGTERM {HANDOVER_DRAIN_S:g} s)"
    )
    fix = memory_from_trace_fix(rank_dir)
    _agent_log().warning(not_produced_line(rank_dir, "memory_timeline.*", why, fix))
    return without_snapshot(job)


def without_snapshot(job: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``job`` that asks for no memory snapshot, its record naming none."""
    name = job["exports"].get("memory_snapshot")
    exports = {**job["exports"], "memory_snapshot": None}
    record = job.get("record")
    if isinstance(record, dict) and isinstance(record.get("extras"), list):
        record = {**record, "extras": [extra for extra in record["extras"] if extra != name]}
    return {**job, "exports": exports, "record": record}


def _agent_log() -> Any:
    from npuprof.agent.log import get_log

    return get_log()


def _keep_unparsed(job: dict[str, Any]) -> None:
    """A job no post-processor takes: its files stay (written now if they were not), for npuprof analyse."""
    from npuprof.agent.capture import write_job_files

    write_job_files(job, _agent_log())


def append_to_spool(spool: Path, data: bytes) -> None:
    """Append ``data`` (whole job lines) to the post-processor's spool, made when absent (never through a
    link, never blocking on a FIFO); raises OSError, with nothing of ``data`` left there when the disk
    filled inside it (a line cut short would join the next one, and both be lost)."""
    from npuprof.results.atomic import file_mode

    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(spool, flags, file_mode())
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise OSError(f"{spool} is not a regular file")
        if status.st_size + len(data) > SPOOL_LIMIT:  # its reader would refuse it whole (spooled_jobs)
            raise OSError(errno.EFBIG, f"{spool} would grow past {SPOOL_LIMIT >> 20} MiB")
        done = 0
        try:
            while done < len(data):
                done += os.write(fd, data[done:])
        except OSError:
            with contextlib.suppress(OSError):
                end = os.lseek(fd, 0, os.SEEK_END)
                os.ftruncate(fd, end - done)  # (O_APPEND: our bytes are the file's last, nobody else writes)
            raise
    finally:
        os.close(fd)


# what follows the end of the post-processor that ended after RESTARTS replacements
NOT_REPLACED = (
    f"not replaced ({RESTARTS} times at most a process): the next captures are kept unparsed, npuprof "
    "analyse parses them"
)


def replaced_because(pid: int | None, pipe_lost: bool, alive: bool, then: str = "") -> str:
    """The agent's line when a new post-processor replaces post-processor ``pid`` (None: not known yet),
    ``alive`` or not (``then``: what follows instead, where none replaces it). Only one that ended while our
    pipe to it was ours died of something else (killed, out of memory): the run summary counts those lines
    as deaths (:func:`deaths_in`). One whose pipe the script closed (``os.closerange``) ends of that, at
    EOF, once done with what it was handed (helper-151: such a child's summary read "found dead (killed?
    out of memory?)")."""
    then = then or "a new one takes the next captures"
    if pipe_lost and pid is None:
        return (
            f"{PIPE_CLOSED} its post-processor (os.closerange?), its pid not known yet: that ends it; {then}"
        )
    if pipe_lost:
        fate = "it ends once done with what it was handed" if alive else "it ended of that (its input closed)"
        return f"{PIPE_CLOSED} post-processor pid {pid} (os.closerange?): {fate}; {then}"
    if pid is None:
        return f"the post-processor (its pid not known yet) has ended or is out of reach: {then}"
    if alive:  # the script closed our pidfd of it (os.closerange: helper-110 read "found dead" of it)
        return (
            f"post-processor pid {pid} is out of reach (the script closed npuprof's descriptors of it?): "
            + then
        )
    return f"post-processor pid {pid} had ended: {then}"


def pipe_closed(message: str) -> bool:
    """Whether an agent's log ``message`` says the script closed npuprof's pipe to its post-processor."""
    return message.startswith(PIPE_CLOSED)


def deaths_in(lines: Iterable[str]) -> set[str]:
    """The pids of the post-processors that npuprof.log's ``lines`` say were found dead."""
    found = (_DEATH_RE.search(line) for line in lines)
    return {m["a"] or m["b"] for m in found if m is not None}


def _create_lock(output: Path, run_id: str) -> tuple[int, str]:
    """A new lock file in the pending dir, held (LOCK_EX) on return, and its name. Never follows a link
    planted there, never waits: the name is ours alone."""
    pending = output / layout.PENDING_DIR
    for attempt in range(3):  # the last post-processor of another run may remove the empty dir meanwhile
        with contextlib.suppress(FileExistsError):
            os.mkdir(pending, 0o750)
        try:
            dir_fd = os.open(pending, _DIR_FLAGS)
            try:
                name = f"{run_id}.{os.uname().nodename}.{os.getpid()}.{os.urandom(4).hex()}.lock"
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                lock = os.open(name, flags, 0o640, dir_fd=dir_fd)
            finally:
                os.close(dir_fd)
            break
        except FileNotFoundError:
            if attempt == 2:
                raise
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(lock)
        raise
    return lock, name


def _lift_last(fds: list[int]) -> int:
    """The last of ``fds`` moved above stdio (npuprof.owned_fd.above_stdio), in the list too; dropped from it
    when that fails, as it has been closed then."""
    fd = fds.pop()
    fds.append(above_stdio(fd))
    return fds[-1]


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _child_env() -> dict[str, str]:
    # NPUPROF_COMMAND stays: the commands its log lines suggest are the user's (npuprof/invocation.py)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NPUPROF_") or k == ENV_COMMAND}
    pythonpath = _without_bootstrap(env.get("PYTHONPATH", ""))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, _PACKAGE_ROOT) if p)
    env["OMP_NUM_THREADS"] = "1"  # its torch work (the memory timeline) is small: no thread per core
    return env


def _start_by_launcher(fds: list[int], spool: Path, run_id: str) -> spawner.Spawned | None:
    """Ask `npuprof run` to start the post-processor (npuprof.results.spawner) with ``fds`` (the job pipe,
    lock, ready pipe and our pidfd, which it watches); None when it cannot be asked (no launcher's address,
    or it did not answer): nothing was handed over then."""
    address = os.environ.get(spawner.ENV_SPAWN)
    if not address:
        return None
    try:
        there = [spawner.child_fd(k) for k in range(1, 4)]
        argv = [*_postprocessor_argv(spool, *there, run_id), *_inherited_settings()]
        return spawner.request_spawn(address, sys.executable, argv, _child_env(), fds, watch=3)
    except (OSError, ValueError, TypeError) as exc:
        _agent_log().info(f"npuprof run did not start the post-processor ({exc!r}): started here")
        return None


def _postprocessor_argv(spool: Path, lock_fd: int, ready_fd: int, parent_fd: int, run_id: str) -> list[str]:
    """The post-processor's command line, its job pipe on stdin and the other descriptors at these numbers;
    ``--run``: by it the launcher finds one the job started itself (:func:`own_post_processors_at_work`);
    ``--log``: the run's log, beside the spool in the run's output directory (a --dynamic request's
    prof_dir outside it had the post-processor's lines in a log of its own, which the run's summary never
    read: it blamed "a post-processor stopped, killed, or still at work" for a full disk there)."""
    return [
        sys.executable, "-m", "npuprof.results.postprocess", "--parent", str(os.getpid()),
        "--spool", str(spool), "--lock-fd", str(lock_fd), "--ready-fd", str(ready_fd),
        "--parent-fd", str(parent_fd), "--run", run_id, "--log", str(spool.with_name(layout.RUN_LOG)),
    ]  # fmt: skip


def _inherited_settings() -> list[str]:
    """What a child of ours would have inherited and `npuprof run`'s child must be told: the umask (a
    stricter one keeps its files as private as the job's) and the CPUs (a job pinned with taskset)."""
    settings = []
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status", "rb") as status:
        for line in status:
            if line.startswith(b"Umask:"):
                settings += ["--umask", str(int(line.split()[1], 8))]  # read: os.umask would set it
                break
    with contextlib.suppress(OSError, AttributeError):
        cpus = os.sched_getaffinity(0)
        if cpus != set(range(os.cpu_count() or 0)):
            settings += ["--cpus", ",".join(map(str, sorted(cpus)))]
    return settings


def _take_settings(args: list[str]) -> None:
    """In the post-processor: the settings :func:`_inherited_settings` passed."""
    with contextlib.suppress(ValueError, IndexError):
        if "--umask" in args:
            os.umask(int(args[args.index("--umask") + 1]))
    with contextlib.suppress(ValueError, IndexError, OSError, AttributeError):
        if "--cpus" in args:
            os.sched_setaffinity(0, {int(c) for c in args[args.index("--cpus") + 1].split(",")})


def _spawn_file_actions(kept: set[int]) -> list[tuple[Any, ...]]:
    """stdin, stdout, stderr: /dev/null; ``kept`` as they are; every other inherited descriptor closed
    (glibc ignores a close of one that is already closed)."""
    actions: list[tuple[Any, ...]] = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]
    keep = {0, 1, 2} | kept
    return actions + [(os.POSIX_SPAWN_CLOSE, fd) for fd in _open_fds() if fd not in keep]


def _open_fds() -> list[int]:
    try:
        return sorted(int(name) for name in os.listdir("/proc/self/fd"))
    except (OSError, ValueError):
        return []  # the post-processor closes what it inherited itself (close_inherited_fds)


def close_inherited_fds(keep: set[int]) -> None:
    """In the post-processor: close whatever descriptor it may still have inherited."""
    high = 3
    for fd in sorted(keep | {2}):
        if fd >= high:
            os.closerange(high, fd)
            high = fd + 1
    os.closerange(high, 1 << 16)


def _without_bootstrap(pythonpath: str) -> str:
    """PYTHONPATH less npuprof's bootstrap directory (the post-processor needs no agent); every other
    entry, empty ones (the current directory) included, stays."""
    ours = os.path.join(_PACKAGE_ROOT, "npuprof", "_bootstrap")
    return os.pathsep.join(p for p in pythonpath.split(os.pathsep) if os.path.normpath(p or ".") != ours)


def pending_jobs(output: Path, run_id: str | None = None) -> list[str]:
    """The lock files of background jobs (of ``run_id``, or of any run) under ``output``."""
    try:
        dir_fd = os.open(output / layout.PENDING_DIR, _DIR_FLAGS)
    except OSError:
        return []
    try:
        return sorted(n for n in os.listdir(dir_fd) if _is_lock_name(n, run_id))
    finally:
        os.close(dir_fd)


def _is_lock_name(name: str, run_id: str | None) -> bool:
    return name.endswith(".lock") and (run_id is None or name.startswith(f"{run_id}."))


def wait_for_pending(
    output: Path,
    run_id: str | None = None,
    poll_s: float = 0.1,
    on_stopped: Callable[[int], None] | None = None,
    deadline: float | None = None,
) -> int:
    """Wait until every background job of ``run_id`` under ``output`` has ended; how many there were.
    Only regular files are opened, without following links and without blocking on a FIFO.
    ``on_stopped(pid)`` hears, once each, of a post-processor on this host found stopped (SIGSTOP, Ctrl-Z):
    it would be waited for until it is continued. TimeoutError once ``time.monotonic()`` passes
    ``deadline``: the jobs go on."""
    try:
        dir_fd = os.open(output / layout.PENDING_DIR, _DIR_FLAGS)
    except OSError:
        return 0
    count = 0
    try:
        for name in sorted(n for n in os.listdir(dir_fd) if _is_lock_name(n, run_id)):
            if _wait_for_lock(dir_fd, name, poll_s, on_stopped, deadline):
                count += 1
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=dir_fd)
        remaining = os.listdir(dir_fd)
    finally:
        os.close(dir_fd)
    if not remaining:
        with contextlib.suppress(OSError):
            os.rmdir(output / layout.PENDING_DIR)
    return count


_STOPPED_CHECK_S = 2.0  # how often a wait looks whether the post-processor it waits for is stopped


def _wait_for_lock(
    dir_fd: int,
    name: str,
    poll_s: float,
    on_stopped: Callable[[int], None] | None,
    deadline: float | None = None,
) -> bool:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return False
    pid = None
    next_check = time.monotonic()
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        while True:  # polled, so that Ctrl-C stops the wait at once
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError(f"post-processing still at work ({name})") from None
            if time.monotonic() >= next_check:
                next_check = time.monotonic() + _STOPPED_CHECK_S
                pid = pid or _holder_of_lock(dir_fd, name, fd)
                if pid is not None and _not_waited_for(pid):
                    # (a holder with no command line may be one at its exit: EXITING_GRACE_S)
                    return not _is_post_processor(pid) and _freed_soon(fd)
                if on_stopped is not None and pid is not None and _is_stopped_post_processor(pid):
                    on_stopped(pid)
                    on_stopped = None  # said once
            time.sleep(poll_s)
    finally:
        os.close(fd)


# A post-processor ending at EOF has no command line left (Linux frees its memory before its descriptors)
# while it still holds its lock: read as a dead one whose lock a copy of its descriptor holds, it was not
# waited for, and the run counted no post-processor. Its lock is free within moments; a copy's stays held.
EXITING_GRACE_S = 1.0


def _freed_soon(fd: int) -> bool:
    """Whether the lock on ``fd`` is taken within :data:`EXITING_GRACE_S` (then held by this process)."""
    until = time.monotonic() + EXITING_GRACE_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= until:
                return False
        time.sleep(0.02)


def gzip_file(plain: Path) -> Path:
    """``x.json`` -> ``x.json.gz`` atomically; the plain file is removed only once the gz is complete."""
    import gzip
    import shutil

    target = plain.with_name(plain.name + ".gz")
    with (
        open(plain, "rb") as src,
        atomic_writer(target, "wb") as raw,
        gzip.GzipFile(filename=plain.name, mode="wb", fileobj=raw, compresslevel=GZIP_LEVEL, mtime=0) as gz,
    ):
        shutil.copyfileobj(src, gz, 1 << 20)
    plain.unlink()
    return target


_JOB_RUN = {"id": ""}  # the run of the job at work, which tags its log lines
# the run's npuprof.log (--log), where the run's summary reads what this process said of each capture;
# without it, the log beside the rank dir
_RUN_LOG: dict[str, Path] = {}
# --log held open from the start, written when it cannot be opened (the output made read-only: a bind
# mount, a remount): what this process met there was lost, and the run's summary guessed "a post-processor
# stopped, killed, or still at work" for captures it had found unwritable (helper-355)
_KEPT_LOG: dict[str, Any] = {}


def _keep_run_log_open() -> int | None:
    """Hold --log open (before the ready line: the output may be made read-only as soon as the training
    process goes on); the descriptor, or None."""
    from npuprof.agent.log import AgentLog

    path = _RUN_LOG.get("path")
    if path is None:
        return None
    kept = AgentLog(str(path), "postprocess")
    _KEPT_LOG["log"] = kept
    return kept.keep_a_descriptor()


def _log(rank_dir: Path, message: str, level: str = "INFO") -> None:
    line = f"{rank_dir.name}: {message}"
    path = _RUN_LOG.get("path", rank_dir.parent / layout.RUN_LOG)
    kept = _KEPT_LOG.get("log")
    if kept is not None and kept.path == str(path):
        kept.run_id = _JOB_RUN["id"]
        kept.write(level, line)
        return
    logfile.log(path, level, "postprocess", line, _JOB_RUN["id"])


def _db_missing(rank_dir: Path) -> int:
    """--export-type db asked for a db this rank did not get (its summary says why): said at the run's end,
    since msprof-analyze would leave the rank out of the run without a word."""
    from npuprof.results.extras import not_produced

    why = (
        "writing it failed (the rank's `npuprof analyse` report says why): msprof-analyze leaves the rank out"
    )
    _log(
        rank_dir,
        not_produced("the db export", why, npuprof_cmd("analyse --export-type db") + " on the result"),
        "WARNING",
    )
    return 1


def run_job(job: CaptureJob) -> int:
    """Write the capture's files, then parse and gzip. Returns 0, or 1 when a part failed."""
    from npuprof.results.atomic import write_json
    from npuprof.results.handover import record_plain

    rank_dir = Path(job.rank_dir)
    status = 0
    record = record_plain(job.record)
    if _done_already(job):
        return 0
    try:
        for name, content in job.files.items():
            write_json(rank_dir / name, content)
        write_json(rank_dir / layout.CAPTURE_RECORD, record)
    except OSError as exc:
        _log(rank_dir, f"could not write the capture's files: {exc!r}", "ERROR")
        return 1
    if job.chrome_trace is not None:
        status |= _copy_chrome_trace(rank_dir, *job.chrome_trace, job.min_free_space)
    trace_bytes = _size_of(job.trace)
    parse_short = (
        _short_of_space(rank_dir, job.min_free_space, _parse_space(trace_bytes)) if job.analyse else ""
    )
    if parse_short and _gzip_makes_room(rank_dir, job, trace_bytes):
        # The parse reads the gzipped trace as well: the room the plain trace leaves is the parse's.
        record, status = _gzip_trace(rank_dir, job, record, trace_bytes, status)
        with contextlib.suppress(OSError):  # the record names the trace kept, before the parse
            write_json(rank_dir / layout.CAPTURE_RECORD, record)
        parse_short = _short_of_space(rank_dir, job.min_free_space, _parse_space(trace_bytes))
    if parse_short:
        _log(rank_dir, f"not analysed ({parse_short}); run {npuprof_cmd('analyse')} on it later", "WARNING")
        status = 1
    elif job.analyse:
        status |= _parse(rank_dir, job)
    if job.exports is not None:
        status |= _finish_exports(rank_dir, job, record)
    record, status = _gzip_trace(rank_dir, job, record, trace_bytes, status)
    if record != record_plain(job.record):
        # This process owns the record: rewritten from the job, not by reading it back.
        try:
            write_json(rank_dir / layout.CAPTURE_RECORD, record)
        except OSError as exc:
            _log(rank_dir, f"could not rewrite the capture record: {exc!r}", "ERROR")
            status = 1
    return status


def _parse(rank_dir: Path, job: CaptureJob) -> int:
    try:
        from npuprof.analysis.parse import parse_rank_dir

        outcome = parse_rank_dir(rank_dir, export_db=job.export_db, heed_read_only=False)
    except Exception as exc:
        _log(rank_dir, f"analysis failed: {exc!r}", "ERROR")
        return 1
    if not outcome.ok:
        why = f"{outcome.status}" + (f": {outcome.reason}" if outcome.reason else "")
        _log(rank_dir, f"not analysed ({why}); run {npuprof_cmd('analyse')} on it later", "WARNING")
        return 1
    if outcome.status == "cached":  # an `npuprof analyse` of the run in flight parsed it first
        _log(rank_dir, "already analysed (by another parse, an npuprof analyse?): its tables are kept")
    else:
        _log(rank_dir, f"analysed in {outcome.seconds:.1f} s: {', '.join(outcome.files)}")
    if job.export_db and not layout.has_profiler_db(rank_dir):
        return _db_missing(rank_dir)
    return 0


def _plain_trace_to_gzip(job: CaptureJob) -> Path | None:
    trace = Path(job.trace) if job.gzip and job.trace else None
    return trace if trace is not None and trace.suffix == ".json" and trace.exists() else None


def _gzip_makes_room(rank_dir: Path, job: CaptureJob, trace_bytes: int) -> bool:
    """Whether gzipping first leaves the parse the room it lacks (a gzipped trace is ~0.1-0.2x)."""
    if _plain_trace_to_gzip(job) is None:
        return False
    after = _parse_space(trace_bytes) - trace_bytes + GZIP_SPACE_FACTOR * trace_bytes
    return not _short_of_space(rank_dir, job.min_free_space, max(after, GZIP_SPACE_FACTOR * trace_bytes))


def _gzip_trace(
    rank_dir: Path, job: CaptureJob, record: dict[str, Any], trace_bytes: int, status: int
) -> tuple[dict[str, Any], int]:
    """Gzip the plain trace when asked and there is room; the record naming what is kept, and the status."""
    trace = _plain_trace_to_gzip(job)
    if trace is None:
        return record, status
    short = _short_of_space(rank_dir, job.min_free_space, GZIP_SPACE_FACTOR * trace_bytes)
    if short:
        _log(rank_dir, f"not gzipped ({short}): the plain trace is kept", "WARNING")
        return record, status
    try:
        packed = gzip_file(trace)
    except OSError as exc:
        _log(rank_dir, f"gzip failed, the plain trace is kept: {exc!r}", "WARNING")
        return record, 1
    _summary_names_gzipped(rank_dir, trace.name, packed.name)
    return {**record, "trace": packed.name}, status


SUMMARY_LIMIT = 256 << 20  # as results/cut_capture.py reads a summary (its top operators per step)


def _summary_names_gzipped(rank_dir: Path, plain: str, packed: str) -> None:
    """The parse just made names the trace it read, ``plain``, which the gzip has replaced by ``packed``:
    its npuprof_summary.json's ``trace`` is made to name the file there is (docs/formats.md; a script
    reading it opened a file that was gone). Only under the tables' lock (another parse writing them
    now writes its own summary), and only a summary naming ``plain``; ``analyse.done`` keeps naming the
    plain trace, as documented. A failure leaves the old name, logged."""
    import msgspec

    from npuprof.analysis.parse import SUMMARY_FILE, alone_in, write_json_fast

    parsed = rank_dir / layout.PARSED_DIR
    path = parsed / SUMMARY_FILE
    if not path.exists():
        return  # not parsed (--no-analyse, short of space), or gzipped before its parse
    with alone_in(parsed) as alone:
        if not alone:
            return
        try:
            summary = msgspec.json.decode(layout.read_small(path, SUMMARY_LIMIT))
            if not isinstance(summary, dict) or summary.get("trace") != plain:
                return
            summary["trace"] = packed
            write_json_fast(path, summary, indent=0)  # as the parse writes it
        except (OSError, ValueError, msgspec.MsgspecError) as exc:  # (DecodeError is a ValueError)
            _log(rank_dir, f"{SUMMARY_FILE} still names {plain}, now gzipped: {exc!r}", "WARNING")


def _done_already(job: CaptureJob) -> bool:
    """A job seen twice (the one in the pipe's hands when the training process ended is spooled too): its
    trace already gzipped and parsed; running it again would put back the record naming the plain trace."""
    if not job.trace or os.path.exists(job.trace) or not os.path.exists(job.trace + ".gz"):
        return False
    return not job.analyse or (Path(job.rank_dir) / layout.PARSED_DIR / layout.ANALYSE_DONE).exists()


# What a parse and a gzip write, against the plain trace's size: trace_view.json ~1.2x and the tables
# (bench/README.md); a gzipped copy ~0.1-0.2x, before the plain trace is removed. A parse's fixed-size
# outputs come on top: layout.PARSE_SPACE_ALLOWANCE.
PARSE_SPACE_FACTOR = 1.5
GZIP_SPACE_FACTOR = 0.25


def _parse_space(trace_bytes: int) -> float:
    """The room a parse of a trace of ``trace_bytes`` takes, fixed-size outputs included."""
    return PARSE_SPACE_FACTOR * trace_bytes + layout.PARSE_SPACE_ALLOWANCE


def _size_of(path: str | None) -> int:
    try:
        return os.stat(path).st_size if path else 0
    except OSError:
        return 0


def _short_of_space(rank_dir: Path, spec: str, wanted: float) -> str:
    from npuprof.results.free_space import short_of_room

    return short_of_room(rank_dir, spec, wanted)


def _copy_chrome_trace(rank_dir: Path, source: str, target: str, min_free_space: str) -> int:
    """--export-chrome-trace's copy (npuprof.agent.chrome_trace); 1 when it failed, which is logged as
    "not produced" (shown at the end of the run). Not made where it would take the target's disk below
    --min-free-space, as the parse and the gzip are not: a copy of the whole plain trace per capture took
    that disk to 0 bytes, where the job's own writes were promised the room."""
    from npuprof.agent.chrome_trace import copy_trace

    short = _short_of_space(Path(target).parent, min_free_space, _size_of(source))
    if short:
        return _chrome_trace_not_produced(rank_dir, f"{target}: not copied ({short})")
    try:
        copy_trace(Path(source), Path(target))
    except OSError as exc:
        return _chrome_trace_not_produced(rank_dir, f"{target}: {exc.strerror or exc}")
    _log(rank_dir, f"--export-chrome-trace: {target} (copied)")
    return 0


def _chrome_trace_not_produced(rank_dir: Path, why: str) -> int:
    from npuprof.results.extras import not_produced

    _log(rank_dir, not_produced("--export-chrome-trace", why, "choose a writable path with space"), "WARNING")
    return 1


def _finish_exports(rank_dir: Path, job: CaptureJob, record: dict[str, Any]) -> int:
    """The stacks and memory timeline of the capture (npuprof.results.extras), named in the record's
    ``extras`` (in place); 1 when something failed unexpectedly."""
    from npuprof.results.extras import finish_exports

    assert job.exports is not None

    def say(message: str, level: str) -> None:
        _log(rank_dir, message, level)

    try:
        trace = Path(job.trace) if job.trace else None
        written = finish_exports(rank_dir, trace, job.exports, say, job.min_free_space)
    except Exception as exc:
        _log(rank_dir, f"stacks / memory timeline failed: {exc!r}", "ERROR")
        return 1
    snapshot = job.exports.memory_snapshot
    kept = [name for name in record.get("extras", []) if name != snapshot or (rank_dir / name).exists()]
    record["extras"] = list(dict.fromkeys(kept + written))
    return 0


def _log_unusable(line: bytes, why: str) -> None:
    """A job line this post-processor cannot use: said in the log of the rank dir it names, if any."""
    try:
        rank_dir = json.loads(line).get("rank_dir")
    except (ValueError, AttributeError, RecursionError):
        return
    if isinstance(rank_dir, str):
        _log(Path(rank_dir), f"not post-processed: {why}; run {npuprof_cmd('analyse')}", "ERROR")


def read_jobs(fd: int, parent_fd: int | None, poll_s: float = 1.0) -> Iterator[bytes]:
    """The lines written into ``fd`` until EOF, or until the training process has died (a process it
    forked without Python's fork hooks may still hold the pipe open: that must not keep npuprof waiting),
    told by ``parent_fd``, its pidfd (our parent is never that process)."""
    import select

    buffer = b""
    while True:
        ready, _, _ = select.select([fd], [], [], poll_s)
        if not ready:
            if parent_fd is not None and select.select([parent_fd], [], [], 0)[0]:
                return
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            if buffer.strip():
                yield buffer
            return
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        yield from (line for line in lines if line.strip())


def _holder_of_lock(dir_fd: int, name: str, fd: int | None = None) -> int | None:
    """The pid of the post-processor holding lock ``name`` (it writes its pid into the file when it
    starts), when the lock's host is this one; None when that is not known. Read through ``fd`` where the
    lock is open already: the folder may have been removed since (helper-116)."""
    parts = name.rsplit(".", 3)
    if len(parts) != 4 or not parts[0].endswith("." + os.uname().nodename):
        return None
    opened = None
    try:
        if fd is None:
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            fd = opened = os.open(name, flags, dir_fd=dir_fd)
        text = os.pread(fd, 32, 0)
    except OSError:
        return None
    finally:
        if opened is not None:
            os.close(opened)
    return int(text) if text.strip().isascii() and text.strip().isdigit() else None


def not_waited_for(dir_fd: int, name: str, fd: int) -> bool:
    """Lock ``name`` (open as ``fd``) is held, but not by a post-processor to wait for
    (:func:`_not_waited_for`)."""
    pid = _holder_of_lock(dir_fd, name, fd)
    return pid is not None and _not_waited_for(pid)


def _not_waited_for(pid: int) -> bool:
    """The post-processor ``pid`` that wrote itself into a held lock is not waited for: it has died, and a
    copy of its lock's descriptor in another process (one forked while it was open) holds the lock, which
    its death did not free (docs/architecture.md, "Process model"); or it serves a training process that
    outlives the job (started in a session of its own): it ends with it, maybe hours later (helper-116: the
    run waited for it, "waiting for ... (gzip / analyse)" with nothing to do)."""
    return not _is_post_processor(pid) or _training_lives(pid)


def _training_lives(pid: int) -> bool:
    """Whether post-processor ``pid``'s training process (``--parent`` in its command line) still lives: a
    stop is then that process's hold while it records, which it lifts itself."""
    parent = _parent_in(_command_line(pid))
    if parent is None:
        return False
    from npuprof.job_processes import is_a_run_process

    return parent > 1 and is_a_run_process(parent)


def _command_line(pid: int) -> list[bytes]:
    """``pid``'s arguments (/proc), none where they cannot be read."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().split(b"\0")
    except OSError:
        return []


def _parent_in(args: list[bytes]) -> int | None:
    """The ``--parent`` pid of a post-processor's ``args``, None when they name none."""
    try:
        return int(args[args.index(b"--parent") + 1])
    except (ValueError, IndexError):
        return None


def _serves_us(pid: int) -> bool:
    """``pid`` is a post-processor started for this process (``--parent`` our pid in its command line)."""
    args = _command_line(pid)
    return b"npuprof.results.postprocess" in args and _parent_in(args) == os.getpid()


def _is_stopped_post_processor(pid: int) -> bool:
    """``pid`` is a post-processor stopped by a signal or a tracer (state T or t in /proc; False where
    that is not known)."""
    fields = stat_fields(pid)
    return bool(fields) and fields[0] in (b"T", b"t") and _is_post_processor(pid)


def continue_when_orphaned(ready_fd: int | None) -> None:
    """Ask the kernel for SIGCONT when our parent, `npuprof run`, dies: the training process stops us while
    it records (Postprocessor.hold); the launcher continues us when that process dies, the kernel when the
    launcher itself dies. Then say so, with our pid, on ``ready_fd``: the training process holds us only
    from then on. (Started through sh, where no launcher could, our parent is gone at once: we are never
    held then.)"""
    import ctypes
    import signal

    asked = False
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        asked = libc.prctl(1, int(signal.SIGCONT), 0, 0, 0) == 0  # PR_SET_PDEATHSIG
    if ready_fd is not None:
        with contextlib.suppress(OSError):
            os.write(ready_fd, f"{'r' if asked else '-'}{os.getpid()}\n".encode())  # see _read_ready
            os.set_blocking(ready_fd, False)  # kept: a byte per job done (job_done), never waited on


def job_done(ready_fd: int | None) -> None:
    """One byte on the ready pipe per job done: the training process holds us during a capture only while
    few of its captures wait for us (Postprocessor.hold). A full pipe (nobody reads) drops the byte."""
    if ready_fd is not None:
        with contextlib.suppress(OSError):
            os.write(ready_fd, JOB_DONE)


def continue_held(output: Path, run_id: str) -> None:
    """SIGCONT to this run's post-processors on this host that still work (their lock is held): the job
    has ended, nothing records any more, and one stopped by its training process (Postprocessor.hold)
    whose end the kernel did not report must not be waited for for ever."""
    import signal

    for pid in _lock_holders(output, run_id):
        if _is_stopped_post_processor(pid) and not _training_lives(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGCONT)


def own_post_processors_at_work(output: Path | None = None, run_id: str | None = None) -> list[int]:
    """The post-processors this launcher's spawner started that still run though their training process
    has ended: their lock files tell nothing once the script removed them (the output dir with them), and
    the launcher would return while they still write (helper-110, 4 of 5 under load). With the run's
    ``output`` and ``run_id``, when the locks' folder is gone, also those of this run that its job started
    itself, found in /proc by their ``--run``: the launcher's spawner had not answered within its second
    (CI, 3 test workers on 2 cores), and `npuprof run` returned while one still wrote."""
    found = [
        pid
        for pid in spawner.children()
        if _parent_of(pid) == os.getpid() and _is_post_processor(pid) and not _training_lives(pid)
    ]
    if output is not None and run_id and not (output / layout.PENDING_DIR).is_dir():
        found += [
            pid for pid in _post_processors_of_run(run_id) if pid not in found and not _training_lives(pid)
        ]
    return found


def post_processor_of_run_lives(run_id: str) -> bool:
    """Whether a post-processor of run ``run_id`` still runs on this host (at work on what it was handed)."""
    return bool(_post_processors_of_run(run_id))


def _post_processors_of_run(run_id: str) -> list[int]:
    """The live post-processors on this host whose command line names run ``run_id`` (``--run``)."""
    found = []
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if name.isdigit():
                args = _command_line(int(name))
                if _is_post_processor_args(args) and _run_in(args) == run_id and not _is_zombie(int(name)):
                    found.append(int(name))
    return found


def _run_in(args: list[bytes]) -> str | None:
    """The ``--run`` of a post-processor's ``args``, None when they name none."""
    try:
        return args[args.index(b"--run") + 1].decode("utf-8", "replace")
    except (ValueError, IndexError):
        return None


def _is_zombie(pid: int) -> bool:
    fields = stat_fields(pid)
    return bool(fields) and fields[0] == b"Z"


def wait_for_own_post_processors(
    poll_s: float = 0.05,
    on_stopped: Callable[[int], None] | None = None,
    deadline: float | None = None,
    output: Path | None = None,
    run_id: str | None = None,
) -> int:
    """Wait, by pid, until :func:`own_post_processors_at_work` is empty; how many there were at most. One
    stopped whose training process has ended is continued first, as :func:`continue_held` does for lock
    holders; one stopped again is said to ``on_stopped`` once and waited for. TimeoutError once
    ``time.monotonic()`` passes ``deadline``: they go on."""
    import signal

    at_work = own_post_processors_at_work(output, run_id)
    for pid in at_work:
        if _is_stopped_post_processor(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGCONT)
    most, said = len(at_work), set()
    next_check = time.monotonic() + _STOPPED_CHECK_S
    while at_work:
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError(f"post-processing still at work (pids {at_work})")
        if on_stopped is not None and time.monotonic() >= next_check:
            next_check = time.monotonic() + _STOPPED_CHECK_S
            for pid in at_work:
                if pid not in said and _is_stopped_post_processor(pid):
                    said.add(pid)
                    on_stopped(pid)
        time.sleep(poll_s)
        at_work = own_post_processors_at_work(output, run_id)
        most = max(most, len(at_work))
    return most


def lift_idle_priority(
    pids: list[int] | None = None, priority: tuple[int, int] | None = None
) -> list[tuple[int, bool, bool]]:
    """The job has ended: the post-processors this launcher started (``pids``, default: the spawner's
    children not yet reaped) that still run, and what they forked, get normal CPU priority back
    (npuprof/results/priority.py): (pid, threads raised, autogroup raised) of each. Only its own children:
    a lock file names any pid it likes (helper-113: one planted in a shared output dir had another user's
    process raised), and one read from a lock could be missing yet (helper's run under load: the
    post-processor, idle, had not written it when the job ended)."""
    from npuprof.results.priority import restore_normal_priority

    lifted = []
    for pid in spawner.children() if pids is None else pids:
        if _parent_of(pid) == os.getpid() and _is_post_processor(pid) and not _training_lives(pid):
            lifted.append((pid, *restore_normal_priority(pid, priority)))
    return lifted


def _lock_holders(output: Path, run_id: str) -> list[int]:
    """The pids written in this run's lock files on this host (the post-processors that took them)."""
    try:
        dir_fd = os.open(output / layout.PENDING_DIR, _DIR_FLAGS)
    except OSError:
        return []
    try:
        names = [name for name in os.listdir(dir_fd) if _is_lock_name(name, run_id)]
        return [pid for name in names if (pid := _holder_of_lock(dir_fd, name)) is not None]
    except OSError:
        return []
    finally:
        os.close(dir_fd)


def _parent_of(pid: int) -> int | None:
    fields = stat_fields(pid)
    return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None


def _is_post_processor(pid: int) -> bool:
    return _is_post_processor_args(_command_line(pid))


def _is_post_processor_args(args: list[bytes]) -> bool:
    return any(b"npuprof.results.postprocess" in arg for arg in args)


def main(argv: list[str] | None = None) -> int:
    """The post-processor: one JSON job a line on stdin, until EOF or the training process's end."""
    args = list(sys.argv[1:] if argv is None else argv)
    lock = int(args[args.index("--lock-fd") + 1]) if "--lock-fd" in args else None
    spool = Path(args[args.index("--spool") + 1]) if "--spool" in args else None
    ready = int(args[args.index("--ready-fd") + 1]) if "--ready-fd" in args else None
    parent_fd = int(args[args.index("--parent-fd") + 1]) if "--parent-fd" in args else None
    if "--log" in args:
        _RUN_LOG["path"] = Path(args[args.index("--log") + 1])
    _take_settings(args)  # before the ready line: held from then on, a stopped one would run unpinned after
    kept_log = _keep_run_log_open()
    continue_when_orphaned(ready)
    if lock is not None:
        with contextlib.suppress(OSError):  # who holds the lock: `npuprof run` names it if it is stopped
            os.pwrite(lock, f"{os.getpid()}\n".encode(), 0)
        close_inherited_fds({lock} | {fd for fd in (parent_fd, ready, kept_log) if fd is not None})
    status = 1
    try:
        status = _serve(spool, parent_fd, ready)
    finally:
        if lock is not None:
            _remove_own_lock(lock)
            # `npuprof run` stops waiting once the lock file is gone: leave now, not after the
            # interpreter's teardown (seconds at SCHED_IDLE on a busy machine)
            os._exit(status)
    return status


def _remove_own_lock(lock: int) -> None:
    """Its lock file, once its work is done: a launcher that stopped waiting (Ctrl-C, SIGTERM) is gone and
    would have left it for ever. (The lock itself goes with the process.)"""
    with contextlib.suppress(OSError):
        path = os.readlink(f"/proc/self/fd/{lock}")
        if path.endswith(".lock") and os.path.basename(os.path.dirname(path)) == layout.PENDING_DIR:
            os.unlink(path)
            os.rmdir(os.path.dirname(path))  # when it was the last (a lock being made is retried)


def spooled_jobs(spool: Path | None) -> Iterator[bytes]:
    """The lines of the spool the training process wrote (past QUEUE_LIMIT jobs waiting, and at its end:
    Postprocessor.spool_left), once, after the pipe has closed; the file is removed as it is read (a link
    or a FIFO of that name is never followed)."""
    if spool is None:
        return
    try:
        data = layout.read_small(spool, SPOOL_LIMIT)
    except OSError:  # none: nothing was left at the end
        return
    with contextlib.suppress(OSError):
        os.unlink(spool)
    yield from (line for line in data.split(b"\n") if line.strip())


IDLE_NICE = 19


def yield_to_training() -> None:
    """Run only on CPU time the job leaves idle. nice 10 was not enough: a training process whose torch
    uses every core (OpenMP threads that wait for each other at each operator) lost 3-25x on the steps of
    a capture while this process made an earlier capture's memory timeline (2 cores: one of its threads
    descheduled for a slice stalls the rest). SCHED_IDLE gives way at once to any normal thread; nice 19
    where the policy is refused."""
    with contextlib.suppress(OSError, AttributeError):
        os.nice(19)
    with contextlib.suppress(OSError, AttributeError):
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    # Its own session (setsid) is its own autogroup where the kernel groups by session: the policy above
    # then ranks it only against itself, and the group competes with the job's at equal weight.
    from npuprof.results.priority import set_autogroup_nice

    set_autogroup_nice(os.getpid(), IDLE_NICE)  # the kernel's one write per 100 ms waited out (helper-116)


def _serve(spool: Path | None = None, parent_fd: int | None = None, ready_fd: int | None = None) -> int:
    # Training has priority: on a busy machine this waits for idle CPU rather than slowing the steps.
    yield_to_training()
    status = 0
    import itertools

    from npuprof.results.handover import HandoverError, job_from_line

    jobs = read_jobs(sys.stdin.fileno(), parent_fd)
    for line in itertools.chain(jobs, spooled_jobs(spool)):
        try:
            job = job_from_line(line)
            _JOB_RUN["id"] = job.record.run_id or ""
        except HandoverError as exc:
            _log_unusable(line, str(exc))
            job_done(ready_fd)
            status |= 1
            continue
        try:
            status |= run_job(job)
        except Exception:  # stderr is /dev/null: what went wrong goes to npuprof.log
            import traceback

            _log(Path(job.rank_dir), f"post-processing failed: {traceback.format_exc()}", "ERROR")
            status |= 1
        finally:
            job_done(ready_fd)
    return status


if __name__ == "__main__":
    sys.exit(main())
