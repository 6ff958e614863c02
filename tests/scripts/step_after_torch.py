"""A loop whose step is defined after torch is imported, for ``--step-on __main__:...``
(tests/test_step_on_main.py). ``python step_after_torch.py STEPS``; under torchrun the ranks all-reduce
their gradients (gloo).

The loop calls ``Trainer.step`` only through a bound method saved before the loop, and ``Trainer.step``
calls ``train_step`` only through a reference saved right after its ``def``: each return counts once,
whichever of the two ``--step-on`` names. Call ``k`` (from 0) runs in a ``call#k`` range."""

import gc
import os
import sys

import torch
import torch.distributed as dist

if "RANK" in os.environ:
    dist.init_process_group("gloo")
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)


CALLS: list = []


def train_step(model, opt, x):
    with torch.profiler.record_function(f"call#{len(CALLS)}"):  # the trace tells the calls apart
        CALLS.append(1)
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        if dist.is_initialized():
            for p in model.parameters():
                dist.all_reduce(p.grad)
        opt.step()
        return loss.item()


SAVED_STEP = train_step


class Trainer:
    def __init__(self, model, opt):
        self.model, self.opt = model, opt

    def step(self, x):
        return SAVED_STEP(self.model, self.opt, x)


def main() -> None:
    run = Trainer(model, opt).step
    for _ in range(int(sys.argv[1])):
        run(torch.randn(4, 8))


if __name__ == "__main__":
    main()
    if dist.is_initialized():
        dist.destroy_process_group()
        os._exit(0)  # see tests/test_run_torchrun.py: a worker may abort at exit after destroy_process_group
    gc.freeze()  # skip the exit-time collection over torch's objects (atexit runs before it)
