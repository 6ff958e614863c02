"""Started by the bootstrap when a trigger module has been imported (torch.optim.optimizer, or the
module of --step-on). Builds the controller once per process and installs the step hooks."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Any

from npuprof.agent.log import AgentLog, get_log, never_raise, set_log

_state: dict[str, Any] = {}


def on_trigger(module_name: str, module: Any) -> None:
    try:
        agent = _state.get("agent") or _start()
        if agent is not None:
            agent.on_module(module_name, module)
    except Exception as exc:
        import traceback

        log = get_log()
        log.error(f"agent start failed: {exc!r}\n{traceback.format_exc()}")
        log.warn_once("start", f"profiling is off in this process ({exc!r}); training goes on")


def _start() -> Agent | None:
    import json

    from npuprof import ENV_CONFIG
    from npuprof.config import ProfileConfig

    payload = json.loads(os.environ[ENV_CONFIG])
    cfg = ProfileConfig.from_payload(payload["config"])
    run = payload.get("run", {})
    log = AgentLog(run.get("log"), "agent", str(run.get("run_id", "")))
    set_log(log)
    own_mode = _torch_npu_own_mode()
    if own_mode:
        log.warn_once("own-mode", f"{own_mode}; npuprof steps aside in this process to avoid double capture")
        _state["agent"] = None
        return None
    agent = Agent(cfg, run, log)
    _state["agent"] = agent
    return agent


def _torch_npu_own_mode() -> str | None:
    """torch_npu registers its own optimizer-step hook in these modes; two drivers would double-step."""
    from npuprof.agent.own_mode import torch_npu_own_mode_active

    return torch_npu_own_mode_active()


class Agent:
    def __init__(self, cfg: Any, run: dict[str, Any], log: AgentLog) -> None:
        from npuprof.agent.controller import CaptureController
        from npuprof.agent.ranks import current_rank
        from npuprof.agent.schedule import SchedulePlan

        self.cfg = cfg
        self.run = run
        self.log = log
        self.worker = cfg.worker_name or socket.gethostname().split(".")[0] or "host"
        self.controller = CaptureController(
            cfg,
            SchedulePlan(cfg.schedule),
            backend_factory=self._make_backend,
            sink_factory=self._make_sink,
            log=log,
            rank_fn=current_rank,
            on_arm=self._prepare,
        )
        from npuprof.results.postprocess import Postprocessor

        self.post = Postprocessor(Path(cfg.output))
        self.step_module, self.step_qualname = cfg.step_on.split(":", 1) if cfg.step_on else (None, None)
        self.hooked: set[str] = set()
        self._exit_hooks()
        log.info(f"agent ready in {sys.argv[0] or 'python'} (rank {current_rank()})")

    @never_raise("installing the step hooks")
    def on_module(self, module_name: str, module: Any) -> None:
        if module_name in self.hooked:
            return
        self.hooked.add(module_name)
        if module_name == self.step_module:
            from npuprof.agent.steps import wrap_step_function

            if not wrap_step_function(module, self.step_qualname or "", self.controller, self.log):
                self.log.warn_once(
                    "step-on",
                    f"--step-on {self.cfg.step_on}: {self.step_qualname} not found in {module_name}; "
                    "no steps counted",
                )
        elif module_name == "torch.optim.optimizer" and self.step_module is None:
            from npuprof.agent.steps import OptimizerSteps

            OptimizerSteps(self.controller, self.log).install()
            self._guard_user_profiler()

    def _make_backend(self) -> Any:
        from npuprof.agent.backends import select_backend

        backend = select_backend(self.log)
        self._guard_user_profiler()
        self._catch_sigterm()
        return backend

    def _make_sink(self, backend: Any) -> Any:
        from npuprof.agent.capture import CaptureWriter
        from npuprof.agent.ranks import current_rank

        return CaptureWriter(self.cfg, self.run, backend, self.log, current_rank, self.worker, self.post)

    @never_raise("starting the background post-processor")
    def _prepare(self) -> None:
        """Start the post-processor when training starts, so that its interpreter start-up does not
        compete with the first recorded steps; only in a process that may record."""
        from npuprof.agent.ranks import current_rank

        rank = current_rank()
        if rank is not None and not self.cfg.wants_rank(rank):
            return
        if self.controller.plan.next_busy_step(-1) is None:
            return
        self.post.start()

    # ---- the edges of the process ----------------------------------------------------------------
    def _exit_hooks(self) -> None:
        import atexit

        atexit.register(self._at_exit)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._in_forked_child)

    @never_raise("finalising the capture at exit")
    def _at_exit(self) -> None:
        self.controller.finish_early(
            f"training ended before the capture's last step; step {self.controller.step} is partial"
        )

    def _in_forked_child(self) -> None:
        # A forked child (DataLoader worker) must never touch the parent's profiler.
        self.controller.enabled = False
        self.controller.prof = None
        self.controller.next_check = 1 << 62
        self.post.forget()

    def _catch_sigterm(self) -> None:
        """Finalise a capture on SIGTERM, then die of it as before (only if the script set no handler)."""
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return

        def on_sigterm(signum: int, frame: Any) -> None:
            signal.signal(signum, signal.SIG_DFL)
            try:
                self.controller.finish_early("stopped by SIGTERM")
            finally:
                os.kill(os.getpid(), signum)

        signal.signal(signal.SIGTERM, on_sigterm)

    def _guard_user_profiler(self) -> None:
        """When the script starts its own torch profiler while ours records, ours steps aside."""
        if "user-profiler-guard" in self.hooked:
            return
        autograd_profiler = sys.modules.get("torch.autograd.profiler")
        if autograd_profiler is None:
            return
        self.hooked.add("user-profiler-guard")
        cls = autograd_profiler.profile
        original = cls._prepare_trace
        controller = self.controller
        log = self.log

        def _prepare_trace(prof_self: Any, *args: Any, **kwargs: Any) -> Any:
            ours = controller.prof is not None and getattr(controller.prof, "profiler", None) in (
                None,
                prof_self,
            )
            if controller.prof is not None and not ours:
                log.warn_once(
                    "user-profiler",
                    "the training script started its own profiler; npuprof's capture ends here "
                    "and steps aside while the script's runs",
                )
                controller.finish_early("the training script started its own profiler")
            return original(prof_self, *args, **kwargs)

        cls._prepare_trace = _prepare_trace
