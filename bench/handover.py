"""What a thread training beside a driving thread that waits costs per step, when npuprof does not read
that wait as a wait for it (docs/architecture.md, "Step boundaries": a thread that takes 3 step boundaries
while the driving one takes none looks at the driver's wait, to take the steps over).

    .venv/bin/python bench/handover.py            # ~1 minute on 2 quiet cores
    .venv/bin/python bench/handover.py --quick    # a few seconds: smoke test only, figures meaningless

In one process, no torch: the main thread takes step 0 of a ``CaptureController`` (no capture near), then
waits in a way npuprof does not take for a wait on the training thread: polling a flag held by a variable
of its function (named once in the log), or an Event of its own set from elsewhere (nothing found).
A training thread runs ~1 ms steps of pure-Python work, each followed by the controller's boundary, whose
CPU time it takes (the steps' own is too noisy for a µs). The looks' baseline, in the same round, is the
same boundary with the looks taken out; the rows for scale look at the driver every third step, as npuprof
did before its looks were spaced (``LOOK_SPACING`` 0), and set that boundary beside an empty function
(between 1 ms steps its code runs from cold caches: ~3 µs, where a tight loop of them takes ~0.5 µs).
Budget: the looks' 0.1 % of the step that ``LOOK_SPACING`` gives them, <= 1 µs a 1 ms step.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import median, paired_diff, print_table, verdict

from npuprof.agent import controller as controller_module
from npuprof.agent.controller import CaptureController
from npuprof.agent.schedule import SchedulePlan
from npuprof.config import ProfileConfig, Schedule

BUDGET_US = 1.0  # 0.1 % of the 1 ms step: what LOOK_SPACING allows them
STEP_S = 0.001


class _Log:
    """What the controller logs, kept (the local flag's line is checked: the wait is the one meant)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, message: str) -> bool:
        self.lines.append(message)
        return True

    warning = error = info

    def warn_once(self, key: str, message: str) -> bool:
        return self.info(message)


def _controller(log: _Log) -> CaptureController:
    never = Schedule(skip_first=1 << 40)
    controller = CaptureController(
        ProfileConfig(),
        SchedulePlan(never),
        backend_factory=lambda: None,
        sink_factory=lambda backend: None,
        log=log,  # type: ignore[arg-type]
        rank_fn=lambda: 0,
    )
    controller.arm()
    controller.on_boundary()  # step 0 on the main thread: it drives
    return controller


def _spin_per_step() -> int:
    """Iterations of an empty loop that take ~STEP_S of CPU."""
    n, start = 200_000, time.thread_time()
    for _ in range(n):
        pass
    return max(1, int(n * STEP_S / max(time.thread_time() - start, 1e-6)))


def _train(boundary: Callable[[], None], steps: int, spin: int, state: dict[str, Any]) -> None:
    clock, spent = time.thread_time_ns, 0
    for _ in range(steps):
        for _ in range(spin):
            pass
        start = clock()
        boundary()
        spent += clock() - start
    state["ns"] = spent / steps
    state["done"] = True  # after the loop: the driver's local flag (the wait npuprof names, unread)


def _polls_a_local_flag(state: dict[str, Any], ready: threading.Event) -> None:
    while not state["done"]:
        time.sleep(0.01)


def _polls_its_event(state: dict[str, Any], ready: threading.Event) -> None:
    while not ready.is_set():
        time.sleep(0.01)


WAITS = {
    "polling a flag of its function's": _polls_a_local_flag,
    "polling an Event set elsewhere": _polls_its_event,
}


def one_run(wait: Callable[..., None], steps: int, spin: int, how: str) -> tuple[float, list[str]]:
    """CPU ns per boundary of the training thread: ``how`` "empty" (an empty function), "no look" (the
    boundary with its looks at the driver taken out), "spaced" (npuprof's), "every third" (a look every
    third boundary, as before)."""
    log = _Log()
    controller = _controller(log)
    state: dict[str, Any] = {"done": False}
    ready = threading.Event()
    boundary = (lambda: None) if how == "empty" else controller.on_boundary
    saved = (
        controller_module.LOOK_SPACING,
        controller_module._waits_for_other_threads,
        CaptureController._say_unread_wait,
    )
    if how == "every third":
        controller_module.LOOK_SPACING = 0
    if how == "no look":
        controller_module._waits_for_other_threads = lambda driver: False
        CaptureController._say_unread_wait = lambda self: None  # type: ignore[method-assign]
    try:
        thread = threading.Thread(target=_train, args=(boundary, steps, spin, state), name="trainer")
        thread.start()
        finisher = threading.Thread(target=lambda: (thread.join(), ready.set()), name="finisher")
        finisher.start()
        wait(state, ready)
        thread.join()
        finisher.join()
    finally:
        (
            controller_module.LOOK_SPACING,
            controller_module._waits_for_other_threads,
            CaptureController._say_unread_wait,
        ) = saved
    if controller.driver != threading.get_ident():
        raise SystemExit("the training thread took the steps over: not the wait this bench measures")
    return state["ns"], log.lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes: checks the bench runs, nothing more"
    )
    args = parser.parse_args()
    steps, rounds = (200, 1) if args.quick else (2_000, 3)
    spin = _spin_per_step()
    rows = []
    for label, wait in WAITS.items():
        samples: dict[str, list[float]] = {"empty": [], "no look": [], "spaced": [], "every third": []}
        names = list(samples)
        for round_no in range(rounds):
            shift = round_no % len(names)
            for how in names[shift:] + names[:shift]:
                samples[how].append(one_run(wait, steps, spin, how)[0])
        rows += _rows(label, samples)
    print_table(
        f"handover.py: {steps} steps of ~{STEP_S * 1000:g} ms CPU, {rounds} rounds, "
        "CPU time of the boundary, "
        "medians",
        ["case", "baseline (same run)", "npuprof", "added", "budget", "verdict"],
        rows,
    )
    return 0


def _rows(label: str, samples: dict[str, list[float]]) -> list[list[str]]:
    rows = []
    for how, baseline, name, budget in (
        ("spaced", "no look", "npuprof's looks at the driver's wait", f"<= +{BUDGET_US:g} µs"),
        ("every third", "no look", "(for scale: a look every third step, as before)", "-"),
        ("no look", "empty", "(for scale: its boundary, looks taken out, vs an empty function)", "-"),
    ):
        added = paired_diff(samples[how], samples[baseline]) / 1000
        rows.append(
            [
                f"a training thread's step, the driver {label}: {name}",
                f"{baseline} {median(samples[baseline]) / 1000:.2f} µs",
                f"{median(samples[how]) / 1000:.2f} µs",
                f"{added:+.2f} µs a step",
                budget,
                verdict(added, BUDGET_US) if budget != "-" else "-",
            ]
        )
    return rows


if __name__ == "__main__":
    sys.exit(main())
