"""npuprof.analysis.forked: results and errors come back from forked children; columns go to them."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import numpy as np
import pytest

from npuprof.analysis.forked import Forked, SharedColumns
from npuprof.analysis.trace_loader import TraceError


@dataclass
class Pair:
    ids: np.ndarray
    times: np.ndarray


class Unpicklable(Exception):
    def __init__(self, a: int, b: int) -> None:  # pickling passes only the message: unpickling fails
        super().__init__(f"{a}/{b}")


@pytest.mark.parametrize("fork", [True, False])
def test_result_and_errors(fork: bool) -> None:
    parent = os.getpid()
    assert Forked(fork, lambda: (os.getpid() != parent, np.arange(3))).result()[0] is fork
    with pytest.raises(TraceError) as info:
        Forked(fork, lambda: (_ for _ in ()).throw(TraceError("corrupt", "bad bytes"))).result()
    assert info.value.kind == "corrupt"

    def unpicklable() -> None:
        raise Unpicklable(1, 2)

    with pytest.raises(RuntimeError if fork else Unpicklable, match="1/2"):
        Forked(fork, unpicklable).result()


def test_inline_job_runs_only_when_asked() -> None:
    ran: list[int] = []
    job = Forked(False, lambda: ran.append(1))
    assert ran == []
    job.close()  # the caller is failing: the job is dropped
    assert ran == []


@pytest.mark.parametrize("fork", [True, False])
def test_shared_columns_reach_the_child(fork: bool) -> None:
    shared = SharedColumns(Pair, 1000, fork)
    child = Forked(
        fork, lambda: float(shared.get().times.sum()) + int(shared.get().ids[-1]), shared.after_fork
    )
    value = Pair(np.arange(1000, dtype=np.int32), np.linspace(0.0, 1.0, 1000))
    shared.publish(value)  # after the fork, as the nesting is
    assert child.result() == pytest.approx(float(value.times.sum()) + 999)


def test_child_sees_a_parent_that_gave_up() -> None:
    shared = SharedColumns(Pair, 10, True)
    child = Forked(True, lambda: shared.get(), shared.after_fork)
    shared.close()  # the parent failed before publishing
    with pytest.raises(RuntimeError, match="before handing over its Pair"):
        child.result()


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_a_forked_child_dies_with_its_parent(how: str) -> None:
    """helper-172: an analyse ended by SIGTERM (``timeout``) or kill -9 left its forked children working,
    which then renamed a db into the rank dir and wrote scratch its parent had removed. A real parent
    process: it forks a child that would work 60 s, says the child's pid, and is killed."""
    import signal
    import subprocess
    import sys
    import time

    parent = subprocess.Popen(
        [sys.executable, "-c",
         "import time\nfrom npuprof.analysis.forked import Forked\n"
         "child = Forked(True, lambda: time.sleep(60))\nprint(child.pid, flush=True)\ntime.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        parent.send_signal(getattr(signal, how))
        assert parent.wait(10) == -getattr(signal, how)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _alive(child):
            time.sleep(0.02)
        assert not _alive(child), f"the forked child {child} outlived its parent"
    finally:
        parent.kill()
        parent.wait()


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, which init reaps at once, does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_parse_pool_workers_die_with_analyse(how: str) -> None:
    """helper-223: an analyse of several unparsed rank dirs, ended by SIGTERM or kill -9, left the
    processes of its parsing pool (report.parse_all) sleeping for good, their parent gone (two such
    processes of a killed analyse were still there 38 minutes later). A real parent process: its pool's
    workers say their pids and would parse for 60 s; it is killed."""
    import signal
    import subprocess
    import sys
    import time

    # each worker says its pid in one write: two print()s interleaved on the pipe ("1234" "5678" "\n" "\n")
    parent = subprocess.Popen(
        [sys.executable, "-c",
         "import os, time\nfrom pathlib import Path\nfrom npuprof.analysis import report\n"
         "def slow(d, *args):\n    os.write(1, b'%d\\n' % os.getpid())\n    time.sleep(60)\n"
         "report.parse_rank_dir = slow\n"
         "report.parse_all([Path('/nonexistent/a'), Path('/nonexistent/b')], 2, False)\n"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    workers: list[int] = []
    try:
        assert parent.stdout is not None
        workers = [int(parent.stdout.readline()), int(parent.stdout.readline())]
        parent.send_signal(getattr(signal, how))
        assert parent.wait(10) == -getattr(signal, how)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(w) for w in workers):
            time.sleep(0.02)
        left = [w for w in workers if _alive(w)]
        assert not left, f"the parsing processes {left} outlived analyse"
    finally:
        parent.kill()
        parent.wait()
        for w in workers:  # without the fix: not left sleeping after the test
            with contextlib.suppress(OSError):
                os.kill(w, signal.SIGKILL)
