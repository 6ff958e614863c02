"""torch_npu.profiler on Ascend NPUs: the Ascend PyTorch Profiler's
``profile(..., experimental_config=_ExperimentalConfig(...))`` built from npuprof's flags, writing torch_npu's
own result layout.

Facts about torch_npu this module relies on (Ascend/pytorch, ``torch_npu/profiler/``):
- ``tensorboard_trace_handler(dir_name, worker_name, analyse_flag, async_mode)`` configures a process-wide
  path singleton *when it is called*; each capture's ``init_trace`` (the step a warm-up or recording
  begins) then creates ``{worker_name}_{UTC YYYYmmddHHMMSSmmm}_ascend_pt`` under ``dir_name``. The
  returned function only parses. So the handler is made before the profiler starts, and run at the end.
- ``finalize_trace`` writes ``profiler_info[_{rank}].json`` and ``profiler_metadata.json`` (then clears the
  metadata) before ``on_trace_ready`` runs.
- ``_ExperimentalConfig.__init__`` grew over releases (``msprof_tx``, ``op_attr``, ``gc_detect_threshold``,
  ``export_type`` came after ``profiler_level, aic_metrics, l2_cache, data_simplification,
  record_op_args``; recent docs call ``msprof_tx`` ``mstx``), so a keyword is passed only when the installed
  signature has it, and a flag it cannot take is reported as ignored.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from npuprof import options
from npuprof.agent.backends.base import CaptureRefused, ScheduleFn, TraceReady, align_torch_style
from npuprof.agent.metadata import distributed_info
from npuprof.agent.own_mode import torch_npu_own_mode_active as torch_npu_own_mode_active
from npuprof.agent.schedule import Action
from npuprof.config import ProfileConfig
from npuprof.options import TORCH_NPU_OPTIONS

_unavailable_reason: str | None = None


# ---- is this an NPU process? -----------------------------------------------------------------------
def npu_available() -> bool:
    """torch_npu imports and sees an NPU. On False, ``unavailable_reason()`` says why (for the log)."""
    global _unavailable_reason
    try:
        import torch_npu
    except (ImportError, OSError) as exc:  # e.g. "libhccl.so: cannot open shared object file" without CANN
        _unavailable_reason = f"import torch_npu failed: {exc}"
        return False
    try:
        available = bool(torch_npu.npu.is_available())
    except Exception as exc:
        _unavailable_reason = f"torch.npu.is_available() failed: {exc!r}"
        return False
    _unavailable_reason = None if available else "torch_npu imports but torch.npu.is_available() is False"
    return available


def unavailable_reason() -> str | None:
    """Why the last ``npu_available()`` said False (None after a True)."""
    return _unavailable_reason


# ---- flags -> torch_npu keywords -------------------------------------------------------------------
_DEFAULTS = ProfileConfig()
# cfg attribute -> _ExperimentalConfig keyword(s), first present wins
_EXPERIMENTAL_KEYWORDS: dict[str, tuple[str, ...]] = {o.key: o.npu_keywords for o in TORCH_NPU_OPTIONS}


def flag_text(cfg: ProfileConfig, attr: str) -> str:
    """How the user wrote ``cfg.<attr>``: on the command line, or in a config file."""
    return options.given_text(cfg, options.BY_KEY[attr])


def _given(cfg: ProfileConfig, attr: str) -> bool:
    return getattr(cfg, attr) != getattr(_DEFAULTS, attr)


_PID_AFTER_WORKER = re.compile(r"_worker_name\s+or\s+socket\.gethostname\(\)\s*,\s*str\(os\.getpid\(\)\)")


@functools.cache
def _appends_pid_to_worker_name() -> bool:
    """Does this torch_npu put its pid after the worker name it is given (Ascend/pytorch !18779, March
    2025: ``"{}_{}".format(self._worker_name or socket.gethostname(), str(os.getpid()))``)? Before, a
    worker name was the whole prefix of the rank dir's name; npuprof gave ``{worker}_{pid}``, which a later
    release turned into ``{worker}_{pid}_{pid}_...`` (helper-122). Told by the source of its path creator;
    not known (no source): the earlier form."""
    import importlib
    import sys

    try:
        module = sys.modules.get("torch_npu.profiler._profiler_path_creator") or importlib.import_module(
            "torch_npu.profiler._profiler_path_creator"
        )
        creators = [v for v in vars(module).values() if isinstance(v, type) and hasattr(v, "create_prof_dir")]
        return any(_PID_AFTER_WORKER.search(inspect.getsource(c.create_prof_dir)) for c in creators)
    except Exception:  # an unreadable or changed module: the earlier form, as before
        return False


def _accepted_keywords(fn: Any) -> set[str]:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return set()
    return {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def experimental_kwargs(cfg: ProfileConfig, tp: Any) -> tuple[dict[str, Any], list[str]]:
    """Keyword arguments for ``tp._ExperimentalConfig`` (``tp`` = ``torch_npu.profiler``) and the flags the
    installed torch_npu cannot take (only those the user changed from their defaults)."""
    accepted = _accepted_keywords(tp._ExperimentalConfig)
    kwargs: dict[str, Any] = {}
    unsupported: list[str] = []
    for attr, names in _EXPERIMENTAL_KEYWORDS.items():
        keyword = next((n for n in names if n in accepted), None)
        if keyword is None:
            if _given(cfg, attr):
                unsupported.append(
                    f"{flag_text(cfg, attr)} (this torch_npu's _ExperimentalConfig has no {names[0]})"
                )
            continue
        if attr == "export_type" and "," in cfg.export_type and not _takes_export_list(tp):
            unsupported.append(
                f"{flag_text(cfg, attr)} (this torch_npu takes one export type, not a list: give text or db)"
            )
            continue
        value, missing = _native_value(cfg, attr, tp)
        if missing:
            if _given(cfg, attr):
                unsupported.append(f"{flag_text(cfg, attr)} (this torch_npu has no {missing})")
            continue
        kwargs[keyword] = value
    return kwargs, unsupported


def _native_value(cfg: ProfileConfig, attr: str, tp: Any) -> tuple[Any, str | None]:
    """The torch_npu value for one setting, or (None, name of the missing enum member)."""
    value = getattr(cfg, attr)
    if attr == "export_type":  # "text", "db" or "text,db": one member, or the list newer releases take
        members = [{"text": "Text", "db": "Db"}[t] for t in value.split(",")]
        enum = getattr(tp, "ExportType", None)
        for member in members:
            if enum is None or not hasattr(enum, member):
                return None, f"ExportType.{member}"
        native = [getattr(enum, member) for member in members]
        return (native if len(native) > 1 else native[0]), None
    enum_of = {"level": ("ProfilerLevel", value), "aic_metrics": ("AiCMetrics", value)}
    if attr in enum_of:
        enum_name, member = enum_of[attr]
        enum = getattr(tp, enum_name, None)
        if enum is None or not hasattr(enum, member):
            return None, f"{enum_name}.{member}"
        return getattr(enum, member), None
    if attr == "gc_detect_threshold" and value is not None:
        return float(value), None
    return value, None


def _takes_export_list(tp: Any) -> bool:
    """Whether ``_ExperimentalConfig(export_type=...)`` takes a list: releases before the list was added
    declare ``export_type: str`` and reset anything but one name to text (Ascend/pytorch,
    ``experimental_config.py``). A signature that cannot be read is taken for a current one."""
    try:
        parameter = inspect.signature(tp._ExperimentalConfig).parameters.get("export_type")
    except (TypeError, ValueError):
        return True
    return parameter is None or parameter.annotation not in (str, "str")


def default_worker(cfg: ProfileConfig) -> str:
    """The worker name npuprof's agent uses when ``--worker-name`` is not given."""
    from npuprof.agent.ranks import worker_name

    return worker_name(cfg.worker_name)


class _NpuSchedule:
    """npuprof's plan as a torch_npu schedule. torch_npu writes ``schedule.__dict__`` into
    profiler_info's ``common_config.schedule``; the slots keep the helpers out of it."""

    __slots__ = ("__dict__", "_last", "_native", "_new_capture", "_plan", "_recording")

    def __init__(self, cfg: ProfileConfig, plan: ScheduleFn, native_action: Any) -> None:
        s = cfg.schedule
        self.wait, self.active, self.warmup = s.wait, s.active, s.warmup
        self.repeat, self.skip_first = s.repeat, s.skip_first
        self._plan = plan
        self._native = {action: getattr(native_action, action.name) for action in Action}
        self._recording: Callable[[], None] | None = None  # run at each step that records
        # run as each capture after the first begins (torch_npu creates its rank dir right after): the script
        # may have pointed torch_npu's process-wide path creator elsewhere (its own tensorboard_trace_handler)
        self._new_capture: Callable[[], None] | None = None
        self._last = Action.NONE

    def __call__(self, step: int) -> Any:
        action = self._plan(step)
        if action.recording and self._recording is not None:
            self._recording()
        begins = action is not Action.NONE and self._last in (Action.NONE, Action.RECORD_AND_SAVE)
        self._last = action
        if begins and self._new_capture is not None:
            self._new_capture()
        return self._native[action]


# ---- the backend -----------------------------------------------------------------------------------
class NpuBackend:
    name = "torch_npu"
    writes_own_layout = True

    def __init__(self) -> None:
        import torch_npu
        import torch_npu.profiler

        self._torch_npu = torch_npu
        self._tp = torch_npu.profiler
        self.device = f"npu:{torch_npu.npu.current_device()}"
        self._cfg: ProfileConfig | None = None
        self._metadata: dict[str, Any] = {}

    # ---- what this backend cannot do -----------------------------------------------------------
    def ignored_flags(self, cfg: ProfileConfig) -> list[str]:
        tp = self._tp
        ignored: list[str] = []
        if "npu" not in cfg.activities:
            for attr in _EXPERIMENTAL_KEYWORDS:
                if _given(cfg, attr):
                    ignored.append(
                        f"{flag_text(cfg, attr)} (torch_npu uses the experimental options only "
                        "with the npu activity)"
                    )
        else:
            kwargs, unsupported = experimental_kwargs(cfg, tp)
            ignored.extend(unsupported)
            if cfg.aic_metrics != "AiCoreNone" and cfg.level in ("Level0", "Level_none"):
                ignored.append(
                    f"{flag_text(cfg, 'aic_metrics')} (needs --level 1 or 2; torch_npu resets it "
                    "at level 0 and none)"
                )
            # the export type torch_npu gets: none (its text) where the installed release cannot take the
            # one asked (helper-214: --export-type text,db --op-attr on a release taking one type)
            exported = kwargs.get("export_type")
            db = getattr(getattr(tp, "ExportType", None), "Db", "db")
            db = db in (exported if isinstance(exported, list) else [exported])
            if cfg.op_attr and "op_attr" in kwargs and not db:
                why = "torch_npu records operator attributes only with --export-type db"
                ignored.append(f"{flag_text(cfg, 'op_attr')} ({why})")
        if "cpu" not in cfg.activities:
            for attr in ("record_shapes", "with_stack", "with_modules", "with_flops", "gc_detect_threshold"):
                if _given(cfg, attr):
                    ignored.append(f"{flag_text(cfg, attr)} (needs the cpu activity)")
        if not cfg.analyse and "analyse_flag" not in _accepted_keywords(tp.tensorboard_trace_handler):
            why = "this torch_npu's tensorboard_trace_handler always parses"
            ignored.append(f"{flag_text(cfg, 'analyse')} ({why})")
        if not cfg.gzip:
            ignored.append("--no-gzip (torch_npu writes its own raw data; there is no Kineto trace to gzip)")
        return list(dict.fromkeys(ignored))

    # ---- the profiler --------------------------------------------------------------------------
    def create_profiler(
        self, cfg: ProfileConfig, schedule: ScheduleFn, on_trace_ready: TraceReady, worker: str | None = None
    ) -> Any:
        tp = self._tp
        self._cfg = cfg
        # Must precede the profiler's start: it tells torch_npu where init_trace creates the rank dir.
        handler = self._trace_handler(cfg, worker or default_worker(cfg))
        kwargs, _ = experimental_kwargs(cfg, tp)
        activities = [getattr(tp.ProfilerActivity, a.upper()) for a in ("cpu", "npu") if a in cfg.activities]

        def trace_ready(prof: Any) -> None:
            try:
                on_trace_ready(prof)
            finally:
                self._reapply_metadata(prof)

        plan = _NpuSchedule(cfg, schedule, tp.ProfilerAction)
        prof = tp.profile(
            activities=activities,
            schedule=plan,
            on_trace_ready=trace_ready,
            record_shapes=cfg.record_shapes,
            profile_memory=cfg.profile_memory,
            with_stack=cfg.with_stack,
            with_flops=cfg.with_flops,
            with_modules=cfg.with_modules,
            experimental_config=tp._ExperimentalConfig(**kwargs),
        )
        prof._npuprof_trace_handler = handler
        if cfg.metadata:
            self.add_metadata(prof, cfg.metadata)
        plan._recording = functools.partial(self._add_distributed_args, prof)
        pointed = [True]  # the handler above points torch_npu at -o for the first capture

        def new_capture() -> None:
            if pointed.pop() if pointed else False:
                return
            try:
                self._trace_handler(cfg, worker or default_worker(cfg))
            except Exception:  # never a cause of a failed step: the capture goes where torch_npu says
                pass

        plan._new_capture = new_capture
        return prof

    def _add_distributed_args(self, prof: Any) -> None:
        """``distributed_args`` into the capture's profiler_metadata.json, as the training frameworks on
        Ascend hand it to torch_npu (``add_metadata_json``; torch_npu does not write it, and msprof-analyze's
        ``cluster`` takes its DP / PP / TP columns from it): npuprof's view of torch.distributed, the one the
        CPU path writes (docs/formats.md, "profiler_metadata.json"), unless the user gave their own. Run at
        each recording step, so that a group initialised after the profiler was made is seen before the
        capture ends; never a cause of a failed step."""
        store = getattr(prof, "metadata", None)
        if "distributed_args" in self._metadata or (isinstance(store, dict) and "distributed_args" in store):
            return
        try:
            args = distributed_info().get("distributed_args")
            if args:
                prof.add_metadata_json("distributed_args", json.dumps(args))
        except Exception:
            pass

    def _trace_handler(self, cfg: ProfileConfig, worker: str) -> Callable[[Any], None]:
        from npuprof.results.atomic import make_dir

        output = os.path.abspath(cfg.output)
        make_dir(output)
        name = worker if _appends_pid_to_worker_name() else f"{worker}_{os.getpid()}"
        kwargs: dict[str, Any] = {"dir_name": output, "worker_name": name}
        if "analyse_flag" in _accepted_keywords(self._tp.tensorboard_trace_handler):
            kwargs["analyse_flag"] = cfg.analyse
        handler = self._tp.tensorboard_trace_handler(**kwargs)
        if handler is None:
            # torch_npu's @no_exception_func: it printed its [ERROR] and returned None. Profiled anyway, it
            # would record into the job's working directory (helper-126).
            raise CaptureRefused(
                f"torch_npu refused the output directory {output!r} (its [ERROR] line says why; releases "
                "before June 2026 refuse a symbolic link and any character but letters, digits, "
                f"'. _ - / ~' and spaces); fix: give {'npuprof trigger -o or ' if cfg.dynamic else ''}"
                "npuprof run -o such a path"
            )
        return handler

    def align(self, prof: Any, step: int) -> None:
        align_torch_style(prof, step)

    @staticmethod
    def current_rank_dir(prof: Any) -> Path | None:
        """The ``*_ascend_pt`` dir of the capture in progress (or the last one); None before the first."""
        path = getattr(getattr(prof, "prof_if", None), "prof_path", None) or getattr(prof, "prof_path", None)
        return Path(path) if path else None

    def export_raw(self, prof: Any, rank_dir: Path | None, worker: str) -> tuple[Path, Path | None]:
        """Finish torch_npu's side of a capture (its parsing, when ``--analyse``); return its rank dir."""
        handler = getattr(prof, "_npuprof_trace_handler", None)
        if handler is None:  # a profiler made elsewhere: at least parse what it recorded
            cfg = self._cfg or ProfileConfig()
            handler = self._trace_handler(cfg, worker)
        handler(prof)
        found = self.current_rank_dir(prof)
        if found is None or not found.is_dir():
            raise RuntimeError(f"torch_npu reported no result directory for this capture ({found})")
        _mark_parsed(found)
        return found, None

    # ---- facts and metadata --------------------------------------------------------------------
    def version_info(self) -> dict[str, str]:
        import torch

        return {
            "torch_version": str(torch.__version__),
            "torch_npu_version": str(self._torch_npu.__version__),
        }

    def add_metadata(self, prof: Any, metadata: dict[str, Any]) -> bool:
        """Into torch_npu's profiler_metadata.json: strings by ``add_metadata``, anything else as JSON by
        ``add_metadata_json``. torch_npu writes and clears them at each capture's end, so they are
        handed over again after each capture for the next one of the same profiler."""
        for key, value in metadata.items():
            self._metadata[str(key)] = value
        _hand_over(prof, metadata)
        return True

    def _reapply_metadata(self, prof: Any) -> None:
        # After a capture torch_npu has written and cleared its metadata dict. Refill that same dict
        # (what add_metadata/_json store into) directly: some releases refuse add_metadata between captures.
        store = getattr(prof, "metadata", None)
        if not self._metadata:
            return
        if isinstance(store, dict):
            store.update(json.loads(json.dumps(self._metadata)))
        else:
            _hand_over(prof, self._metadata)

    def script_profiler_started(self) -> None:
        """Nothing of torch_npu's module state is changed by npuprof."""


def _hand_over(prof: Any, metadata: dict[str, Any]) -> None:
    for key, value in metadata.items():
        if isinstance(value, str):
            prof.add_metadata(str(key), value)
        else:
            prof.add_metadata_json(str(key), json.dumps(value))


def _mark_parsed(rank_dir: Path) -> None:
    """After torch_npu's own parse (synchronous: npuprof never passes ``async_mode``), mark its output done,
    as npuprof's parser does, so that ``npuprof analyse`` reads its tables instead of parsing again."""
    from npuprof.analysis.ascend_output import KERNEL_FILE, STEP_FILE
    from npuprof.results import layout
    from npuprof.results.atomic import write_text

    out = rank_dir / layout.PARSED_DIR
    if (out / STEP_FILE).is_file() or (out / KERNEL_FILE).is_file():
        write_text(out / layout.ANALYSE_DONE, "")
