"""Findings of helper-205, a new user's training scripts (main() with argparse, gradient accumulation, GANs,
torch.compile, DataLoader workers, torchrun): each test fails without its fix."""

from __future__ import annotations

from typing import Any

import pytest
from test_steps_units import ALTERNATES, World, _world, iterate, make, sgd


class _Log:
    """A marks implementation that writes each range's start and end into a list."""

    gate = None

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.next_id = 0

    def range_start(self, name: str, stream: Any) -> int:
        self.next_id += 1
        self.log.append(f"[{name}")
        return self.next_id

    def range_end(self, range_id: int) -> None:
        self.log.append("]")


def test_a_range_called_with_no_name_is_named_by_its_function_and_never_raises() -> None:
    """``@npuprof.range()`` (the decorator called, as most decorators are) raised ``TypeError: missing 1
    required positional argument: 'name'`` at the script's import, under npuprof and without it, where the
    README says a call never raises and ``@npuprof.range`` with no name names the range by the function.
    So did ``with npuprof.range():``. Both are named now: by the function ranged, by the code of the
    ``with``."""
    from npuprof import marks

    log: list[str] = []
    saved = marks._impl
    marks._use(_Log(log))
    try:

        @marks.range()
        def load(x: int) -> int:
            log.append("body")
            return x + 1

        class Model:
            @marks.range()
            @staticmethod
            def fixed(x: int) -> int:
                return x * 2

        def train_step() -> None:
            with marks.range():
                log.append("block")

        assert load(1) == 2 and load.__name__ == "load"
        assert Model.fixed(3) == 6
        train_step()
        prefix = "test_a_range_called_with_no_name_is_named_by_its_function_and_never_raises.<locals>."
        assert log == [
            f"[{prefix}load",
            "body",
            "]",
            f"[{prefix}Model.fixed",
            "]",
            f"[{prefix}train_step",
            "block",
            "]",
        ], log
    finally:
        marks._use(saved)


def test_a_critic_stepping_first_several_times_an_iteration_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    """A WGAN whose critic's loop (5 steps) comes before the generator's step: the critic steps first, so it
    counts steps, 5 an iteration (60 steps for 12 iterations), and nothing said so; the generator stepping
    first is said (the two alternate). Said once now, on stderr too."""
    world: World = _world(monkeypatch)
    dw, critic = make(sgd("Critic"))
    gw, gen = make(sgd("Gen"))
    for _ in range(4):
        for _ in range(5):
            iterate(dw, critic)
        iterate(gw, gen)
    said = [line for kind, line in world.log.lines if kind == "warn_once"]
    assert said == [
        "the optimizer Critic (2 parameters) counts steps and steps 5 times to each step() of Gen (2 "
        "parameters) (steps 5-15): each of its step() is a step; if one iteration of your job runs those 5 "
        "(a WGAN's critic loop before its generator's step), it holds as many steps: to count iterations, "
        "name the function of one iteration with --step-on MODULE:QUALNAME"
    ]
    assert world.controller.step == 20  # counted as before: one step a critic step


def test_an_optimizer_stepped_once_an_epoch_before_its_batches_is_not_said_to_make_iterations_several(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A second optimizer stepped once at each epoch's start, before the epoch's 8 batches: it steps first
    and counts, the batches' optimizer takes over at its third step, and the first one stepping again
    looks like a WGAN's generator before its critic's loop. The steps are the batches, one an iteration,
    which stderr called "several per iteration of the job": hedged now."""
    world: World = _world(monkeypatch)
    ew, per_epoch = make(sgd("PerEpoch"))
    bw, per_batch = make(sgd("PerBatch"))
    epochs, batches = 3, 8
    for _ in range(epochs):
        iterate(ew, per_epoch)
        for _ in range(batches):
            iterate(bw, per_batch)
    said = [line for kind, line in world.log.lines if kind == "warn_once"]
    assert said == [
        "the optimizer PerEpoch (2 parameters) still steps after PerBatch (2 parameters) took over counting "
        "steps (at step 1, when it stepped 3 times in a row): the two alternate, so from step 1 on a step is "
        "one step() of PerBatch (2 parameters), " + ALTERNATES
    ]
    assert world.controller.step == 1 + epochs * batches  # the first epoch step, then one a batch


def test_an_optimizer_stepping_twice_in_iterations_apart_is_not_said_to_step_more_often(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The counting optimizer's step with another's two steps before it, then one without, then again
    with two: not the pattern of an optimizer stepped every other iteration (two steps of the other before
    each of the counting one's), nothing said."""
    world: World = _world(monkeypatch)
    aw, a = make(sgd("A"))
    bw, b = make(sgd("B"))
    for others in (0, 2, 0, 2, 0, 2, 0):
        for _ in range(others):
            iterate(bw, b)
        iterate(aw, a)
    assert [kind for kind, _ in world.log.lines] == ["info"], world.log.lines
    assert world.controller.step == 7


def test_two_optimizers_stepping_once_each_an_iteration_say_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The other side of the test above: D then G once each an iteration."""
    world: World = _world(monkeypatch)
    aw, a = make(sgd("A"))
    bw, b = make(sgd("B"))
    for _ in range(6):
        iterate(aw, a)
        iterate(bw, b)
    assert [kind for kind, _ in world.log.lines] == ["info"], world.log.lines
    assert world.controller.step == 6


def test_a_discriminator_stepping_first_every_other_iteration_is_said(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A GAN whose discriminator steps first, every other iteration, the generator at each: the
    discriminator counts steps (the generator's 2 steps in a row never take over), so 12 iterations were
    6 steps, each holding 2, and nothing said so. Said once now, on stderr too, hedged: a generator
    stepped twice an iteration makes the same pattern."""
    world: World = _world(monkeypatch)
    dw, disc = make(sgd("Disc"))
    gw, gen = make(sgd("Gen"))
    iterations = 12
    for i in range(iterations):
        if i % 2 == 0:
            iterate(dw, disc)
        iterate(gw, gen)
    said = [line for kind, line in world.log.lines if kind == "warn_once"]
    assert said == [
        "the optimizer Disc (2 parameters) counts steps and Gen (2 parameters) steps 2 times to each of its "
        "step() (steps 1-2): each step holds 2 step() of Gen; if one iteration of your job steps Gen once "
        "(Disc stepped every 2 iterations: a discriminator's), a step holds 2 iterations: to count "
        "iterations, name the function of one iteration with --step-on MODULE:QUALNAME"
    ]
    assert world.controller.step == iterations // 2  # counted as before: one step a discriminator step


def _report(restart_counts: list[int]) -> Any:
    import json

    from npuprof.analysis.report_schema import REPORT_VERSION, read_report
    from npuprof.analysis.summary_schema import SUMMARY_ORDER

    step = {"step": 6, **dict.fromkeys(SUMMARY_ORDER, 0.0), "duration_us": 1000.0}
    ranks = [
        {
            "rank": rank, "rank_dir": f"out/vm_{100 + rank}_ascend_pt", "status": "parsed", "device": "CPU",
            "trace": "t.json", "steps": [step], "step_time_mean_us": 1000.0, "top_operators": [],
            "top_kernels": [], "memory_peak_mb": None, "memory_peak_reserved_mb": None, "communication": {},
            "restart_count": count,
        }
        for rank, count in enumerate(restart_counts)
    ]  # fmt: skip
    cross = {"steps": [], "slowest": None, "start_skew": []}
    return read_report(
        json.dumps(
            {
                "version": REPORT_VERSION,
                "path": "out",
                "steps_filter": None,
                "ranks": ranks,
                "problems": [],
                "cross_rank": cross,
            }
        )
    )


def test_a_torchrun_job_never_restarted_has_no_attempt_in_its_titles() -> None:
    """Every torchrun job's rank titles said "attempt 0" (its records keep TORCHELASTIC_RESTART_COUNT),
    where the README's example of a 2-rank torchrun report has none and says analyse names the attempt of a
    restarted job's captures. Named only when some capture is of a later attempt."""
    import io

    from rich.console import Console

    from npuprof.reports import terminal

    def titles(counts: list[int]) -> list[str]:
        out = io.StringIO()
        terminal.render_table(_report(counts), Console(file=out, width=200))
        return [line.strip() for line in out.getvalue().splitlines() if line.startswith("rank ")]

    assert titles([0, 0]) == ["rank 0  (CPU, out/vm_100_ascend_pt)", "rank 1  (CPU, out/vm_101_ascend_pt)"]
    assert titles([0, 1]) == [
        "rank 0  (CPU, attempt 0, out/vm_100_ascend_pt)",
        "rank 1  (CPU, attempt 1, out/vm_101_ascend_pt)",
    ]
