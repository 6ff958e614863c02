"""A small training job for trying npuprof: runs on the CPU in seconds, and under torchrun (gloo).

python examples/train.py --steps 20
torchrun --nproc-per-node 2 examples/train.py --steps 20
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist
from torch import nn


def build_model(width: int) -> nn.Module:
    return nn.Sequential(
        nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--width", type=int, default=128)
    args = parser.parse_args()

    distributed = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    if distributed:
        dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = build_model(args.width)
    if distributed:
        model = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    for step in range(args.steps):
        inputs = torch.randn(args.batch, 64)
        targets = torch.randint(0, 10, (args.batch,))
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        if step % 10 == 0 and (not distributed or dist.get_rank() == 0):
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    if distributed:
        dist.barrier()
        dist.destroy_process_group()
        # torchrun workers occasionally abort at interpreter exit after destroy_process_group;
        # leaving at once avoids it (measured-facts.md).
        os._exit(0)


if __name__ == "__main__":
    main()
