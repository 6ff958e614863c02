"""--export-chrome-trace PATH: a plain Chrome trace of each capture where the user asked, besides the
result layout (docs/architecture.md, "Time windows").

On the step this is a hard link of the raw trace the capture has just exported (the post-processor
gzips that file later into a new one: the link keeps the plain JSON). Where a link cannot be made
(another filesystem), the trace is opened on the step and copied from that descriptor by a daemon thread,
so that the post-processor removing the raw trace meanwhile changes nothing.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path
from typing import Any

from npuprof.config import ProfileConfig
from npuprof.results.atomic import file_mode

WORLD_SIZE_VARIABLES = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "PMI_SIZE")


def several_traces(cfg: ProfileConfig, environ: dict[str, str] | None = None) -> bool:
    """Whether this run may write more than one trace: more than one process, or more than one capture
    per process. Then each name carries rank, pid and first step (the seed's multi-card advice)."""
    env = os.environ if environ is None else environ
    for name in WORLD_SIZE_VARIABLES:
        value = env.get(name, "").strip()
        if value.isdigit() and int(value) > 1:
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


def export_chrome_trace(
    cfg: ProfileConfig, source: Path, rank: int | None, first_step: int, log: Any
) -> None:
    """Put ``source`` (a plain JSON trace) at the path --export-chrome-trace names; never raises."""
    assert cfg.export_chrome_trace is not None
    target = trace_path(cfg.export_chrome_trace, several_traces(cfg), rank, os.getpid(), first_step)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        tmp.unlink(missing_ok=True)
        os.link(source, tmp)
        os.replace(tmp, target)
        log.info(f"--export-chrome-trace: {target}")
        return
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        reason = exc
    try:
        handle = open(source, "rb")  # noqa: SIM115 - the copying thread closes it
    except OSError as exc:
        log.warn_once("chrome-trace", f"--export-chrome-trace: {target} not written: {exc} (link: {reason})")
        return
    threading.Thread(
        target=_copy, args=(handle, tmp, target, log), name="npuprof-chrome-trace", daemon=True
    ).start()


def _copy(handle: Any, tmp: Path, target: Path, log: Any) -> None:
    try:
        with handle, open(tmp, "wb") as out:
            shutil.copyfileobj(handle, out, 1 << 20)
        os.chmod(tmp, file_mode())
        os.replace(tmp, target)
        log.info(f"--export-chrome-trace: {target} (copied)")
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        log.warn_once("chrome-trace", f"--export-chrome-trace: {target} not written: {exc}")
