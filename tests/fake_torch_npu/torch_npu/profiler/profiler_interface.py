"""Stand-in for ``torch_npu.profiler.profiler_interface`` (tests only).

Same life cycle as the real ``_ProfInterface`` (init_trace creates the rank dir, finalize_trace writes
profiler_info and profiler_metadata). The recording is torch's Kineto profiler on the CPU; at the end of a
capture it becomes the raw ``FRAMEWORK/`` and ``PROF_*/`` data of torch_npu's layout, and parsing writes
ASCEND_PROFILER_OUTPUT/ in torch_npu's forms (see ``analysis/_standin_data.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterable
from typing import Any

import torch

from .. import _calls
from .._C._profiler import ProfilerActivity, _supported_npu_activities
from ._profiler_path_creator import ProfPathCreator
from .analysis import _standin_comm, _standin_data
from .analysis.prof_common_func._constant import Constant, collect_env_vars, print_warn_msg
from .analysis.prof_common_func._utils import no_exception_func
from .experimental_config import _ExperimentalConfig

__all__ = ["supported_activities"]


@no_exception_func(set())
def supported_activities() -> set:
    return _supported_npu_activities()


class _ProfInterface:
    def __init__(
        self,
        activities: Iterable[ProfilerActivity] | None = None,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        with_flops: bool = False,
        with_modules: bool = False,
        schedule: Callable[[int], Any] | None = None,
        metadata: dict | None = None,
        experimental_config: Any = None,
    ) -> None:
        self.prof_path = ""
        self.activities = set(activities) if activities else supported_activities()
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.with_flops = with_flops
        self.with_modules = with_modules
        self.experimental_config = (
            experimental_config if experimental_config is not None else _ExperimentalConfig()
        )
        self.schedule = schedule
        self.metadata = metadata
        self.start_monotonic = 0
        self._kineto: Any = None
        self._check_params()

    # ---- life cycle ----------------------------------------------------------------------------
    def init_trace(self) -> None:
        ProfPathCreator().create_prof_dir()
        self.prof_path = ProfPathCreator().get_prof_dir()
        os.makedirs(os.path.join(self.prof_path, Constant.FRAMEWORK_DIR), mode=0o750)
        self._kineto = None
        _calls.record("init_trace", prof_path=self.prof_path)

    def _new_kineto(self) -> Any:
        kineto = torch.profiler._KinetoProfile(
            activities=[torch.profiler.ProfilerActivity.CPU],
            # always: HCCL's data has every collective's size (the stand-in's from its gloo span's inputs);
            # the operators' shapes are kept only when asked for (record_raw)
            record_shapes=True,
            profile_memory=self.profile_memory,
            with_stack=self.with_stack,
            with_flops=self.with_flops,
            with_modules=self.with_modules,
        )
        kineto.prepare_trace()
        return kineto

    def warmup_trace(self) -> None:
        self._kineto = self._new_kineto()
        _calls.record("warmup_trace", prof_path=self.prof_path)

    def start_trace(self) -> None:
        if self._kineto is None:
            self._kineto = self._new_kineto()
        self.start_monotonic = time.monotonic_ns()
        # torch_npu's profiler is its own (npu_profiler.cpp: its state in the thread's PROFILER_STATE, so
        # torch._C._autograd._profiler_enabled() says True on this thread, as torch's does here), and never
        # sets torch's Python flag torch.autograd.profiler._is_profiler_enabled, which torch's Kineto
        # profiler underneath sets: it is left as it was
        enabled = torch.autograd.profiler._is_profiler_enabled
        self._kineto.start_trace()
        torch.autograd.profiler._set_is_profiler_enabled(enabled)
        if ProfilerActivity.CPU in self.activities and self.experimental_config.with_gc:
            _calls.record("gc_detect.start", threshold=self.experimental_config.gc_detect_threshold)
        if getattr(self.experimental_config, "record_op_args", False):
            # ProfilerMgr::Start: AclopStartDumpArgs into the rank dir's path + "_op_args", a sibling of it
            # (the AOE tuner's operator arguments), whatever the activities; CANN's files, placeholders here
            dump = self.prof_path.rstrip("/") + "_op_args"
            os.makedirs(dump, mode=0o750, exist_ok=True)
            with open(os.path.join(dump, f"op_args_{os.getpid()}.bin"), "ab") as f:
                f.write(b"stand-in operator arguments\n")
        _calls.record("start_trace", prof_path=self.prof_path)

    def stop_trace(self) -> None:
        if self._kineto is not None:
            enabled = torch.autograd.profiler._is_profiler_enabled
            self._kineto.stop_trace()
            torch.autograd.profiler._set_is_profiler_enabled(enabled)
        _calls.record("stop_trace", prof_path=self.prof_path)

    def finalize_trace(self) -> None:
        framework = os.path.join(self.prof_path, Constant.FRAMEWORK_DIR)
        recording: dict = {}
        if self._kineto is not None and self._kineto.profiler is not None and os.path.isdir(framework):
            scratch = os.path.join(framework, ".standin_recording.json")
            self._kineto.export_chrome_trace(scratch)
            with open(scratch, encoding="utf-8") as f:
                recording = json.load(f)
            os.unlink(scratch)
        _standin_data.record_raw(
            self.prof_path,
            recording,
            record_shapes=self.record_shapes,
            npu=ProfilerActivity.NPU in self.activities,
        )
        self._dump_profiler_info()
        self._dump_metadata()
        ProfPathCreator().is_prof_inited = False
        _calls.record("finalize_trace", prof_path=self.prof_path)

    def delete_prof_dir(self) -> None:
        _calls.record("delete_prof_dir", prof_path=self.prof_path)
        ProfPathCreator().delete_prof_dir()

    # ---- parsing -------------------------------------------------------------------------------
    def analyse(
        self,
        analysis_type: str = Constant.TENSORBOARD_TRACE_HANDLER,
        output_path: str | None = None,
        **kwargs: Any,
    ) -> None:
        _calls.record(
            "analyse",
            prof_path=self.prof_path,
            analysis_type=analysis_type,
            output_path=output_path,
            kwargs=kwargs,
        )
        try:
            if analysis_type == Constant.TENSORBOARD_TRACE_HANDLER:
                analyse_dir(self.prof_path)
            elif analysis_type == Constant.EXPORT_CHROME_TRACE:  # torch_npu writes its trace_view form there
                with open(output_path, "w", encoding="utf-8") as f:
                    json.dump(_standin_data.trace_view(self.prof_path), f)
            elif analysis_type == Constant.EXPORT_STACK:
                _standin_data.stacks(
                    self.prof_path, output_path, kwargs.get("metric", Constant.METRIC_CPU_TIME)
                )
            elif analysis_type == Constant.EXPORT_MEMORY_TIMELINE:
                self._kineto.export_memory_timeline(output_path, device="cpu")
        except Exception as exc:
            print_warn_msg(f"Profiling data parsing failed. ({exc!r})")

    # ---- files ---------------------------------------------------------------------------------
    def _dump_profiler_info(self) -> None:
        def to_cfg(obj: Any) -> Any:
            if not obj:
                return None
            return getattr(obj, "__dict__", {})

        common_config = {
            "activities": [str(a) for a in self.activities],
            "schedule": to_cfg(self.schedule),
            "record_shapes": self.record_shapes,
            "profile_memory": self.profile_memory,
            "with_stack": self.with_stack,
            "with_flops": self.with_flops,
            "with_modules": self.with_modules,
        }
        info: dict[str, Any] = {
            "config": {
                "common_config": common_config,
                "experimental_config": to_cfg(self.experimental_config),
            },
            "start_info": {
                "syscnt_enable": False,
                "freq": 100,
                "start_cnt": 0,
                "start_monotonic": self.start_monotonic,
            },
            "end_info": {"collectionTimeEnd": time.time_ns(), "MonotonicTimeEnd": time.monotonic_ns()},
        }
        rank_id: Any = os.environ.get("RANK")
        if rank_id is None and torch.distributed.is_available() and torch.distributed.is_initialized():
            rank_id = torch.distributed.get_rank()
        name = "profiler_info.json" if rank_id is None else f"profiler_info_{rank_id}.json"
        if rank_id is not None:
            info["rank_id"] = rank_id
        _write_json(os.path.join(self.prof_path, name), info)

    def _dump_metadata(self) -> None:
        if Constant.Text in self.experimental_config.export_type:
            self.metadata.update(collect_env_vars())
        self._add_group_info_to_metadata()
        if not self.metadata:
            return
        if not ProfPathCreator().is_prof_inited:
            print_warn_msg("Profiler is not initialized. Skip this metadata.")
            return
        _write_json(os.path.join(self.prof_path, Constant.PROFILER_META_DATA), self.metadata)
        self.metadata.clear()

    def _add_group_info_to_metadata(self) -> None:
        """torch_npu's ``parallel_group_info`` (docs/formats.md, "profiler_metadata.json"): each HCCL group of
        the process keyed by its communicator's name, with ``group_name`` (the group's HCCL option
        ``group_name``, "" without one; ``default_group`` for the default group), ``group_rank`` and
        ``global_ranks`` (in the group's order); none when torch.distributed is not initialised. The
        stand-in's gloo groups stand for HCCL ones (their collectives are its HCCL operators)."""
        dist = torch.distributed
        try:
            if not (dist.is_available() and dist.is_initialized()):
                return
            c10d = dist.distributed_c10d
            rank = dist.get_rank()
            default = c10d._get_default_group()
            info: dict[str, Any] = {}
            for index, group in enumerate(c10d._world.pg_map):
                ranks = dist.get_process_group_ranks(group)
                if rank not in ranks:
                    continue
                name = "default_group" if group is default else ""
                key = _standin_comm.comm_name(sorted(ranks), 0 if group is default else index)
                info[key] = {
                    "group_name": name,
                    "group_rank": dist.get_group_rank(group, rank),
                    "global_ranks": ranks,
                }
            if info:
                self.metadata.update({"parallel_group_info": info})
        except Exception as err:
            print_warn_msg(f"Failed to get parallel group info, Exception: {err}.")

    def _check_params(self) -> None:
        if ProfilerActivity.NPU not in self.activities:
            print_warn_msg("Experimental config will not be uesd while ProfilerActivity.NPU is not set.")
        if ProfilerActivity.CPU not in self.activities and self.experimental_config.with_gc:
            print_warn_msg("GC detect will not take effect while ProfilerActivity.CPU is not set.")


def analyse_dir(prof_path: str) -> None:
    """The stand-in's parsing, as torch_npu's: ASCEND_PROFILER_OUTPUT/ from the raw data, then (with
    data_simplification, the default) the raw data it no longer needs removed."""
    info_files = sorted(p for p in os.listdir(prof_path) if p.startswith("profiler_info"))
    info: dict[str, Any] = {}
    if info_files:
        with open(os.path.join(prof_path, info_files[0])) as f:
            info = json.load(f)
    exp = (info.get("config") or {}).get("experimental_config") or {}
    export_types = exp.get("_export_type") or [Constant.Text]
    out = os.path.join(prof_path, Constant.OUTPUT_DIR)
    os.makedirs(out, mode=0o750, exist_ok=True)
    if Constant.Text in export_types and os.path.isdir(os.path.join(prof_path, Constant.FRAMEWORK_DIR)):
        _standin_data.parse(prof_path, out)
    if Constant.Db in export_types:
        rank = info.get("rank_id")
        name = "ascend_pytorch_profiler.db" if rank is None else f"ascend_pytorch_profiler_{rank}.db"
        with sqlite3.connect(os.path.join(out, name)) as db:
            db.execute("CREATE TABLE IF NOT EXISTS META_DATA (name TEXT, value TEXT)")
    if exp.get("_data_simplification", True):  # as torch_npu releases of 2024 simplify
        shutil.rmtree(os.path.join(prof_path, Constant.FRAMEWORK_DIR), ignore_errors=True)
        cann = _standin_data.prof_dir(prof_path)
        for sub in ("mindstudio_profiler_output", "mindstudio_profiler_log"):
            if cann:
                shutil.rmtree(os.path.join(cann, sub), ignore_errors=True)
    if os.environ.get("FAKE_TORCH_NPU_API", "latest") == "latest":
        # ProfilingParser.generate_parser_done_file (releases since January 2026): written last, whatever
        # the parse wrote, tables or none
        open(os.path.join(out, "analyse.done"), "w").close()


def _write_json(path: str, data: Any) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o640)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=4)
