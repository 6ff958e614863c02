"""The training script's own torch profilers: npuprof steps aside while one runs.

torch allows one profiler at a time; a second one started while another is enabled, or stepped into its
recording phase, fails with "Profiler is already enabled" and can crash libtorch. The flag torch keeps
(``torch.autograd.profiler._is_profiler_enabled``) is only set while a profiler *records*: a scheduled
profiler in its wait or warm-up phase does not set it, so it cannot tell npuprof to stay away. Here the
start and stop of every torch profiler object are followed instead (``torch.profiler.profile`` and
``_KinetoProfile``, as context managers or by ``start()``/``stop()``; ``torch.autograd.profiler.profile``
as a context manager; torch_npu's ``torch_npu.profiler.profile`` and ``_KinetoProfile``, which are torch_npu's
own classes, not torch's: its profiler neither goes through torch's nor sets torch's flag, and its
``dynamic_profile`` opens a ``profile`` of its own), npuprof's own objects excepted.

The policy: when the script starts a profiler, a capture of ours in flight is finished there (what it
recorded is kept); while any of the script's profilers runs, npuprof opens none (one warning); once they
have all stopped, npuprof resumes at its next capture window. A profiler the script starts and never
stops keeps npuprof off until it is garbage-collected (and while torch still says one is enabled).
"""

from __future__ import annotations

import functools
import sys
import weakref
from typing import Any

from npuprof.agent.log import AgentLog
from npuprof.results.logfile import OWN_PROFILER_KEPT_OUT, OWN_PROFILER_STOPPED

# npuprof's own profiler objects, and the script's profilers that have started and not stopped.
_ours: weakref.WeakSet[Any] = weakref.WeakSet()
_running: weakref.WeakSet[Any] = weakref.WeakSet()
_installed: dict[str, Any] = {}

WARNING = "the training script runs its own profiler; npuprof steps aside while it runs"


def mark_ours(prof: Any) -> None:
    """A profiler object of npuprof's: its start and stop are not the script's."""
    try:
        _ours.add(prof)
    except TypeError:  # an object without weak references: it cannot be told apart, nor mistaken
        pass


def running() -> bool:
    """Whether one of the script's profilers has started and not stopped."""
    return len(_running) > 0


def report(log: AgentLog, step: int) -> None:
    log.warn_once("user-profiler", WARNING)
    log.info(f"no capture at step {step}{OWN_PROFILER_KEPT_OUT}")


def install(controller: Any, log: AgentLog) -> bool:
    """Follow the script's torch profilers (once per process); False when torch is not loaded yet.

    Never imports anything of torch's: called when ``torch.optim.optimizer`` loads (in the middle of
    ``import torch``, before ``torch.profiler`` exists), the classes of ``torch.profiler`` are wrapped as
    soon as their module has loaded."""
    if "controller" in _installed:
        return True
    autograd_profiler = sys.modules.get("torch.autograd.profiler")
    if autograd_profiler is None:
        return False
    _installed["controller"] = controller
    _installed["log"] = log
    _wrap_classes(autograd_profiler, {"profile": (("__enter__",), ("__exit__",))})
    for name in FOLLOWED:
        _follow_module(name)
    return True


PROFILER_MODULE = "torch.profiler.profiler"
TORCH_NPU_PROFILER_MODULE = "torch_npu.profiler.profiler"
# the modules whose profiler classes are followed, each class with its start and stop methods (torch_npu's
# ``profile.__enter__`` / ``__exit__`` / ``__del__`` and its dynamic_profile go through them)
_START_STOP = {"_KinetoProfile": (("start",), ("stop",)), "profile": (("start",), ("stop",))}
FOLLOWED: dict[str, dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    PROFILER_MODULE: _START_STOP,
    TORCH_NPU_PROFILER_MODULE: _START_STOP,
}


def _follow_module(name: str) -> None:
    """Wrap the classes ``FOLLOWED[name]`` names now, or once the module has loaded (torch_npu's is imported
    after torch, if at all)."""
    module = sys.modules.get(name)
    if module is not None:
        _wrap_module(module, name)
    else:
        sys.meta_path.insert(0, _WhenLoaded(name, functools.partial(_wrap_module, name=name)))


def _wrap_module(module: Any, name: str) -> None:
    _wrap_classes(module, FOLLOWED[name])


def _wrap_classes(module: Any, methods: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]) -> None:
    log: AgentLog = _installed["log"]
    for class_name, (starts, stops) in methods.items():
        cls = getattr(module, class_name, None)
        if not isinstance(cls, type):
            log.info(f"{module.__name__}.{class_name} not found; not followed")
            continue
        for name in starts:
            _wrap(cls, name, _started, log)
        for name in stops:
            _wrap(cls, name, _stopped, log)


class _WhenLoaded:
    """A one-shot meta-path finder: run ``then(module)`` once the module ``name`` has executed."""

    def __init__(self, name: str, then: Any) -> None:
        self.name = name
        self.then = then
        self.busy = False

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != self.name or self.busy:
            return None
        self.busy = True
        try:
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            for finder in sys.meta_path:
                spec = finder.find_spec(name, path, target) if hasattr(finder, "find_spec") else None
                if spec is not None:
                    break
            else:
                return None
        finally:
            self.busy = False
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original_exec = loader.exec_module
        then = self.then

        def exec_module(module: Any) -> None:
            original_exec(module)
            try:
                then(module)
            except Exception as exc:
                _installed["log"].warning(f"the script's own profilers are not followed: {exc!r}")

        try:
            loader.exec_module = exec_module
        except Exception:
            pass
        return spec


def _wrap(cls: type, name: str, note: Any, log: AgentLog) -> None:
    original = cls.__dict__.get(name)
    if original is None or getattr(original, "__npuprof_user_profiler__", False):
        return
    before = note is _started

    @functools.wraps(original)
    def wrapper(prof: Any, *args: Any, **kwargs: Any) -> Any:
        if before:  # before torch enables it: ours must be out of the way first
            _note(note, prof)
            try:
                return original(prof, *args, **kwargs)
            except BaseException:
                _running.discard(prof)  # it did not start
                raise
        try:
            return original(prof, *args, **kwargs)
        finally:
            _note(note, prof)

    wrapper.__npuprof_user_profiler__ = True  # type: ignore[attr-defined]
    try:
        setattr(cls, name, wrapper)
    except Exception as exc:
        log.warning(f"{cls.__name__}.{name} not followed: {exc!r}")


def _note(note: Any, prof: Any) -> None:
    try:
        if prof not in _ours:
            note(prof)
    except Exception as exc:  # never in the script's way
        log = _installed.get("log")
        if log is not None:
            log.warning(f"following the script's profiler failed: {exc!r}")


def _started(prof: Any) -> None:
    if getattr(prof, "enabled", True) is False:  # torch.autograd.profiler.profile(enabled=False)
        return
    _running.add(prof)
    log: AgentLog = _installed["log"]
    log.warn_once("user-profiler", f"{WARNING} (started at {_started_where()})")
    controller = _installed["controller"]
    if controller.backend is not None:
        controller.backend.script_profiler_started()
    if controller.prof is not None:
        # Ours must stop before the script's starts; only its own thread can stop it (else it is asked to).
        controller.finish_early("the training script started its own profiler")


def _started_where() -> str:
    """The first caller outside torch and npuprof: the script's line, or the framework's (Lightning's
    ``Trainer(profiler="pytorch")``, accelerate's ``ProfileKwargs``), which a user did not call a profiler."""
    import os

    skipped = [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
    for package in ("torch", "torch_npu"):  # torch_npu's profile.__enter__ and @no_exception_func too
        module = sys.modules.get(package)
        if module is not None and getattr(module, "__file__", None):
            skipped.append(os.path.dirname(os.path.abspath(module.__file__)))
    skipped = [root + os.sep for root in skipped]
    frame = sys._getframe(1)
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not path.startswith(tuple(skipped)):
            shown = path.split(f"{os.sep}site-packages{os.sep}", 1)[-1]
            return f"{shown}:{frame.f_lineno}, in {frame.f_code.co_name}"
        frame = frame.f_back
    return "an unknown place"


def _stopped(prof: Any) -> None:
    if prof in _running:
        _running.discard(prof)
        if not _running:
            _installed["log"].info(OWN_PROFILER_STOPPED)
