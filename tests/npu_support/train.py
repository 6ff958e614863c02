"""A tiny training loop written as for an Ascend NPU (``import torch_npu``), run by the NPU tests under
``npuprof run`` with the torch_npu stand-in first on PYTHONPATH. Usage: train.py STEPS [EXIT_CODE]"""

from __future__ import annotations

import gc
import os
import sys
import time

import torch
import torch_npu  # noqa: F401  (an NPU script imports it; torch_npu's own profiling mode starts here)


def _note_worker(_worker_id: int) -> None:
    with open(os.environ["NPU_TRAIN_WORKER_PIDS"], "a") as f:  # each forked worker's pid, a line each
        f.write(f"{os.getpid()}\n")
    gc.collect()  # as a worker's own allocations make Python do, at a time no one chooses


def main() -> None:
    steps = int(sys.argv[1])
    exit_code = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    print(f"pid {os.getpid()}", flush=True)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    workers = int(os.environ.get("NPU_TRAIN_FORKED_WORKERS", "0"))  # DataLoader workers forked each step
    data = torch.utils.data.TensorDataset(torch.randn(8, 8))
    # a step's host-only work: loading its data first (seconds), a buffer of that many MB held a while
    # (host work, no device task) before the optimizer's update
    load_s = float(os.environ.get("NPU_TRAIN_LOAD_S", "0"))
    buffer_mb = int(os.environ.get("NPU_TRAIN_BUFFER_MB", "0"))
    for _ in range(steps):
        if load_s:
            time.sleep(load_s)
        if workers:
            for _batch in torch.utils.data.DataLoader(
                data,
                batch_size=4,
                num_workers=workers,
                multiprocessing_context="fork",
                worker_init_fn=_note_worker,
            ):
                pass
        loss = model(torch.randn(4, 8)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        if buffer_mb:
            buffer = torch.empty(buffer_mb << 20, dtype=torch.uint8)
            time.sleep(0.002)
            del buffer
        optimizer.step()
    print(f"trained {steps} steps", flush=True)
    gc.freeze()  # torch's objects kept out of the interpreter's last collection, as tests/scripts/trainer.py
    sys.exit(exit_code)


if __name__ == "__main__":
    main()
