"""Started by the bootstrap when a trigger module has been imported (torch.optim.optimizer, or the
module of --step-on), or when the script binds the name of --step-on __main__:QUALNAME. Builds the
controller once per process and installs the step hooks."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npuprof import ENV_JOB_PID, ENV_LAUNCHER_PID
from npuprof.agent import sigterm_clock, threads
from npuprof.agent.log import AgentLog, get_log, never_raise, set_log
from npuprof.agent.thread_deaths import exception_named, uncaught_named

if TYPE_CHECKING:
    from collections.abc import Callable

    from npuprof.agent.signals import KeptWork

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


def on_main_target_missing(module: Any, step_on: str) -> None:
    """Called by the bootstrap at exit when ``--step-on __main__:QUALNAME``'s first name was never bound in
    this process's ``__main__``: logged with the closest names defined there, for the launcher's report. A
    script that never ran (``python nope.py``: nothing but ``__dunder__`` names) or died of an exception
    (``sys.last_value``, set before exit handlers run) may not have reached its ``def``: its own error is
    the news, not this."""
    try:
        if all(key.startswith("__") for key in vars(module)) or getattr(sys, "last_value", None) is not None:
            return
        log = get_log() if _state.get("agent") else _report_log()
        if log is None:
            return
        from npuprof.agent.steps import missing_target_message

        log.warning(missing_target_message(module, step_on.partition(":")[2], step_on))
    except Exception as exc:
        _report_failure(f"--step-on {step_on} not reported: {exc!r}")


def on_main_target_held(module: Any, step_on: str) -> None:
    """Called by the bootstrap at exit when the script bound ``--step-on __main__:QUALNAME``'s first name
    while something else still referenced the placeholder (docs/architecture.md, "Step boundaries"): the
    binding did not free it, so the agent never woke and no step was counted (helper-325: a
    ``@torch.jit.script`` function defined before ``train_step`` copies the script's globals, the
    placeholder with them; the run's end said that no process defined train_step)."""
    try:
        log = get_log() if _state.get("agent") else _report_log()
        if log is None:
            return
        first = step_on.partition(":")[2].split(".")[0]
        if refused := _refused_target(module, step_on):  # a @torch.jit.script target holds it itself
            log.warning(f"--step-on {step_on}: {refused}; no steps counted")
            return
        path = getattr(module, "__file__", None) or (sys.argv[0] if sys.argv else "")
        where = f"__main__ ({os.path.basename(path)})" if path else "__main__"
        log.warning(
            f"--step-on {step_on}: {first} was defined in {where} while something else held npuprof's "
            "placeholder for it (a copy of the script's globals: torch.jit.script keeps one for each "
            f"function it compiles), so npuprof did not see the definition; no steps counted; define {first} "
            "before the script's first @torch.jit.script function, or name a function of a module it imports"
        )
    except Exception as exc:
        _report_failure(f"--step-on {step_on} not reported: {exc!r}")


def on_main_target_seen_late(module: Any, step_on: str) -> None:
    """Called by the bootstrap once it has woken the agent at a garbage collection that found
    ``--step-on __main__:QUALNAME``'s first name bound while something else held the placeholder
    (docs/architecture.md, "Step boundaries"): the script may have called the function before, uncounted,
    so that its step numbers start later than its first call (helper-325: ProfilerStep#6-8 held the
    script's calls 16-18)."""
    try:
        log = get_log() if _state.get("agent") else _report_log()
        if log is None or _refused_target(module, step_on):  # the agent has said why it counts nothing
            return
        first = step_on.partition(":")[2].split(".")[0]
        path = getattr(module, "__file__", None) or (sys.argv[0] if sys.argv else "")
        where = f"__main__ ({os.path.basename(path)})" if path else "__main__"
        log.warn_once(
            "step-on-seen-late",
            f"--step-on {step_on}: npuprof saw the definition of {first} in {where} only at a garbage "
            "collection after it, something else holding its placeholder (a copy of the script's globals: "
            "torch.jit.script keeps one for each function it compiles): calls made before were not counted, "
            f"and step 0 may be a later call than the script's first; define {first} before the script's "
            "first @torch.jit.script function",
        )
    except Exception as exc:
        _report_failure(f"--step-on {step_on} not reported: {exc!r}")


def _refused_target(module: Any, step_on: str) -> str:
    """Why the function --step-on __main__:NAME names cannot be wrapped, as the agent refuses it ("" when
    it can, or when NAME is a class whose method is named): a ``@torch.jit.script`` function
    (``ScriptFunction``) holds the placeholder in the globals it copies as it is compiled."""
    from npuprof.agent.steps import _not_a_step_function

    qualname = step_on.partition(":")[2]
    if "." in qualname:
        return ""
    return _not_a_step_function(vars(module).get(qualname))


def on_main_target_spawned(step_on: str) -> None:
    """Called by the bootstrap at exit in a child that multiprocessing's spawn (or forkserver) started: its
    script ran as ``__mp_main__`` and defined the target there, where npuprof does not watch (helper-125:
    the run's summary blamed the schedule)."""
    from npuprof.results.logfile import SPAWNED_CHILD

    try:
        log = get_log() if _state.get("agent") else _report_log()
        if log is not None:  # INFO: a spawned DataLoader worker never was to count steps (helper-128)
            log.info(
                f"--step-on {step_on}: this process was started by multiprocessing's spawn, whose script "
                f"runs as __mp_main__, where npuprof cannot wrap it{SPAWNED_CHILD}: name a function of a "
                "module the script imports (--step-on MODULE:NAME), as the README says"
            )
    except Exception as exc:
        _report_failure(f"--step-on {step_on} not reported: {exc!r}")


def _report_log() -> AgentLog | None:
    """The run's log, for a process where the agent never started."""
    from npuprof import ENV_CONFIG
    from npuprof.payload import PayloadError, read_payload

    try:
        _cfg, facts = read_payload(os.environ[ENV_CONFIG])
    except (KeyError, PayloadError):
        return None
    return AgentLog(facts.log, "agent", facts.run_id)


def _report_failure(message: str) -> None:
    try:
        sys.stderr.write(f"npuprof: {message}\n")
    except Exception:
        pass


def _start() -> Agent | None:
    import msgspec

    from npuprof import ENV_CONFIG
    from npuprof.payload import PayloadError, read_payload

    try:
        cfg, facts = read_payload(os.environ[ENV_CONFIG])
    except PayloadError as exc:
        get_log().warn_once("payload", f"profiling is off in this process: {exc}; training goes on")
        # and in the run's log, as the bootstrap logs an agent that could not start: the launcher's last
        # line names it (helper-110: a child whose environment the script rewrote read "no process of the
        # job imported torch.optim")
        from npuprof.results.logfile import AGENT_START_FAILED

        where = os.environ.get("NPUPROF_LOG")
        AgentLog(where or None, "bootstrap").error(f"{AGENT_START_FAILED}{exc}")
        return None
    run = msgspec.structs.asdict(facts)
    hidden = _output_hidden(facts.shown_local_ranks)
    log = AgentLog(facts.log, "agent", facts.run_id, output_hidden=hidden)
    log.keep_a_descriptor()
    set_log(log)
    own_mode = _torch_npu_own_mode()
    if own_mode:
        log.warn_once("own-mode", f"{own_mode}; npuprof steps aside in this process to avoid double capture")
        _state["agent"] = None
        return None
    agent = Agent(cfg, run, log)
    _state["agent"] = agent
    return agent


def _output_hidden(shown_local_ranks: list[int] | None) -> bool:
    """Whether torchrun's --local-ranks-filter leaves this process's output unseen; not when LOCAL_RANK
    is no number (``LOCAL_RANK=²`` raised a ValueError there, and profiling was off in the process)."""
    from npuprof.agent.ranks import local_rank_from_env

    local_rank = local_rank_from_env()
    return shown_local_ranks is not None and local_rank is not None and local_rank not in shown_local_ranks


def _torch_npu_own_mode() -> str | None:
    """torch_npu registers its own optimizer-step hook in these modes; two drivers would double-step."""
    from npuprof.agent.own_mode import torch_npu_own_mode_active

    return torch_npu_own_mode_active()


class Agent:
    def __init__(self, cfg: Any, run: dict[str, Any], log: AgentLog) -> None:
        from npuprof.agent.controller import CaptureController
        from npuprof.agent.ranks import current_rank, worker_name
        from npuprof.agent.schedule import plan_for

        self.cfg = cfg
        self.run = run
        self.log = log
        from npuprof.agent.disk_guard import DiskGuard
        from npuprof.agent.signals import SigtermGuard

        self.worker = worker_name(cfg.worker_name)
        self.disk = DiskGuard(cfg.output, getattr(cfg, "min_free_space", "auto"), log)
        self.sigterm = SigtermGuard(
            self._on_sigterm,
            log,
            on_term_after_export=self._handed_over_on_sigterm,
            on_term_unhandled=lambda: _plans_last_lines(self.controller, "SIGTERM"),
            recorded_off_main=lambda: self.controller.recorded_off_the_main_thread(),
        )
        self._native_exit: _NativeExit | None = None  # set once a profiler of ours has run here
        self.controller = CaptureController(
            cfg,
            plan_for(cfg, run, log),
            backend_factory=self._make_backend,
            sink_factory=self._make_sink,
            log=log,
            rank_fn=current_rank,
            on_arm=self._prepare,
            space=self.disk,
            on_profiling=self._on_profiling,
            on_new_cycle=self._on_new_cycle,
            on_recorded_step=self.sigterm.check_pipe,
            on_idle_decision=self.sigterm.put_down_if_copied,
            backend_costs_an_import=_backend_costs_an_import,
        )
        from npuprof.results.postprocess import Postprocessor

        self.post = Postprocessor(Path(cfg.output), run.get("run_id"))
        self.optimizer_steps: Any = None
        self.step_module, self.step_qualname = cfg.step_on.split(":", 1) if cfg.step_on else (None, None)
        self.hooked: set[str] = set()
        self._mp_after_fork = False  # multiprocessing's after-fork hook registered (in a forked child)
        self._counts_logged_in = 0  # the pid whose step count was logged at its exit (once a process)
        self._ready_in = os.getpid()  # its "agent ready" line names this process (not a child forked from it)
        self._exit_hooks()
        if getattr(self.controller.plan, "timed", False):
            # a time window's clock runs from now: a process that leaves by os._exit before it opens says
            # how long it ran too (torchrun workers often do: the run's end named no --delay that fits)
            self._finalise_at_os_exit()
        from npuprof.agent.comm_marks import install_at_wake

        install_at_wake(cfg, log)  # --msprof-tx: communication ranges (never raises)
        run_said = f"run {run.get('run_id')}{_attempt()}"
        log.info(ready_line(sys.argv[0] or "python", current_rank(), run_said))
        self._follow_the_launcher()

    @never_raise("installing the step hooks")
    def on_module(self, module_name: str, module: Any) -> None:
        if module_name in self.hooked:
            return
        self.hooked.add(module_name)
        if module_name == self.step_module:
            from npuprof.agent.steps import missing_target_message, wrap_step_function

            qualname = self.step_qualname or ""
            if not wrap_step_function(module, qualname, self.controller, self.log):
                message = missing_target_message(module, qualname, self.cfg.step_on)
                self.log.warn_once("step-on", message)
        elif module_name == "torch.optim.optimizer" and self.step_module is None:
            from npuprof.agent.steps import OptimizerSteps

            self.optimizer_steps = OptimizerSteps(self.controller, self.log)
            self.optimizer_steps.install()
            self._guard_user_profiler()

    def _make_backend(self) -> Any:
        from npuprof.agent.backends import select_backend

        backend = select_backend(self.log)
        self._guard_user_profiler()
        self._hold_sigterm_in_profilers(backend)
        return backend

    def _hold_sigterm_in_profilers(self, backend: Any) -> None:
        """SIGTERM waits (at most HANDLER_LIMIT_S) while our profiler collects and exports a trace: in the
        step() that ends a capture and in a stop() while it records, which take seconds for a big trace
        (npuprof.agent.signals). So it does while torch starts the profiler (its start(), and the step()
        that ends a warm-up): its handler's stop() there, the profiler prepared and not yet enabled, killed
        the job with SIGSEGV (docs/architecture.md, "Signals"); and in a warm-up's stop(), which enables
        the profiler and disables it: a script's handler that raised there (sys.exit) left it enabled, and
        the job died of SIGSEGV as the interpreter ended. Other calls are left alone."""
        from npuprof.agent.controller import step_holds
        from npuprof.agent.schedule import Action
        from npuprof.agent.signals import PROFILER_START, TRACE_EXPORT

        create = backend.create_profiler
        guard = self.sigterm
        controller = self.controller
        saves = {
            "start": lambda: True,
            "step": lambda: controller.action in (Action.RECORD_AND_SAVE, Action.WARMUP),
            "stop": lambda: True,
        }
        # what each holds, as a SIGTERM waiting past the limit names it (a warm-up's last step starts the
        # recording)
        holds = {
            "start": lambda: PROFILER_START,
            "step": lambda: step_holds(controller.action),
            "stop": lambda: TRACE_EXPORT,
        }

        def create_profiler(*args: Any, **kwargs: Any) -> Any:
            prof = create(*args, **kwargs)
            for name, when in saves.items():
                method = getattr(prof, name, None)
                if method is None:
                    continue
                try:
                    setattr(prof, name, _held(method, guard, when, holds[name]))
                except (AttributeError, TypeError):
                    pass  # the profiler cannot be wrapped: the export in on_trace_ready is still held
            return prof

        backend.create_profiler = create_profiler

    def _on_profiling(self, active: bool) -> None:
        """A profiler of ours starts or stops: SIGTERM then finalises the capture, or acts as before; the
        post-processor waits meanwhile (its work distorts the steps recorded)."""
        if self.post is not None:
            self.post.hold(active)
            if active:
                self._say_if_the_post_processor_runs_beside()
        if active:
            if not self.sigterm.install() and not threads.on_main_thread():
                self.log.warn_once(
                    "sigterm-thread",
                    "training runs in a thread other than the main one, and this Python cannot ask the "
                    "main thread to install a SIGTERM handler: a SIGTERM ends the job without finalising "
                    "the capture in flight (the job's end and Ctrl-C do finalise it)",
                )
            if self._native_exit is None:
                self._native_exit = _NativeExit.prepare()
            self._finalise_at_os_exit()
        else:
            self.sigterm.capture_ended(self._copy_left())

    def _dynamic(self) -> bool:
        """--dynamic: its plan writes the logs `npuprof status` reads, and their last lines at the end."""
        return hasattr(self.controller.plan, "at_exit")

    def _copy_left(self) -> KeptWork | None:
        """The ended capture's memory snapshot, still being copied, paced (a minute or more for 100,000
        events), where a SIGTERM killed the process at once, the categorised timeline lost: the SIGTERM
        guard's ``copy`` duty (a SIGTERM hands the rest over as at exit, the copy at full speed within the
        exit's bound, and the process dies of it). The copier asks for a decision once done, where the
        guard goes (``put_down_if_copied``); with --dynamic the session's duty keeps it after that (a main
        thread blocked outside Python was given the session's 50 ms, the copy lost)."""
        from npuprof.agent.signals import KeptWork
        from npuprof.results.postprocess import HANDOVER_DRAIN_S

        post = self.post
        if post is None or not post.copying():
            return None
        post.when_copied(self.controller.replan)
        return KeptWork(post.copying, post.finish_copies, HANDOVER_DRAIN_S)

    def _on_new_cycle(self) -> None:
        """A running profiler begins another capture (--repeat): a SIGTERM guard left out at its start for
        want of descriptors is tried again, since the job may have freed some; the post-processor is held
        again, or let run while too many captures wait for it (Postprocessor.hold)."""
        self.sigterm.install()
        if self.post is not None:
            self.post.hold(True)
            self._say_if_the_post_processor_runs_beside()

    def _say_if_the_post_processor_runs_beside(self) -> None:
        """The capture just begun keeps it in its record (the run summary and analyse show it): a new profiler
        (--wait > 0, --dynamic) or another cycle of the running one (captures back to back)."""
        if self.post is not None and self.post.runs_beside:
            self.controller.note_for_capture(
                f"the post-processor ran during this capture ({self.post.runs_beside} earlier captures "
                "waited for it): its work may have slowed these steps"
            )

    def _finalise_at_os_exit(self) -> None:
        """``os._exit`` skips atexit, where a capture open at the end (``--delay`` without ``--duration``,
        a schedule cut short) is finalised: a script that leaves by ``os._exit`` (torchrun workers after
        destroy_process_group, examples/train.py) would lose it. Called from this process's main thread,
        it finalises first, then exits as asked. It exits at once, as os._exit does, from another thread,
        in a forked child, when called again during that finalise, and when it interrupted (a signal
        handler) a step boundary, torch's profiler code or an import: stopping the profiler there would
        crash the process (the capture is then reported interrupted). With --dynamic the plan's logs get
        their last lines too (the capture's end, "the process ends"), which ``npuprof status`` reads.

        ``os.execv`` and ``os.execve`` (which every ``os.exec*`` calls) end this process image as well, with
        no atexit: a script that restarts itself by exec lost the capture in flight. They finalise alike."""
        for name in ("_exit", "execv", "execve"):
            if hasattr(os, name):
                _finalise_before(name, self._at_exit, self.controller)

    def _make_sink(self, backend: Any) -> Any:
        """The captures' sink; with ``backend`` None, the one that records skipped windows before torch is
        loaded (the controller's ``_sink_for_a_skip``)."""
        from npuprof.agent.backends.base import NotChosen
        from npuprof.agent.capture import CaptureWriter
        from npuprof.agent.ranks import current_rank

        backend = backend if backend is not None else NotChosen()
        return CaptureWriter(
            self.cfg, self.run, backend, self.log, current_rank, self.worker, self.post, space=self.disk
        )

    @never_raise("starting the background post-processor")
    def _prepare(self) -> None:
        """Start the post-processor when training starts, so that its interpreter start-up does not
        compete with the first recorded steps; only in a process that may record."""
        from npuprof.agent.ranks import current_rank

        if self._dynamic():  # its logs' last lines (npuprof status), however the process ends
            self._finalise_at_os_exit()
            # between captures too (the guard's session duty, kept past each capture): a SIGTERM is logged
            # as such, and the process still dies of it (agent/signals.py); status said "gone (no end
            # line: killed?)"
            if self.sigterm.install_for_session():
                guard = self.sigterm
                self.controller.plan.keep_up(guard.child_signal_unwrapped, guard.check_pipe)
        rank = current_rank()
        if rank is not None and not self.cfg.wants_rank(rank):
            return
        if self.controller.plan.next_busy_step(-1) is None:
            return
        self.disk.start()
        try:
            self.post.start()
        except OSError as exc:
            # tried again as each capture starts, which says so if it fails there too: here the output dir
            # may not exist yet (a job that cannot reach its launcher, another node's, makes it then;
            # helper-117: "no post-processor could be started (No such file or directory)", then it was)
            self.log.info(f"post-processor not started with training ({exc!r}); tried again at a capture")

    # ---- the edges of the process ----------------------------------------------------------------
    def _exit_hooks(self) -> None:
        import atexit

        atexit.register(self._at_exit)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._in_forked_child)
        if _in_a_multiprocessing_child():
            # (a rank of mp.spawn) finalised at the end of run() too, where what failed it is still known
            self._finalise_at_multiprocessing_exit()

    @never_raise("finalising the capture at exit")
    def _at_exit(self, ended_by: str = "training ended") -> None:
        from npuprof.agent.signals import decision_begins, decision_ends

        decision_begins()  # the script's handlers deferred meanwhile run at the end (agent/signals.py)
        try:
            self._finalise_at_exit(ended_by)
        finally:
            decision_ends(exiting=True)
            if ended_by == "training ended":  # (an exec may fail, and the script train on)
                # steps after this (an atexit handler of the script registered before torch was imported,
                # run after this one) would open a capture that nothing finalises
                self.controller.closed_for_exit = "its steps run in an atexit handler, after npuprof's"

    def _finalise_at_exit(self, ended_by: str) -> None:
        # A Ctrl-C now (the job is ending: a KeyboardInterrupt would only interrupt this finalise, as
        # Python ignores it in an exit callback) waits for the capture and its hand-over, and is dropped.
        from npuprof.agent.controller import later_start_avoids_it
        from npuprof.agent.signals import sigint_held_back
        from npuprof.results.logfile import (
            NOTHING_COUNTED_AT_EXIT,
            STARTS_WORKERS_AT_EXIT,
            STEPS_AT_EXIT,
            WINDOWS_SKIPPED_AT_EXIT,
        )

        with sigint_held_back(deliver=False):
            controller = self.controller
            # the run's end report reads these; once a process (helper-121: a forked child that ends by
            # exit() runs this both from atexit and from multiprocessing's exit finalizers)
            counting = controller.armed or controller.step_function_wrapped
            if counting and ended_by == "training ended" and self._counts_logged_in != os.getpid():
                self._counts_logged_in = os.getpid()
                self.log.info(f"{STEPS_AT_EXIT}{controller.step}")
                if controller.step_function_wrapped:
                    from npuprof.agent.steps import rebindings_not_followed

                    for line in rebindings_not_followed():
                        self.log.warn_once("step-on-not-followed", line)
                if controller.windows_skipped:
                    self.log.info(f"{WINDOWS_SKIPPED_AT_EXIT}{controller.windows_skipped}")
            elif not counting and self._counts_logged_in != os.getpid():
                from npuprof.agent.window_plan import starts_workers

                if starts_workers():  # its rank (SLURM_PROCID under srun) is not a rank that records
                    self._counts_logged_in = os.getpid()
                    self.log.info(STARTS_WORKERS_AT_EXIT)
                # a rank that only logs, or serves data; and any process whose agent said it was ready: one
                # that says nothing at its end did not reach it (killed), as the run's summary reads it (a
                # forked DataLoader worker, never said ready, says nothing unless it has a rank, as before)
                elif ended_by == "training ended" and (_has_rank() or self._ready_in == os.getpid()):
                    self._counts_logged_in = os.getpid()
                    self.log.info(f"{NOTHING_COUNTED_AT_EXIT}{_nothing_to_count(self.cfg)}")
            not_begun = getattr(getattr(controller, "plan", None), "not_begun_at_exit", None)
            if (
                ended_by in ("training ended", OS_EXIT_ENDED)
                and not_begun is not None
                and (line := not_begun())
            ):
                self.log.info(line)
            cut = ""  # what a finish made now cuts (controller.finish_early)
            if getattr(controller, "_no_steps", False):  # a time window in a job without steps
                timed_end = getattr(controller.plan, "end_at", None) is not None
                from npuprof.agent.window_plan import ENDED_EARLY

                late, ended_early = "", ENDED_EARLY
                if hasattr(controller.plan, "late_by"):
                    controller.plan.process_ends()
                    late, ended_early = controller.plan.late_by(), controller.plan.ended_early()
                # --delay alone records until the process ends: that is its end, not a cut
                reason = late or (ended_early if timed_end else "")
            elif getattr(controller, "steps_elsewhere", None) and controller.step == 0:
                elsewhere = controller.steps_elsewhere
                reason = (
                    f"no step was counted in it: the steps ran on thread {elsewhere}, not on the thread "
                    f"that started the profiler ({later_start_avoids_it(self.cfg)})"
                )
            else:
                ended = (_died_of_uncaught_exception() if ended_by == "training ended" else None) or ended_by
                reason = f"{ended} before the capture's last step"
                cut = f"; step {controller.step} is partial"
            controller.finish_at_exit(reason, cut)
            from npuprof.results.postprocess import EXIT_COPY_WAIT_S

            self._hand_over_the_rest(copies_s=EXIT_COPY_WAIT_S)  # nothing trains any more: see there
            chrome_trace = sys.modules.get("npuprof.agent.chrome_trace")  # loaded by a copy, if one began
            if chrome_trace is not None:
                chrome_trace.wait_for_copies_at_exit()

    def _on_sigterm(self) -> None:
        """Finalise the capture in flight; the process then dies of SIGTERM (npuprof.agent.signals), its
        waits counted from the signal's arrival."""
        self.controller.finish_on_sigterm(self.sigterm.finish_by())
        self._hand_over_the_rest(until=self.sigterm.hand_over_by())
        _plans_last_lines(self.controller, "SIGTERM")

    def _handed_over_on_sigterm(self) -> None:
        """A SIGTERM held during a trace export that wrote the capture: the hand-over is left, and the
        plan's last lines."""
        self._hand_over_the_rest(until=self.sigterm.hand_over_by())
        _plans_last_lines(self.controller, "SIGTERM")

    def _hand_over_the_rest(self, copies_s: float = 0.0, until: float | None = None) -> None:
        """Jobs the pipe could not take in time go to the post-processor's spool, parsed after the job;
        those it cannot take either are written here, unparsed. ``copies_s``: how long a memory snapshot's
        copy still under way is waited for (the process's normal end; a SIGTERM's has its own 5 s).
        ``until``: when (on ``sigterm_clock.CLOCK``) the wait for the pipe ends at the latest (a SIGTERM's
        ``SigtermGuard.hand_over_by``), the rest spooled."""
        self.post.hold(False)  # nothing records any more (a capture the finalise could not stop included)
        if until is None:
            left = self.post.drain(copies_s=copies_s)
        else:
            from npuprof.results.postprocess import HANDOVER_DRAIN_S

            drain_s = max(0.0, min(HANDOVER_DRAIN_S, until - sigterm_clock.CLOCK.monotonic()))
            left = self.post.drain(drain_s, copies_s=copies_s)
        spooled = len(left)
        from npuprof.results.postprocess import uncopied_snapshot

        # (before spool_left, which takes such a snapshot out of its job)
        held_by_a_copy = any(uncopied_snapshot(job) for job in left)
        left = self.post.spool_left(left)
        if spooled > len(left):
            why = (
                "a memory snapshot was still being copied"
                if held_by_a_copy
                else "captures came faster than they were parsed"
            )
            from npuprof.results.logfile import SPOOLED_AT_EXIT

            self.log.info(
                f"{spooled - len(left)}{SPOOLED_AT_EXIT}{self.post.spool}: parsed after the job ends ({why})"
            )
        if left:
            from npuprof.agent.capture import write_job_files

            for job in left:
                write_job_files(job, self.log)

    def _in_forked_child(self) -> None:
        """A forked child counts its own steps and, if it trains, records its own captures (a
        multiprocessing worker started with fork); the parent's profiler, post-processor, threads and
        signal handler are not its own. A DataLoader worker never steps an optimizer: it stays idle.

        A child forked while a profiler of ours runs inherits that profiler, enabled in libtorch: it never
        stops or exports it, records nothing itself (torch allows one profiler) and says nothing; the
        parent's capture goes on. Once torch's profiler has run in a process, a child of it that ends by
        exit() would hang in Kineto's exit-time destructor: it ends by _exit once Python has finished."""
        try:
            inherited = self.controller.prof is not None
            if self._native_exit is not None:
                self._native_exit.arm_in_child()
            self.controller.reset_after_fork()
            if self.optimizer_steps is not None:
                self.optimizer_steps.primary = None
            self.post.forget()
            from npuprof.results.postprocess import Postprocessor

            self.post = Postprocessor(Path(self.cfg.output), self.run.get("run_id"))
            self.disk.forget_after_fork()
            self.sigterm.forget_after_fork()
            if inherited:
                self._drop_in_child()
                return
            self._finalise_at_multiprocessing_exit()
        except Exception as exc:
            self._drop_in_child()
            self.log.error(f"agent reset after fork failed; profiling is off in pid {os.getpid()}: {exc!r}")

    def _drop_in_child(self) -> None:
        from npuprof.agent.controller import NEVER

        self.controller.enabled = False
        self.controller.next_check = NEVER
        self.log.info(f"pid {os.getpid()}, forked while a capture ran, records nothing")

    def _finalise_at_multiprocessing_exit(self) -> None:
        """multiprocessing ends a forked worker with os._exit, which skips atexit: its own exit hook
        (util.Finalize) still runs. Its bootstrap clears the finalizers registered before it (this fork
        hook's too), then runs its after-fork hooks: the finalizer is registered again from one of those.
        Without it the os._exit guard still finalises the capture, but as one "ended by os._exit" of a worker
        whose target returned, and the worker's exit lines (its step count) are not written (helper-315)."""
        mp_util = sys.modules.get("multiprocessing.util")
        if mp_util is None:
            return
        mp_util.Finalize(None, self._at_exit, exitpriority=10)
        if not self._mp_after_fork:
            self._mp_after_fork = True  # once: the children of this child inherit the registration
            mp_util.register_after_fork(self, Agent._finalise_in_multiprocessing_child)

    @staticmethod
    def _finalise_in_multiprocessing_child(agent: Agent) -> None:
        mp_util = sys.modules.get("multiprocessing.util")
        if mp_util is not None:
            mp_util.Finalize(None, agent._at_exit, exitpriority=10)

    # ---- the launcher's death -----------------------------------------------------------------
    @never_raise("following the launcher")
    def _follow_the_launcher(self) -> None:
        """The job's own process (the launcher's direct child: python, torchrun) gets SIGTERM when
        `npuprof run` dies, even of SIGKILL, which it cannot forward: PR_SET_PDEATHSIG. Its children are
        its own to end (torchrun ends its workers). Set here, when the agent starts: a launcher already
        dead by then is treated as if the signal had come."""
        if not sys.platform.startswith("linux"):
            return
        launcher = _launcher_pid(self.run)
        if launcher is None or launcher == os.getpid():
            return
        if os.getppid() == launcher:
            if not _set_parent_death_signal(signal.SIGTERM):
                return
            if os.getppid() == launcher:
                return  # set while the launcher lives: the kernel sends SIGTERM when it dies
        elif _process_runs(launcher) or not _first_process_of_the_job(self.run):
            return  # not the launcher's direct child
        self.log.warning(f"npuprof run (pid {launcher}) has died: the job ends with SIGTERM")
        os.kill(os.getpid(), signal.SIGTERM)

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


def _held(method: Any, guard: Any, when: Any, holding: Callable[[], str]) -> Any:
    from npuprof.agent.backends.base import HELD_MARK
    from npuprof.agent.signals import script_handlers_deferred

    def held(*args: Any, **kwargs: Any) -> Any:
        if not when():
            return method(*args, **kwargs)
        with guard.export_hold(holding=holding()), script_handlers_deferred():
            return method(*args, **kwargs)

    setattr(held, HELD_MARK, True)  # what release_profiler takes out of a profiler let go of
    return held


def _backend_costs_an_import() -> bool:
    from npuprof.agent.backends import chosen_only_by_importing_torch

    return chosen_only_by_importing_torch()


def _in_a_multiprocessing_child() -> bool:
    """Started by multiprocessing: spawned (its command line says so while it imports the parent's main
    module, before its bootstrap) or forked before this agent woke (its bootstrap names the parent)."""
    from npuprof.agent.window_plan import a_multiprocessing_child

    process = sys.modules.get("multiprocessing.process")
    return a_multiprocessing_child() or (process is not None and process.parent_process() is not None)


def _died_of_uncaught_exception() -> str | None:
    """ "the process died of an uncaught ValueError (bad batch)" when the script's main thread raised it to
    the top (the interpreter keeps it in ``sys.last_exc``, ``sys.last_value`` before 3.12, before its exit
    callbacks run), or what failed a multiprocessing child; None for any other end (a return, the main
    thread's ``sys.exit``, a signal). A capture it cut short said "training ended", as if the job had ended
    well (the job's exit code was the only sign)."""
    exc = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    if isinstance(exc, BaseException):
        return f"the process died of {uncaught_named(exc)}"
    return _multiprocessing_child_failed()


def _multiprocessing_child_failed() -> str | None:
    """What ends a multiprocessing child that failed, read while it ends: its exit finalizers (ours
    included) run in ``Process._bootstrap``'s ``finally``, the exception that ends ``run()`` still in
    flight. ``torch.multiprocessing.spawn`` catches a rank's exception and calls ``sys.exit(1)``: a rank
    of an ``mp.spawn`` job that raised said "training ended". None at a normal end and in an atexit
    callback (no exception is in flight there)."""
    exc = sys.exc_info()[1]
    if exc is None:
        return None
    if not isinstance(exc, SystemExit):
        return f"the process died of {uncaught_named(exc)}"
    if exc.code in (None, 0):
        return None
    code = exc.code if isinstance(exc.code, int) else 1  # Python prints any other object and exits 1
    cause = exc.__context__
    after = f" after raising {exception_named(cause)}" if cause is not None else ""
    return f"the process exited with code {code}{after}"


class _NativeExit:
    """A forked child of a process where torch's profiler has run ends by ``_exit`` once Python is done.

    libkineto's exit-time destructor (``ConfigLoader``) destroys a condition variable that the parent's
    config thread waits on; that thread does not exist in the child, so ``exit()`` waits for ever (a plain
    ``os.fork()`` child ending normally, with or without npuprof, once a profiler ran). multiprocessing's
    children end by ``os._exit`` already. glibc's ``on_exit`` handlers get the exit status: the last one
    registered runs first and closes (flushes) C's stdio, the next calls ``_exit(status)``. The functions
    are looked up in the parent: nothing is loaded in the child."""

    def __init__(self, on_exit: Any, exit_address: int, flush_address: int) -> None:
        self._on_exit = on_exit
        self._exit = exit_address
        self._flush = flush_address

    @classmethod
    def prepare(cls) -> _NativeExit | None:
        if not sys.platform.startswith("linux"):
            return None
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            on_exit = libc.on_exit
            on_exit.argtypes = (ctypes.c_void_p, ctypes.c_void_p)
            on_exit.restype = ctypes.c_int
            exit_address = ctypes.cast(libc._exit, ctypes.c_void_p).value
            flush_address = ctypes.cast(libc.fcloseall, ctypes.c_void_p).value
        except (AttributeError, OSError):  # not glibc: children may hang at exit as without npuprof
            return None
        if not exit_address or not flush_address:
            return None
        return cls(on_exit, exit_address, flush_address)

    def arm_in_child(self) -> None:
        self._on_exit(self._exit, None)
        self._on_exit(self._flush, None)


PR_SET_PDEATHSIG = 1


def _launcher_pid(run: dict[str, Any]) -> int | None:
    """The pid of the `npuprof run` that started this job: from the payload, the environment, or (only in
    a process that leads a process group, as the launcher's direct child does) the run record."""
    for value in (run.get("launcher_pid"), os.environ.get(ENV_LAUNCHER_PID)):
        if value:
            with contextlib.suppress(TypeError, ValueError):
                return int(value)
    if os.getpgrp() != os.getpid():
        return None
    return _launcher_pid_from_record(run)


def _launcher_pid_from_record(run: dict[str, Any]) -> int | None:
    """``launcher_pid`` of this run's npuprof_run*.json."""
    pid = (_run_record(run) or {}).get("launcher_pid")
    return pid if isinstance(pid, int) and pid > 0 else None


def _run_record(run: dict[str, Any]) -> dict[str, Any] | None:
    """This run's npuprof_run*.json (the newest few records only; links, FIFOs and other runs' records are
    passed over)."""
    import json

    output, run_id = run.get("output"), run.get("run_id")
    if not output or not run_id:
        return None
    candidates: list[tuple[float, str]] = []
    try:
        with os.scandir(output) as entries:
            for entry in entries:
                if entry.name.startswith("npuprof_run") and entry.name.endswith(".json"):
                    with contextlib.suppress(OSError):
                        if entry.is_file(follow_symlinks=False):
                            candidates.append((entry.stat(follow_symlinks=False).st_mtime, entry.name))
    except OSError:
        return None
    for _, name in sorted(candidates, reverse=True)[:8]:
        try:
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            with os.fdopen(os.open(os.path.join(output, name), flags), "rb") as handle:
                record = json.loads(handle.read(8 << 20))
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and record.get("run_id") == run_id:
            return record
    return None


def _set_parent_death_signal(signum: int) -> bool:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    ulong = ctypes.c_ulong
    return libc.prctl(PR_SET_PDEATHSIG, ulong(int(signum)), ulong(0), ulong(0), ulong(0)) == 0


def _process_runs(pid: int) -> bool:
    """Whether ``pid`` exists and has not ended (a zombie nobody reaped yet has ended)."""
    from npuprof.proc_stat import has_ended, state_of

    state = state_of(pid)
    if state is not None:
        return not has_ended(state)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _first_process_of_the_job(run: dict[str, Any]) -> bool:
    """This process is the job's first, the launcher's direct child: its bootstrap found the launcher its
    parent as it started, or the run record names it (``job_pid``: the launcher died before this image's
    bootstrap, `bash -c 'setup; exec python train.py'`, helper-160). Leading a process group is not enough
    to tell: a trainer the job starts in a group of its own (``subprocess.Popen(process_group=0)``,
    ``os.setpgid(0, 0)``) whose agent woke after the job's first process and npuprof run had ended took
    the launcher's end for its death and ended with SIGTERM (helper-158)."""
    pid = os.getpid()
    if os.getpgrp() != pid:
        return False
    # the pid with the process's start: a process of the run given the first one's pid once it had died
    # (the pids wrapped round), leading a group of its own, inherited the mark or reads the record's pid,
    # and trained on where it took itself for the first process and ended (helper-165)
    from npuprof.proc_stat import start_ticks

    started = start_ticks("self")
    if os.environ.get(ENV_JOB_PID) == f"{pid}:{'' if started is None else started}":
        return True
    record = _run_record(run) or {}
    return record.get("job_pid") == pid and record.get("job_start_ticks") == started


def _has_rank() -> bool:
    from npuprof.agent.ranks import current_rank

    return current_rank() is not None


def ready_line(script: str, rank: int | None, run_said: str) -> str:
    """The "agent ready" line of a process of ``rank`` (None: none known yet). A process without a rank reads
    "(rank 0, ...)", as it counts (README, --ranks), the "rank None" older readers of the line took for a
    rank named None; said before the brackets, where their pattern (run_summary._READY) reads any text, as
    the dynamic path's "rank 0 is not selected" line says it (dynamic_log.not_selected)."""
    if rank is None:
        from npuprof.agent.dynamic_log import RANKLESS

        return f"agent ready in {script}, {RANKLESS} (rank 0, {run_said})"
    return f"agent ready in {script} (rank {rank}, {run_said})"


def _attempt() -> str:
    """The ready line's ", attempt N" under torchrun (its TORCHELASTIC_RESTART_COUNT): the run's summary
    counts a rank's captures in each attempt apart."""
    from npuprof.results.handover import restart_count_from_env

    attempt = restart_count_from_env(os.environ)
    return "" if attempt is None else f", attempt {attempt}"


def _nothing_to_count(cfg: Any) -> str:
    """Why a process had no step boundary at all, for its line at exit."""
    if getattr(cfg, "step_on", None):
        return f"--step-on {cfg.step_on} never loaded in it"
    return "it made no optimizer"


OS_EXIT_ENDED = "the process ended by os._exit"  # what ended a process that left by os._exit


def _finalise_before(name: str, at_exit: Any, controller: Any) -> None:
    """Make ``os.<name>`` (``_exit``, ``execv``, ``execve``) finalise the capture in flight first
    (Agent._finalise_at_os_exit says when it may)."""
    real = getattr(os, name)
    if getattr(real, "npuprof_finalises", False):
        if getattr(real, "npuprof_pid", None) == os.getpid():
            return
        # wrapped in the process this one was forked from, for that process alone (it exits at once
        # here): wrapped anew for this one. A time window wraps as the agent wakes, so a forked child
        # that trained and left by os._exit lost its capture (helper-370)
        real = real.__wrapped__

    from npuprof.agent.frames import CAPTURE_CODE, PROFILER_UNSAFE, runs_code_of

    pid = os.getpid()
    finalising: list[bool] = []

    is_exec = name != "_exit"
    ended_by = f"the process replaced itself (os.{name})" if is_exec else OS_EXIT_ENDED

    def leave(*args: Any) -> Any:
        # An exec that will fail (no such file: the script may catch it and train on) keeps the capture;
        # its file is read only when there is something to finalise.
        if not finalising and os.getpid() == pid and (not is_exec or _exec_would_run(*args[:2])):
            finalising.append(True)
            if (
                threads.on_main_thread()
                and not controller.inside_a_decision()
                and not runs_code_of(sys._getframe(1), PROFILER_UNSAFE + CAPTURE_CODE)
            ):
                with contextlib.suppress(BaseException):
                    at_exit(ended_by)
            # --dynamic: its logs' last lines (file appends only: safe from any thread, anywhere)
            with contextlib.suppress(BaseException):
                _plans_last_lines(controller)
        try:
            return real(*args)
        except BaseException as exc:
            if finalising and is_exec:  # it failed after all: a later one finalises what records then
                with contextlib.suppress(BaseException):
                    controller.log.warning(f"os.{name} failed ({exc!r}) after finalising the capture")
            finalising.clear()
            raise

    leave.npuprof_finalises = True  # type: ignore[attr-defined]
    leave.npuprof_pid = pid  # type: ignore[attr-defined]
    leave.__wrapped__ = real  # type: ignore[attr-defined]
    leave.__name__ = leave.__qualname__ = name
    setattr(os, name, leave)


def _plans_last_lines(controller: Any, signalled: str = "") -> None:
    """--dynamic: the plan's last log lines (the capture's end, ``signalled``'s, "the process ends"), which
    status reads."""
    plan_exit = getattr(getattr(controller, "plan", None), "at_exit", None)
    if plan_exit is not None and signalled:
        plan_exit(signalled)
    elif plan_exit is not None:
        plan_exit()


def _exec_would_run(path: Any = None, argv: Any = ("x",)) -> bool:
    """Whether exec of ``path`` with ``argv`` gets past the failures that are known before it: an empty
    ``argv`` (ValueError), a missing or non-executable file, a ``#!`` interpreter that is not there (a
    CRLF line names ``/bin/sh\\r``), a file that is neither ELF nor ``#!`` (ENOEXEC, unless binfmt_misc
    has handlers that may take it). An open descriptor (os.execve's fd form) and a file it may not read
    are taken as runnable."""
    if isinstance(path, int):
        return True
    try:
        if not argv or not argv[0]:
            return False
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            return False
        with open(path, "rb") as handle:
            head = handle.read(256)
    except PermissionError:
        return True
    except (TypeError, ValueError, OSError):
        return False
    if head.startswith(b"\x7fELF"):
        return True
    if head.startswith(b"#!"):
        line = head[2:].split(b"\n", 1)[0].lstrip(b" \t")
        interpreter = line.replace(b"\t", b" ").split(b" ", 1)[0]  # the kernel splits on blanks only
        found = os.fsdecode(interpreter)
        return bool(interpreter) and os.path.isfile(found) and os.access(found, os.X_OK)
    return _binfmt_handlers()


def _binfmt_handlers() -> bool:
    """Whether binfmt_misc has handlers registered (for other formats than ELF and ``#!``)."""
    try:
        return any(name not in ("register", "status") for name in os.listdir("/proc/sys/fs/binfmt_misc"))
    except OSError:
        return False
