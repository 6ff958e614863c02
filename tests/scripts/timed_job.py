"""A job for --delay/--duration: torch ops for SECONDS after `import torch`, with no step at all, or
(--steps) one SGD step every ~0.15 s. Writes the wall-clock time before and after `import torch` to OUT.
With --steps-after S (and --steps) the steps begin after S seconds of torch ops without a step.
With --join-first S the main thread first waits S seconds in Thread.join (and OUT says when it ended).
With --until-captured DIR the job ends as soon as its own capture under DIR is complete (its record says
so), SECONDS being then the most it runs; the --join-first thread then ends 1.6 s after that, S being the
most it waits (and OUT says when it ended)."""

import gc
import glob
import json
import os
import sys
import threading
import time

out, seconds = sys.argv[1], float(sys.argv[2])
until = sys.argv[sys.argv.index("--until-captured") + 1] if "--until-captured" in sys.argv else None


def captured() -> bool:
    """This process's capture under ``until`` is complete."""
    if until is None:
        return False
    for path in glob.glob(os.path.join(until, "*_ascend_pt", "npuprof_capture.json")):
        try:
            with open(path) as handle:
                record = json.load(handle)
        except (OSError, ValueError):
            continue
        if record.get("pid") == os.getpid() and record.get("status") == "complete":
            return True
    return False


before = time.time()
import torch  # noqa: E402  (the agent wakes in this import: the time around it is the test's reference)

after = time.time()
times = {"before_import": before, "after_import": after}
if "--join-first" in sys.argv:
    limit = float(sys.argv[sys.argv.index("--join-first") + 1])

    def wait() -> None:
        if until is None:
            time.sleep(limit)
        else:
            deadline = time.monotonic() + limit
            while time.monotonic() < deadline and not captured():
                time.sleep(0.05)
            time.sleep(max(0.0, min(1.6, deadline - time.monotonic())))
        times["waiter_ended"] = time.time()

    waiter = threading.Thread(target=wait)
    waiter.start()
    waiter.join()
    times["join_ended"] = time.time()
with open(out, "w") as handle:
    json.dump(times, handle)
a = torch.randn(64, 64)
if "--steps-after" in sys.argv:  # torch ops without a step for S seconds, then steps
    setup_end = time.monotonic() + float(sys.argv[sys.argv.index("--steps-after") + 1])
    while time.monotonic() < setup_end:
        torch.mm(a, a)
        time.sleep(0.02)
if "--steps" in sys.argv:
    model = torch.nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
end = time.monotonic() + seconds
while time.monotonic() < end:
    torch.mm(a, a)
    if "--steps" in sys.argv:
        model(torch.randn(8, 16)).sum().backward()
        time.sleep(0.15)
        opt.step()
        opt.zero_grad()
    else:
        time.sleep(0.1)
    if captured():
        break
gc.freeze()  # skip the exit-time collection over torch's objects (atexit runs before it)
