"""Stand-in for ``torch_npu.profiler._profiler_action_controller`` (tests only): the real transition map."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from .analysis.prof_common_func._constant import print_warn_msg
from .scheduler import ProfilerAction

A = ProfilerAction


class ProfActionController:
    def __init__(self, prof: Any, prof_inst: Any, on_trace_ready: Callable[..., Any] | None = None) -> None:
        self.prof = prof
        self.prof_inst = prof_inst
        self.on_trace_ready = on_trace_ready
        self.action_map = self._init_action_map()

    def transit_action(self, prev_action: Any, current_action: Any) -> None:
        for action in self.action_map.get((prev_action, current_action), []):
            action()

    def _trace_ready(self) -> None:
        if self.on_trace_ready:
            self.on_trace_ready(self.prof)

    def _init_action_map(self) -> dict:
        p = self.prof_inst
        save = [p.stop_trace, p.finalize_trace, self._trace_ready]
        return {
            (A.NONE, A.NONE): [],
            (A.NONE, A.WARMUP): [p.init_trace, p.warmup_trace],
            (A.NONE, A.RECORD): [p.init_trace, p.start_trace],
            (A.NONE, A.RECORD_AND_SAVE): [p.init_trace, p.start_trace],
            (A.WARMUP, A.NONE): [
                partial(print_warn_msg, "Incorrect schedule: WARMUP followed by NONE"),
                p.start_trace,
                p.stop_trace,
                p.finalize_trace,
            ],
            (A.WARMUP, A.WARMUP): [],
            (A.WARMUP, A.RECORD): [p.start_trace],
            (A.WARMUP, A.RECORD_AND_SAVE): [p.start_trace],
            (A.RECORD, A.NONE): [
                partial(print_warn_msg, "Incorrect schedule: RECORD followed by NONE"),
                p.stop_trace,
                p.finalize_trace,
            ],
            (A.RECORD, A.WARMUP): [
                partial(print_warn_msg, "Incorrect schedule: RECORD followed by WARMUP"),
                p.stop_trace,
                p.finalize_trace,
            ],
            (A.RECORD, A.RECORD): [],
            (A.RECORD, A.RECORD_AND_SAVE): [],
            (A.RECORD_AND_SAVE, A.NONE): save,
            (A.RECORD_AND_SAVE, A.WARMUP): [*save, p.init_trace, p.warmup_trace],
            (A.RECORD_AND_SAVE, A.RECORD): [*save, p.init_trace, p.start_trace],
            (A.RECORD_AND_SAVE, A.RECORD_AND_SAVE): [*save, p.init_trace, p.start_trace],
            (A.WARMUP, None): [
                partial(
                    print_warn_msg,
                    "Incorrect schedule: Stop profiler while current state is "
                    "WARMUP which will result in empty parsed data.",
                ),
                p.finalize_trace,
                p.delete_prof_dir,
            ],
            (A.RECORD, None): [
                partial(
                    print_warn_msg,
                    "Incorrect schedule: Stop profiler while current state is "
                    "RECORD which may result in incomplete parsed data.",
                ),
                *save,
            ],
            (A.RECORD_AND_SAVE, None): [
                partial(
                    print_warn_msg,
                    "Stop profiler while current state is "
                    "RECORD_AND_SAVE, perhaps the scheduling cycle has not yet completed.",
                ),
                *save,
            ],
        }
