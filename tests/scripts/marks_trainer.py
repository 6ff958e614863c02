"""A tiny training loop that uses npuprof's marks API and, under torchrun (gloo), all_reduce, broadcast
and send/recv every step; at step --gc-step it collects 200 cycles of garbage inside the range
"forced_gc" (tests/test_marks.py). Runs as well under plain ``python``, without npuprof."""

from __future__ import annotations

import argparse
import gc
import os
import time

import torch
import torch.distributed as dist
from torch import nn

import npuprof

CYCLES = 200


@npuprof.range("backward")
def backward(loss: torch.Tensor) -> None:
    loss.backward()


def make_cycles(count: int) -> None:
    for _ in range(count):
        cycle: list[object] = []
        cycle.append(cycle)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--gc-step", type=int, default=3)
    args = parser.parse_args()
    distributed = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    if distributed:
        dist.init_process_group("gloo")
    rank = dist.get_rank() if distributed else 0
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    npuprof.mark("train start")
    for step in range(args.steps):
        npuprof.mark("step begin")
        range_id = npuprof.range_start("dataloader")
        inputs, targets = torch.randn(8, 16), torch.randn(8, 4)
        npuprof.range_end(range_id)
        optimizer.zero_grad()
        with npuprof.range("forward"):
            loss = nn.functional.mse_loss(model(inputs), targets)
        backward(loss)
        if distributed:
            for param in model.parameters():
                dist.all_reduce(param.grad)
            dist.broadcast(torch.arange(5, dtype=torch.int64), src=0)
            buffer = torch.zeros(7, dtype=torch.float64)
            if rank == 0:
                dist.send(buffer + step, dst=1)
            else:
                dist.recv(buffer, src=0)
        if step == args.gc_step:
            with npuprof.range("forced_gc"):
                make_cycles(CYCLES)
                time.sleep(0.002)  # margins: the test places the collection inside this range by its clock
                gc.collect()
                time.sleep(0.002)
        optimizer.step()
    print(f"marks trainer done, rank {rank}", flush=True)
    if distributed:
        dist.destroy_process_group()
        os._exit(0)  # see tests/test_run_torchrun.py: a worker may abort at exit after destroy_process_group
    gc.freeze()  # skip the exit-time collection over torch's objects (after the GC-watch's capture)


if __name__ == "__main__":
    main()
