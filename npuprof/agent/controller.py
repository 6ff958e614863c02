"""The agent's heart: at each step boundary, decide whether to capture (docs/architecture.md).

Step counting is the only cost outside captures: ``on_boundary`` increments a counter and compares it
with the next step at which anything changes. A plan (a schedule today, a config watcher tomorrow)
says which action each step gets and with which configuration; a backend turns that into a running
profiler; a sink owns the result files. A plan that changes its mind calls ``replan`` (from any thread)
and the controller asks it again at the next step boundary.
"""

from __future__ import annotations

from typing import Any, Protocol

from npuprof.agent.backends.base import Backend
from npuprof.agent.log import AgentLog
from npuprof.agent.schedule import Action, CapturePlan
from npuprof.config import ProfileConfig

NEVER = 1 << 62


class CaptureSink(Protocol):
    def begin(self, step: int, cfg: ProfileConfig) -> None: ...

    def finish(self, prof: Any, last_step: int, detail: str = "", status: str = "complete") -> None: ...

    def abandon(self, detail: str) -> None: ...

    def skipped(self, step: int, detail: str) -> None: ...


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
        space: Any = None,
        on_profiling: Any = None,
    ) -> None:
        self.base_cfg = cfg
        self.cfg = cfg  # the configuration of the capture in flight (or the next one)
        self.plan = plan
        self._backend_factory = backend_factory
        self._sink_factory = sink_factory
        self.log = log
        self._rank_fn = rank_fn
        self._on_arm = on_arm
        self.space = space  # a DiskGuard (npuprof.agent.disk_guard) or None
        self._on_profiling = on_profiling  # told when a profiler of ours starts (True) and stops (False)
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
        self._stop_status = "complete"
        self._replanned = False

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

    def replan(self) -> None:
        """The plan changed (a config watcher's thread, say): look again at the next step boundary.
        The flag is set before ``next_check`` so that a decision being taken right now cannot hide it."""
        self._replanned = True
        self.next_check = 0

    # ---- the decision --------------------------------------------------------------------------
    def _sync(self) -> None:
        if not self.enabled:
            self.next_check = NEVER
            return
        self._replanned = False
        try:
            self._advance()
            if self._replanned:
                self.next_check = 0
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
            self.cfg = self.plan.config_at(step) or self.base_cfg
            refusal = self._refusal(step)
            if refusal is not None:
                self._skip(step, refusal)
                return
            self._open(step, wanted)
        else:
            if self.space is not None and not self.space.ok:
                self.finish_early(f"stopped at step {step}: {self.space.describe()}", status="incomplete")
                return
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

    def _skip(self, step: int, forever: bool) -> None:
        """Pass over a window this process must not record. A rank that is not selected never records;
        otherwise (the user's profiler runs, the disk is full) the next window is asked again. Never a
        search over steps: with --repeat 0 --wait 0 every step is busy."""
        if forever:
            self.next_check = NEVER
            return
        upcoming = self.plan.next_window_start(step)
        self.next_check = NEVER if upcoming is None else upcoming

    def _refusal(self, step: int) -> bool | None:
        """None when a capture may open at ``step``; else whether it may never open in this process."""
        rank = self._rank_fn()
        if not self.cfg.wants_rank(rank):
            self.log.info(f"rank {rank} not selected (--ranks); no capture at step {step}")
            return rank is not None  # an unknown rank may become known once the process group exists
        if _profiler_already_enabled():
            self.log.warn_once(
                "user-profiler",
                f"the training script runs its own profiler; npuprof steps aside (no capture at step {step})",
            )
            return False
        if self.space is not None and not self.space.ok:
            message = f"capture at step {step} skipped: {self.space.describe()}"
            self.log.warn_once("disk-space", message + "; training goes on")
            if self.sink is not None or self._ensure_sink():
                assert self.sink is not None
                self.sink.skipped(step, message)
            return False
        return None

    def _ensure_sink(self) -> bool:
        if self.backend is None:
            self.backend = self._backend_factory()
            self.sink = self._sink_factory(self.backend)
        return self.sink is not None

    def _report_ignored_flags(self) -> None:
        assert self.backend is not None
        ignored = self.backend.ignored_flags(self.cfg)
        if ignored:
            text = ", ".join(ignored)
            self.log.warn_once(f"ignored-flags:{text}", f"ignored on the {self.backend.name} backend: {text}")

    def _open(self, step: int, wanted: Action) -> None:
        self._ensure_sink()
        assert self.backend is not None
        self._report_ignored_flags()
        self.prof = self.backend.create_profiler(self.cfg, self.plan.action_at, self._on_trace_ready)
        self.backend.align(self.prof, step)
        self.action = wanted
        self._note_capture_start(Action.NONE, wanted, step)
        self.prof.start()
        self._tell_profiling(True)
        self.log.info(f"profiler started at step {step} ({wanted.name}) on {self.backend.name}")

    def _note_capture_start(self, previous: Action, now: Action, step: int) -> None:
        if now.recording and previous is not Action.RECORD:
            assert self.sink is not None
            self.sink.begin(step, self.cfg)

    def _on_trace_ready(self, prof: Any) -> None:
        # Called by the profiler inside step() or stop(); the capture ended at the previous step.
        last = self.step if self._stopping else self.step - 1
        detail = self._stop_detail if self._stopping else ""
        status = self._stop_status if self._stopping else "complete"
        if self.sink is not None:
            self.sink.finish(prof, last, detail, status)

    def _tell_profiling(self, active: bool) -> None:
        if self._on_profiling is not None:
            try:
                self._on_profiling(active)
            except Exception as exc:
                self.log.warning(f"profiling {'start' if active else 'stop'} hook failed: {exc!r}")

    def _close_quietly(self) -> None:
        prof, self.prof = self.prof, None
        if prof is not None:
            try:
                prof.stop()
            except Exception as exc:
                self.log.warning(f"profiler stop failed: {exc!r}")
            self._tell_profiling(False)
        self.action = Action.NONE

    def _drop_session(self, detail: str) -> None:
        prof, self.prof = self.prof, None
        self.action = Action.NONE
        if prof is not None:
            try:
                prof.stop()
            except Exception:
                pass
            self._tell_profiling(False)
        if self.sink is not None:
            self.sink.abandon(detail)

    # ---- ending early --------------------------------------------------------------------------
    def finish_early(self, reason: str, status: str = "complete") -> None:
        """Training ends (or a signal came, the user's profiler starts, the disk fills) while ours
        records: keep what was recorded, marked with ``reason`` (and ``status``); drop a warm-up. The
        next window is asked again (never a search: see ``_skip``)."""
        if self.prof is None:
            return
        self._stopping = True
        self._stop_detail = reason
        self._stop_status = status
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
            self._stop_status = "complete"
            self._tell_profiling(False)
        self._skip(self.step, forever=False)

    def reset_after_fork(self) -> None:
        """A forked child starts counting its own steps; the parent's profiler and files are not its."""
        self.prof = None
        self.backend = None
        self.sink = None
        self.action = Action.NONE
        self.step = 0
        self.next_check = 0
        self.armed = False
        self._stopping = False


def _profiler_already_enabled() -> bool:
    import sys

    autograd_profiler = sys.modules.get("torch.autograd.profiler")
    return bool(getattr(autograd_profiler, "_is_profiler_enabled", False))
