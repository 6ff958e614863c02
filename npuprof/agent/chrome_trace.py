"""--export-chrome-trace PATH: a plain Chrome trace of each capture where the user asked, besides the
result layout (docs/architecture.md, "Time windows").

On the step this is a hard link of the raw trace the capture has just exported, when the post-processor
gzips that file later into a new one (the link then keeps the plain JSON, a file of its own). Otherwise
(another filesystem, ``--no-gzip``: a link would share the result tree's file, so an edit of one would
change both, or torch_npu's trace_view.json) the post-processor copies it before it parses and gzips
(:func:`copy_trace`, outliving the training process, so that an exit right after the capture loses nothing);
without a post-processor a daemon thread of the training process copies it, joined at exit.
"""

from __future__ import annotations

import atexit
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from npuprof.agent.ranks import one_rank_of_several
from npuprof.config import ProfileConfig
from npuprof.results.atomic import file_mode, temp_name

WORLD_SIZE_VARIABLES = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "PMI_SIZE")


def several_traces(cfg: ProfileConfig, environ: dict[str, str] | None = None) -> bool:
    """Whether this run may write more than one trace: more than one process (a launcher's world size, or
    torch.distributed's once initialised), or more than one capture per process. Then each name carries
    rank, pid and first step (the seed's multi-card advice)."""
    env = os.environ if environ is None else environ
    for name in WORLD_SIZE_VARIABLES:
        value = env.get(name, "").strip()
        if value.isascii() and value.isdigit() and int(value) > 1:
            return True
    if one_rank_of_several():  # ranks started without a launcher (torch.multiprocessing.spawn)
        return True
    if cfg.timed:
        return False
    return cfg.dynamic is not None or cfg.schedule.repeat != 1


def trace_path(base: str, several: bool, rank: int | None, pid: int, first_step: int) -> Path:
    """``trace.json`` as is, or ``trace_rank1_pid123_step6.json`` (no rank part when it is unknown)."""
    path = Path(base)
    if not several:
        return path
    rank_part = f"_rank{rank}" if rank is not None else ""
    return path.with_name(f"{path.stem}{rank_part}_pid{pid}_step{first_step}{path.suffix}")


def _target(
    cfg: ProfileConfig, rank: int | None, first_step: int, run_start_ns: int | None, log: Any
) -> Path:
    """The path for this capture's trace: the name given, unless this run may write several (then each
    carries rank, pid and step), or another process of this run has written it already (processes of a
    job without WORLD_SIZE, one after the other): that one's is kept, this one's carries its pid. A name
    with pid and step that is taken too (the process replaced itself with ``os.exec*``: same pid, its
    steps counted from 0 again) gets a number: ``trace_pid123_step6_2.json``."""
    assert cfg.export_chrome_trace is not None
    several = several_traces(cfg)
    target = trace_path(cfg.export_chrome_trace, several, rank, os.getpid(), first_step)
    if not run_start_ns or not _written_since(target, run_start_ns):
        return target
    own = target if several else trace_path(cfg.export_chrome_trace, True, rank, os.getpid(), first_step)
    if own == target or _written_since(own, run_start_ns):
        own = _numbered(own, run_start_ns)
    log.warn_once("chrome-trace-taken", f"--export-chrome-trace: {target} was written since this run "
                  f"started (by another of its processes, by this one before an os.exec*, or by another "
                  f"run at the same time); this process's trace is {own}")  # fmt: skip
    return own


def _written_since(path: Path, run_start_ns: int) -> bool:
    """Whether ``path`` is a file of this run (a file of before the run is replaced, as torch's export
    replaces it)."""
    try:
        return os.stat(path).st_mtime_ns >= run_start_ns
    except OSError:
        return False


NUMBERED_MAX = 10_000  # the numbers tried before the last one is taken anyway


def _numbered(path: Path, run_start_ns: int) -> Path:
    """``path`` with the first number from 2 whose name this run has not written."""
    for number in range(2, NUMBERED_MAX):
        candidate = path.with_name(f"{path.stem}_{number}{path.suffix}")
        if not _written_since(candidate, run_start_ns):
            return candidate
    return path.with_name(f"{path.stem}_{NUMBERED_MAX}{path.suffix}")


def export_chrome_trace(
    cfg: ProfileConfig,
    source: Path,
    rank: int | None,
    first_step: int,
    log: Any,
    may_link: bool,
    run_start_ns: int | None = None,
) -> tuple[str, str] | None:
    """Put ``source`` (a plain JSON trace) at the path --export-chrome-trace names, by a hard link when
    ``may_link``; else (or when no link can be made) returns (source, target) for the post-processor to
    copy (:func:`copy_trace`). ``run_start_ns``: when the run began (a file written since is this run's).
    Never raises."""
    target = _target(cfg, rank, first_step, run_start_ns, log)
    if may_link:
        tmp = _tmp_of(target)
        try:
            tmp.unlink(missing_ok=True)
            os.link(source, tmp)
            os.replace(tmp, target)
            log.info(f"--export-chrome-trace: {target}")
            return None
        except OSError:
            tmp.unlink(missing_ok=True)
    return str(source), str(target)


def copy_trace(source: Path, target: Path) -> None:
    """Copy ``source`` to ``target`` through a temporary file renamed at the end (no partial file ever has
    the target's name, and none is left behind); raises OSError."""
    with open(source, "rb") as handle:
        _copy_handle(handle, target)


def copy_in_background(source: Path, target: Path, log: Any) -> None:
    """Without a post-processor: the copy on a daemon thread of this process, waited for at exit (the
    process's normal end would otherwise cut it short). The source is opened now: the post-processor's
    gzip may remove it meanwhile."""
    try:
        handle = open(source, "rb")  # noqa: SIM115 - the copying thread closes it
    except OSError as exc:
        log.warn_once("chrome-trace", f"--export-chrome-trace: {target} not written: {exc}")
        return
    thread = threading.Thread(
        target=_copy_from, args=(handle, target, log), name="npuprof-chrome-trace", daemon=True
    )
    try:
        thread.start()
    except RuntimeError:  # no new thread at interpreter shutdown (Python 3.12.0/3.12.1): copied here
        _copy_from(handle, target, log)
        return
    # One exit hook for all copies, and only the copies still running kept: an entry (and its thread) per
    # capture piled up in atexit for the job's life, a capture every few steps for days (helper-187)
    _copying[:] = [t for t in _copying if t.is_alive()]
    _copying.append(thread)
    if not _copying_joined:
        _copying_joined.append(True)
        atexit.register(_join_copies)


EXIT_WAIT_S = 120.0  # the most the end of the process waits for the copies in progress, all of them
EXIT_SAID_AFTER_S = 1.0  # an exit held longer than this by a copy says why on stderr
_copying: list[threading.Thread] = []  # the copies started that were running at the last one's start
_copying_joined: list[bool] = []  # _join_copies registered at exit (once)
_exit_wait_began: list[float] = []  # when the exit first waited for the copies (one bound for all its waits)


def wait_for_copies_at_exit() -> None:
    """The agent's exit, once its capture in flight is finalised: that capture's copy starts after atexit's
    own wait (registered at the first copy, so run before the agent's earlier exit hook; registered during
    the exit, or under os._exit, never run), and its daemon thread died with the process, the copy lost
    without a word. Waited for here within the same EXIT_WAIT_S."""
    _join_copies()


def _join_copies() -> None:
    """At exit: wait for the copies in progress, EXIT_WAIT_S at most in all. Each was waited EXIT_WAIT_S in
    turn, without a word: on a stalled filesystem ten copies held a finished job's exit 20 minutes."""
    from npuprof.agent.log import get_log

    if not _exit_wait_began:
        _exit_wait_began.append(time.monotonic())
    started = _exit_wait_began[0]
    running = _running_past(started + EXIT_SAID_AFTER_S)
    if not running:
        return
    log = get_log()
    log.warn_once(
        "chrome-trace-copy-at-exit",
        f"the process ends once its --export-chrome-trace copies ({len(running)}) are written, at most "
        f"{EXIT_WAIT_S:g} s (the captures are saved already)",
    )
    left = _running_past(started + EXIT_WAIT_S)
    if left:
        log.warn_once(
            "chrome-trace-copy-cut",
            f"--export-chrome-trace: {len(left)} of its copies not written, the process ending "
            f"{EXIT_WAIT_S:g} s into their wait (each capture's own trace, under -o, has the same events)",
        )


def _running_past(deadline: float) -> list[threading.Thread]:
    """The copies still running at ``deadline`` (time.monotonic()), waited for until then."""
    for thread in list(_copying):
        thread.join(max(0.0, deadline - time.monotonic()))
    return [thread for thread in _copying if thread.is_alive()]


def _copy_from(handle: Any, target: Path, log: Any) -> None:
    from npuprof.agent.untraced import leave_trace

    leave_trace()
    try:
        with handle:
            _copy_handle(handle, target)
        log.info(f"--export-chrome-trace: {target} (copied)")
    except OSError as exc:
        log.warn_once("chrome-trace", f"--export-chrome-trace: {target} not written: {exc}")


def _copy_handle(handle: Any, target: Path) -> None:
    tmp = _tmp_of(target)
    try:
        with open(tmp, "wb") as out:
            shutil.copyfileobj(handle, out, 1 << 20)
        os.chmod(tmp, file_mode())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _tmp_of(target: Path) -> Path:
    return temp_name(target)
