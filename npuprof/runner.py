"""What `npuprof run` does once its flags are valid: prepare the output, launch, wait, report."""

from __future__ import annotations

import contextlib
import errno
import io
import math
import os
import signal
import stat
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from npuprof import ENV_CONFIG, __version__
from npuprof.config import ProfileConfig
from npuprof.invocation import npuprof_cmd
from npuprof.launch import (
    FORWARDED_SIGNALS,
    InternalLaunchError,
    JobEnd,
    LaunchError,
    child_environment,
    config_payload,
    counts_as_ctrl_c,
    die_of,
    injection_warnings,
    new_run_id,
    run_child,
    shebang_line,
    shown_local_ranks,
    which,
)
from npuprof.proc_stat import start_ticks
from npuprof.results import free_space, layout, logfile, run_record
from npuprof.results.atomic import make_dir
from npuprof.results.paths import UnsafePathError, character_torch_cannot_write, resolve_output_path
from npuprof.signal_names import signal_name

_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def _record_the_job(record: run_record.RunRecord, pid: int) -> None:
    """The job's first process in the run record (``job_pid``): an agent that finds npuprof run dead tells
    by it that its process is the one to end, where the process's bootstrap came too late to see the
    launcher its parent (`bash -c 'setup; exec python train.py'` with npuprof run killed during the setup).
    With its start (``job_start_ticks``, kept across exec): a later process given the same pid is not it."""
    record.content["job_pid"] = pid
    record.content["job_start_ticks"] = start_ticks(pid)
    record.write()


def _stderr_shows_nothing() -> bool:
    """Whether nothing written to stderr can be seen: a write to it failed (the launcher's GuardedStream
    drops every later one), or it is a terminal that was hung up (every write fails with EIO)."""
    from npuprof.cli.main import stream_error

    if stream_error("stderr") is not None:
        return True
    try:
        os.write(sys.stderr.fileno(), b"")
    except (ValueError, AttributeError, io.UnsupportedOperation):  # closed, or no sys.stderr at all
        return True
    except OSError as exc:
        return exc.errno == errno.EIO
    return False


def _error(message: str, code: int = 2) -> int:
    sys.stderr.write(f"npuprof run: error: {message}\n")
    return code


def _note(message: str) -> None:
    sys.stderr.write(f"npuprof: {message}\n")
    sys.stderr.flush()


class _RunLog:
    """The launcher's lines in npuprof.log (the shared writer: no symlink, no FIFO, rotation). Lines it
    cannot write are reported once on stderr; the job goes on."""

    def __init__(self, path: Path, run_id: str = "") -> None:
        self.path = path
        self.run_id = run_id
        self.job_ended = False
        self._lost = False

    def write(self, message: str, level: str = "INFO") -> None:
        if logfile.log(self.path, level, "launcher", message, self.run_id):
            return
        if not self._lost:
            self._lost = True
            why = _why_unwritable(self.path)
            then = "" if self.job_ended else "; the job goes on"
            _note(f"cannot write to the log {str(self.path)!r} ({why}){then}")
        with contextlib.suppress(OSError):
            if (info := os.lstat(self.path)).st_size == 0 and stat.S_ISREG(info.st_mode):
                os.unlink(self.path)  # created by the failed write: leave no empty log


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _why_unwritable(path: Path) -> str:
    if not os.path.isdir(path.parent):
        return "its directory was removed"
    with contextlib.suppress(OSError):
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return "it is not a regular file"
    with contextlib.suppress(OSError):
        if os.statvfs(path.parent).f_bavail == 0:
            return os.strerror(errno.ENOSPC)
    return "not writable"


def prepare_output(cfg: ProfileConfig) -> Path:
    """The output directory, resolved once (see resolve_output_path) and created 0o750."""
    output = resolve_output_path(cfg.output, "--output")
    if (odd := character_torch_cannot_write(str(output))) is not None:
        # -o names the character in itself, the working directory can hold it too (helpers 90, 94)
        raise UnsafePathError(
            f"--output {cfg.output!r} is {str(output)!r}, which holds {odd}: torch cannot write its traces "
            "there; give -o a directory without it"
        )
    if output.exists() and not output.is_dir():
        raise UnsafePathError(f"--output {cfg.output!r} exists and is not a directory; give a directory")
    make_dir(output)
    if not os.access(output, os.W_OK):
        raise UnsafePathError(f"--output {cfg.output!r} is not writable; give a writable directory")
    return output


def _working_directory() -> str | None:
    """The working directory, None where it has been removed (the job may still run there, as
    ``python -c`` does)."""
    try:
        return os.getcwd()
    except OSError:
        return None


def _tell_an_outer_run(run_id: str, output: Path) -> None:
    """This `npuprof run` is a job of another (its hook and log in our environment): our job gets our hook,
    not the outer run's, so the outer run's log is told where the captures go (its summary says so rather
    than "no process of the job imported torch.optim")."""
    from npuprof import ENV_CONFIG

    outer_log = os.environ.get("NPUPROF_LOG")
    if ENV_CONFIG in os.environ and outer_log:  # the same log too, when both runs share -o
        line = logfile.format_line("INFO", "agent", f"{logfile.NESTED_RUN}run {run_id}, output {output}")
        logfile.append_line(outer_log, line)


def _forget_reported_warnings(output: Path, run_id: str) -> None:
    marks = output / layout.REPORTED_DIR
    if marks.is_dir() and not marks.is_symlink():
        import shutil  # only here: ~2 ms of start-up

        shutil.rmtree(marks / run_id, ignore_errors=True)
        with contextlib.suppress(OSError):
            marks.rmdir()


HIDDEN_WARNINGS_SHOWN = 10


def _repeat_hidden_warnings(output: Path, run_id: str) -> None:
    """Say the warnings that only ranks whose stderr torchrun does not show met (``--redirects 3`` alone
    sends every rank's to its log file, ``--local-ranks-filter`` alone to /dev/null): they were reported
    once, where the user does not look (README, "Around torchrun"); each names torchrun's file of the first
    rank that met it, else npuprof.log, which has them all."""
    from npuprof.agent.log import shown_nowhere

    log_path = output / layout.RUN_LOG
    hidden = shown_nowhere(str(output), run_id)
    for warning, where in hidden[:HIDDEN_WARNINGS_SHOWN]:
        _note(f"{warning} (met by ranks whose stderr torchrun does not show here: {where or log_path})")
    if len(hidden) > HIDDEN_WARNINGS_SHOWN:
        _note(f"and {len(hidden) - HIDDEN_WARNINGS_SHOWN} more such warning(s) in {log_path}")


class _StopWaiting(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _not_ignored(signals: Iterable[int]) -> list[int]:
    """Those of ``signals`` not ignored when npuprof started: one ignored there (nohup's SIGHUP) stays ignored
    in npuprof, as in the job that inherits it (helper-136)."""
    return [sig for sig in signals if signal.getsignal(sig) != signal.SIG_IGN]


class _HeldSignals:
    """From the job's end until the run record is written, the launcher's signals (Ctrl-C and those of
    ``_STOP_WAITING``) are noted, not acted upon at once, so that no pair of them loses the record
    (helper-94: a second one raised inside the handling of the first); during the post-processing wait the
    first one stops the wait. ``restore()`` puts the previous handlers back; ``death()`` is the signal the
    launcher then dies of."""

    def __init__(self, already: list[int] | None = None, interrupts: list[float] | None = None) -> None:
        # ``already``: received after the job's end, before these handlers (run_child's forwarder found the
        # job gone): they count as the first ones, and stop the wait once it begins
        self.received: list[int] = list(already or [])
        # when each Ctrl-C counted, run_child's included: a SIGINT within SAME_CTRL_C_S of the last is a
        # copy of it (`timeout` passes its own on), and not a Ctrl-C of its own
        self.interrupts: list[float] = list(interrupts or [])
        self.stopper: int | None = None  # the signal that stopped the wait
        self.waiting = False
        # not one ignored when npuprof started: a hang-up after the job killed the launcher
        self.previous = {sig: signal.signal(sig, self._on) for sig in _not_ignored(FORWARDED_SIGNALS)}
        signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED_SIGNALS)  # blocked by run_child at the job's end

    def _on(self, signum: int, frame: object) -> None:
        if signum == signal.SIGINT and not counts_as_ctrl_c(self.interrupts):
            return  # a copy of the last Ctrl-C (`timeout`'s): counted, npuprof died of SIGINT (helper-203)
        self.received.append(signum)
        if self.waiting:
            self.waiting = False  # only the first one stops the wait
            self.stopper = signum
            raise _StopWaiting(signum)

    def begin_waiting(self) -> None:
        """The wait begins: one that came since the job's end, before it, stops it now (helper-170: a
        SIGUSR1 in that gap was only noted, and the wait went on)."""
        stoppers = [sig for sig in self.received if sig in (*_STOP_WAITING, signal.SIGINT)]
        if stoppers:
            self.stopper = stoppers[0]
            raise _StopWaiting(stoppers[0])
        self.waiting = True

    def restore(self) -> None:
        for sig, handler in self.previous.items():
            with contextlib.suppress(OSError, ValueError):
                signal.signal(sig, handler)

    def death(self) -> int | None:
        """The first SIGTERM, SIGHUP or SIGQUIT received, else a Ctrl-C that came while the wait was not
        on (a Ctrl-C or SIGUSR1/2 that stopped the wait only ends it: the job's exit code stands)."""
        deadly = [sig for sig in self.received if sig in _DEATHS]
        if deadly:
            return deadly[0]
        interrupts = self.received.count(signal.SIGINT) - (self.stopper == signal.SIGINT)
        return signal.SIGINT if interrupts > 0 else None


def _wait_for_post_processing(
    output: Path,
    log_path: Path,
    run_id: str,
    held: _HeldSignals,
    stopped_by: int | None = None,
    stopped_at: float | None = None,
) -> None:
    """Wait for this run's post-processors. Ctrl-C and the signals of ``_STOP_WAITING`` stop the wait (the
    work goes on in the background; ``held`` notes them for the launcher to die of once its record is
    written). A job ended by a signal that asks it to stop (``stopped_by``: a batch system's SIGTERM, whose
    SIGKILL follows ~30 s later; come at ``stopped_at``, time.monotonic()) is waited for STOPPED_JOB_WAIT_S
    at most, and not past STOPPED_JOB_END_S from the signal. Says it waits only when a post-processor still
    works after a moment: one that had nothing to do (no capture) ends as soon as the job has."""
    from npuprof.results import postprocess, spawner

    if (
        not (output / layout.PENDING_DIR).is_dir()
        and not spawner.children()
        and not postprocess.own_post_processors_at_work(output, run_id)  # ones the job started itself
    ):
        return  # nothing was handed over, or the post-processors have ended with their locks' folder
    postprocess.continue_held(output, run_id)  # stopped by a training process that died recording
    # Started by torchrun as one of its workers, the other workers may still train: the wait stays idle.
    if not os.environ.get("TORCHELASTIC_RUN_ID"):
        from npuprof.results.priority import own_priority

        nice, group_nice = priority = own_priority()
        for pid, threads_raised, autogroup_raised in postprocess.lift_idle_priority(priority=priority):
            if threads_raised and autogroup_raised:
                said = f"npuprof's own CPU priority again (SCHED_OTHER, nice {nice})"
            elif threads_raised:  # helper-116: the kernel refused the autogroup's write again and again
                said = f"SCHED_OTHER and nice {nice} for its threads; the kernel refused its autogroup's"
            elif autogroup_raised:
                said = (
                    f"its autogroup at nice {group_nice}; its threads stay SCHED_IDLE (leaving it needs "
                    "CAP_SYS_NICE)"
                )
            else:
                said = "no change: it keeps its idle CPU priority (raising it needs CAP_SYS_NICE)"
            said = f"the job has ended: post-processor pid {pid} gets {said}"
            logfile.log(log_path, "INFO", "launcher", said, run_id)
    try:
        held.begin_waiting()
        # one bound for the whole wait, its quiet start included: STOPPED_JOB_WAIT_S from the job's end
        wait_began = time.monotonic()
        stop_end = _stop_wait_end(stopped_by, stopped_at)
        deadline = min(time.monotonic() + _QUIET_WAIT_S, stop_end)

        def at_work() -> int:  # by their locks, or by pid where the script removed the locks
            return _busy_post_processors(output, run_id) or len(
                postprocess.own_post_processors_at_work(output, run_id)
            )

        busy = at_work()
        while busy and time.monotonic() < deadline:
            time.sleep(0.02)
            busy = at_work()
        stop_wait_s = max(0.0, stop_end - time.monotonic())
        if busy and stopped_by is not None and stop_end <= time.monotonic():
            _note(_not_waited_after_stop(busy, stopped_by, stopped_at, log_path))
            return
        if busy:
            at_most = (
                f", at most {stop_wait_s:.0f} s more after {_signal_name(stopped_by)}" if stopped_by else ""
            )
            _note(
                f"waiting for {busy} background post-processing job(s) (gzip / analyse) to finish{at_most} "
                "(Ctrl-C stops waiting; they go on)..."
            )

        def said_stopped(pid: int) -> None:
            _note(
                f"post-processor pid {pid} is stopped (SIGSTOP or Ctrl-Z) and is waited for: `kill -CONT "
                f"{pid}` lets it finish; Ctrl-C stops waiting"
            )

        deadline_after_stop = stop_end if stopped_by else None
        postprocess.wait_for_pending(output, run_id, on_stopped=said_stopped, deadline=deadline_after_stop)
        # the launcher's own post-processors whose lock files the script removed, waited for by pid
        postprocess.wait_for_own_post_processors(
            on_stopped=said_stopped, deadline=deadline_after_stop, output=output, run_id=run_id
        )
        spawner.wait_for_children(2.0)  # the last ones out, their lock gone, may still be exiting
    except _StopWaiting:
        _note(f"stopped waiting: post-processing goes on in the background (see {log_path})")
    except TimeoutError:
        _note(
            f"stopped waiting after {time.monotonic() - wait_began:.0f} s (the job was stopped by "
            f"{_signal_name(stopped_by)}): post-processing goes on in the background; "
            f"{npuprof_cmd('analyse')} finishes what it could not (see {log_path})"
        )
    finally:
        held.waiting = False


def _not_waited_after_stop(busy: int, stopped_by: int, stopped_at: float | None, log_path: Path) -> str:
    """Why the launcher does not wait for ``busy`` post-processors: the job, stopped by ``stopped_by`` at
    ``stopped_at``, ended past the STOPPED_JOB_END_S its wait may last (a hold, then the finalise: 28 s)."""
    ended = "" if stopped_at is None else f" {time.monotonic() - stopped_at:.0f} s"
    return (
        f"not waiting for {busy} background post-processing job(s): the job ended{ended} after "
        f"{_signal_name(stopped_by)}, past the {STOPPED_JOB_END_S:.0f} s the wait may last before the "
        f"SIGKILL that follows it; post-processing goes on in the background; {npuprof_cmd('analyse')} "
        f"finishes what it could not (see {log_path})"
    )


def _stop_wait_end(stopped_by: int | None, stopped_at: float | None) -> float:
    """When the wait after a stop signal ends (time.monotonic()): STOPPED_JOB_WAIT_S from now, and no later
    than STOPPED_JOB_END_S from the signal (a job whose finalise took 20 s of the 30 s had the launcher
    write its record 32 s after the signal, past the SIGKILL); never, without a stop signal."""
    if stopped_by is None:
        return math.inf
    now = time.monotonic()
    return min(now + STOPPED_JOB_WAIT_S, (now if stopped_at is None else stopped_at) + STOPPED_JOB_END_S)


def _signal_name(signum: int | None) -> str:
    return signal_name(signum) if signum is not None else "a signal"


# Signals that stop the wait: the launcher then writes its record and dies of SIGTERM, SIGHUP or SIGQUIT
# (as the job would have); SIGUSR1/2, a batch system's warning before it stops or kills the job (SGE's
# -notify, Slurm's --signal), only end the wait: the job has ended, its exit code stands.
_STOP_WAITING = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
_DEATHS = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
# How long post-processors may take to end before the launcher says it waits. One that was handed nothing
# (a run without captures) may still be starting when a short job ends: on 2 busy cores it took over
# 0.5 s to end, and the run said it waited for a post-processing job that never had one
_QUIET_WAIT_S = 2.0
# After a stop signal (SIGTERM, SIGHUP, SIGQUIT) passed on to the job: Slurm's KillWait and Kubernetes'
# grace period are 30 s, the job's own finalise comes first, and the launcher must write its record
STOPPED_JOB_WAIT_S = 10.0
# ... and that wait ends this long after the signal at the latest, the job's finalise (up to 20 s, within
# 28 s of the signal after a hold: docs/architecture.md, "Signals") included: the record is written before
# the SIGKILL
STOPPED_JOB_END_S = 25.0


def _busy_post_processors(output: Path, run_id: str) -> int:
    """How many of this run's post-processors still hold their lock (are still working), but those whose
    training process outlives the job and those dead whose lock a copy of it still holds. A lock file whose
    lock is free belongs to one that has ended; only regular files are opened, never a link, never blocking
    on a FIFO."""
    import fcntl

    from npuprof.results import postprocess

    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        dir_fd = os.open(output / layout.PENDING_DIR, os.O_RDONLY | os.O_DIRECTORY | flags)
    except OSError:
        return 0
    busy = 0
    try:
        for name in os.listdir(dir_fd):
            if not (name.startswith(f"{run_id}.") and name.endswith(".lock")):
                continue
            try:
                fd = os.open(name, flags, dir_fd=dir_fd)
            except OSError:
                continue
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    continue
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                except BlockingIOError:
                    busy += not postprocess.not_waited_for(dir_fd, name, fd)
            except OSError:
                continue
            finally:
                os.close(fd)
    finally:
        os.close(dir_fd)
    return busy


class _SignalsBeforeTheJob:
    """A signal that ends a process by default (FORWARDED_SIGNALS) after the run record is written and
    before the job starts (its signals are passed on from then): the record gets its end, then npuprof dies
    of the signal (its record said nothing of how the run ended). Not SIGTERM, SIGHUP and SIGINT alone:
    a Ctrl-\\ (SIGQUIT) or SIGUSR1 there left a record with no end (helper-342)."""

    SIGNALS = FORWARDED_SIGNALS

    def __init__(self, record: run_record.RunRecord) -> None:
        self.record = record
        self.payloads: list[Any] = []  # the job's config payload, once written: removed too
        self.previous = {sig: signal.signal(sig, self._stop) for sig in _not_ignored(self.SIGNALS)}

    def _stop(self, signum: int, _frame: Any) -> None:
        # the others held until npuprof dies: a second one (`timeout`'s copy of a Ctrl-C) raised
        # KeyboardInterrupt inside the record's write, which then said nothing of the run's end (helper-203)
        signal.pthread_sigmask(signal.SIG_BLOCK, self.SIGNALS)
        self.restore()
        with contextlib.suppress(Exception):
            for payload in self.payloads:
                payload.remove_file()
            why = f"stopped by {signal_name(signum)} before the job started"
            self.record.content.update(end=run_record.now_iso(), exit_code=128 + signum, error=why)
            self.record.write()
        die_of(signum)

    def restore(self) -> None:
        for sig, handler in self.previous.items():
            with contextlib.suppress(OSError, ValueError, TypeError):
                signal.signal(sig, handler)


def _finish(end: JobEnd) -> int:
    """The launcher's exit code; it dies of the job's signal instead when shells expect so."""
    signum = end.death_signal()
    if signum is not None:
        die_of(signum, group=signum == end.terminal_signal())
    return end.exit_code


def _run_unprofiled(command: list[str], output: str, exc: OSError) -> int:
    """No room for even the output directory: the job runs all the same, without npuprof."""
    _note(f"cannot create --output {output!r}: {exc.strerror}; the job runs without profiling")
    try:
        end = run_child(command, dict(os.environ))
    except LaunchError as launch_error:
        code = _error(str(launch_error), launch_error.exit_code)
        launch_error.die_of_the_held()
        return code
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED_SIGNALS)  # held since the job's end: now acted on
    return _finish(end)


def _prepare_dynamic(cfg: ProfileConfig) -> tuple[str, str]:
    """--dynamic DIR made ready (npuprof.agent.dynamic_files.prepare): the baseline digest of its
    profiler_config.json, and the line that tells the user what to do. Raises ValueError or OSError."""
    from npuprof.agent.dynamic_files import CONFIG_NAME, LOG_DIR, held_request, prepare, why_unwritable

    directory, baseline, created = prepare(cfg.dynamic or "", dynamic_named(cfg))
    cfg.dynamic = str(directory)
    made = "written from torch_npu's template" if created else "kept as it is"
    if not created:
        from npuprof.results.layout import read_small

        try:
            held = held_request(read_small(directory / CONFIG_NAME, 1 << 20))
        except (OSError, ValueError):  # UnsafeFileError: too large, or no regular file
            held = ""
        if held:
            made += f"; the request it holds{held} was sent before this job: no request for it"
    target = shell_word(str(directory))
    # a folder mounted read-only on the nodes: the watchers read the file, and log nothing (helper-244: the
    # line pointed at `npuprof trigger` and `npuprof status`, which then had nothing to write or to read)
    ask = f"edit it, or run `{npuprof_cmd(f'trigger {target} --active 2')}`, to capture"
    if why := why_unwritable(directory):
        ask = f"it cannot be changed from here ({why}): change it where it can be, to capture"
    told = f"`{npuprof_cmd(f'status {target}')}` says what each rank did (logs in {directory / LOG_DIR})"
    if why := why_unwritable(directory / LOG_DIR):
        told = (
            f"warning: its processes cannot log what they do in {directory / LOG_DIR} ({why}), so npuprof "
            "status will show nothing; captures still work"
        )
    return baseline, f"dynamic capture: {directory / CONFIG_NAME} ({made}) is watched; {ask}; {told}"


def dynamic_named(cfg: ProfileConfig) -> str:
    """How the user gave the dynamic directory: --dynamic, or the PROF_CONFIG_PATH npuprof took for it."""
    from npuprof.options import ENV_DYNAMIC

    return ENV_DYNAMIC if cfg.given_as.get("dynamic", "").startswith(f"{ENV_DYNAMIC}=") else "--dynamic"


def shell_word(text: str) -> str:
    import shlex  # only with --dynamic

    return shlex.quote(text)


def command_line(command: list[str]) -> str:
    """``command`` as one line a shell takes back: a multi-line ``python -c`` program is one record of
    npuprof.log, never lines that read as records of their own."""
    return " ".join(_one_record(word) for word in command)


def _one_record(word: str) -> str:
    """``word`` quoted; one holding what reads as a record's start (its time, level and writer: a program
    that writes or reads npuprof.log), which the log's readers split off as a record of its own
    (logfile.log_records), with its "[" escaped."""
    from npuprof.reports.run_summary import shell_quote

    quoted = shell_quote(word)
    return quoted if len(logfile.log_records(f"x {quoted}")) == 1 else shell_quote(word, escaped="[")


def command_problem(program: str) -> tuple[str, int] | None:
    """Why ``program`` cannot be started, with the shell's exit code for it (127: not found, 126: found
    but not executable), checked before anything is made; None when it can. Searched as launch.run_child
    searches: the job's $PATH is npuprof's."""
    not_executable = f"{program!r} is not executable (chmod +x it, or run it with its interpreter)", 126
    # helper-231: `-- ./train.py` of a script with no #! line was told to chmod +x it, after which it was
    # refused as "neither a binary nor a script with a #! line": such a file runs by its interpreter only
    by_interpreter = "run it with its interpreter"
    if program.endswith(".py"):
        by_interpreter += f": `-- python {program}`"
    try:
        found = program if "/" in program else which(program, os.environ.get("PATH", os.defpath))
    except FileNotFoundError:
        found = ""
    except PermissionError:
        return not_executable
    if program and _search_denied(found):
        return f"{program!r}: permission denied (a directory on its path is not searchable by you)", 126
    if not program or not os.path.exists(found):
        if program.startswith("-"):  # helper-121: `npuprof run -- --active 3 python ...`
            return f"command not found: {program!r} (npuprof's flags go before --, the command after it)", 127
        if "/" not in program and os.path.isfile(program):  # `-- train.py`: $PATH is searched, not here
            run_it = f"python {program}" if program.endswith(".py") else f"./{program}"
            return f"command not found: {program!r} (not on $PATH; the file here runs as `-- {run_it}`)", 127
        return f"command not found: {program!r}", 127
    if os.path.isdir(found):
        return f"{program!r} is a directory, not a command", 126
    if not _starts_like_a_program(found):
        if not os.access(found, os.X_OK):
            return f"{program!r} is not executable, nor a script with a #! line ({by_interpreter})", 126
        return (
            f"{program!r} is neither a binary nor a script with a #! line ({by_interpreter})",
            126,
        )
    if not os.access(found, os.X_OK):
        return not_executable
    if (interpreter := _missing_interpreter(found)) is not None:  # exec()'s ENOENT: not "command not found"
        crlf = (
            " (its #! line ends in \\r: Windows line endings; dos2unix it)"
            if interpreter.endswith("\r")
            else ""
        )
        return f"{program!r}: its #! interpreter {interpreter!r} is not found{crlf}", 127
    return None


def _search_denied(path: str) -> bool:
    """Whether ``path`` cannot be looked up for a directory on it that this user may not search: exec()
    fails with EACCES there (the shell: "Permission denied", 126), where os.path.exists said no such file
    ("command not found", 127)."""
    try:
        os.stat(path)
    except PermissionError:
        return True
    except (OSError, ValueError):
        return False
    return False


def _missing_interpreter(path: str) -> str | None:
    """The interpreter a ``#!`` file names when it is not there (read as the kernel reads the line: up to the
    first blank, a carriage return kept; helper-178: ./train.sh with CRLF line endings was said "command not
    found" of a file that is there), else None."""
    line = shebang_line(path, 256)
    if line is None:
        return None
    line = line.lstrip(b" \t")
    interpreter = os.fsdecode(line.replace(b"\t", b" ").split(b" ", 1)[0])
    if not interpreter or os.path.exists(interpreter):  # a relative one: from the working directory
        return None
    return interpreter


def _starts_like_a_program(path: str) -> bool:
    """A binary (ELF) or a script naming its interpreter (#!): what exec() starts (a shell hands any other
    file to sh; which interpreter the job wants is not known here)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4)
    except OSError:
        return True  # exec() says why
    return head.startswith(b"#!") or head == b"\x7fELF"


def execute(cfg: ProfileConfig, command: list[str]) -> int:
    problem = command_problem(command[0]) if command else None
    if problem is not None:  # as a shell says it, and nothing made
        return _error(*problem)
    dynamic: tuple[str, str] | None = None
    if cfg.dynamic is not None:
        try:
            dynamic = _prepare_dynamic(cfg)
        except ValueError as exc:  # a symlink, or a file or directory someone else could write
            return _error(str(exc))
        except OSError as exc:
            named = dynamic_named(cfg)
            unset = f", or unset {named}" if named != "--dynamic" else ""
            return _error(
                f"{named} {cfg.dynamic!r}: {exc.strerror or exc}; give a directory you can write{unset}"
            )
    try:
        output = prepare_output(cfg)
    except UnsafePathError as exc:
        return _error(str(exc))
    except OSError as exc:
        if exc.errno in _NO_SPACE:
            return _run_unprofiled(command, cfg.output, exc)
        return _error(
            f"cannot create --output {cfg.output!r}: {exc.strerror or exc}; give a writable directory"
        )
    cfg.output = str(output)
    started_in = _identity(output)  # the directory itself: one removed and made again is another
    disk_warning = free_space.skip_warning(output, cfg.min_free_space)
    if disk_warning:
        _note(disk_warning)
    log_path = output / layout.RUN_LOG
    run_id = new_run_id()
    log = _RunLog(log_path, run_id)
    record = run_record.RunRecord(
        output,
        {
            "npuprof_version": __version__,
            "run_id": run_id,
            "command": command,
            "cwd": _working_directory(),
            "host": os.uname().nodename,  # = socket.gethostname(), without importing socket
            "launcher_pid": os.getpid(),
            "config": cfg.to_payload(),
            "start": run_record.now_iso(),
            "end": None,
            "exit_code": None,
            "captures": [],
        },
    )
    before_the_job = _SignalsBeforeTheJob(record)
    problem = record.write()
    if problem:
        _note(f"cannot write the run record in {str(output)!r}: {problem}; the job runs without it")
    log.write(f"run {run_id} starts: {command_line(command)}")
    _remove_payloads_left(output, run_id)
    _tell_an_outer_run(run_id, output)
    if disk_warning:
        log.write(disk_warning, "WARNING")
    run: dict[str, object] = {
        "run_id": run_id,
        "start_ns": time.time_ns(),  # a file written since is this run's (--export-chrome-trace)
        "log": str(log_path),
        "output": str(output),
        "launcher_pid": os.getpid(),
    }
    if (shown := shown_local_ranks(command)) is not None:
        run["shown_local_ranks"] = shown
    if dynamic is not None:
        run["dynamic_baseline"] = dynamic[0]
        _note(dynamic[1])
        log.write(dynamic[1])
    payload = config_payload(cfg, run, output)
    before_the_job.payloads.append(payload)
    reach_warnings = injection_warnings(command)
    from npuprof.results.extras import preflight_notes  # requested outputs that cannot be produced

    for warning in (*reach_warnings, payload.problem, *payload.notes, *preflight_notes(cfg, command)):
        if warning:
            _note(warning)
            log.write(warning, "WARNING")
    env = child_environment(cfg, run, dict(os.environ), payload.value)
    from npuprof.results import spawner  # the job's post-processors are ours, never the script's children

    spawn_address = spawner.start_service(run_id)
    env.pop(spawner.ENV_SPAWN, None)  # an outer npuprof's
    if spawn_address is not None:
        env[spawner.ENV_SPAWN] = spawn_address
    started = time.monotonic()
    # Held (blocked) from the restore until run_child's forwarders are in place: a signal in between found
    # its default action and killed npuprof, its record saying nothing of the run's end (helper-342)
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED_SIGNALS)
    before_the_job.restore()  # run_child passes the signals on to the job from here

    def in_a_file(exc: LaunchError) -> dict[str, str] | None:
        """The environment within the kernel's limit without npuprof, over it with the configuration
        inline: the job runs as it would without npuprof, its configuration passed in a file. Started again
        inside run_child: the signals that came during the first start are passed on to it."""
        nonlocal payload
        if exc.errno != errno.E2BIG or payload.file is not None:
            return None
        in_file = config_payload(cfg, run, output, in_file=True)
        if in_file.file is None:
            return None
        payload, env[ENV_CONFIG] = in_file, in_file.value
        log.write(f"{exc}: the configuration is passed to the job in {in_file.file} instead", "WARNING")
        return env

    try:
        end = run_child(
            command,
            env,
            run_id,
            on_start=lambda pid: _record_the_job(record, pid),
            mask=mask,
            retry=in_a_file,
        )
    except LaunchError as exc:
        with contextlib.suppress(Exception):
            payload.remove_file()
        if isinstance(exc, InternalLaunchError):
            message = f"internal error as the job was being started ({exc})"
        else:
            message = str(exc) + (_over_the_exec_limit(env) if exc.errno == errno.E2BIG else "")
        record.content.update(end=run_record.now_iso(), exit_code=exc.exit_code, error=message)
        record.write()
        if isinstance(exc, InternalLaunchError):
            _internal_error(log, message, exc.cause, "the job did not run")
            code = exc.exit_code
        else:
            code = _error(message, exc.exit_code)
        exc.die_of_the_held()
        return code
    if end.internal_error is not None:
        # (one as the forwarders were put down came after the job's end: it ran to its end unaided)
        after = end.internal_error_after_the_end
        when = "after the job ended" if after else "while the job ran"
        record.content["error"] = f"internal error {when} ({_named(end.internal_error)})"
        _internal_error(
            log,
            str(record.content["error"]),
            end.internal_error,
            "the exit code is the job's" if after else "the job ran to its end: the exit code is the job's",
        )
    elapsed = time.monotonic() - started
    log.job_ended = True
    held = _HeldSignals(end.after_the_end, end.interrupts)
    try:
        with contextlib.suppress(_StopWaiting):  # one handled at the very edge of the wait's own try
            stopped_by = next((sig for sig in end.forwarded if sig in _DEATHS), None)
            stopped_at = end.first_came.get(stopped_by) if stopped_by is not None else None
            _wait_for_post_processing(output, log_path, run_id, held, stopped_by, stopped_at)
        replaced = started_in is not None and _identity(output) not in (None, started_in)
        _after_the_job(
            output, cfg, record, log, run_id, end, elapsed, problem, payload, reach_warnings, replaced
        )
    except Exception as exc:  # npuprof's own fault: the job's exit code and signal still pass through
        _note(f"internal error after the job ended ({type(exc).__name__}: {exc}); the exit code is the job's")
        import traceback  # only here: ~7 ms of the launcher's start otherwise

        log.write(f"internal error after the job ended: {''.join(traceback.format_exception(exc))}", "ERROR")
        with contextlib.suppress(Exception):
            payload.remove_file()
    held.restore()
    if (stopped_by := held.death()) is not None and end.death_signal() is None:
        die_of(stopped_by)
    return _finish(end)


def _named(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _internal_error(log: _RunLog, what: str, exc: BaseException, job: str) -> None:
    """npuprof's own failure around the job's start, as the run's other internal errors are told: one line,
    its traceback in the run log."""
    import traceback  # only here: ~7 ms of the launcher's start otherwise

    with contextlib.suppress(Exception):
        log.write(f"{what}: {''.join(traceback.format_exception(exc))}", "ERROR")
    _note(f"{what}; {job}; details in {log.path}")


def _remove_or_keep_the_payload(
    payload: Any, record: run_record.RunRecord, log: _RunLog, run_id: str
) -> None:
    """The payload file removed at the run's end, but while processes of the job outlive it (a daemon the
    job forked): each reads it when it imports torch, and one that had not yet went unprofiled, where the
    summary said what they capture lands in -o (helper-336). Kept then, named in the record for the next
    run into -o to remove once they have ended (_remove_payloads_left)."""
    from npuprof.job_processes import outliving_the_job

    outliving = outliving_the_job(run_id) if payload.file is not None else []
    if not outliving:
        payload.remove_file()
        return
    record.content["payload_kept"] = payload.file.name
    log.write(
        f"{payload.file.name} is kept for the {len(outliving)} process(es) of the job that outlive it (pid "
        f"{', '.join(map(str, outliving[:10]))}), which read it as they import torch; the next npuprof run "
        "into this directory removes it once they have ended"
    )


def _remove_payloads_left(output: Path, run_id: str) -> None:
    """Remove the payload files that earlier runs on this host kept for processes of their job that outlived
    them (_remove_or_keep_the_payload), once none of those processes runs. Another host's are left: its
    processes are not seen from here."""
    from npuprof.job_processes import processes_of_the_run

    if not any(output.glob(".npuprof_payload.*.json")):
        return
    host = os.uname().nodename
    for _, content in layout.read_run_records(output):
        kept, other = content.get("payload_kept"), content.get("run_id")
        if not isinstance(other, str) or kept != f".npuprof_payload.{other}.json" or other == run_id:
            continue
        if content.get("host") == host and not processes_of_the_run(other):
            with contextlib.suppress(OSError):
                os.unlink(output / kept)


def _over_the_exec_limit(env: dict[str, str]) -> str:
    """What E2BIG means here: the command line and the environment are over the kernel's limit, the bytes
    npuprof put into the environment counted (its variables, and what it added to PYTHONPATH)."""
    added = sum(
        len(os.fsencode(key)) + len(os.fsencode(value)) + 1 - len(os.fsencode(os.environ.get(key, "")))
        for key, value in env.items()
        if os.environ.get(key) != value
    )
    return (
        f" (its arguments and environment are over the kernel's limit, getconf ARG_MAX, with the {added} "
        "bytes npuprof adds to the environment: make the environment or the command line smaller)"
    )


def _after_the_job(
    output: Path,
    cfg: ProfileConfig,
    record: run_record.RunRecord,
    log: _RunLog,
    run_id: str,
    end: JobEnd,
    elapsed: float,
    problem: str | None,
    payload: Any,
    reach_warnings: list[str],
    replaced: bool = False,
) -> None:
    """The run record's end, the log's last line and the run summary, once the job has ended; ``replaced``:
    the output directory was removed and made again during the run."""
    log_path = log.path
    _remove_or_keep_the_payload(payload, record, log, run_id)
    _repeat_hidden_warnings(output, run_id)
    _forget_reported_warnings(output, run_id)
    captures = run_record.captures_of_run(output, run_id)
    for skipped in layout.take_skipped():
        _note(f"skipped {skipped}")
        log.write(f"skipped {skipped}", "WARNING")
    record.content.update(
        end=run_record.now_iso(),
        exit_code=end.exit_code,
        wall_seconds=round(elapsed, 3),
        stopped_seconds=round(end.stopped_s, 3),
        signals_forwarded=end.forwarded,
        captures=[c.as_dict() for c in captures],
    )
    late_problem = record.write()
    if late_problem and not problem:
        _note(f"could not update {str(record.path or output)!r}: {late_problem}")
    log.write(f"run {run_id} ends: exit code {end.exit_code}, {len(captures)} capture(s)")
    if _stderr_shows_nothing():
        # a closed terminal: the summary's wait for the processes that outlive the job (up to 1 s,
        # job_processes.OUTLIVE_SETTLE_S) kept npuprof from its hang-up's death, for lines nobody sees
        return
    from npuprof.reports.run_summary import print_run_summary

    died_of = -end.returncode if end.returncode < 0 else None
    no_capture = print_run_summary(
        output, captures, end.exit_code, cfg, log_path, run_id, bool(reach_warnings), died_of, replaced
    )
    if no_capture:  # for npuprof analyse, export-stacks and memory-timeline of this output later
        record.content.update(no_capture=no_capture)
        record.write()
