"""One process, a gloo world of one: each step a user range around the forward pass, a mark and an
all_reduce (a ``comm:`` range under ``--msprof-tx``); step --gc-step collects 300 cycles of garbage
(tests/test_marks_analysis.py). Runs as well under plain ``python``."""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile

import torch
import torch.distributed as dist
from torch import nn

import npuprof

CYCLES = 300


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--gc-step", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as rendezvous:
        dist.init_process_group(
            "gloo", init_method=f"file://{os.path.join(rendezvous, 'store')}", rank=0, world_size=1
        )
        torch.manual_seed(0)
        model = nn.Linear(32, 16)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for step in range(args.steps):
            npuprof.mark("step begin")
            optimizer.zero_grad()
            with npuprof.range("forward"):
                loss = model(torch.randn(8, 32)).square().mean()
            loss.backward()
            dist.all_reduce(model.weight.grad)
            if step == args.gc_step:
                for _ in range(CYCLES):
                    cycle: list[object] = []
                    cycle.append(cycle)
                gc.collect()
            optimizer.step()
        dist.destroy_process_group()
    print("marks gc job done", flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
