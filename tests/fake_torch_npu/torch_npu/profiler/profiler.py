"""Stand-in for ``torch_npu.profiler.profiler`` (tests only): ``profile``, ``_KinetoProfile``,
``tensorboard_trace_handler`` and ``analyse`` with the real signatures and step semantics."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from sys import getsizeof
from typing import Any

import torch.autograd.profiler as prof

from .. import _calls
from .._C._profiler import ProfilerActivity
from ._profiler_action_controller import ProfActionController
from ._profiler_path_creator import ProfPathCreator
from .analysis.prof_common_func._constant import Constant, print_warn_msg
from .analysis.prof_common_func._utils import no_exception_func
from .experimental_config import API
from .profiler_interface import _ProfInterface, analyse_dir, supported_activities
from .scheduler import ProfilerAction, _default_schedule_fn

__all__ = ["analyse", "profile", "supported_activities", "tensorboard_trace_handler"]


class _KinetoProfile:
    def __init__(
        self,
        *,
        activities: Iterable[ProfilerActivity] | None = None,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        with_flops: bool = False,
        with_modules: bool = False,
        experimental_config: Any = None,
    ) -> None:
        self.metadata: dict[str, Any] = {}
        self.prof_if = _ProfInterface(
            activities=activities,
            record_shapes=record_shapes,
            profile_memory=profile_memory,
            with_stack=with_stack,
            with_flops=with_flops,
            with_modules=with_modules,
            experimental_config=experimental_config,
            metadata=self.metadata,
        )
        self.max_meta_size = 50 * 1024
        self.max_str_len = 4096

    @no_exception_func()
    def start(self) -> None:
        ProfPathCreator().init(export_only_mode=True)
        self.prof_if.init_trace()
        self.prof_if.start_trace()

    @no_exception_func()
    def stop(self) -> None:
        self.prof_if.stop_trace()
        self.prof_if.finalize_trace()

    @no_exception_func()
    def export_chrome_trace(self, output_path: str) -> None:
        _calls.record("export_chrome_trace", output_path=output_path)
        if not output_path.endswith(".json"):
            raise RuntimeError("Invalid parameter output_path, which must be a json file.")
        self.prof_if.analyse(Constant.EXPORT_CHROME_TRACE, output_path)

    @no_exception_func()
    def add_metadata(self, key: str, value: str) -> None:
        _calls.record("add_metadata", key=key, value=value)
        if not isinstance(key, str) or not isinstance(value, str):
            print_warn_msg("The key and value of metadata must be string. Skip this metadata.")
            return
        if len(key) > self.max_str_len or len(value) > self.max_str_len:
            print_warn_msg("Invalid input key or value. Skip this metadata.")
            return
        if getsizeof(self.metadata) + getsizeof(key) + getsizeof(value) < self.max_meta_size:
            self.metadata[key] = value
        else:
            print_warn_msg("Too many metadata added. Skip this metadata")

    @no_exception_func()
    def add_metadata_json(self, key: str, value: str) -> None:
        _calls.record("add_metadata_json", key=key, value=value)
        if not isinstance(key, str) or not isinstance(value, str):
            print_warn_msg("The key and value of metadata must be string. Skip this metadata.")
            return
        if len(key) > self.max_str_len or len(value) > self.max_str_len:
            print_warn_msg("Invalid input key or value. Skip this metadata.")
            return
        if getsizeof(self.metadata) + getsizeof(key) + getsizeof(value) < self.max_meta_size:
            try:
                self.metadata[key] = json.loads(value)
            except ValueError:
                print_warn_msg("The metadata value must be json format string. Skip this metadata")
        else:
            print_warn_msg("Too many metadata added. Skip this metadata")

    @no_exception_func()
    def export_stacks(self, output_path: str, metric: str = Constant.METRIC_CPU_TIME) -> None:
        _calls.record("export_stacks", output_path=output_path, metric=metric)
        if not self.prof_if.with_stack:
            print_warn_msg("Function export_stacks() requires with_stack=True.")
            return
        if metric not in (Constant.METRIC_CPU_TIME, Constant.METRIC_NPU_TIME):
            print_warn_msg(
                "Metric should be self_cpu_time_total or self_npu_time_total."
                "Here it is presumed to be self_cpu_time_total."
            )
        self.prof_if.analyse(Constant.EXPORT_STACK, output_path, metric=metric)

    @no_exception_func()
    def export_memory_timeline(self, output_path: str, device: str | None = None) -> None:
        _calls.record("export_memory_timeline", output_path=output_path, device=device)
        self.prof_if.analyse(Constant.EXPORT_MEMORY_TIMELINE, output_path, device=device or "npu:0")


@no_exception_func()
def _tensorboard_trace_handler_latest(
    dir_name: str | None = None,
    worker_name: str | None = None,
    analyse_flag: bool = True,
    async_mode: bool = False,
) -> Callable:
    _calls.record(
        "tensorboard_trace_handler",
        dir_name=dir_name,
        worker_name=worker_name,
        analyse_flag=analyse_flag,
        async_mode=async_mode,
    )
    ProfPathCreator().init(worker_name=worker_name, dir_name=dir_name)

    def handler_fn(prof_inst: Any) -> None:
        _calls.record("handler_fn", prof_path=prof_inst.prof_if.prof_path, analyse_flag=analyse_flag)
        if analyse_flag:
            prof_inst.prof_if.analyse(async_mode=async_mode)

    return handler_fn


@no_exception_func()
def _tensorboard_trace_handler_old(dir_name: str | None = None, worker_name: str | None = None) -> Callable:
    _calls.record("tensorboard_trace_handler", dir_name=dir_name, worker_name=worker_name)
    ProfPathCreator().init(worker_name=worker_name, dir_name=dir_name)

    def handler_fn(prof_inst: Any) -> None:
        _calls.record("handler_fn", prof_path=prof_inst.prof_if.prof_path)
        prof_inst.prof_if.analyse()

    return handler_fn


tensorboard_trace_handler = (
    _tensorboard_trace_handler_old if API == "5.0.0" else _tensorboard_trace_handler_latest
)
tensorboard_trace_handler.__name__ = "tensorboard_trace_handler"


class profile(_KinetoProfile):
    @_calls.logged("profile")
    def __init__(
        self,
        *,
        activities: Iterable[ProfilerActivity] | None = None,
        schedule: Callable[[int], ProfilerAction] | None = None,
        on_trace_ready: Callable[..., Any] | None = None,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        with_flops: bool = False,
        with_modules: bool = False,
        experimental_config: Any = None,
        use_cuda: bool | None = None,
    ) -> None:
        super().__init__(
            activities=activities,
            record_shapes=record_shapes,
            profile_memory=profile_memory,
            with_stack=with_stack,
            with_flops=with_flops,
            with_modules=with_modules,
            experimental_config=experimental_config,
        )
        activities_set = set(activities) if activities else supported_activities()
        if schedule and callable(schedule):
            self.schedule = schedule
            self.record_steps = True
        else:
            self.schedule = _default_schedule_fn
            self.record_steps = False
        self.prof_if = _ProfInterface(
            activities=activities_set,
            record_shapes=record_shapes,
            profile_memory=profile_memory,
            with_stack=with_stack,
            with_flops=with_flops,
            with_modules=with_modules,
            experimental_config=experimental_config,
            schedule=self.schedule,
            metadata=self.metadata,
        )
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self.current_action = self.schedule(self.step_num)
        self._step_num_offset = 0
        self.step_rec_fn: prof.record_function | None = None
        if use_cuda is not None:
            print_warn_msg("This is npu environment, use_cuda is invalid")
        self.stopped = False
        self.action_controller = ProfActionController(self, self.prof_if, self.on_trace_ready)

    @no_exception_func()
    def __enter__(self) -> profile:
        self.start()
        return self

    @no_exception_func()
    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __del__(self) -> None:
        # as torch_npu's profile (profiler.py, under @no_exception_func): a profile dropped while it runs
        # stops itself, its trace finalised and handed to on_trace_ready
        try:
            if not self.stopped:
                _calls.record("profile.__del__ stops", step_num=self.step_num)
                self.stop()
        except Exception as exc:  # torch_npu's decorator prints and swallows everything
            print_warn_msg(f"Call __del__ failed: {exc}")

    @no_exception_func()
    def start(self) -> None:
        _calls.record("profile.start", step_num=self.step_num, action=self.current_action)
        self.stopped = False
        if not self.on_trace_ready:
            ProfPathCreator().init(export_only_mode=True)
        self.action_controller.transit_action(ProfilerAction.NONE, self.current_action)
        if self.record_steps:
            self.step_rec_fn = prof.record_function(
                "ProfilerStep#" + str(self.step_num + self._step_num_offset)
            )
            self.step_rec_fn.__enter__()

    @no_exception_func()
    def stop(self) -> None:
        _calls.record("profile.stop", step_num=self.step_num, action=self.current_action)
        if self.record_steps and self.step_rec_fn:
            self.step_rec_fn.__exit__(None, None, None)
        self.action_controller.transit_action(self.current_action, None)
        self.stopped = True

    @no_exception_func()
    def step(self) -> None:
        if self.stopped:
            print_warn_msg("Profiler is stopped, step takes no effect!")
            return
        if self.record_steps and self.step_rec_fn:
            self.step_rec_fn.__exit__(None, None, None)
        prev_action = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        _calls.record("profile.step", step_num=self.step_num, prev=prev_action, action=self.current_action)
        self.action_controller.transit_action(prev_action, self.current_action)
        if self.record_steps:
            self.step_rec_fn = prof.record_function(
                "ProfilerStep#" + str(self.step_num + self._step_num_offset)
            )
            self.step_rec_fn.__enter__()


@no_exception_func()
def analyse(
    profiler_path: str, max_process_number: int = os.cpu_count() or 1, export_type: Any = None
) -> None:
    _calls.record("analyse_offline", profiler_path=profiler_path, export_type=export_type)
    analyse_dir(profiler_path)
