"""A configurable tiny training loop for npuprof's tests."""

from __future__ import annotations

import argparse
import gc
import os
import signal
import sys
import time

import torch
from torch import nn


class PlainSGD(torch.optim.Optimizer):
    """A custom optimizer with its own step(), as users write them."""

    def __init__(self, params, lr: float = 0.01) -> None:
        super().__init__(params, {"lr": lr})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-group["lr"])
        return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument(
        "--optimizer", default="sgd", choices=["sgd", "adam", "custom", "two", "lbfgs", "scaler"]
    )
    parser.add_argument("--exit-code", type=int, default=0)
    parser.add_argument("--signal-self-at", type=int, default=-1, help="SIGTERM itself at this step")
    parser.add_argument("--sleep", type=float, default=0.0, help="seconds per step")
    parser.add_argument("--own-profiler-at", type=int, default=-1, help="start a torch profiler at this step")
    parser.add_argument("--marker", default="", help="file to touch when training ends")
    parser.add_argument("--loader-workers", type=int, default=0, help="feed batches through a DataLoader")
    args = parser.parse_args()

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    second = nn.Linear(4, 4)
    if args.optimizer == "sgd":
        opts = [torch.optim.SGD(model.parameters(), lr=0.01)]
    elif args.optimizer == "adam":
        opts = [torch.optim.Adam(model.parameters())]
    elif args.optimizer == "custom":
        opts = [PlainSGD(model.parameters())]
    elif args.optimizer == "two":  # a GAN-like loop: two optimizers step every iteration
        opts = [torch.optim.Adam(model.parameters()), torch.optim.SGD(second.parameters(), lr=0.01)]
    elif args.optimizer == "lbfgs":
        opts = [torch.optim.LBFGS(model.parameters(), max_iter=3)]
    else:
        opts = [torch.optim.SGD(model.parameters(), lr=0.01)]
    scaler = torch.amp.GradScaler("cpu", enabled=True) if args.optimizer == "scaler" else None
    own_profiler = None
    batches = None
    if args.loader_workers:
        data = torch.utils.data.TensorDataset(
            torch.randn(8 * args.steps, 16), torch.randint(0, 4, (8 * args.steps,))
        )
        batches = iter(torch.utils.data.DataLoader(data, batch_size=8, num_workers=args.loader_workers))

    for step in range(args.steps):
        if step == args.own_profiler_at:
            own_profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
            own_profiler.start()
        if step == args.signal_self_at:
            os.kill(os.getpid(), signal.SIGTERM)
        x, y = next(batches) if batches is not None else (torch.randn(8, 16), torch.randint(0, 4, (8,)))

        def closure(x=x, y=y):
            opts[0].zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            return loss

        if args.optimizer == "lbfgs":
            opts[0].step(closure)
        elif scaler is not None:
            opts[0].zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opts[0])
            scaler.update()
        else:
            for opt in opts:
                opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y) + second(model(x)).pow(2).mean()
            loss.backward()
            for opt in opts:
                opt.step()
        if args.sleep:
            time.sleep(args.sleep)
    if own_profiler is not None:
        own_profiler.stop()
        own_profiler.export_chrome_trace(os.path.join(os.path.dirname(args.marker or "."), "own_trace.json"))
    if args.marker:
        with open(args.marker, "w") as handle:
            handle.write("done\n")
    # The suite runs this script hundreds of times: what it made (torch's objects above all) is kept out of
    # the interpreter's last collection, which walks them all (~0.5 CPU-s a run, measured). atexit (npuprof's
    # finalisation) runs as before; the suite's other jobs end as scripts usually do.
    gc.freeze()
    sys.exit(args.exit_code)


if __name__ == "__main__":
    main()
