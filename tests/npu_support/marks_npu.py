"""An NPU-style loop (``import torch_npu``) that uses npuprof's marks and a one-rank gloo group, run by
tests/test_marks.py under ``npuprof run --msprof-tx --level none`` with the torch_npu stand-in first on
PYTHONPATH. Usage: marks_npu.py STEPS"""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist
import torch_npu  # noqa: F401  (an NPU script imports it)

import npuprof

STREAM = "stream-0"  # handed through to mstx as given (the stand-in has no device streams)


def main() -> None:
    steps = int(sys.argv[1])
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(steps):
        npuprof.mark("npu step")
        with npuprof.range("npu forward", stream=STREAM):
            loss = model(torch.randn(4, 8)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        for param in model.parameters():
            dist.all_reduce(param.grad)
        optimizer.step()
    dist.destroy_process_group()
    print(f"trained {steps} steps", flush=True)


if __name__ == "__main__":
    main()
    import gc

    gc.freeze()  # skip the exit-time collection over torch's objects (atexit runs before it)
