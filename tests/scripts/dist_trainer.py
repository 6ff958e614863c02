"""A 2-rank gloo training loop that can make one rank hang or die mid-run (fault tests)."""

from __future__ import annotations

import argparse
import os
import signal
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--hang-rank", type=int, default=-1, help="this rank stops joining collectives")
    parser.add_argument("--kill-rank", type=int, default=-1, help="this rank SIGKILLs itself")
    parser.add_argument("--at", type=int, default=-1, help="step of the hang or the kill")
    parser.add_argument("--marks", default="", help="directory for pid and progress marks")
    parser.add_argument(
        "--slow-export-rank", type=int, default=-1, help="this rank's trace export takes 1.5 s more"
    )
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if rank == args.slow_export_rank:
        export = torch.profiler.profile.export_chrome_trace

        def slow_export(prof: torch.profiler.profile, path: str) -> None:  # a big trace's export
            time.sleep(1.5)
            export(prof, path)

        torch.profiler.profile.export_chrome_trace = slow_export
    marks = Path(args.marks) if args.marks else None
    if marks is not None:
        (marks / f"rank{rank}.pid").write_text(str(os.getpid()))
    torch.manual_seed(rank)
    model = nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(args.steps):
        if step == args.at and rank == args.kill_rank:
            os.kill(os.getpid(), signal.SIGKILL)
        if step == args.at and rank == args.hang_rank:
            while True:  # alive, but never joins the collective below
                time.sleep(1)
        if step == args.at and marks is not None:
            (marks / f"rank{rank}.blocked").write_text(str(step))
        opt.zero_grad()
        nn.functional.mse_loss(model(torch.randn(8, 16)), torch.randn(8, 4)).backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        opt.step()
        if args.sleep:
            time.sleep(args.sleep)
    dist.destroy_process_group()
    os._exit(0)  # see tests/test_run_torchrun.py: a worker may abort at exit after destroy_process_group


if __name__ == "__main__":
    main()
