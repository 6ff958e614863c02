"""Step boundaries: every Optimizer.step (any subclass, GradScaler.step, closures) by default,
or the return of a user-named function with --step-on MODULE:QUALNAME."""

from __future__ import annotations

import functools
from typing import Any

from npuprof.agent.controller import CaptureController
from npuprof.agent.log import AgentLog


class OptimizerSteps:
    """Counts iterations of the first optimizer that steps (so GANs don't count double).

    The boundary is taken once ``optimizer.step()`` has returned, outside torch's ``Optimizer.step#``
    range: stepping the profiler from inside the post-hook (within that range) crashed libtorch in
    some runs with ``--warmup 0`` (docs/architecture.md, "Step boundaries"). The post-hook only marks
    the boundary; a thin wrapper around the class's ``step`` takes it on return."""

    def __init__(self, controller: CaptureController, log: AgentLog) -> None:
        self.controller = controller
        self.log = log
        self.primary: int | None = None
        self.in_scaler = 0
        self.pending = False

    def install(self) -> None:
        import torch.optim.optimizer as optimizer_module

        optimizer_module.register_optimizer_step_post_hook(self._post_hook)
        base = optimizer_module.Optimizer
        original_init = base.__init__
        steps = self

        @functools.wraps(original_init)
        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            original_init(self, *args, **kwargs)
            try:
                steps._wrap_class_step(type(self))
            except Exception as exc:
                steps.log.warning(f"{type(self).__name__}.step not wrapped: {exc!r}")
            if not steps.controller.armed:
                steps._arm()

        base.__init__ = init  # type: ignore[method-assign]

    def _wrap_class_step(self, cls: type) -> None:
        step = cls.step  # type: ignore[attr-defined]
        if getattr(step, "__npuprof_step__", False):
            return
        steps = self

        @functools.wraps(step)  # keeps torch's "hooked" mark, so torch does not wrap it again
        def stepped(*args: Any, **kwargs: Any) -> Any:
            result = step(*args, **kwargs)
            if steps.pending:
                steps.pending = False
                steps.controller.on_boundary()
            return result

        stepped.__npuprof_step__ = True  # type: ignore[attr-defined]
        cls.step = stepped  # type: ignore[attr-defined]

    def _arm(self) -> None:
        try:
            self._wrap_grad_scaler()
        except Exception as exc:
            self.log.warning(f"GradScaler.step not hooked: {exc!r}")
        self.controller.arm()

    def _counts(self, optimizer: Any) -> bool:
        key = id(optimizer)
        if self.primary is None:
            self.primary = key
        return key == self.primary

    def _post_hook(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self.in_scaler or not self._counts(optimizer):
            return
        if getattr(type(optimizer).step, "__npuprof_step__", False):
            self.pending = True  # taken when step() returns
        else:
            self.controller.on_boundary()  # a step this module could not wrap: count it here

    def _wrap_grad_scaler(self) -> None:
        from torch.amp.grad_scaler import GradScaler

        original = GradScaler.step
        if getattr(original, "__npuprof__", False):
            return
        steps = self

        @functools.wraps(original)
        def step(scaler: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
            steps.in_scaler += 1
            try:
                result = original(scaler, optimizer, *args, **kwargs)
            finally:
                steps.in_scaler -= 1
            # Counted even when the scaler skipped optimizer.step (inf/nan gradients): it is still a step.
            if steps._counts(optimizer):
                steps.controller.on_boundary()
            return result

        step.__npuprof__ = True  # type: ignore[attr-defined]
        GradScaler.step = step  # type: ignore[method-assign]


def wrap_step_function(module: Any, qualname: str, controller: CaptureController, log: AgentLog) -> bool:
    """Make each return of ``module.qualname`` a step boundary. False when it cannot be found."""
    *owner_path, attr = qualname.split(".")
    owner: Any = module
    for part in owner_path:
        owner = getattr(owner, part, None)
        if owner is None:
            return False
    raw = owner.__dict__.get(attr) if hasattr(owner, "__dict__") else None
    if raw is None:
        raw = getattr(owner, attr, None)
    if raw is None:
        return False
    kind = type(raw) if isinstance(raw, staticmethod | classmethod) else None
    func = raw.__func__ if kind is not None else raw
    if not callable(func):
        return False

    @functools.wraps(func)
    def stepped(*args: Any, **kwargs: Any) -> Any:
        if not controller.armed:
            controller.arm()
        try:
            return func(*args, **kwargs)
        finally:
            controller.on_boundary()

    setattr(owner, attr, kind(stepped) if kind is not None else stepped)
    log.info(f"steps counted at each return of {module.__name__}:{qualname}")
    return True
