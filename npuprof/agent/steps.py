"""Step boundaries: every Optimizer.step (any subclass, GradScaler.step, closures) by default,
or the return of a user-named function with --step-on MODULE:QUALNAME."""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import sys
import weakref
from _thread import get_ident
from collections.abc import Callable
from sys import _getframe
from types import CodeType
from typing import Any

from npuprof.agent import recursion_limit
from npuprof.agent.controller import CaptureController
from npuprof.agent.log import AgentLog, raised_by_a_signal_handler, report_failure

SWITCH_AFTER = 3  # steps of another optimizer, the primary not stepping meanwhile, that make it primary
SWITCHES_LOGGED = 10  # changes of the primary that the log names (an optimizer made at each iteration)


class OptimizerSteps:
    """Counts iterations of one optimizer, the *primary* (so GANs don't count double).

    The primary is the first optimizer that steps, held by a weak reference (an id() can be reused). When
    it is gone, the next optimizer that steps becomes primary; when another optimizer steps
    ``SWITCH_AFTER`` times while the primary does not step once (a learning-rate finder's optimizer given
    up, an optimizer re-created after some epochs, a new pair of them), that one becomes primary. Both
    are logged. Optimizers that alternate with the primary (a GAN's) never switch.

    Only the thread that drives the controller counts (``CaptureController.driver``); steps taken on other
    threads are passed over here as they are there.

    The boundary is taken once ``optimizer.step()`` has returned, outside torch's ``Optimizer.step#``
    range: stepping the profiler from inside the post-hook (within that range) crashed libtorch in
    some runs with ``--warmup 0`` (docs/architecture.md, "Step boundaries"). The post-hook only marks
    the boundary; a thin wrapper around the class's ``step`` takes it on return, from the outermost
    wrapped ``step`` only: a subclass's ``step`` that calls ``super().step()`` counts once."""

    def __init__(self, controller: CaptureController, log: AgentLog) -> None:
        self.controller = controller
        self.log = log
        self._primary: Any = None  # a weak reference (or, for an object without one, a holder)
        # Steps of each other optimizer since the primary last stepped (weakly), and the most of them.
        self._others: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self._in_a_row = 0
        # The primary that another one took over from (weakly), and the step then: its stepping again means
        # it was not given up but steps less often (a WGAN's generator): said once, on stderr too.
        self._displaced: Any = None
        self._displaced_at = 0
        self._displaced_in_step = False  # the take-over left out its partner's step: numbers are iterations
        # Every optimizer taken over from (weakly), and the step of the first take-over: one of them stepping
        # again, fewer than SWITCH_AFTER times, between two take-overs (a generator stepping once before two
        # critics that take over from each other in turn) alternates too (_turn_between_take_overs).
        self._taken_from: weakref.WeakSet[Any] = weakref.WeakSet()
        self._first_taken_at = 0
        self._said_alternating = False
        # Each other optimizer's (weakly) step at its last step() and the steps between its last two: the
        # primary stepping as many times, several, between each two of them (a WGAN's critic stepping first,
        # its loop before each generator step) makes several steps an iteration: said once (_less_often)
        self._other_steps: weakref.WeakKeyDictionary[Any, tuple[int, int]] = weakref.WeakKeyDictionary()
        self._said_less_often = False
        # Each other optimizer (weakly) that stepped several times between the primary's last two steps,
        # how many, and the step then: as many again by the primary's next step is said once (_more_often)
        self._between: weakref.WeakKeyDictionary[Any, tuple[int, int]] = weakref.WeakKeyDictionary()
        self._said_more_often = False
        # Each other optimizer (weakly) that stepped once between two steps of the primary, after it in the
        # iteration (a GAN's generator): its first step after the primary's last is in that iteration
        self._partners: weakref.WeakSet[Any] = weakref.WeakSet()
        self._switches = 0  # changes of the primary after the first (logged up to SWITCHES_LOGGED)
        self.in_scaler = 0
        self.pending = 0  # the thread id whose primary step is to be counted when its step() returns
        self._inside: set[int] = set()  # threads inside a wrapped step() (nesting)
        self._compiling: Callable[[], bool] = bool  # torch.compile's test, once an optimizer exists

    @property
    def primary(self) -> Any:
        return None if self._primary is None else self._primary()

    @primary.setter
    def primary(self, optimizer: Any) -> None:
        self._primary = None if optimizer is None else _weak(optimizer)
        self._others.clear()
        self._partners.clear()
        self._in_a_row = 0

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
        _follow_user_profilers(self.controller, self.log)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._forget_threads)

    def _forget_threads(self) -> None:
        """A forked child has one thread; what other threads were doing in the parent is not its own."""
        self._inside.clear()
        self.pending = 0
        self.in_scaler = 0

    def _wrap_class_step(self, cls: type) -> None:
        if self._compiling is bool:  # torch is imported whole once an optimizer exists (not at install)
            self._compiling = _is_compiling()
        step = cls.step  # type: ignore[attr-defined]
        if getattr(step, "__npuprof_step__", False):
            return
        steps = self
        inside = self._inside
        controller = self.controller

        compiling = self._compiling

        @functools.wraps(step)  # keeps torch's "hooked" mark, so torch does not wrap it again
        def stepped(*args: Any, **kwargs: Any) -> Any:
            if compiling():  # traced by torch.compile: only the step itself (see _is_compiling)
                return step(*args, **kwargs)
            me = get_ident()
            if me in inside:  # a step() inside a step(): the outermost one counts
                return step(*args, **kwargs)
            inside.add(me)
            try:
                result = step(*args, **kwargs)
            except BaseException as exc:
                _off_the_traceback(exc)
                raise
            finally:
                inside.discard(me)
            if steps.pending == me:
                steps.pending = 0
                controller.on_boundary_of(me)
            return result

        stepped.__npuprof_step__ = True  # type: ignore[attr-defined]
        cls.step = stepped  # type: ignore[attr-defined]

    def _arm(self) -> None:
        """Training starts: at the first optimizer's making, or in a child forked after it (os.fork,
        multiprocessing's fork: its controller starts unarmed, docs/architecture.md "Safety") at
        its first step of that optimizer, as --step-on's function arms at its first call. Unarmed, such a
        child said nothing of its steps at its end (the run's summary: "the most steps a process counted:
        0") and, with --dynamic, never started its watcher."""
        try:
            self._wrap_grad_scaler()
        except Exception as exc:
            self.log.warning(f"GradScaler.step not hooked: {exc!r}")
        _follow_user_profilers(self.controller, self.log)
        self.controller.arm()

    def _counts(self, optimizer: Any, me: int) -> bool:
        """Whether this step of ``optimizer`` on thread ``me`` is a step boundary (see the class). The
        fast path (the primary, on the driving thread) is a few comparisons."""
        driver = self.controller.driver
        if driver is not None and driver != me:
            if not self.controller.foreign_boundary():
                return False  # another thread drives (unless this one just took over: controller.py)
            self._thread_took_over(optimizer)
        primary = self._primary
        if primary is not None and optimizer is primary():
            if self._in_a_row:
                self._primary_stepped()
            return True
        return self._another(optimizer)

    def _thread_took_over(self, optimizer: Any) -> None:
        """This thread took the steps over from a driving one that waits for it (its steps before counted
        by the controller): its optimizer counts from now on, the one that counted being the waiting
        thread's. A pool's worker training a model of its own took 3 more steps to take over as an
        optimizer, a window in them lost ("steps 4-5 of its window passed uncounted")."""
        primary = self.primary
        if primary is not None and optimizer is not primary:
            self._switch(optimizer, "the thread it steps on took over counting the steps")

    def _primary_stepped(self) -> None:
        if self._displaced is not None:
            self._alternating()
        if not self._said_more_often and (self._in_a_row > 1 or self._between):
            self._more_often()
        self._note_partners()
        self._others.clear()
        self._in_a_row = 0

    def _note_partners(self) -> None:
        if self._partners:  # known already: walking _others cost a GAN ~1.5 us an iteration
            return
        for other, count in self._others.items():
            if count == 1:
                self._partners.add(other)

    def _another(self, optimizer: Any) -> bool:
        """A step of an optimizer that is not the primary: it may become the primary."""
        primary = self._primary() if self._primary is not None else None
        if primary is None:
            why = "the first optimizer to step" if self._primary is None else "the previous one is gone"
            self._switch(optimizer, why)
            return True
        try:
            count = self._others.get(optimizer, 0) + 1
            self._others[optimizer] = count
        except TypeError:  # no weak reference to it: it only becomes primary once the primary is gone
            return False
        self._in_a_row = max(self._in_a_row, count)
        if count < SWITCH_AFTER:
            if not self._said_less_often:
                self._less_often(optimizer, primary)
            return False
        # Its earlier steps were not boundaries: counted now (unless a capture records: its step holds
        # them), so that the step numbers stay the job's iterations. A partner's first one was in the
        # primary's last iteration, counted then (a GAN's generator, its discriminator frozen: each step N
        # was iteration N-1 from then on).
        partner = optimizer in self._partners
        earlier = count - 1 - partner
        name = type(optimizer).__name__
        if self._taken_from and not self._said_alternating:
            self._turn_between_take_overs(optimizer, primary)
        if not self._said_alternating and optimizer in self._taken_from:
            self._taken_back(optimizer, primary)
        if not self._taken_from:
            self._first_taken_at = self.controller.step
        with contextlib.suppress(TypeError):  # no weak reference to it: not followed
            self._taken_from.add(primary)
        self._displaced_at = self.controller.step  # the first step that ends at one of its steps
        counted = self.controller.steps_missed(earlier, f"the optimizer {name} took over counting")
        if not counted:
            self.controller.note_for_capture(
                f"step {self.controller.step} holds {count} steps of the optimizer {name}, which took over "
                "counting steps then"
            )
        self._displaced = _weak(primary)
        self._displaced_in_step = partner
        self._switch(
            optimizer,
            f"it stepped {count} times, the previous primary {type(primary).__name__} not once meanwhile; "
            + (
                f"its {earlier} earlier step(s) are counted too"
                + (
                    f" (not the one before them, in the iteration of {type(primary).__name__}'s last step, "
                    "which it stepped after in each iteration)"
                    if partner
                    else ""
                )
                if counted
                else f"a capture records: its step {self.controller.step} holds {count} of them, "
                f"the {earlier} earlier counted once it ends (at the next step boundary during a warm-up)"
            ),
        )
        return True

    def _less_often(self, optimizer: Any, primary: Any) -> None:
        """``optimizer`` steps and is not the primary: when the primary stepped the same number of times,
        several, between each of its last three steps, each step() of the primary is a step, several per
        iteration of a job whose iteration steps both: a WGAN whose critic's loop comes before the generator's
        step counted 5 steps an iteration without a word, where the generator stepping first is said
        (``_alternating``) (helper-205). Said once, on stderr too, hedged: an optimizer stepped every N
        iterations (a second model's) makes the same pattern, its steps the iterations."""
        now = self.controller.step
        last, gap = self._other_steps.get(optimizer, (-1, 0))
        self._other_steps[optimizer] = (now, now - last if last >= 0 else 0)
        if last < 0 or now - last < 2 or now - last != gap or self._said_alternating:
            return
        self._said_less_often = True
        self.log.warn_once(
            "optimizer-steps-more-often",
            f"the optimizer {_described(primary)} counts steps and steps {gap} times to each step() of "
            f"{_described(optimizer)} (steps {last - gap}-{now}): each of its step() is a step; if one "
            f"iteration of your job runs those {gap} (a WGAN's critic loop before its generator's step), it "
            "holds as many steps: to count iterations, name the function of one iteration with --step-on "
            "MODULE:QUALNAME",
        )

    def _more_often(self) -> None:
        """The primary steps: another optimizer that stepped as many times, several (fewer than
        ``SWITCH_AFTER``), since each of the primary's last two steps makes each step hold that many of its
        step(): a GAN whose discriminator, stepping first, steps every other iteration counted one step per
        two iterations without a word (the generator's two steps in a row never took over). Said once, on
        stderr too, hedged as ``_less_often`` is: a job whose iteration steps the other twice (a generator
        stepped twice an iteration) makes the same pattern, its steps the iterations."""
        before, self._between = self._between, weakref.WeakKeyDictionary()
        now = self.controller.step
        for optimizer, count in list(self._others.items()):
            if count < 2:
                continue
            if before.get(optimizer) == (count, now - 1) and not self._said_alternating:
                self._said_more_often = True
                self._say_more_often(optimizer, count)
                return
            self._between[optimizer] = (count, now)

    def _say_more_often(self, optimizer: Any, count: int) -> None:
        now, primary, name = self.controller.step, self.primary, type(optimizer).__name__
        self.log.warn_once(
            "optimizer-steps-less-often",
            f"the optimizer {_described(primary)} counts steps and {_described(optimizer)} steps {count} "
            f"times to each of its step() (steps {now - 1}-{now}): each step holds {count} step() of {name}; "
            f"if one iteration of your job steps {name} once ({type(primary).__name__} stepped every "
            f"{count} iterations: a discriminator's), a step holds {count} iterations: to count iterations, "
            "name the function of one iteration with --step-on MODULE:QUALNAME",
        )

    def _alternating(self) -> None:
        """The primary steps again and the optimizer it took over from stepped meanwhile (fewer than
        ``SWITCH_AFTER`` times): that one was not given up but steps less often (a WGAN's generator
        stepping before several critic steps), so the steps are this one's since the take-over, several
        per iteration of the job. Said once, on stderr too; the counting goes on as it is."""
        old = self._displaced()
        if old is None:  # gone: it was given up
            self._displaced = None
            return
        if old not in self._others:
            return
        new, at = _described(self.primary), self._displaced_at
        self._say_alternating(
            f"the optimizer {_described(old)} still steps after {new} took over counting steps (at step "
            f"{at}, when it stepped {SWITCH_AFTER} times in a row): the two alternate, so from step {at} on "
            f"a step is one step() of {new}",
            numbered_ahead=not self._displaced_in_step,
        )

    def _turn_between_take_overs(self, optimizer: Any, primary: Any) -> None:
        """``optimizer`` takes over from ``primary``, and an optimizer taken over from earlier stepped since
        ``primary`` last stepped, fewer than ``SWITCH_AFTER`` times: it took a turn, not given up, while the
        others took over in turn (a WGAN's generator stepping once before two critics' steps, each critic
        taking over from the other: ``_alternating`` sees no step of the generator between two steps of
        one primary). Said once, as ``_alternating`` says it."""
        turn = next(
            (
                o
                for o, n in self._others.items()
                if n < SWITCH_AFTER and o is not optimizer and o in self._taken_from
            ),
            None,
        )
        if turn is None:
            return
        at = self._first_taken_at
        self._say_alternating(
            f"the optimizer {_described(turn)} still steps while {_described(optimizer)} and "
            f"{_described(primary)} take over counting steps from each other (from step {at}, each when "
            f"it stepped {SWITCH_AFTER} times in a row): the optimizers alternate, so from step {at} on a "
            "step is one step() of the one counting then"
        )

    def _taken_back(self, optimizer: Any, primary: Any) -> None:
        """``optimizer`` takes counting back from ``primary``, which took it over: it was not given up, and
        ``primary`` may have stepped in a loop of its own between its iterations (an evaluation's linear
        probe, a head fitted every N steps), each of whose steps counted as one of the job's; or the job
        trains in stages that come back to an optimizer. Said once, on stderr too, as a condition: nothing
        but INFO lines of npuprof.log said so (helper-157)."""
        since, now = self._displaced_at, self.controller.step
        self._said_alternating = True
        self.log.warn_once(
            "optimizer-takes-back",
            f"the optimizer {_described(optimizer)} counts steps again at step {now}, after "
            f"{_described(primary)} took over counting from it at step {since}: steps {since}-{now - 1} "
            f"were each one step() of {type(primary).__name__}. If it ran a loop of its own between "
            "iterations (an evaluation's probe), those steps are not the job's iterations and a capture of "
            "them records that loop: name the function of one iteration with --step-on MODULE:QUALNAME to "
            "count iterations (training in stages, each with its own optimizer, is counted right)",
        )

    def _say_alternating(self, what: str, numbered_ahead: bool = True) -> None:
        """Once a run: the optimizers alternate (``_alternating``, ``_turn_between_take_overs``). Hedged:
        an optimizer stepped once an epoch, before the epoch's batches, or a discriminator trained every
        few iterations, before its generator, makes the same pattern as a WGAN's generator stepped before
        its critic's loop, and its steps are the iterations ("several per iteration of the job" was said of
        such a job's right count), each numbered one ahead where the other's first step and the iteration it
        began were counted apart (not when the take-over knew them one iteration: ``_partners``)."""
        self._displaced = None
        self._said_alternating = True
        numbered = ", numbered one ahead of it" if numbered_ahead else ""
        self.log.warn_once(
            "optimizer-alternates",
            f"{what}, several per iteration of a job whose iteration steps both (a WGAN's generator and its "
            "critic's loop); when the other steps less often (once an epoch, a discriminator trained every "
            f"few iterations), a step is one iteration{numbered}: "
            "to count iterations, name the function of one iteration with --step-on MODULE:QUALNAME",
        )

    def _switch(self, optimizer: Any, why: str) -> None:
        first = self._primary is None
        self.primary = optimizer
        name = type(optimizer).__name__
        if first:
            self.log.info(f"steps are counted on the optimizer {name} ({why})")
            return
        self._switches += 1
        if self._switches < SWITCHES_LOGGED:
            self.log.info(f"the optimizer {name} now counts steps ({why})")
        elif self._switches == SWITCHES_LOGGED:  # an optimizer made anew at each iteration: not a line each
            self.log.info(
                f"the optimizer {name} now counts steps ({why}); later changes of the optimizer that counts "
                "steps are not logged"
            )

    def _post_hook(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        try:  # npuprof's own failure never reaches the script's optimizer.step() (free when none)
            if self._compiling():  # torch.compile traces the step's hooks too
                return
            controller = self.controller
            if not controller.armed and controller.enabled:  # checked here: a call less on every step
                self._arm()  # a forked child stepping the optimizer its parent made: see _arm (not one
                # forked while a capture ran, which records nothing: entry.Agent._drop_in_child)
            if self.in_scaler:
                return
            me = get_ident()
            primary = self._primary
            if primary is not None and optimizer is primary() and self.controller.driver in (me, None):
                if self._in_a_row:  # the fast path, inline: the primary, on the driving thread
                    self._primary_stepped()
            elif not self._counts(optimizer, me):
                return
            if getattr(type(optimizer).step, "__npuprof_step__", False):
                self.pending = me  # taken when the outermost step() returns
            else:
                self.controller.on_boundary()  # a step this module could not wrap: count it here
        except Exception as exc:
            if raised_by_a_signal_handler(exc):
                raise  # the script's own exception (its signal handler ran inside our code): it is theirs
            report_failure("the optimizer step hook", exc, self.log)

    def _wrap_grad_scaler(self) -> None:
        from torch.amp.grad_scaler import GradScaler

        original = GradScaler.step
        if getattr(original, "__npuprof__", False):
            return
        steps = self

        @functools.wraps(original)
        def step(scaler: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
            me = get_ident()
            driver = steps.controller.driver
            if driver is not None and driver != me:
                return original(scaler, optimizer, *args, **kwargs)  # another thread drives
            steps.in_scaler += 1
            try:
                result = original(scaler, optimizer, *args, **kwargs)
            finally:
                steps.in_scaler -= 1
            # Counted even when the scaler skipped optimizer.step (inf/nan gradients): it is still a step.
            if steps._counts(optimizer, me):
                steps.controller.on_boundary()
            return result

        step.__npuprof__ = True  # type: ignore[attr-defined]
        GradScaler.step = step  # type: ignore[method-assign]


def _described(optimizer: Any) -> str:
    """An optimizer's class and parameter count (two optimizers of one class are told apart)."""
    name = type(optimizer).__name__
    try:
        count = sum(p.numel() for group in optimizer.param_groups for p in group["params"])
    except Exception:  # not a torch optimizer's param_groups
        return name
    return f"{name} ({count:,} parameters)"


def _weak(obj: Any) -> Any:
    try:
        return weakref.ref(obj)
    except TypeError:  # no weak references (__slots__ without __weakref__): held, as it would be anyway
        return lambda: obj


def _follow_user_profilers(controller: CaptureController, log: AgentLog) -> None:
    try:
        from npuprof.agent import user_profiler

        user_profiler.install(controller, log)
    except Exception as exc:
        log.warning(f"the script's own profilers are not followed: {exc!r}")


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
    refusal = _not_a_step_function(func)
    if refusal:
        log.warn_once("step-on-kind", f"--step-on {module.__name__}:{qualname}: {refusal}; no steps counted")
        return True  # found: the end of the run does not report it missing

    codes: list[Any] = []  # the wrapper's and arm's code objects (no function: no reference cycle)

    def arm() -> None:  # at the first call's start: step 0 is that call, whole
        _run_by_dynamo_as_python(*codes, controller)  # torch imported after the function's definition
        _follow_user_profilers(controller, log)
        controller.arm(at_a_step_start=True)

    if inspect.iscoroutinefunction(func):  # the boundary comes when the awaited call returns
        # the closure's own: a coroutine the collector closes at the interpreter's teardown finds this
        # module's globals (sys, _off_the_traceback) and the controller's set to None
        is_finalizing = sys.is_finalizing

        @functools.wraps(func)
        async def stepped_async(*args: Any, **kwargs: Any) -> Any:
            if _traced():  # by torch.compile: only the function itself (see _traced)
                return await func(*args, **kwargs)
            if not controller.armed:  # checked here: a call less on every step
                arm()
            try:
                return await func(*args, **kwargs)
            except GeneratorExit:  # closed before its end: no traceback is shown
                raise
            except BaseException as exc:
                _off_the_traceback(exc)
                raise
            finally:
                if not is_finalizing():
                    controller.on_boundary()

        stepped: Callable[..., Any] = stepped_async
    elif inspect.isgeneratorfunction(func):  # ... one step an item it yields (see _items_as_steps)

        @functools.wraps(func)
        def stepped_generator(*args: Any, **kwargs: Any) -> Any:
            if _traced():  # by torch.compile: only the function itself (see _traced)
                return (yield from func(*args, **kwargs))
            if not controller.armed:  # checked here: a call less on every step
                arm()
            try:
                return (yield from _items_as_steps(func(*args, **kwargs), controller))
            except GeneratorExit:  # closed: no traceback is shown (and at the interpreter's teardown, this
                raise  # module's globals, _off_the_traceback among them, are None)
            except BaseException as exc:
                _off_the_traceback(exc)
                raise

        stepped = stepped_generator
    else:
        own_code = _own_code(func)  # a call from it is recursion (a direct one: one look at the caller)

        @functools.wraps(func)
        def stepped_call(*args: Any, **kwargs: Any) -> Any:
            if _traced():  # by torch.compile: only the function itself (see _traced)
                return func(*args, **kwargs)
            if not controller.armed:  # checked here: a call less on every step
                arm()
            try:
                recursive = _getframe(1).f_code is own_code
            except ValueError:  # no Python frame below (the first call of a thread started from C)
                recursive = False
            if recursive:  # this wrapper's frame is paid for: see _recursion_limit_by
                added = _recursion_limit_by(1)
                try:
                    return func(*args, **kwargs)
                except BaseException as exc:
                    _off_the_traceback(exc)
                    raise
                finally:
                    controller.on_boundary()
                    if added:
                        recursion_limit.take_back(1)
            try:
                return func(*args, **kwargs)
            except BaseException as exc:
                _off_the_traceback(exc)
                raise
            finally:
                controller.on_boundary()

        stepped = stepped_call
    codes.extend((stepped.__code__, arm.__code__))
    _run_by_dynamo_as_python(*codes, controller)
    stepped.__npuprof_stepped__ = True  # type: ignore[attr-defined]
    # freed with the wrapper when the script binds the name to another function: that one is wrapped then
    stepped.__npuprof_rebound__ = _Rebound(module, qualname, controller, log)  # type: ignore[attr-defined]
    setattr(owner, attr, kind(stepped) if kind is not None else stepped)
    _WRAPPED[:] = [entry for entry in _WRAPPED if entry[3]() is not None]  # a name bound again each epoch
    _WRAPPED.append((owner, attr, f"{module.__name__}:{qualname}", weakref.ref(stepped)))
    controller.step_function_wrapped = True  # its count is logged at exit, 0 included (never called)
    log.info(f"steps counted at each return of {module.__name__}:{qualname}")
    return True


_WRAPPED: list[tuple[Any, str, str, Any]] = []  # (owner, attribute, --step-on, weak ref to the wrapper)


def rebindings_not_followed() -> list[str]:
    """At exit: each --step-on name bound again to another function while its wrapper lived on, so that
    the wrapper's ``_Rebound`` was not freed and the new function not wrapped (helper-325: torch.jit.script
    keeps a copy of the script's globals, the wrapper in it, for each function it compiles after the step
    function; a second ``def train_step`` then counted nothing and the run's end said "the most steps a
    process counted: 3" of a job that called it 17 times). A reference the script saved still counts."""
    lines = []
    for owner, attr, step_on, wrapper in _WRAPPED:
        alive = wrapper()
        if alive is None:
            continue
        bound = getattr(owner, "__dict__", {}).get(attr, None)
        bound = getattr(bound, "__func__", bound)  # a staticmethod or classmethod
        if bound is alive or bound is None or not callable(bound) or getattr(bound, "__npuprof_stepped__", 0):
            continue
        lines.append(
            f"--step-on {step_on} was bound again while something else still held npuprof's wrapper of the "
            "function before (a reference the script saved, or a copy of the script's globals: "
            "torch.jit.script keeps one for each function it compiles), so the new function was not followed "
            "and its calls were not counted; define the step function once, or after the script's "
            "@torch.jit.script functions"
        )
    return lines


def _items_as_steps(gen: Any, controller: Any, is_finalizing: Callable[[], bool] = sys.is_finalizing) -> Any:
    """Drive the generator ``gen`` of a --step-on generator function for its consumer, one step an item:
    the item's iteration (the generator's work for it, then the loop's body) ends when the loop comes
    back for the next item, or leaves (a ``break`` closes the generator). So a loop ``for loss in
    train_steps(): ...`` counts as its body sees it, whether the generator makes the step and yields
    (counted once a generator, at its end, a capture of steps 5-7 held three whole epochs) or yields the
    batch its body trains on; the generator's end after its last item adds no step, one that yields nothing
    is one step, and a resumption that raises ends one as a call that raises does (README, "The step
    function"). What the consumer sends or throws goes on to ``gen`` as ``yield from`` passes it.
    ``is_finalizing`` is bound here: a generator the collector closes at the interpreter's teardown finds
    this module's globals (``sys``) set to None."""
    resume: Any = gen.send
    value: Any = None
    yielded = False
    while True:
        try:
            item = resume(value)
        except StopIteration as stop:
            if not yielded:
                controller.on_boundary()
            return stop.value
        except BaseException as exc:
            _off_the_traceback(exc)
            controller.on_boundary()
            raise
        yielded = True
        try:
            value = yield item
            resume = gen.send
        except GeneratorExit:
            # closed by the loop's break, or by the collector: at the interpreter's teardown, or inside one
            # of npuprof's own decisions on this thread (a boundary there would step the profiler it steps)
            if not is_finalizing() and not controller.inside_a_decision():
                controller.on_boundary()
            gen.close()
            raise
        except BaseException as exc:  # thrown in by the consumer: ``gen`` may handle it
            resume, value = gen.throw, exc
        controller.on_boundary()


def _off_the_traceback(exc: BaseException) -> None:
    """Take the calling wrapper's frame off the head of ``exc``'s traceback, so that what the script's
    step function or optimizer raised reads as it would without npuprof: a bare ``raise`` then adds no
    entry for the wrapper again (Python 3.11+ re-raises the exception's own ``__traceback__``; 3.10 the
    one it caught, the wrapper's frame left in). One raised by the call itself (the script's wrong
    arguments: ``train_step(1, 2)``'s TypeError) ends at the wrapper's frame, and is shown from the
    script's calling line as without npuprof (the wrapper's entry was the last, helper-186)."""
    tb = exc.__traceback__
    if tb is not None and tb.tb_frame is _getframe(1):
        exc.__traceback__ = tb.tb_next


def _own_code(func: Any) -> CodeType | None:
    """The code object of ``func``'s own body (under its decorators), None when it has none."""
    try:
        return getattr(inspect.unwrap(func), "__code__", None)
    except ValueError:  # a cycle of __wrapped__
        return None


def _recursion_limit_by(frames: int) -> bool:
    """Move the recursion limit by ``frames`` for the wrapper of a --step-on function that calls itself:
    each level of its recursion has two frames, the wrapper's and the function's, and a function recursing
    600 deep (fine under the default limit of 1000) failed with RecursionError under npuprof (helper-152).
    Never waits (the step path): False, and nothing moved, when the limit is being moved now
    (:func:`npuprof.agent.recursion_limit.move`)."""
    return recursion_limit.move(frames)


def _traced() -> bool:
    """Whether torch.compile traces the caller: a --step-on wrapper called inside a compiled function (a
    model's ``forward`` under a compiled train step). Dynamo must see none of npuprof's code there: tracing
    the arming (its user-profiler hooks) or the boundary (``threading.get_ident``) failed a
    ``fullgraph=True`` job and broke the graph of any other. Such a call runs compiled, without the
    wrapper's boundary, so it is not counted. torch is found in ``sys.modules`` (which dynamo traces), not
    imported: the function may be wrapped before the script imports torch."""
    compiler = sys.modules.get("torch.compiler")
    return compiler is not None and compiler.is_compiling()


_AS_PYTHON: set[Any] = set()  # the code objects dynamo was told to run as plain Python


def _run_by_dynamo_as_python(wrapper: CodeType, arm: CodeType, controller: Any) -> None:
    """Have torch.compile run a --step-on wrapper it meets as its first frame (the ``forward`` of
    ``torch.compile(model)``, a compiled function named by --step-on) as plain Python, and compile the
    function it calls as it would have: the boundary is taken at each call and the function is compiled
    whole, ``fullgraph=True`` included. npuprof's own code that the wrapper calls (the arming, the
    boundary: the profiler, the post-processor's start) runs as plain Python too, all of it: dynamo would
    compile each of its frames (and fail the job on one with ``fullgraph=True``). Once per code object,
    when torch is loaded (its C part only: ``torch._dynamo`` is not imported); a torch without these names
    leaves the wrapper to ``_traced``. Before torch is loaded: as soon as it has (:func:`_when_torch_loads`).
    """
    if "torch" not in sys.modules:
        _when_torch_loads(wrapper, arm, controller)
        return
    boundary = getattr(getattr(type(controller), "on_boundary", None), "__code__", None)
    codes = [(code, whole) for code, whole in ((wrapper, False), (arm, True), (boundary, True)) if code]
    codes = [(code, whole) for code, whole in codes if code not in _AS_PYTHON]
    if not codes:
        return
    try:
        from torch._C._dynamo.eval_frame import (  # type: ignore[attr-defined]
            _FrameAction,
            _FrameExecStrategy,
            set_code_exec_strategy,
        )

        for code, whole in codes:
            below = _FrameAction.SKIP if whole else _FrameAction.DEFAULT
            set_code_exec_strategy(code, _FrameExecStrategy(_FrameAction.SKIP, below))
            _AS_PYTHON.add(code)
    except Exception:  # another torch's names: _traced keeps dynamo out of the wrapper all the same
        _AS_PYTHON.update(code for code, _whole in codes)


_AWAITING_TORCH: set[Any] = set()  # the wrappers' code objects to mark once torch has loaded


def _when_torch_loads(wrapper: CodeType, arm: CodeType, controller: Any) -> None:
    """A function wrapped before the script imports torch (a module of its own that needs no torch): its
    codes are marked as soon as ``import torch`` has run, before any of it can compile them. Marked at the
    first call instead, a ``torch.compile`` of the function had traced the wrapper at that call (the
    wrapper was its first frame) as the function alone, its compiled code run at every call after: never
    armed, no step counted."""
    if wrapper in _AWAITING_TORCH:
        return
    _AWAITING_TORCH.add(wrapper)
    from npuprof.agent.user_profiler import _WhenLoaded

    def then(_torch: Any) -> None:
        _AWAITING_TORCH.discard(wrapper)
        try:
            _run_by_dynamo_as_python(wrapper, arm, controller)
        except Exception:  # never the job's import of torch; _traced keeps dynamo out of the wrapper
            pass

    sys.meta_path.insert(0, _WhenLoaded("torch", then))


class _Rebound:
    """Held by a ``--step-on`` wrapper only. A script that binds the name again (a second ``def
    train_step``, ``Trainer.step = other``) drops the wrapper, and with it this object, inside that very
    store: its ``__del__`` then wraps whatever the name holds now, before the script's next statement
    (docs/architecture.md, "Step boundaries"). A wrapper still referenced elsewhere (saved, decorated) is
    not freed: that reference still counts."""

    __slots__ = ("controller", "log", "module", "qualname")
    # the class's own: a wrapper freed as the interpreter tears modules down (a script ending with
    # gc.freeze()) finds this module's globals, sys and contextlib, set to None
    _finalizing = staticmethod(sys.is_finalizing)

    def __init__(self, module: Any, qualname: str, controller: CaptureController, log: AgentLog) -> None:
        self.module = module
        self.qualname = qualname
        self.controller = controller
        self.log = log

    def __del__(self) -> None:
        try:
            if self._finalizing():
                return
            name = f"{getattr(self.module, '__name__', '?')}:{self.qualname}"
            if _deleted_top_level(self.module, self.qualname):  # `del train_step`, a def to come: watched
                self.module.__dict__[self.qualname] = _Pending(
                    self.module, self.qualname, self.controller, self.log
                )
                return
            if _unbound(self.module, self.qualname):
                self.log.warning(f"--step-on {name} was deleted or bound to None{STEP_ON_LOST}")
                return
            if not _rebound_to_another(self.module, self.qualname):
                return
            self.log.info(f"--step-on {name} was bound again: its new function is followed")
            if not wrap_step_function(self.module, self.qualname, self.controller, self.log):
                self.log.warning(f"--step-on {name} was bound again, to something not callable{STEP_ON_LOST}")
        except Exception as exc:  # never in the script's way (a __del__ only prints what escapes it)
            try:
                self.log.warning(f"--step-on: following a new binding failed: {exc!r}")
            except Exception:
                pass


STEP_ON_LOST = "; later steps are not counted"


class _Pending(_Rebound):
    """Holds the place of a ``--step-on`` name the script deleted from a module's namespace (``del
    train_step``), as the bootstrap's placeholder holds a name not yet defined in ``__main__``: the
    script's next binding of the name frees it, and its ``__del__`` wraps what was bound. Calling it fails
    as the deleted name would."""

    __slots__ = ()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NameError(f"name {self.qualname!r} is not defined")

    def __repr__(self) -> str:
        return f"<npuprof: {self.qualname} deleted>"


def _deleted_top_level(module: Any, qualname: str) -> bool:
    namespace = getattr(module, "__dict__", None)
    return bool(namespace) and "." not in qualname and qualname not in namespace


def _bound_now(module: Any, qualname: str) -> tuple[bool, Any]:
    """Whether ``module.qualname``'s owner is still there (not a module torn down at exit, not a class
    gone), and what the name is bound to now (None when deleted)."""
    if not getattr(module, "__dict__", None):
        return False, None
    *owner_path, attr = qualname.split(".")
    owner: Any = module
    for part in owner_path:
        owner = getattr(owner, part, None)
        if owner is None:
            return False, None
    return True, getattr(owner, attr, None)


def _unbound(module: Any, qualname: str) -> bool:
    """``module.qualname`` was deleted or bound to None (its owner still there)."""
    there, value = _bound_now(module, qualname)
    return there and value is None


def _rebound_to_another(module: Any, qualname: str) -> bool:
    """The object ``module.qualname`` names now is not a --step-on wrapper."""
    _there, value = _bound_now(module, qualname)
    return value is not None and not getattr(value, "__npuprof_stepped__", False)


def _not_a_step_function(func: Any) -> str:
    """Why ``func`` cannot be replaced by a wrapping function without changing the script ("" when it
    can): a class (subclassed, ``isinstance``), an object called (an ``nn.Module``: its attributes), an
    async generator."""
    if isinstance(func, type):
        return "names a class, not a function: name the method that makes one step (e.g. Class.train_step)"
    if inspect.isasyncgenfunction(func):
        return "names an async generator function, which npuprof cannot count steps on"
    if not (inspect.isroutine(func) or isinstance(func, functools.partial)):
        kind = type(func).__name__
        return f"names a {kind} object, not a function: name the function or method that makes one step"
    return ""


_NOTHING = object()


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _static_kind(module: Any, qualname: str) -> str | None:
    """``"property"`` when ``qualname`` names a property of a class, found without running its getter."""
    target: Any = module
    for part in qualname.split("."):
        try:
            target = inspect.getattr_static(target, part)
        except AttributeError:
            return None
    return "property" if isinstance(target, property) else None


SIMILAR_CUTOFF = 0.75  # difflib's ratio: "train_stp" ~ "train_step" (0.95), not ~ "Trainer.step" (0.67)


def missing_target_message(module: Any, qualname: str, step_on: str) -> str:
    """The one line logged when ``--step-on`` names nothing: where it looked, and the closest names that
    are defined there (the launcher's end-of-run report shows it)."""
    name = getattr(module, "__name__", "?")
    where = name
    path = getattr(module, "__file__", None) or (sys.argv[0] if name == "__main__" and sys.argv else None)
    if name == "__main__" and isinstance(path, str) and path:  # python deletes __file__ once the script ends
        where = f"__main__ ({os.path.basename(path)})"
    outer = qualname.split(".", 1)[0]
    bound = vars(module).get(outer, _NOTHING) if hasattr(module, "__dict__") else _NOTHING
    if "." not in qualname and bound is not _NOTHING and not callable(bound):
        return (
            f"--step-on {step_on}: {qualname} is {_short_repr(bound)} in {where} at its first binding, not a "
            "function; no steps counted; npuprof wraps what the name is first bound to: bind the function "
            f"first (no `{qualname} = None` before its def)"
        )
    if (kind := _static_kind(module, qualname)) is not None:  # helper-124: a property read "not found"
        return (
            f"--step-on {step_on}: {qualname} in {where} is a {kind}, not a function; no steps counted; name "
            "the function it calls, or a method"
        )
    if "." in qualname and inspect.isfunction(getattr(module, outer, None)):
        hint = (
            f"; {outer} is a function: what it defines inside cannot be named (name a module-level "
            "function or a method of a module-level class)"
        )
    elif nested := nested_definitions(module, qualname):
        hint = (
            f"; a function {qualname} is defined inside {', '.join(nested)}, which cannot be named (move it "
            "to module level)"
        )
    elif similar := similar_names(module, qualname):
        hint = f"; similar names there: {', '.join(similar)}"
    elif name == "__main__" and (own := functions_of_the_script(module)):
        hint = f"; the script's functions there: {', '.join(own)}"
    elif name == "__main__":  # helper-125: runpy.run_path, pdb, cProfile, exec(...) of the script
        hint = (
            "; a script run by a runner (runpy, a debugger, pdb, cProfile, exec, multiprocessing's spawn) "
            "defines its functions outside __main__: name a function of a module it imports"
        )
    else:
        hint = ""
    return f"--step-on {step_on}: {qualname} not found in {where}; no steps counted{hint}"


def functions_of_the_script(module: Any, limit: int = 5) -> list[str]:
    """The functions ``__main__`` defines from the file Python was asked to run (``sys.argv[0]``), sorted:
    none when a runner (cProfile, runpy, pdb) is ``__main__`` and the script's functions live elsewhere."""
    script = sys.argv[0] if sys.argv else ""
    if not script:
        return []
    script = os.path.realpath(script)
    own: list[str] = []
    for qualname in defined_functions(module):
        code = _code_of(module, qualname)
        if code is not None and os.path.realpath(code.co_filename) == script:
            own.append(qualname)
    return sorted(own)[:limit]


def _code_of(module: Any, qualname: str) -> Any:
    """The code object of ``module``'s function (or method) ``qualname``, or None."""
    target: Any = module
    for part in qualname.split("."):
        target = getattr(target, part, None)
    return getattr(getattr(target, "__func__", target), "__code__", None)


def nested_definitions(module: Any, name: str, limit: int = 3) -> list[str]:
    """The module's own functions (and its classes' methods) that define a function ``name`` inside them
    (``def main(): def step(): ...`` for ``step``), by their code objects, as ``main()``."""
    found: list[str] = []
    for qualname in defined_functions(module):
        code = _code_of(module, qualname)
        pending = [code] if code is not None else []
        while pending and len(found) < limit:
            inner = [c for c in pending.pop().co_consts if hasattr(c, "co_consts") and hasattr(c, "co_name")]
            if any(c.co_name == name for c in inner):
                found.append(f"{qualname}()")
                break
            pending.extend(inner)
    return found


def similar_names(module: Any, qualname: str, limit: int = 3) -> list[str]:
    """The functions and methods defined in ``module`` closest to ``qualname`` (difflib), best first, then
    those with the same last name (``step`` -> ``Trainer.step``)."""
    from difflib import get_close_matches

    names = [name for name in defined_functions(module) if name != qualname]
    close = get_close_matches(qualname, names, n=limit, cutoff=SIMILAR_CUTOFF)
    last = qualname.rsplit(".", 1)[-1]
    same_last = [name for name in names if name.rsplit(".", 1)[-1] == last and name not in close]
    return (close + same_last)[:limit]


def defined_functions(module: Any) -> list[str]:
    """Qualified names of the functions and classes' methods that ``module`` itself defines (imported ones
    are passed over)."""
    own = getattr(module, "__name__", None)
    names: list[str] = []
    for key, value in list(vars(module).items()):
        if getattr(value, "__module__", None) != own or key.startswith("__"):
            continue
        if isinstance(value, type):
            for attr, member in list(vars(value).items()):
                func = member.__func__ if isinstance(member, staticmethod | classmethod) else member
                if callable(func) and not attr.startswith("__"):
                    names.append(f"{key}.{attr}")
        elif callable(value):
            names.append(key)
    return names


def _is_compiling() -> Callable[[], bool]:
    """torch.compile's "am I being traced" test (False in eager code). An optimizer step traced by
    torch.compile (``fullgraph=True`` included) must see no npuprof code: dynamo cannot trace
    ``threading.get_ident`` and fails the job. Such a step runs compiled, without our hooks, so it is not
    counted (``--step-on`` on the compiled function counts it)."""
    try:
        from torch.compiler import is_compiling
    except ImportError:  # torch before 2.3
        return lambda: False
    return is_compiling
