"""The agent's heart: at each step boundary, decide whether to capture.

Step counting is the only cost outside captures: ``on_boundary`` increments a counter and compares it
with the next step at which anything changes. A plan (a schedule today, a config watcher tomorrow)
says which action each step gets; a backend turns that into a running profiler; a writer owns the
result files.
"""

from __future__ import annotations

from typing import Any, Protocol

from npuprof.agent.backends.base import Backend
from npuprof.agent.log import AgentLog
from npuprof.agent.schedule import Action, CapturePlan
from npuprof.config import ProfileConfig

NEVER = 1 << 62


class CaptureSink(Protocol):
    def begin(self, step: int) -> None: ...

    def finish(self, prof: Any, last_step: int, detail: str = "") -> None: ...

    def abandon(self, detail: str) -> None: ...


class CaptureController:
    def __init__(
        self,
        cfg: ProfileConfig,
        plan: CapturePlan,
        backend_factory: Any,
        sink_factory: Any,
        log: AgentLog,
        rank_fn: Any,
        on_arm: Any = None,
    ) -> None:
        self.cfg = cfg
        self.plan = plan
        self._backend_factory = backend_factory
        self._sink_factory = sink_factory
        self.log = log
        self._rank_fn = rank_fn
        self._on_arm = on_arm
        self.step = 0
        self.next_check = 0
        self.enabled = True
        self.armed = False
        self.backend: Backend | None = None
        self.sink: CaptureSink | None = None
        self.prof: Any = None
        self.action = Action.NONE
        self._stopping = False
        self._stop_detail = ""

    # ---- called from the step hooks ----------------------------------------------------------
    def arm(self) -> None:
        """Step 0 begins (the first optimizer exists, or the step function was hooked)."""
        if self.armed:
            return
        self.armed = True
        if self._on_arm is not None:
            self._on_arm()
        self._sync()

    def on_boundary(self) -> None:
        self.step += 1
        if self.step >= self.next_check:
            self._sync()

    # ---- the decision --------------------------------------------------------------------------
    def _sync(self) -> None:
        if not self.enabled:
            self.next_check = NEVER
            return
        try:
            self._advance()
        except Exception as exc:
            import traceback

            self.log.error(f"capture control failed at step {self.step}: {exc!r}\n{traceback.format_exc()}")
            self.log.warn_once(
                "controller",
                f"profiling stopped after an internal error at step {self.step} ({exc!r}); "
                "training goes on; details in npuprof.log",
            )
            self._drop_session(f"internal error at step {self.step}: {exc!r}")
            self.enabled = False
            self.next_check = NEVER

    def _advance(self) -> None:
        step = self.step
        wanted = self.plan.action_at(step)
        if self.prof is None:
            if wanted is Action.NONE:
                self._schedule_next(step)
                return
            if not self._may_open(step):
                self._skip_window(step)
                return
            self._open(step, wanted)
        else:
            previous = self.action
            self.prof.step()  # torch runs the transitions, on_trace_ready included
            self.action = wanted
            self._note_capture_start(previous, wanted, step)
            if wanted is Action.NONE:
                self._close_quietly()
                self._schedule_next(step)
                return
        self.next_check = step + 1

    def _schedule_next(self, step: int) -> None:
        upcoming = self.plan.next_busy_step(step)
        self.next_check = NEVER if upcoming is None else upcoming

    def _skip_window(self, step: int) -> None:
        """Jump past a window this process must not record (unselected rank, user profiler)."""
        probe = step
        while self.plan.action_at(probe) is not Action.NONE:
            probe += 1
        self._schedule_next(probe)

    def _may_open(self, step: int) -> bool:
        rank = self._rank_fn()
        if not self.cfg.wants_rank(rank):
            self.log.info(f"rank {rank} not selected (--ranks); no capture at step {step}")
            return False
        if _profiler_already_enabled():
            self.log.warn_once(
                "user-profiler",
                f"the training script runs its own profiler; npuprof steps aside (no capture at step {step})",
            )
            return False
        return True

    def _open(self, step: int, wanted: Action) -> None:
        if self.backend is None:
            self.backend = self._backend_factory()
            ignored = self.backend.ignored_flags(self.cfg)
            if ignored:
                self.log.warn_once(
                    "ignored-flags",
                    f"ignored on the {self.backend.name} backend: {', '.join(ignored)}",
                )
            self.sink = self._sink_factory(self.backend)
        self.prof = self.backend.create_profiler(self.cfg, self.plan.action_at, self._on_trace_ready)
        self.backend.align(self.prof, step)
        self.action = wanted
        self._note_capture_start(Action.NONE, wanted, step)
        self.prof.start()
        self.log.info(f"profiler started at step {step} ({wanted.name}) on {self.backend.name}")

    def _note_capture_start(self, previous: Action, now: Action, step: int) -> None:
        if now.recording and previous is not Action.RECORD:
            assert self.sink is not None
            self.sink.begin(step)

    def _on_trace_ready(self, prof: Any) -> None:
        # Called by the profiler inside step() or stop(); the capture ended at the previous step.
        last = self.step if self._stopping else self.step - 1
        detail = self._stop_detail if self._stopping else ""
        if self.sink is not None:
            self.sink.finish(prof, last, detail)

    def _close_quietly(self) -> None:
        prof, self.prof = self.prof, None
        if prof is not None:
            try:
                prof.stop()
            except Exception as exc:
                self.log.warning(f"profiler stop failed: {exc!r}")
        self.action = Action.NONE

    def _drop_session(self, detail: str) -> None:
        prof, self.prof = self.prof, None
        self.action = Action.NONE
        if prof is not None:
            try:
                prof.stop()
            except Exception:
                pass
        if self.sink is not None:
            self.sink.abandon(detail)

    # ---- ending early --------------------------------------------------------------------------
    def finish_early(self, reason: str) -> None:
        """Training ends (or a signal came, or the user's profiler starts) while ours records:
        keep what was recorded, marked with ``reason``; drop a warm-up."""
        if self.prof is None:
            return
        self._stopping = True
        self._stop_detail = reason
        try:
            recording = self.action.recording
            self.prof.stop()  # when recording, torch runs stop_trace + on_trace_ready
            if not recording and self.sink is not None:
                self.sink.abandon(reason)
            self.log.info(f"capture finished early at step {self.step}: {reason}")
        except Exception as exc:
            self.log.error(f"could not finalise the capture ({reason}): {exc!r}")
            if self.sink is not None:
                self.sink.abandon(f"{reason}; finalising failed: {exc!r}")
        finally:
            self.prof = None
            self.action = Action.NONE
            self._stopping = False
            self._stop_detail = ""
        self._skip_window(self.step)


def _profiler_already_enabled() -> bool:
    import sys

    autograd_profiler = sys.modules.get("torch.autograd.profiler")
    return bool(getattr(autograd_profiler, "_is_profiler_enabled", False))
