"""A job for --delay/--duration: torch ops for SECONDS after `import torch`, with no step at all, or
(--steps) one SGD step every ~0.15 s. Writes the wall-clock time before and after `import torch` to OUT.
With --join-first S the main thread first waits S seconds in Thread.join (and OUT says when it ended)."""

import json
import sys
import threading
import time

out, seconds = sys.argv[1], float(sys.argv[2])
before = time.time()
import torch  # noqa: E402  (the agent wakes in this import: the time around it is the test's reference)

after = time.time()
times = {"before_import": before, "after_import": after}
if "--join-first" in sys.argv:
    waiter = threading.Thread(target=time.sleep, args=(float(sys.argv[sys.argv.index("--join-first") + 1]),))
    waiter.start()
    waiter.join()
    times["join_ended"] = time.time()
with open(out, "w") as handle:
    json.dump(times, handle)
a = torch.randn(64, 64)
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
