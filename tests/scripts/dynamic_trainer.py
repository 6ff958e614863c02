"""A training loop that runs until told to stop, for dynamic capture (alone, or one rank of a gloo torchrun).

Prints ``rank R step S`` after each optimizer step (S: the steps done, npuprof's step number of the step
that begins next), so that a test knows how far the job is; stops once ``--stop FILE`` exists (or after
``--max-steps``).
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from pathlib import Path

import torch
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stop", type=Path, required=True)
    parser.add_argument("--sleep", type=float, default=0.02, help="seconds per step")
    parser.add_argument("--max-steps", type=int, default=3000)
    parser.add_argument(
        "--os-exit", type=int, default=None, help="end by os._exit(CODE), as torchrun scripts do"
    )
    args = parser.parse_args()
    distributed = "RANK" in os.environ
    if distributed:
        import torch.distributed as dist

        dist.init_process_group("gloo")
    rank = int(os.environ.get("RANK", "0"))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    step = 0
    while step < args.max_steps:
        opt.zero_grad()
        nn.functional.cross_entropy(model(torch.randn(8, 16)), torch.randint(0, 4, (8,))).backward()
        if distributed:
            for p in model.parameters():
                dist.all_reduce(p.grad)
        opt.step()
        step += 1
        print(f"rank {rank} step {step}", flush=True)
        if distributed:  # every rank stops at the same step, or a collective would wait for ever
            flag = torch.tensor([1.0 if args.stop.exists() else 0.0])
            dist.all_reduce(flag)
            if flag.item() > 0:
                break
        elif args.stop.exists():
            break
        time.sleep(args.sleep)
    if args.os_exit is not None:
        os._exit(args.os_exit)  # no exit hook runs: npuprof must say its last words by itself
    if distributed:
        import atexit

        dist.destroy_process_group()
        atexit._run_exitfuncs()  # npuprof's exit hooks (its last log lines), then:
        os._exit(0)  # a gloo worker can abort at interpreter exit after destroy_process_group
    gc.freeze()  # skip the exit-time collection over torch's objects (atexit runs before it)


if __name__ == "__main__":
    main()
