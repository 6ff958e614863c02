"""What npuprof's marks and communication ranges cost a call, outside and inside a capture.

    .venv/bin/python bench/marks.py            # ~20 s
    .venv/bin/python bench/marks.py --quick    # a few seconds: smoke test only, figures meaningless

In one process, with torch imported (the marks then know where they would go): blocks of calls of
``npuprof.mark``, ``range_start`` + ``range_end``, ``with npuprof.range``, and a torch.distributed function
wrapped by ``--msprof-tx`` (npuprof/agent/comm_marks.py; its wrapper around a function that does nothing,
so the figure is the wrapper's alone), interleaved round by round with blocks of an empty function call:
the baseline of the same run (a bare ``with`` block for ``npuprof.range``, the unwrapped function for the
wrapper), timed by the thread's CPU time. Budget (issue 13): <= 1 µs added a call outside a capture
(a pair, a ``with`` block, counts as one). Inside a torch.profiler capture they are timed for scale
against torch's own ``record_function``; what ``--msprof-tx`` adds to a recorded training step (the budget
inside captures) is bench/marks_capture.py's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import print_table, verdict

BUDGET_US = 1.0


def empty(message: str, stream: object = None) -> None:
    return None


def per_call_ns(
    body: Callable[[int], None], calls: int, rounds: int, baseline: Callable[[int], None]
) -> tuple[float, float]:
    """Median ns a call of ``body`` and of ``baseline``, blocks interleaved (ABBA) round by round."""
    ours: list[float] = []
    base: list[float] = []
    clock = time.thread_time_ns  # the thread's CPU time: steady on a shared machine (bench/_common.py)
    for round_no in range(2 * rounds):
        first_ours = round_no % 2 == (round_no // 2) % 2
        for which in ((body, ours), (baseline, base)) if first_ours else ((baseline, base), (body, ours)):
            start = clock()
            which[0](calls)
            which[1].append((clock() - start) / calls)
    return statistics.median(ours), statistics.median(base)


def _row(label: str, ours_ns: float, base_ns: float, base_name: str, budget: str) -> list[str]:
    added = (ours_ns - base_ns) / 1000
    ratio = f", x{ours_ns / base_ns:.1f}" if base_ns > 0 else ""
    return [
        label,
        f"{base_name} {base_ns / 1000:.3f} µs",
        f"{ours_ns / 1000:.3f} µs",
        f"{added:+.3f} µs a call{ratio}",
        budget,
        verdict(added, BUDGET_US) if budget != "-" else "-",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes: checks the bench runs, nothing more"
    )
    args = parser.parse_args()
    calls, rounds = (2_000, 3) if args.quick else (50_000, 11)

    import torch

    import npuprof
    from npuprof.agent import comm_marks

    def noop_collective(tensor: object, group: object = None) -> None:
        return None

    comm_marks.set_enabled(True)  # as under --msprof-tx: the wrapper asks whether a capture records
    c10d = sys.modules["torch.distributed.distributed_c10d"]  # where the wrapper looks up the group
    wrapped = comm_marks._wrap("all_reduce", "tensor", noop_collective, c10d)
    tensor = torch.zeros(4)

    def empties(n: int) -> None:
        for _ in range(n):
            empty("dataloader")

    def marks(n: int) -> None:
        for _ in range(n):
            npuprof.mark("dataloader")

    def pairs(n: int) -> None:
        for _ in range(n):
            npuprof.range_end(npuprof.range_start("dataloader"))

    def blocks(n: int) -> None:
        for _ in range(n):
            with npuprof.range("dataloader"):
                pass

    def collectives(n: int) -> None:
        for _ in range(n):
            wrapped(tensor)

    def empty_collectives(n: int) -> None:
        for _ in range(n):
            noop_collective(tensor)

    class Bare:
        """The least a context manager costs: the baseline of ``with npuprof.range``."""

        __slots__ = ()

        def __enter__(self) -> None:
            return None

        def __exit__(self, *exc: object) -> None:
            return None

    def bare_blocks(n: int) -> None:
        for _ in range(n):
            with Bare():
                pass

    def torch_blocks(n: int) -> None:
        for _ in range(n):
            with torch.autograd.profiler.record_function("dataloader"):
                pass

    cases = [
        ("npuprof.mark outside a capture", marks, empties, "an empty call"),
        ("range_start + range_end outside a capture", pairs, empties, "an empty call"),
        ("with npuprof.range outside a capture", blocks, bare_blocks, "a bare with block"),
        (
            "--msprof-tx wrapper on a torch.distributed call, outside a capture",
            collectives,
            empty_collectives,
            "the bare function",
        ),
    ]
    rows = []
    for label, body, baseline, base_name in cases:
        ours, base = per_call_ns(body, calls, rounds, baseline)
        rows.append(_row(label, ours, base, base_name, f"<= +{BUDGET_US:g} µs"))
    from torch.profiler import ProfilerActivity, profile

    inside = max(calls // 20, 200)
    comm_marks.start_collecting()  # as an npuprof capture on torch.profiler: comm: ranges kept in memory
    with profile(activities=[ProfilerActivity.CPU]):
        for label, body, baseline, base_name in (
            ("npuprof.mark inside a capture (for scale)", marks, torch_blocks, "a record_function block"),
            (
                "with npuprof.range inside a capture (for scale)",
                blocks,
                torch_blocks,
                "a record_function block",
            ),
            (
                "--msprof-tx wrapper inside a capture (for scale)",
                collectives,
                empty_collectives,
                "the bare function",
            ),
        ):
            ours, base = per_call_ns(body, inside, rounds, baseline)
            rows.append(_row(label, ours, base, base_name, "-"))
    comm_marks.stop_collecting()
    print_table(
        f"npuprof marks (torch {torch.__version__}, {calls} calls x {rounds} rounds, medians)",
        ["what", "baseline (same run)", "npuprof", "added", "budget", "verdict"],
        rows,
        notes=["--quick: figures meaningless"] if args.quick else [],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
