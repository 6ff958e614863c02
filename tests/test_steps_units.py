"""agent/steps.py in-process: which optimizer steps are step boundaries, and when they are taken.

The real torch optimizers and GradScaler run here; the controller is a recorder, so each test states the
exact sequence of events it expects (by hand, from docs/architecture.md, "Step boundaries"): one boundary
per iteration of the *primary* optimizer, taken once its ``step()`` has returned, GradScaler's step
counted once even when it skips for inf/nan, the primary switching after 3 steps of another one, steps on
a thread that does not drive passed over, and ``--step-on`` wrappers. torch's global state (the step
post-hooks, ``Optimizer.__init__``, ``GradScaler.step``) is restored after each test, and each test
defines its own optimizer classes, so nothing leaks into other tests.

These are the fast tests of bench/mutation.py's "steps" group (no subprocess).
"""

from __future__ import annotations

import gc
import inspect
import os
import sys
import threading
import time
import traceback
import types
from _thread import get_ident, start_new_thread
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.optim.optimizer as optimizer_module
from conftest import run_on_thread
from torch.amp.grad_scaler import GradScaler

from npuprof.agent import steps as steps_module
from npuprof.agent import user_profiler
from npuprof.agent.steps import (
    SWITCHES_LOGGED,
    OptimizerSteps,
    defined_functions,
    missing_target_message,
    similar_names,
    wrap_step_function,
)

ME = "boundary"


class Controller:
    """The controller's side of the step hooks, recorded into ``events``."""

    def __init__(self, events: list[Any], arm_sticks: bool = True) -> None:
        self.events = events
        self.driver: int | None = None
        self.armed = False
        self.enabled = True
        self.arm_sticks = arm_sticks
        self.step = 0  # the step in progress, as the real controller's
        self.takes_over = False  # foreign_boundary makes the calling thread drive

    def arm(self, at_a_step_start: bool = False) -> None:
        self.armed = self.arm_sticks
        self.at_a_step_start = at_a_step_start
        self.events.append("arm")

    def on_boundary(self) -> None:
        self.step += 1
        self.events.append((ME, get_ident()))

    def on_boundary_of(self, thread: int) -> None:
        self.step += 1
        self.events.append((ME, thread))

    def foreign_boundary(self) -> bool:
        self.events.append("foreign")
        if self.takes_over:  # as the real one does once a thread stepped 3 times alone (helper-219)
            self.driver = get_ident()
        return self.takes_over

    def steps_missed(self, count: int, why: str = "") -> bool:
        self.step += count
        self.events.append(("missed", count))
        return True

    def note_for_capture(self, note: str) -> None:
        self.events.append(("note", note))


class Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []
        self.path: str | None = None  # where npuprof.log is, as AgentLog's

    def error(self, message: str) -> bool:
        self.lines.append(("error", message))
        return True

    def info(self, message: str) -> None:
        self.lines.append(("info", message))

    def warning(self, message: str) -> None:
        self.lines.append(("warning", message))

    def warn_once(self, key: str, message: str) -> None:
        self.lines.append(("warn_once", message))


@dataclass
class World:
    steps: OptimizerSteps
    controller: Controller
    log: Log
    events: list[Any]
    followed: list[tuple[Any, Any]] = field(default_factory=list)
    forks: list[dict[str, Any]] = field(default_factory=list)


def _isolate_torch(monkeypatch: pytest.MonkeyPatch) -> tuple[list[tuple[Any, Any]], list[dict[str, Any]]]:
    monkeypatch.setattr(optimizer_module, "_global_optimizer_post_hooks", OrderedDict())
    monkeypatch.setattr(optimizer_module.Optimizer, "__init__", optimizer_module.Optimizer.__init__)
    monkeypatch.setattr(GradScaler, "step", GradScaler.step)
    followed: list[tuple[Any, Any]] = []
    forks: list[dict[str, Any]] = []

    def follow(controller: Any, log: Any) -> bool:
        followed.append((controller, log))
        return True

    monkeypatch.setattr(user_profiler, "install", follow)
    monkeypatch.setattr(os, "register_at_fork", lambda **kwargs: forks.append(kwargs))
    return followed, forks


def _world(monkeypatch: pytest.MonkeyPatch, arm_sticks: bool = True) -> World:
    followed, forks = _isolate_torch(monkeypatch)
    events: list[Any] = []
    controller, log = Controller(events, arm_sticks), Log()
    steps = OptimizerSteps(controller, log)  # type: ignore[arg-type]
    steps.install()
    return World(steps, controller, log, events, followed, forks)


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> World:
    return _world(monkeypatch)


def sgd(name: str) -> type[torch.optim.SGD]:
    """A fresh SGD subclass (its ``step`` is wrapped on it alone)."""
    return type(name, (torch.optim.SGD,), {})


def make(cls: type, events: list[Any] | None = None, label: str = "") -> tuple[torch.nn.Parameter, Any]:
    w = torch.nn.Parameter(torch.ones(2))
    opt = cls([w], lr=0.5)
    if events is not None:
        opt.register_step_post_hook(lambda *a: events.append(label))  # runs before the global hooks
    return w, opt


def iterate(w: torch.nn.Parameter, opt: Any) -> None:
    opt.zero_grad()
    (w * 2).sum().backward()
    opt.step()


def boundary() -> tuple[str, int]:
    return (ME, get_ident())


# how the warning that two optimizers alternate ends (hedged: one stepped once an epoch looks the same)
ALTERNATES = (
    "several per iteration of a job whose iteration steps both (a WGAN's generator and its critic's loop); "
    "when the other steps less often (once an epoch, a discriminator trained every few iterations), a step "
    "is one iteration, numbered one ahead of it: to count iterations, name the function of one iteration "
    "with --step-on MODULE:QUALNAME"
)


# ---- installing and arming ------------------------------------------------------------------------
def test_install_hooks_torch_and_the_first_optimizer_arms(monkeypatch: pytest.MonkeyPatch) -> None:
    original_init = optimizer_module.Optimizer.__init__
    world = _world(monkeypatch)
    assert len(optimizer_module._global_optimizer_post_hooks) == 1
    assert world.forks == [{"after_in_child": world.steps._forget_threads}]
    assert world.followed == [(world.controller, world.log)]
    assert not getattr(GradScaler.step, "__npuprof__", False)  # GradScaler waits for the first optimizer
    init = optimizer_module.Optimizer.__init__
    assert init is not original_init and init.__wrapped__ is original_init

    opt_class = sgd("First")
    make(opt_class)
    assert world.events == ["arm"]
    assert world.followed == [(world.controller, world.log)] * 2  # again, now that torch.profiler exists
    assert GradScaler.step.__npuprof__ is True and GradScaler.step.__name__ == "step"
    assert opt_class.step.__npuprof_step__ is True and opt_class.step.__name__ == "step"
    make(opt_class)
    make(sgd("Second"))
    assert world.events == ["arm"]  # armed once


def test_each_new_optimizer_arms_until_the_controller_is_armed(monkeypatch: pytest.MonkeyPatch) -> None:
    world = _world(monkeypatch, arm_sticks=False)
    opt_class = sgd("Again")
    w, opt = make(opt_class)
    make(opt_class)
    assert world.events == ["arm", "arm"]
    scaler = GradScaler("cpu")
    opt.zero_grad()
    scaler.scale((w * 2).sum()).backward()
    scaler.step(opt)  # GradScaler wrapped once, though armed twice: one boundary
    # and a step while unarmed arms too (a child forked after the optimizer was made: test_step_counting)
    assert world.events == ["arm", "arm", "arm", boundary()]


def test_user_profilers_not_followed_is_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    _isolate_torch(monkeypatch)

    def broken(controller: Any, log: Any) -> bool:
        raise RuntimeError("no torch.profiler")

    monkeypatch.setattr(user_profiler, "install", broken)
    log = Log()
    OptimizerSteps(Controller([]), log).install()  # type: ignore[arg-type]
    assert log.lines == [
        ("warning", "the script's own profilers are not followed: RuntimeError('no torch.profiler')")
    ]


def test_a_gradscaler_that_cannot_be_hooked_is_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch.amp.grad_scaler as grad_scaler_module

    world = _world(monkeypatch)
    monkeypatch.setattr(grad_scaler_module, "GradScaler", None)
    make(sgd("NoScaler"))
    assert world.log.lines == [
        (
            "warning",
            "GradScaler.step not hooked: AttributeError(\"'NoneType' object has no attribute 'step'\")",
        )
    ]
    assert world.events == ["arm"]  # armed all the same


def test_the_fork_hook_forgets_the_parents_threads(world: World) -> None:
    steps = world.steps
    steps.pending, steps.in_scaler = 12345, 2
    steps._inside.add(12345)
    world.forks[0]["after_in_child"]()
    assert (steps.pending, steps.in_scaler, steps._inside) == (0, 0, set())


# ---- one optimizer --------------------------------------------------------------------------------
def test_one_boundary_per_step_taken_after_step_returns(world: World) -> None:
    w, opt = make(sgd("Plain"))
    # a global post-hook registered after npuprof's runs after it, still inside torch's Optimizer.step#
    # range: the boundary comes after it, once step() has returned
    optimizer_module.register_optimizer_step_post_hook(lambda *a: world.events.append("later hook"))
    for _ in range(3):
        iterate(w, opt)
    assert world.events == ["arm"] + ["later hook", boundary()] * 3
    assert torch.equal(w.detach(), torch.tensor([-2.0, -2.0]))  # 1 - 3 * 0.5 * 2: the steps really ran
    assert world.log.lines == [
        ("info", "steps are counted on the optimizer Plain (the first optimizer to step)")
    ]
    assert world.steps.pending == 0


def test_a_second_instance_of_the_same_class_is_not_wrapped_twice(world: World) -> None:
    opt_class = sgd("Twice")
    make(opt_class)
    wrapped = opt_class.step
    w, opt = make(opt_class)
    assert opt_class.step is wrapped
    iterate(w, opt)
    assert world.events == ["arm", boundary()]


def test_a_step_calling_super_step_counts_once_at_the_outermost_return(world: World) -> None:
    base = sgd("Base")
    events = world.events

    class Outer(base):  # type: ignore[misc, valid-type]
        def step(self, closure: Any = None) -> Any:
            events.append("outer begins")
            result = super().step(closure)
            events.append("outer ends")
            return result

    make(base)  # Base.step is wrapped too
    w, opt = make(Outer)
    iterate(w, opt)
    iterate(w, opt)
    assert events == ["arm"] + ["outer begins", "outer ends", boundary()] * 2


def test_a_step_that_raises_takes_no_boundary_and_the_next_one_counts(world: World) -> None:
    events = world.events

    class Failing(torch.optim.SGD):
        fail = True

        def step(self, closure: Any = None) -> Any:
            if Failing.fail:
                raise RuntimeError("bad step")
            return super().step(closure)

    w, opt = make(Failing)
    with pytest.raises(RuntimeError, match="bad step"):
        iterate(w, opt)
    Failing.fail = False
    iterate(w, opt)
    assert events == ["arm", boundary()]


def _frames_of(exc: BaseException) -> list[tuple[str, str]]:
    return [(os.path.basename(f.filename), f.name) for f in traceback.extract_tb(exc.__traceback__)]


def test_a_step_that_raises_shows_no_frame_of_npuprof_in_its_traceback(world: World) -> None:
    """helper-182: the traceback the script shows is the one it has without npuprof (the wrapper's frame
    was one more entry, three lines with its source and carets)."""

    class Failing(torch.optim.SGD):
        def step(self, closure: Any = None) -> Any:
            raise RuntimeError("bad step")

    w, opt = make(Failing)
    with pytest.raises(RuntimeError, match="bad step") as raised:
        iterate(w, opt)
    frames = _frames_of(raised.value)
    assert ("steps.py", "stepped") not in frames and frames[-1][1] == "step", frames


def test_a_class_whose_step_cannot_be_wrapped_counts_in_the_hook(world: World) -> None:
    class Locked(type):
        def __setattr__(cls, name: str, value: Any) -> None:
            if name == "step":
                raise AttributeError("step is read-only")
            super().__setattr__(name, value)

    def raw_step(self: Any, closure: Any = None) -> None:
        with torch.no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    p -= group["lr"] * p.grad

    hooked = torch.optim.Optimizer.profile_hook_step(raw_step)
    hooked.hooked = True  # type: ignore[attr-defined]  # torch's mark: torch leaves it as it is
    frozen = Locked("Frozen", (torch.optim.Optimizer,), {"step": hooked})
    w = torch.nn.Parameter(torch.ones(2))
    opt = frozen([w], {"lr": 0.5})
    assert world.log.lines == [("warning", "Frozen.step not wrapped: AttributeError('step is read-only')")]
    iterate(w, opt)
    iterate(w, opt)
    assert world.events == ["arm", boundary(), boundary()]
    assert torch.equal(w.detach(), torch.tensor([-1.0, -1.0]))


# ---- several optimizers ---------------------------------------------------------------------------
def test_two_optimizers_alternating_count_once_per_iteration(world: World) -> None:
    events = world.events
    gw, gen = make(sgd("Gen"), events, "G")
    dw, disc = make(sgd("Disc"), events, "D")
    for _ in range(4):
        iterate(gw, gen)
        iterate(dw, disc)
    assert events == ["arm"] + ["G", boundary(), "D"] * 4
    assert world.log.lines == [
        ("info", "steps are counted on the optimizer Gen (the first optimizer to step)")
    ]


def test_another_optimizer_stepping_3_times_alone_becomes_primary(world: World) -> None:
    events = world.events
    aw, a = make(sgd("OptA"), events, "A")
    bw, b = make(sgd("OptB"), events, "B")
    for opt_w, opt in ((aw, a), (bw, b), (bw, b), (aw, a), (bw, b), (bw, b), (bw, b), (aw, a), (bw, b)):
        iterate(opt_w, opt)
    # A primary; B twice (A steps: B's count starts again); B three times: B is primary from its 3rd
    b = boundary()
    missed = ("missed", 2)  # B's first two steps were not boundaries: counted when it takes over
    assert events == ["arm", "A", b, "B", "B", "A", b, "B", "B", "B", missed, b, "A", "B", b]
    assert [line for _, line in world.log.lines] == [
        "steps are counted on the optimizer OptA (the first optimizer to step)",
        "the optimizer OptB now counts steps (it stepped 3 times, the previous primary OptA not once "
        "meanwhile; its 2 earlier step(s) are counted too)",
        # A stepped again between two steps of B: it was not given up, the two alternate
        "the optimizer OptA (2 parameters) still steps after OptB (2 parameters) took over counting steps "
        "(at step 2, when it stepped 3 times in a row): the two alternate, so from step 2 on a step is one "
        "step() of OptB (2 parameters), " + ALTERNATES,
    ]


def test_a_gan_whose_discriminator_is_frozen_keeps_step_numbers_the_iterations(world: World) -> None:
    """A GAN whose discriminator, stepping first, is frozen after 3 iterations: the generator takes over at
    its third step alone. Its first step after the discriminator's last was in that iteration, already
    counted; it was counted again, so that ProfilerStep#6 recorded iteration 5 from then on (helper-280,
    a capture's markers of each iteration)."""
    events = world.events
    gw, gen = make(sgd("Generator"), events, "G")
    dw, disc = make(sgd("Discriminator"), events, "D")
    iterations = 8
    for it in range(iterations):
        if it < 3:
            iterate(dw, disc)
        iterate(gw, gen)
    b = boundary()
    assert events == ["arm"] + ["D", b, "G"] * 3 + ["G", "G", ("missed", 1), b] + ["G", b] * 3
    assert world.controller.step == iterations
    assert world.log.lines[-1] == (
        "info",
        "the optimizer Generator now counts steps (it stepped 3 times, the previous primary Discriminator "
        "not once meanwhile; its 1 earlier step(s) are counted too (not the one before them, in the "
        "iteration of Discriminator's last step, which it stepped after in each iteration))",
    )


def test_a_discriminator_trained_every_few_iterations_is_said_to_number_steps_one_ahead(
    world: World,
) -> None:
    """A GAN whose discriminator, stepping first, trains every 4th iteration and its generator each one:
    the generator takes over at its third step alone, the discriminator steps again, and the warning said
    "several per iteration", where each step is one iteration, numbered one ahead of it (ProfilerStep#6
    recorded iteration 5, helper-280: a capture's markers of each iteration)."""
    gw, gen = make(sgd("Generator"))
    dw, disc = make(sgd("Discriminator"))
    iterations = 12
    for it in range(iterations):
        if it % 4 == 0:
            iterate(dw, disc)
        iterate(gw, gen)
    assert world.controller.step == iterations + 1  # one step an iteration, one ahead
    said = [line for kind, line in world.log.lines if kind == "warn_once"]
    assert said == [
        "the optimizer Discriminator (2 parameters) still steps after Generator (2 parameters) took over "
        "counting steps (at step 1, when it stepped 3 times in a row): the two alternate, so from step 1 on "
        "a step is one step() of Generator (2 parameters), " + ALTERNATES
    ]
    assert "numbered one ahead" in said[0]


def test_a_discriminator_trained_each_iteration_then_every_few_numbers_steps_as_iterations(
    world: World,
) -> None:
    """The discriminator trains with its generator for 3 iterations, then every 4th from iteration 7: the
    generator, which stepped once between its steps, takes over without counting its step of the
    discriminator's last iteration again, so the steps are the iterations themselves, and the warning does
    not say "numbered one ahead" of them."""
    gw, gen = make(sgd("Generator"))
    dw, disc = make(sgd("Discriminator"))
    iterations, disc_trains = 12, {0, 1, 2, 7, 11}
    for it in range(iterations):
        if it in disc_trains:
            iterate(dw, disc)
        iterate(gw, gen)
    assert world.controller.step == iterations
    said = [line for kind, line in world.log.lines if kind == "warn_once"]
    assert len(said) == 1 and "a step is one iteration: to count iterations" in said[0], said


def test_two_other_optimizers_each_need_3_steps_of_their_own(world: World) -> None:
    events = world.events
    aw, a = make(sgd("PA"), events, "A")
    bw, b = make(sgd("PB"), events, "B")
    cw, c = make(sgd("PC"), events, "C")
    for opt_w, opt in ((aw, a), (bw, b), (cw, c), (bw, b), (cw, c), (cw, c), (aw, a)):
        iterate(opt_w, opt)
    assert events == ["arm", "A", boundary(), "B", "C", "B", "C", "C", ("missed", 2), boundary(), "A"]
    assert world.log.lines[-1] == (
        "info",
        "the optimizer PC now counts steps (it stepped 3 times, the previous primary PA not once meanwhile; "
        "its 2 earlier step(s) are counted too)",
    )


def test_a_primary_that_takes_over_from_one_still_stepping_says_steps_are_its_own(world: World) -> None:
    """A WGAN whose generator steps before 5 critic steps: the critic takes over at its third step (the
    generator could have been given up). The generator stepping again between two critic steps shows it
    alternates: the steps are the critic's from then on, 5 an iteration, which was said only as an INFO
    line of npuprof.log; now once on stderr, with the step it began at and --step-on as the way out."""
    events = world.events
    gw, gen = make(sgd("Gen"), events, "G")
    dw, critic = make(sgd("Critic"), events, "D")
    for _ in range(3):
        iterate(gw, gen)
        for _ in range(5):
            iterate(dw, critic)
    b = boundary()
    assert (
        events
        == ["arm", "G", b, "D", "D", "D", ("missed", 2), b, "D", b, "D", b] + (["G"] + ["D", b] * 5) * 2
    )
    said = [line for kind, line in world.log.lines if kind == "warn_once"]
    assert said == [
        "the optimizer Gen (2 parameters) still steps after Critic (2 parameters) took over counting steps "
        "(at step 1, when it stepped 3 times in a row): the two alternate, so from step 1 on a step is one "
        "step() of Critic (2 parameters), " + ALTERNATES
    ]


def test_a_generator_stepping_between_two_critics_taking_turns_is_said_to_alternate(world: World) -> None:
    """A WGAN with two critics (5 steps each) after one generator step: the first critic takes over from
    the generator, then each critic from the other in turn, twice an iteration, so every critic step was a
    step. The generator still stepped, but never between two steps of one primary, the only place it was
    looked for: nothing but INFO lines of npuprof.log said so, while the README says it is said once."""
    gw, gen = make(sgd("Gen"), world.events)
    aw, a = make(sgd("CriticA"), world.events)
    bw, b = make(sgd("CriticB"), world.events)
    for _ in range(4):
        for opt_w, opt in [(gw, gen)] + [(aw, a)] * 5 + [(bw, b)] * 5:
            iterate(opt_w, opt)
    said = [line for kind, line in world.log.lines if kind == "warn_once"]
    assert said == [
        "the optimizer Gen (2 parameters) still steps while CriticA (2 parameters) and CriticB "
        "(2 parameters) take over counting steps from each other (from step 1, each when it stepped 3 times "
        "in a row): the optimizers alternate, so from step 1 on a step is one step() of the one counting "
        "then, " + ALTERNATES
    ]


def test_a_given_up_primary_is_not_said_to_alternate(world: World) -> None:
    """The optimizer taken over from that never steps again (a learning-rate finder's, kept; training in
    stages, each its own optimizer) took no turn between two steps of the new primary: nothing is said
    beyond the log's lines of the take-overs."""
    aw, a = make(sgd("Finder"), world.events)
    bw, b = make(sgd("Stage1"), world.events)
    cw, c = make(sgd("Stage2"), world.events)
    for opt_w, opt in [(aw, a)] * 4 + [(bw, b)] * 6 + [(cw, c)] * 3:
        iterate(opt_w, opt)
    assert [kind for kind, _ in world.log.lines] == ["info"] * 3


def test_a_primary_taking_counting_back_says_the_steps_between_were_another_loops(world: World) -> None:
    """An evaluation every 4 iterations that fits a linear probe with its own optimizer, 10 steps: the
    probe's optimizer took over at its third step and each of its steps was a step, and the training's
    took counting back 4 iterations later: 42 steps for 14 iterations (no capture recording), the default
    capture (steps 6-8) all probe steps, and nothing on stderr said so (helper-157). Now said once, as soon
    as the training's optimizer takes counting back."""
    tw, train = make(sgd("Train"), world.events)
    for it in range(14):
        iterate(tw, train)
        if it % 4 == 3:
            pw, probe = make(sgd("Probe"), world.events)
            for _ in range(10):
                iterate(pw, probe)
    assert world.controller.step == 42  # the counting itself is as it was
    said = [line for kind, line in world.log.lines if kind == "warn_once"]
    assert said == [
        "the optimizer Train (2 parameters) counts steps again at step 14, after Probe (2 parameters) took "
        "over counting from it at step 4: steps 4-13 were each one step() of Probe. If it ran a loop of its "
        "own between iterations (an evaluation's probe), those steps are not the job's iterations and a "
        "capture of them records that loop: name the function of one iteration with --step-on "
        "MODULE:QUALNAME to count iterations (training in stages, each with its own optimizer, is counted "
        "right)"
    ]


def test_the_primary_gone_the_next_optimizer_to_step_counts_at_once(world: World) -> None:
    events = world.events
    aw, a = make(sgd("Gone"), events, "A")
    iterate(aw, a)
    del a, aw
    gc.collect()
    bw, b = make(sgd("Next"), events, "B")
    iterate(bw, b)
    iterate(bw, b)
    assert events == ["arm", "A", boundary(), "B", boundary(), "B", boundary()]
    assert world.log.lines[-1] == ("info", "the optimizer Next now counts steps (the previous one is gone)")


def test_an_optimizer_made_at_each_iteration_is_not_logged_at_each(world: World) -> None:
    """A script that makes its optimizer anew at each iteration (a per-batch adaptation loop): the previous
    one is gone at each step, and each change of the primary was a line of npuprof.log, 17 µs of the step
    and 130 bytes each: after ~16,000 iterations the rotation (1 MiB, one backup) had dropped the run's
    first lines. The log now names the first changes only, and says so."""
    cls = sgd("Fresh")
    for _ in range(SWITCHES_LOGGED + 5):
        w, opt = make(cls)
        iterate(w, opt)
        del w, opt
        gc.collect()
    assert world.events == ["arm"] + [boundary()] * (SWITCHES_LOGGED + 5)  # every step counted
    gone = "the optimizer Fresh now counts steps (the previous one is gone)"
    assert [line for _, line in world.log.lines] == [
        "steps are counted on the optimizer Fresh (the first optimizer to step)",
        *[gone] * (SWITCHES_LOGGED - 1),
        f"{gone}; later changes of the optimizer that counts steps are not logged",
    ]


def test_objects_without_weak_references(world: World) -> None:
    """A step object that takes no weak reference: held as the primary; as another one it never switches."""

    class Slotted:
        __slots__ = ()

        def step(self) -> None:
            pass

    first, other = Slotted(), Slotted()
    world.controller.armed = True  # as an optimizer's making arms it (unarmed, the first step would)
    hook = world.steps._post_hook  # torch's global post-hook signature: (optimizer, args, kwargs)
    hook(first, (), {})
    for _ in range(4):
        hook(other, (), {})
    hook(first, (), {})
    assert world.events == [boundary(), boundary()]
    assert world.log.lines == [
        ("info", "steps are counted on the optimizer Slotted (the first optimizer to step)")
    ]


# ---- threads --------------------------------------------------------------------------------------
def _on_thread(fn: Any) -> int:
    return run_on_thread(fn)


def test_steps_on_a_thread_that_does_not_drive_are_passed_over(world: World) -> None:
    events = world.events
    aw, a = make(sgd("Driven"), events, "A")
    bw, b = make(sgd("Other"), events, "B")
    iterate(aw, a)
    world.controller.driver = get_ident()
    _on_thread(lambda: iterate(aw, a))  # the primary, on another thread
    for _ in range(3):
        _on_thread(lambda: iterate(bw, b))  # would be a switch on the driving thread
    iterate(aw, a)
    for _ in range(3):
        iterate(bw, b)  # on the driving thread: B's steps count from here, and B takes over at its 3rd
    iterate(aw, a)
    b_ = boundary()
    assert events == ["arm", "A", b_, "A", "foreign"] + ["B", "foreign"] * 3 + [
        "A",
        b_,
        "B",
        "B",
        "B",
        ("missed", 2),
        b_,
        "A",
    ]


def test_a_thread_that_takes_over_counts_that_step(world: World) -> None:
    """helper-219: the controller's foreign_boundary makes the thread drive: its step is a boundary."""
    events = world.events
    w, opt = make(sgd("TakenOver"), events, "T")
    iterate(w, opt)
    world.controller.driver = get_ident()
    world.controller.takes_over = True
    ident = _on_thread(lambda: iterate(w, opt))
    assert events == ["arm", "T", boundary(), "T", "foreign", (ME, ident)]


def test_a_thread_that_takes_over_counts_its_own_optimizer_at_once(world: World) -> None:
    """A sanity step of the main thread's optimizer, then a pool's worker training a model of its own
    took over (the main thread waiting for it): its optimizer was not the primary, its step no boundary,
    and it took 3 more steps to take over as an optimizer, a window in them lost ("steps 4-5 of its
    window passed uncounted (the optimizer SGD took over counting)"). Its optimizer counts from there."""
    events = world.events
    w, opt = make(sgd("Sanity"), events, "S")
    iterate(w, opt)
    world.controller.driver = get_ident()
    world.controller.takes_over = True
    uw, own = make(sgd("Own"), events, "U")
    ident = _on_thread(lambda: [iterate(uw, own) for _ in range(2)])
    assert events == ["arm", "S", boundary(), "U", "foreign", (ME, ident), "U", (ME, ident)]
    assert world.steps.primary is own
    assert (
        "info",
        "the optimizer Own now counts steps (the thread it steps on took over counting the steps)",
    ) in world.log.lines


def test_the_thread_that_steps_is_the_one_told(world: World) -> None:
    w, opt = make(sgd("Threaded"))
    ident = _on_thread(lambda: iterate(w, opt))  # no driver yet: any thread may step
    assert world.events == ["arm", (ME, ident)]


# ---- GradScaler -----------------------------------------------------------------------------------
def _scaled_step(scaler: GradScaler, w: torch.nn.Parameter, opt: Any, grad: float | None = None) -> None:
    opt.zero_grad()
    scaler.scale((w * 2).sum()).backward()
    if grad is not None:
        w.grad.fill_(grad)
    scaler.step(opt)
    scaler.update()


def test_gradscaler_step_counts_once(world: World) -> None:
    events = world.events
    w, opt = make(sgd("Scaled"), events, "S")
    scaler = GradScaler("cpu", init_scale=4.0)
    _scaled_step(scaler, w, opt)
    assert events == ["arm", "S", boundary()]
    assert torch.equal(w.detach(), torch.tensor([0.0, 0.0]))  # 1 - 0.5 * 2: unscaled and stepped


def test_gradscaler_skipping_for_inf_still_counts(world: World) -> None:
    events = world.events
    w, opt = make(sgd("Skipped"), events, "S")
    scaler = GradScaler("cpu", init_scale=4.0)
    _scaled_step(scaler, w, opt, grad=float("inf"))
    _scaled_step(scaler, w, opt, grad=float("nan"))
    assert events == ["arm", boundary(), boundary()]  # optimizer.step never ran ("S" absent) ...
    assert torch.equal(w.detach(), torch.tensor([1.0, 1.0]))  # ... and the weights did not move
    assert scaler.get_scale() == 1.0  # halved twice: torch saw both skips


def test_gradscaler_on_a_thread_that_does_not_drive(world: World) -> None:
    events = world.events
    w, opt = make(sgd("ScaledElsewhere"), events, "S")
    scaler = GradScaler("cpu", init_scale=4.0)
    _scaled_step(scaler, w, opt)
    world.controller.driver = get_ident()
    _on_thread(lambda: _scaled_step(scaler, w, opt))
    _on_thread(lambda: _scaled_step(scaler, w, opt, grad=float("inf")))
    assert events == ["arm", "S", boundary(), "S", "foreign"]
    assert torch.equal(w.detach(), torch.tensor([-1.0, -1.0]))  # the foreign thread's step still ran
    assert world.steps.in_scaler == 0


def test_a_failing_gradscaler_step_leaves_counting_as_it_was(world: World) -> None:
    w, opt = make(sgd("AfterFailure"))
    scaler = GradScaler("cpu")
    with pytest.raises(Exception):  # noqa: B017 - whatever torch raises for a non-optimizer
        scaler.step(object())
    iterate(w, opt)
    assert world.events == ["arm", boundary()]


# ---- --step-on MODULE:QUALNAME --------------------------------------------------------------------
def _module(events: list[Any]) -> types.ModuleType:
    module = types.ModuleType("jobmod")

    def train_step(x: int) -> int:
        events.append(("train_step", x))
        if x < 0:
            raise ValueError("negative")
        return 2 * x

    class Trainer:
        limit = 3  # not a function

        def __init__(self) -> None:  # a dunder: never a candidate
            self.calls = 0

        def step(self, x: int) -> tuple[Any, int]:
            events.append(("Trainer.step", x))
            return self, x

        @staticmethod
        def fixed(x: int) -> int:
            events.append(("Trainer.fixed", x))
            return x

        @classmethod
        def made(cls, x: int) -> tuple[type, int]:
            events.append(("Trainer.made", x))
            return cls, x

        class Inner:
            def go(self) -> str:
                events.append("Inner.go")
                return "went"

    class Sub(Trainer):
        pass

    for obj in (train_step, Trainer, Sub):
        obj.__module__ = "jobmod"
    module.train_step = train_step  # type: ignore[attr-defined]
    module.Trainer = Trainer  # type: ignore[attr-defined]
    module.Sub = Sub  # type: ignore[attr-defined]
    module.value = 3  # type: ignore[attr-defined]
    module.nothing = None  # type: ignore[attr-defined]
    return module


@pytest.fixture
def step_on(
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[types.ModuleType, Controller, Log, list[Any], list[Any]]:
    followed: list[Any] = []
    monkeypatch.setattr(user_profiler, "install", lambda c, log: followed.append(c) or True)
    events: list[Any] = []
    return _module(events), Controller(events), Log(), events, followed


def test_step_on_a_function_arms_at_the_first_call_and_counts_each_return(step_on: Any) -> None:
    module, controller, log, events, followed = step_on
    original = module.train_step
    assert wrap_step_function(module, "train_step", controller, log) is True
    assert log.lines == [("info", "steps counted at each return of jobmod:train_step")]
    assert module.train_step.__name__ == "train_step" and module.train_step.__wrapped__ is original
    assert events == [] and followed == []
    assert module.train_step(3) == 6
    assert module.train_step(4) == 8
    with pytest.raises(ValueError, match="negative"):
        module.train_step(-1)
    assert events == [
        "arm",
        ("train_step", 3),
        boundary(),
        ("train_step", 4),
        boundary(),
        ("train_step", -1),
        boundary(),
    ]
    assert followed == [controller]  # the script's profilers followed once, when armed
    assert controller.at_a_step_start  # armed as the first call starts: step 0 is that call, whole


def test_a_step_on_function_that_raises_shows_no_frame_of_npuprof_in_its_traceback(step_on: Any) -> None:
    """helper-182: a --step-on function's exception reads as without npuprof: no wrapper frame in its
    traceback, plain, recursive, generator or coroutine; each return still a boundary."""
    _, controller, log, events, _ = step_on
    module = types.ModuleType("raising")
    code = (
        "def fail(n):\n    if n == 0:\n        raise ValueError('bottom')\n    return fail(n - 1)\n"
        "def gen():\n    yield 1\n    raise ValueError('gen')\n"
        "async def coro():\n    raise ValueError('coro')\n"
    )
    exec(compile(code, "job.py", "exec"), module.__dict__)
    for name in ("fail", "gen", "coro"):
        assert wrap_step_function(module, name, controller, log) is True
    calls = {
        "fail": lambda: module.fail(2),
        "gen": lambda: list(module.gen()),
        "coro": lambda: module.coro().send(None),
    }
    for name, call in calls.items():
        with pytest.raises(ValueError) as raised:
            call()
        frames = _frames_of(raised.value)
        assert [file for file, _ in frames] == ["test_steps_units.py"] * 2 + ["job.py"] * len(frames[2:])
        assert [function for _, function in frames[2:]] == [name] * (3 if name == "fail" else 1), frames
    assert events.count(boundary()) == 3 + 2 + 1  # gen: its item, then the resumption that raised
    for name, call in {"fail": lambda: module.fail(1, 2), "coro": lambda: module.coro(1).send(None)}.items():
        with pytest.raises(TypeError, match="positional argument") as raised:
            call()  # the script's wrong arguments: raised at its calling line, as without npuprof
        assert [file for file, _ in _frames_of(raised.value)] == ["test_steps_units.py"] * 2, name


def test_step_on_a_recursive_function_costs_the_job_no_recursion_depth(step_on: Any) -> None:
    """helper-152: each level of a recursion through a wrapped function is two frames (the wrapper's and
    the function's): a function recursing 600 deep, fine under the limit of 1000, failed with RecursionError
    under npuprof. Each return still counts, and the limit is the job's again once the call returns."""
    _, controller, log, events, _ = step_on
    module = types.ModuleType("recmod")
    exec("def walk(n):\n    return 0 if n == 0 else 1 + walk(n - 1)\n", module.__dict__)
    assert wrap_step_function(module, "walk", controller, log) is True
    limit = sys.getrecursionlimit()
    frames = len(inspect.stack(0))
    sys.setrecursionlimit(frames + 330)  # room for the recursion below and the calls around it, once
    try:
        depth = module.walk(300)
        after = sys.getrecursionlimit()
    finally:
        sys.setrecursionlimit(limit)
    assert depth == 300 and after == frames + 330
    assert events.count(boundary()) == 301
    # a thread started from C: the wrapper is its first frame, with no frame below it to look at
    start_new_thread(module.walk, (2,))
    deadline = time.monotonic() + 10
    while len(events) < 1 + 301 + 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(events) == 1 + 301 + 3 and events[-1][1] != get_ident(), events[-3:]  # "arm" first


def test_recursion_through_a_step_on_function_in_threads_leaves_the_limit_as_it_was(step_on: Any) -> None:
    """The limit's moves for a recursive --step-on function never wait (the step path) and never drift:
    threads recursing at once, or a move that finds the limit being moved (held here, as by another
    thread), leave the job's limit as it was."""
    from npuprof.agent import recursion_limit

    _, controller, log, _, _ = step_on
    module = types.ModuleType("recmod2")
    exec("def walk(n):\n    return 0 if n == 0 else 1 + walk(n - 1)\n", module.__dict__)
    assert wrap_step_function(module, "walk", controller, log) is True
    limit = sys.getrecursionlimit()
    results: list[int] = []
    workers = [
        threading.Thread(target=lambda: results.extend(module.walk(50) for _ in range(200))) for _ in range(4)
    ]
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads taking turns inside the moves
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(60)
    finally:
        sys.setswitchinterval(switch)
    assert results == [50] * 800
    assert sys.getrecursionlimit() == limit and not recursion_limit._OWED
    with recursion_limit._LOCK:  # taken: nothing moves, nothing waits, and the call still returns
        assert module.walk(20) == 20
        assert sys.getrecursionlimit() == limit


def test_step_on_methods_keep_their_kind(step_on: Any) -> None:
    module, controller, log, events, _ = step_on
    trainer_class = module.Trainer
    for qualname in ("Trainer.step", "Trainer.fixed", "Trainer.made", "Trainer.Inner.go"):
        assert wrap_step_function(module, qualname, controller, log) is True
    trainer = trainer_class()
    assert trainer.step(1) == (trainer, 1)
    assert trainer.fixed(2) == 2 and trainer_class.fixed(3) == 3
    assert trainer.made(4) == (trainer_class, 4) and module.Sub.made(5) == (module.Sub, 5)
    assert trainer_class.Inner().go() == "went"
    assert events == [
        "arm",
        ("Trainer.step", 1),
        boundary(),
        ("Trainer.fixed", 2),
        boundary(),
        ("Trainer.fixed", 3),
        boundary(),
        ("Trainer.made", 4),
        boundary(),
        ("Trainer.made", 5),
        boundary(),
        "Inner.go",
        boundary(),
    ]
    assert isinstance(trainer_class.__dict__["fixed"], staticmethod)
    assert isinstance(trainer_class.__dict__["made"], classmethod)


def test_step_on_an_inherited_method_wraps_the_subclass_only(step_on: Any) -> None:
    module, controller, log, events, _ = step_on
    assert wrap_step_function(module, "Sub.step", controller, log) is True
    module.Trainer().step(1)
    module.Sub().step(2)
    assert events == [("Trainer.step", 1), "arm", ("Trainer.step", 2), boundary()]


def test_step_on_a_compiled_models_forward_counts_each_call_and_keeps_the_graph_whole(step_on: Any) -> None:
    """``--step-on Net.forward`` with ``torch.compile(model, fullgraph=True)``: dynamo traced the wrapper
    (its arming, ``threading.get_ident`` at the boundary) and failed the job, which ran bare (with
    ``fullgraph=False`` it split the model's graph there). The wrapper, the compiled frame's first, now runs
    as plain Python with npuprof's code below it, each call a step, and the forward it calls is compiled
    whole. Called inside another compiled function, the wrapper is traced as the forward alone: no step,
    and the job goes on."""
    _module, controller, log, events, _ = step_on
    module = types.ModuleType("compiledmod")

    class Net(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(x) + 1

    Net.__module__ = "compiledmod"
    module.Net = Net  # type: ignore[attr-defined]
    assert wrap_step_function(module, "Net.forward", controller, log) is True
    model = Net()
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    try:
        for _ in range(3):
            assert torch.equal(compiled(-torch.ones(2)), torch.ones(2))
        assert events == ["arm", boundary(), boundary(), boundary()]
        inside = torch.compile(lambda x: model(x).sum(), fullgraph=True, backend="eager")
        assert inside(torch.ones(2)).item() == 4.0
        assert events == ["arm", boundary(), boundary(), boundary()]  # traced: the forward alone
    finally:
        torch._dynamo.reset()


def test_step_on_a_function_wrapped_before_torch_is_imported_counts_its_compiled_calls(
    step_on: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A --step-on function of a module that loads before the script imports torch (it needs none of its
    own) was marked for dynamo at its first call only: ``torch.compile(train_step)`` had traced the wrapper
    at that very call as the function alone and ran that compiled code at every call after: never armed,
    not one step counted. It is marked as soon as torch has loaded (here: the finder's hook run by hand,
    torch being loaded already)."""
    _module, controller, log, events, _ = step_on
    module = types.ModuleType("latetorch")

    def train_step(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) + 1

    train_step.__module__, train_step.__qualname__ = "latetorch", "train_step"
    module.train_step = train_step  # type: ignore[attr-defined]
    monkeypatch.delitem(sys.modules, "torch")
    finders = list(sys.meta_path)
    assert wrap_step_function(module, "train_step", controller, log) is True
    monkeypatch.undo()  # torch is back: what `import torch` did when the script got to it
    for finder in [f for f in sys.meta_path if f not in finders]:
        sys.meta_path.remove(finder)
        assert finder.name == "torch"
        finder.then(sys.modules["torch"])
    compiled = torch.compile(module.train_step, fullgraph=True, backend="eager")
    try:
        for _ in range(3):
            assert torch.equal(compiled(-torch.ones(2)), torch.ones(2))
        assert events == ["arm", boundary(), boundary(), boundary()]
    finally:
        torch._dynamo.reset()


def test_step_on_follows_the_name_bound_again(step_on: Any) -> None:
    """A function or method bound again (a second def, ``Trainer.step = other``) drops npuprof's wrapper:
    the new one is wrapped right there; a wrapper still referenced elsewhere keeps counting, and the name's
    new function is wrapped once that reference goes too."""
    module, controller, log, events, _ = step_on
    assert wrap_step_function(module, "train_step", controller, log) is True
    assert wrap_step_function(module, "Trainer.step", controller, log) is True
    module.train_step = lambda x: events.append(("again", x))
    module.train_step(1)
    module.Trainer.step = lambda self, x: events.append(("method again", x))
    module.Trainer().step(2)
    saved = module.train_step
    module.train_step = lambda x: events.append(("third", x))  # the second wrapper lives on in `saved`
    module.train_step(3)
    saved(4)
    del saved
    module.train_step(5)
    assert events == [
        "arm", ("again", 1), boundary(), ("method again", 2), boundary(),
        ("third", 3), ("again", 4), boundary(), ("third", 5), boundary(),
    ]  # fmt: skip
    again = "was bound again: its new function is followed"
    assert ("info", f"--step-on jobmod:Trainer.step {again}") in log.lines
    assert log.lines.count(("info", f"--step-on jobmod:train_step {again}")) == 2
    module.train_step = 3  # bound to nothing callable: said, never raised
    lost = "was bound again, to something not callable; later steps are not counted"
    assert log.lines[-1] == ("warning", f"--step-on jobmod:train_step {lost}")
    # deleted (or bound to None): nothing is left to hang the watch on; a later def is not followed: said
    assert wrap_step_function(module, "Trainer.fixed", controller, log) is True
    del module.Trainer.fixed
    gone = "was deleted or bound to None; later steps are not counted"
    assert log.lines[-1] == ("warning", f"--step-on jobmod:Trainer.fixed {gone}")


def test_step_on_follows_a_name_deleted_then_defined_again(step_on: Any) -> None:
    """`del train_step` then a new def: the deleted name's place is held (calling it fails as the deleted
    name would) and the next binding is wrapped; the new def was not followed."""
    module, controller, log, events, _ = step_on
    assert wrap_step_function(module, "train_step", controller, log) is True
    module.train_step(1)
    del module.train_step
    with pytest.raises(NameError, match="'train_step' is not defined"):
        module.train_step(2)
    module.train_step = lambda x: events.append(("new", x))
    module.train_step(3)
    assert events == ["arm", ("train_step", 1), boundary(), ("new", 3), boundary()]
    assert ("info", "--step-on jobmod:train_step was bound again: its new function is followed") in log.lines


@pytest.mark.parametrize(
    "qualname", ["missing", "Missing.step", "Trainer.missing", "Trainer.Missing.go", "value", "nothing"]
)
def test_step_on_a_name_that_is_no_function_is_not_found(step_on: Any, qualname: str) -> None:
    module, controller, log, events, _ = step_on
    before = dict(vars(module))
    assert wrap_step_function(module, qualname, controller, log) is False
    assert dict(vars(module)) == before and log.lines == [] and events == []


def test_step_on_an_attribute_of_an_object_without_dict(step_on: Any) -> None:
    module, controller, log, events, _ = step_on

    class Holder:
        __slots__ = ("run",)  # no __dict__: the attribute is read and set as such

    holder = Holder()
    holder.run = lambda: events.append("ran")
    module.holder = holder
    assert wrap_step_function(module, "holder.run", controller, log) is True
    holder.run()
    assert events == ["arm", "ran", boundary()]


# ---- --step-on that names nothing -----------------------------------------------------------------
def _names_module(name: str = "jobmod", file: str | None = "/somewhere/jobmod.py") -> types.ModuleType:
    module = _module([])
    module.__name__ = name
    if file is not None:
        module.__file__ = file

    def evaluate() -> None:
        pass

    evaluate.__module__ = "jobmod"
    module.evaluate = evaluate  # type: ignore[attr-defined]
    module.imported = os.path.join  # defined elsewhere: not a candidate
    module.__private__ = evaluate  # type: ignore[attr-defined]
    return module


def test_missing_target_in_the_script_itself_lists_its_functions_not_a_runner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # examples/train.py defines only main and build_model: a misspelt --step-on there was told that "a
    # script run by a runner defines its functions outside __main__", though it was run by python itself
    script = tmp_path / "train.py"
    script.write_text("def main():\n    pass\n\ndef build_model():\n    pass\n")
    main = types.ModuleType("__main__")
    main.__file__ = str(script)
    exec(compile(script.read_text(), str(script), "exec"), vars(main))
    monkeypatch.setattr(sys, "argv", [str(script)])
    assert missing_target_message(main, "train_stpe", "__main__:train_stpe") == (
        "--step-on __main__:train_stpe: train_stpe not found in __main__ (train.py); no steps counted; "
        "the script's functions there: build_model, main"
    )
    monkeypatch.setattr(sys, "argv", [str(tmp_path / "other.py")])  # a runner's __main__: its own file
    assert "run by a runner" in missing_target_message(main, "train_stpe", "__main__:train_stpe")


def test_defined_functions_are_the_modules_own_functions_and_methods() -> None:
    module = _names_module()
    assert sorted(defined_functions(module)) == sorted(
        [
            "train_step",
            "evaluate",
            "Trainer.step",
            "Trainer.fixed",
            "Trainer.made",
            "Trainer.Inner",
            # Sub's own namespace has no method
        ]
    )


def test_similar_names_closest_first_then_same_last_name() -> None:
    module = _names_module()
    assert similar_names(module, "train_stp") == ["train_step"]  # ratio 0.95; Trainer.step 0.67
    assert similar_names(module, "step") == ["Trainer.step"]  # no close one; same last name
    assert similar_names(module, "train_step") == []  # itself is not "similar"
    assert similar_names(module, "Trainer.stepp") == ["Trainer.step"]  # close, not listed twice
    assert similar_names(module, "Other.Inner.step") == ["Trainer.step"]  # 0.64; the last name is "step"


def test_similar_names_at_most_limit() -> None:
    module = types.ModuleType("many")
    for name in ("step_aa", "step_ab", "step_ac", "step_ad"):
        fn = types.FunctionType((lambda: None).__code__, {}, name)
        fn.__module__ = "many"
        setattr(module, name, fn)
    # "step_ax" against each: 12/14 = 0.857 alike, so difflib orders ties by name, last first
    assert similar_names(module, "step_ax") == ["step_ad", "step_ac", "step_ab"]
    assert similar_names(module, "step_ax", limit=2) == ["step_ad", "step_ac"]
    assert similar_names(module, "step_ax", limit=4) == ["step_ad", "step_ac", "step_ab", "step_aa"]


def test_missing_target_message(monkeypatch: pytest.MonkeyPatch) -> None:
    module = _names_module()
    assert missing_target_message(module, "train_stp", "jobmod:train_stp") == (
        "--step-on jobmod:train_stp: train_stp not found in jobmod; no steps counted; "
        "similar names there: train_step"
    )
    assert missing_target_message(module, "zzz", "jobmod:zzz") == (
        "--step-on jobmod:zzz: zzz not found in jobmod; no steps counted"
    )
    # a name inside a function: not "similar names: train_step" but why it cannot be named
    assert missing_target_message(module, "train_step.inner", "jobmod:train_step.inner") == (
        "--step-on jobmod:train_step.inner: train_step.inner not found in jobmod; no steps counted; "
        "train_step is a function: what it defines inside cannot be named (name a module-level function "
        "or a method of a module-level class)"
    )
    main = _names_module("__main__", "/work/scripts/train.py")
    runner = (
        "; a script run by a runner (runpy, a debugger, pdb, cProfile, exec, multiprocessing's spawn) "
        "defines its functions outside __main__: name a function of a module it imports"
    )
    assert missing_target_message(main, "zzz", "__main__:zzz") == (
        "--step-on __main__:zzz: zzz not found in __main__ (train.py); no steps counted" + runner
    )
    monkeypatch.setattr(sys, "argv", ["/elsewhere/run.py"])
    gone = _names_module("__main__", None)  # python deletes __file__ once the script ends
    assert missing_target_message(gone, "zzz", "__main__:zzz") == (
        "--step-on __main__:zzz: zzz not found in __main__ (run.py); no steps counted" + runner
    )
    other = _names_module("other", None)
    assert missing_target_message(other, "zzz", "other:zzz") == (
        "--step-on other:zzz: zzz not found in other; no steps counted"
    )
    monkeypatch.setattr(sys, "argv", [])
    assert missing_target_message(gone, "zzz", "__main__:zzz") == (
        "--step-on __main__:zzz: zzz not found in __main__; no steps counted" + runner
    )
    assert steps_module.SIMILAR_CUTOFF == 0.75
    nameless = types.SimpleNamespace(step_a=lambda: None)  # no __name__: said as "?"
    assert (
        missing_target_message(nameless, "zzz", "x:zzz")
        == "--step-on x:zzz: zzz not found in ?; no steps counted"
    )
    two = types.ModuleType("two")
    for cls_name in ("A", "B"):
        cls = type(cls_name, (), {"step": lambda self: None, "__module__": "two"})
        setattr(two, cls_name, cls)
    # "step" against "A.step" and "B.step": 8/10 = 0.8 each, ties ordered by name, last first
    assert missing_target_message(two, "step", "two:step") == (
        "--step-on two:step: step not found in two; no steps counted; similar names there: B.step, A.step"
    )


def test_a_limit_the_job_sets_inside_a_recursive_step_function_stays_its_own(step_on: Any) -> None:
    """The wrapper took back its frame of each level from whatever limit was there: a recursive --step-on
    function that set its own limit at its deepest level was left that limit less its depth."""
    _, controller, log, _, _ = step_on
    module = types.ModuleType("recmod3")
    exec(
        "import sys\n"
        "def walk(n):\n"
        "    if n == 0:\n"
        "        sys.setrecursionlimit(5000)\n"
        "        return 0\n"
        "    return 1 + walk(n - 1)\n",
        module.__dict__,
    )
    assert wrap_step_function(module, "walk", controller, log) is True
    limit = sys.getrecursionlimit()
    try:
        assert module.walk(50) == 50
        after = sys.getrecursionlimit()
        sys.setrecursionlimit(limit)
        assert module.walk(0) == 0 and sys.getrecursionlimit() == 5000
    finally:
        sys.setrecursionlimit(limit)
    assert after == 5000


def test_a_failure_in_the_step_hook_never_reaches_the_scripts_optimizer_step(world: World) -> None:
    """npuprof's code in torch's optimizer step hook (an unwrapped class's boundary counted there, another
    thread's step looked at) raised into the script's optimizer.step(), whose thread then ended (seen with
    a broken take-over check: helper-219's); it is said once, and training goes on."""

    def broken() -> bool:
        raise RuntimeError("internal")

    w, opt = make(sgd("Hooked"))
    iterate(w, opt)
    world.controller.driver = get_ident()
    world.controller.foreign_boundary = broken  # type: ignore[method-assign]
    _on_thread(lambda: [iterate(w, opt) for _ in range(3)])  # re-raises what the thread raised
    said = [m for level, m in world.log.lines if "internal" in m]
    assert any("training goes on" in m for m in said), world.log.lines
    assert said[0].startswith("the optimizer step hook failed: RuntimeError('internal')"), said
