"""torch.profiler (Kineto) on CUDA GPUs and CPUs."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from npuprof.agent.backends.base import ScheduleFn, TraceReady, align_torch_style
from npuprof.agent.schedule import Action
from npuprof.config import ProfileConfig
from npuprof.options import BY_KEY, TORCH_NPU_ONLY_OPTIONS, given_text
from npuprof.owned_fd import room_for
from npuprof.results import atomic, layout

# Options only torch_npu acts on (npuprof/options.py): on torch.profiler each one given is reported as
# ignored. --msprof-tx and --gc-detect-threshold act here too (agent/capture_annotations.py).
_DEFAULTS = ProfileConfig()


class TorchBackend:
    writes_own_layout = False

    def __init__(self, use_cuda: bool) -> None:
        import torch

        self.use_cuda = use_cuda
        self.name = "torch-cuda" if use_cuda else "torch-cpu"
        self.device = f"cuda:{torch.cuda.current_device()}" if use_cuda else "cpu"

    def ignored_flags(self, cfg: ProfileConfig) -> list[str]:
        ignored = [
            given_text(cfg, option)
            for option in TORCH_NPU_ONLY_OPTIONS
            if getattr(cfg, option.key) != getattr(_DEFAULTS, option.key)
        ]
        from npuprof.agent.capture import metric_fits

        ignored += [f"--export-stacks {m}" for m in cfg.export_stacks if not metric_fits(m, self.name)]
        typed = "activities" in cfg.given_as  # a config file's key and value, or `--activities gpu`
        if cfg.activities == ["npu"] and not self.use_cuda:
            activities = given_text(cfg, BY_KEY["activities"]) if typed else "--activities npu"
            ignored.append(f"{activities} (no accelerator here; the CPU is profiled)")
        elif (
            "npu" in cfg.activities
            and not self.use_cuda
            and cfg.given_as.get("activities", "").startswith("-")
        ):
            # `--activities cpu,gpu`: the default cpu,npu, and a config file's (its template's), say nothing
            ignored.append(
                f"the device part of {given_text(cfg, BY_KEY['activities'])} (no accelerator here)"
            )
        return ignored

    def _activities(self, cfg: ProfileConfig) -> list[Any]:
        from torch.profiler import ProfilerActivity

        acts = []
        if "cpu" in cfg.activities or not self.use_cuda:
            acts.append(ProfilerActivity.CPU)
        if "npu" in cfg.activities and self.use_cuda:
            acts.append(ProfilerActivity.CUDA)
        return acts

    def create_profiler(self, cfg: ProfileConfig, schedule: ScheduleFn, on_trace_ready: TraceReady) -> Any:
        import torch.profiler as tp

        native = {
            Action.NONE: tp.ProfilerAction.NONE,
            Action.WARMUP: tp.ProfilerAction.WARMUP,
            Action.RECORD: tp.ProfilerAction.RECORD,
            Action.RECORD_AND_SAVE: tp.ProfilerAction.RECORD_AND_SAVE,
        }
        _quiet_cycle_warning(tp)
        # --export-stacks needs no experimental_config(verbose=True): the stacks are rebuilt from the
        # trace's python_function events in the background (npuprof/results/extras.py).
        return tp.profile(
            activities=self._activities(cfg),
            schedule=lambda step: native[schedule(step)],
            on_trace_ready=on_trace_ready,
            record_shapes=cfg.record_shapes,
            profile_memory=cfg.profile_memory,
            with_stack=cfg.with_stack,
            with_flops=cfg.with_flops,
            with_modules=cfg.with_modules,
        )

    def align(self, prof: Any, step: int) -> None:
        align_torch_style(prof, step)

    def export_raw(self, prof: Any, rank_dir: Path | None, worker: str) -> tuple[Path, Path | None]:
        assert rank_dir is not None, "the torch backend writes into a dir the controller made"
        # Plain json: torch's gzip path compresses inside the training step (~10 MB/s);
        # npuprof gzips in a background process instead.
        trace = rank_dir / layout.trace_file_name(worker, time.time_ns(), gzip=False)
        tmp = atomic.temp_name(trace)  # with the pid: a kill -9 leaves what analyse removes later
        # Kineto writes "<path>.tmp" and renames it; on a full disk it logs and returns, leaving a
        # partial "<path>.tmp" and no "<path>" (docs/formats.md, "Raw traces").
        kineto_tmp = tmp.with_name(tmp.name + ".tmp")
        try:
            with _path_torch_can_take(tmp) as path:
                prof.export_chrome_trace(path)
            if not tmp.exists():
                if not rank_dir.is_dir():  # removed while the capture ran (helper-90): no disk to blame
                    raise OSError(f"torch wrote no trace: {rank_dir} is gone (removed during the capture?)")
                if not room_for(2):
                    raise OSError(
                        f"torch wrote no trace into {rank_dir}: no file descriptor was free for it (the job "
                        "holds nearly all it may open: raise `ulimit -n`)"
                    )
                raise OSError(f"torch wrote no trace into {rank_dir} ({_why_short()})")
            if not layout.ends_like_json(tmp):
                raise OSError(f"the trace torch wrote into {rank_dir} is truncated ({_why_short()})")
            tmp.chmod(atomic.file_mode())
            tmp.replace(trace)
        except BaseException:
            for leftover in (tmp, kineto_tmp):
                leftover.unlink(missing_ok=True)
            raise
        return rank_dir, trace

    @staticmethod
    def profiler_enabled() -> bool:
        """Whether torch's profiler records in C++ now: its stop() then disables it; else its stop() would
        start a trace (npuprof.agent.controller._must_not_stop)."""
        try:
            import torch

            return bool(torch._C._autograd._profiler_enabled())
        except Exception:
            return False

    def version_info(self) -> dict[str, str]:
        import torch

        return {"torch_version": str(torch.__version__)}  # a TorchVersion, which JSON writers may refuse

    def add_metadata(self, prof: Any, metadata: dict[str, Any]) -> bool:
        return False

    def script_profiler_started(self) -> None:
        """torch warns the script's profiler of its cycles as it would without npuprof."""
        release_cycle_warning()


@contextlib.contextmanager
def _path_torch_can_take(path: Path) -> Iterator[str]:
    """``path`` as a str torch can hand to Kineto: torch encodes it as UTF-8, so a directory name holding
    bytes that are not UTF-8 (surrogates here) cannot pass; it then goes through ``/proc/self/fd/<fd of the
    directory>/<name>`` (the file names npuprof makes are ASCII)."""
    text = str(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            yield f"/proc/self/fd/{fd}/{path.name}"
        finally:
            os.close(fd)
        return
    yield text


# torch warns once per process when a scheduled profiler starts its second cycle; each of npuprof's cycles
# is a capture of its own, exported at its end, so the warning only puzzled users on the job's stderr.
CYCLE_WARNING = (
    "Warning: Profiler clears events at the end of each cycle. Only events from the current cycle will be "
    "reported. To keep events across cycles, set acc_events=True."
)


_marked: list[set[str]] = []  # torch's once-only set, when npuprof marked the warning there


def _quiet_cycle_warning(tp: Any) -> None:
    """Mark torch's cycle warning as shown (torch.profiler.profiler's once-only set), where it has one."""
    shown = getattr(getattr(tp, "profiler", None), "_WARNINGS_SHOWN", None)
    if isinstance(shown, set) and CYCLE_WARNING not in shown:
        shown.add(CYCLE_WARNING)
        _marked[:] = [shown]


def release_cycle_warning() -> None:
    """The script starts a profiler of its own: torch warns it as it would without npuprof."""
    for shown in _marked:
        shown.discard(CYCLE_WARNING)
    _marked.clear()


def _why_short() -> str:
    """The likely reason a trace was not written whole: a file size limit of the job's (``ulimit -f``:
    helper-124, read as a full disk), else a full disk."""
    import resource

    try:
        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    except (OSError, ValueError):
        limit = resource.RLIM_INFINITY
    if limit != resource.RLIM_INFINITY:
        return f"is the disk full, or the job's file size limit of {limit} bytes (ulimit -f) too low?"
    return "is the disk full?"
