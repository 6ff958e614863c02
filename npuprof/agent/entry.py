"""Started by the bootstrap when a trigger module has been imported (torch.optim.optimizer, or the
module of --step-on). Builds the controller once per process and installs the step hooks."""

from __future__ import annotations

import os
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
    from npuprof import ENV_CONFIG
    from npuprof.config import ProfileConfig, decode_env_payload

    payload = decode_env_payload(os.environ[ENV_CONFIG])
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
        from npuprof.agent.ranks import current_rank, worker_name
        from npuprof.agent.schedule import SchedulePlan

        self.cfg = cfg
        self.run = run
        self.log = log
        from npuprof.agent.disk_guard import DiskGuard
        from npuprof.agent.signals import SigtermGuard

        self.worker = worker_name(cfg.worker_name)
        self.disk = DiskGuard(cfg.output, getattr(cfg, "min_free_space", "auto"), log)
        self.sigterm = SigtermGuard(self._on_sigterm, log)
        self.controller = CaptureController(
            cfg,
            SchedulePlan(cfg.schedule),
            backend_factory=self._make_backend,
            sink_factory=self._make_sink,
            log=log,
            rank_fn=current_rank,
            on_arm=self._prepare,
            space=self.disk,
            on_profiling=self._on_profiling,
        )
        from npuprof.results.postprocess import Postprocessor

        self.post = Postprocessor(Path(cfg.output), run.get("run_id"))
        self.optimizer_steps: Any = None
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

            self.optimizer_steps = OptimizerSteps(self.controller, self.log)
            self.optimizer_steps.install()
            self._guard_user_profiler()

    def _make_backend(self) -> Any:
        from npuprof.agent.backends import select_backend

        backend = select_backend(self.log)
        self._guard_user_profiler()
        return backend

    def _on_profiling(self, active: bool) -> None:
        """A profiler of ours starts or stops: SIGTERM then finalises the capture, or acts as before."""
        if active:
            self.sigterm.install()
        else:
            self.sigterm.uninstall()

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
        self.disk.start()
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
        self._hand_over_the_rest()

    def _on_sigterm(self) -> None:
        """Finalise the capture in flight; the process then dies of SIGTERM (npuprof.agent.signals)."""
        self.controller.finish_early("stopped by SIGTERM")
        self._hand_over_the_rest()

    def _hand_over_the_rest(self) -> None:
        """Jobs the post-processor could not take in time are written here, unparsed."""
        left = self.post.drain()
        if left:
            from npuprof.agent.capture import write_job_files

            for job in left:
                write_job_files(job, self.log)

    def _in_forked_child(self) -> None:
        """A forked child counts its own steps and, if it trains, records its own captures (a
        multiprocessing worker started with fork); the parent's profiler, post-processor, threads and
        signal handler are not its own. A DataLoader worker never steps an optimizer: it stays idle."""
        try:
            self.controller.reset_after_fork()
            if self.optimizer_steps is not None:
                self.optimizer_steps.primary = None
            self.post.forget()
            from npuprof.results.postprocess import Postprocessor

            self.post = Postprocessor(Path(self.cfg.output), self.run.get("run_id"))
            self.disk.forget_after_fork()
            self.sigterm.forget_after_fork()
            self._finalise_at_multiprocessing_exit()
        except Exception as exc:
            self.controller.enabled = False
            self.controller.next_check = 1 << 62
            self.log.error(f"agent reset after fork failed; profiling is off in pid {os.getpid()}: {exc!r}")

    def _finalise_at_multiprocessing_exit(self) -> None:
        """multiprocessing ends a forked worker with os._exit, which skips atexit: its own exit hook
        (util.Finalize) still runs."""
        mp_util = sys.modules.get("multiprocessing.util")
        if mp_util is not None:
            mp_util.Finalize(None, self._at_exit, exitpriority=10)

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
