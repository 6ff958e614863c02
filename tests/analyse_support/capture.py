"""Capture a real Kineto trace on CPU into an npuprof-style rank dir (1 process, or one per torchrun rank).

Usage: python capture.py OUT_ROOT [--gzip-rank R]
"""

from __future__ import annotations

import gc
import gzip
import json
import os
import shutil
import socket
import sys
import time

import torch
import torch.distributed as dist


def main() -> None:
    out_root = sys.argv[1]
    gzip_rank = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[2] == "--gzip-rank" else -1
    distributed = "RANK" in os.environ
    if distributed:
        dist.init_process_group("gloo")
    rank = dist.get_rank() if distributed else 0
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    stamp = time.strftime("%Y%m%d%H%M%S") + "000"
    rank_dir = os.path.join(out_root, f"{socket.gethostname()}_{os.getpid()}_{stamp}_ascend_pt")
    os.makedirs(rank_dir)

    def on_ready(prof: torch.profiler.profile) -> None:
        trace = os.path.join(rank_dir, f"{socket.gethostname()}.{time.time_ns()}.pt.trace.json")
        prof.export_chrome_trace(trace)
        if rank == gzip_rank:
            with open(trace, "rb") as src, gzip.open(trace + ".gz", "wb") as dst:
                shutil.copyfileobj(src, dst)
            os.unlink(trace)

    schedule = torch.profiler.schedule(skip_first=1, wait=1, warmup=1, active=2, repeat=1)
    with torch.profiler.profile(
        schedule=schedule, record_shapes=True, profile_memory=True, with_stack=True, on_trace_ready=on_ready
    ) as prof:
        for _ in range(6):
            loss = model(torch.randn(32, 64)).sum()
            loss.backward()
            if distributed:
                for p in model.parameters():
                    dist.all_reduce(p.grad)
            opt.step()
            opt.zero_grad()
            prof.step()
    info = {
        "config": {"common_config": {"record_shapes": True, "profile_memory": True, "with_stack": True}},
        "torch_version": torch.__version__,
        "rank_id": rank,
    }
    name = f"profiler_info_{rank}.json" if distributed else "profiler_info.json"
    with open(os.path.join(rank_dir, name), "w") as handle:
        json.dump(info, handle, indent=4)
    if distributed:
        dist.destroy_process_group()
        sys.stdout.flush()
        os._exit(0)
    gc.freeze()  # skip the exit-time collection over torch's objects (atexit runs before it)


if __name__ == "__main__":
    main()
