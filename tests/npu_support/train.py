"""A tiny training loop written as for an Ascend NPU (``import torch_npu``), run by the NPU tests under
``npuprof run`` with the torch_npu stand-in first on PYTHONPATH. Usage: train.py STEPS [EXIT_CODE]"""

from __future__ import annotations

import os
import sys

import torch
import torch_npu  # noqa: F401  (an NPU script imports it; torch_npu's own profiling mode starts here)


def main() -> None:
    steps = int(sys.argv[1])
    exit_code = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    print(f"pid {os.getpid()}", flush=True)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(steps):
        loss = model(torch.randn(4, 8)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"trained {steps} steps", flush=True)
    sys.exit(exit_code)


if __name__ == "__main__":
    main()
