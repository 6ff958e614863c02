"""What a job profiled for days must not accumulate, capture after capture (helper-133)."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from conftest import npuprof, rank_dirs

# only reference counting frees memory here: what just the cyclic collector would free (late: a full
# collection comes hundreds of captures apart in a process that imported torch) stays and is counted
COUNTS_LIVE_PROFILERS = """
import gc, json, sys
gc.disable()
import torch
net = torch.nn.Linear(8, 1)
sgd = torch.optim.SGD(net.parameters(), lr=0.01)
for i in range(12):
    net(torch.randn(4, 8)).sum().backward()
    sgd.step()
alive = [o for o in gc.get_objects() if isinstance(o, torch.profiler.profile)]
json.dump(len(alive), open(sys.argv[1], "w"))
"""


def test_a_profiler_npuprof_has_done_with_is_freed_at_once(out: Path, tmp_path: Path) -> None:
    """--repeat 0 with --wait makes a new profiler each cycle; each stopped one, with every event of its
    capture, stayed in a reference cycle (torch's action_map, npuprof's step/stop wrappers) until a full
    collection: a job of 1,500 ops a step grew from 310 to 762 MB over 100 captures, where a hand-written
    profiler kept for the whole job stayed at 334 MB (agent/backends/base.py, release_profiler)."""
    script = tmp_path / "counts.py"
    script.write_text(COUNTS_LIVE_PROFILERS)
    report = tmp_path / "alive.json"
    result = npuprof(
        "run", "-o", str(out), "--no-analyse", "--skip-first", "1", "--wait", "1", "--warmup", "0",
        "--active", "1", "--repeat", "0", "--", sys.executable, str(script), str(report), timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert len(rank_dirs(out)) >= 5  # five profilers made and let go, a sixth may record at the end
    assert json.loads(report.read_text()) <= 1


@contextlib.contextmanager
def _handover_to_a_full_pipe(post: Any = None) -> Iterator[Any]:
    """A hand-over (``post``'s, if given) whose post-processor's pipe is full and whose writer blocks: the
    post-processor that far behind. The writer is let go and the pipe closed after."""
    import os
    import threading

    from npuprof.owned_fd import OwnedFd
    from npuprof.results import postprocess

    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    with contextlib.suppress(BlockingIOError):
        while True:
            os.write(write_end, b"x" * 4096)  # full
    os.set_blocking(write_end, True)
    handover = postprocess._Handover(OwnedFd(write_end), post)
    if post is not None:
        post._handover = handover
    released = threading.Event()
    handover._write = lambda job: released.wait(timeout=60)  # type: ignore[method-assign,assignment]
    try:
        yield handover
    finally:
        released.set()
        os.close(read_end)


def test_a_process_ends_without_waiting_on_a_pipe_that_stays_full() -> None:
    """Captures came faster than they were parsed: at the process's end the jobs still queued wait to reach
    the post-processor's pipe, 5 s at most, then go to its spool. A pipe that stays full moves none of them:
    every process of the job waited the whole 5 s at its exit (helper-133: 344 captures queued). It stops
    waiting once the pipe has stayed full for DRAIN_STALLED_S."""
    import time

    with _handover_to_a_full_pipe() as handover:
        for n in range(4):
            handover.put({"n": n})
        began = time.monotonic()
        left = handover.drain(timeout_s=30)
        waited = time.monotonic() - began
        assert [job["n"] for job in left] == [0, 1, 2, 3]  # the one in the writer's hands included
        assert waited < 10, waited  # not the 30 s it was given (0.5 s stalled, under any load)


def test_the_jobs_kept_in_memory_for_a_post_processor_far_behind_stay_bounded(tmp_path: Path) -> None:
    """A CPU-bound job starves its post-processor (SCHED_IDLE): its pipe fills and every later capture's
    job waited in the training process's memory, for days (helper-187: 300 jobs after 15,000 steps with a
    capture every 50, +6.5 MB RSS). Past QUEUE_LIMIT waiting, the next ones go straight to its spool, parsed
    after the job as those left at its end; those go after them, none replacing them."""

    from npuprof.results import handover as wire
    from npuprof.results import postprocess

    post = postprocess.Postprocessor(tmp_path, "run")
    post.spool = tmp_path / "spool.jsonl"
    record = wire.record_plain(wire.CaptureRecord(status="complete", steps=[7]))
    total = 2_000
    with _handover_to_a_full_pipe(post) as handover:
        for n in range(total):
            handover.put({"rank_dir": str(tmp_path / f"capture_{n}"), "record": record, "written": True})
            assert handover.queue.qsize() <= postprocess.QUEUE_LIMIT <= 1_000, n  # a few MB at most
        spilled = [wire.job_from_line(line).rank_dir for line in post.spool.read_bytes().splitlines()]
        assert len(spilled) == total - postprocess.QUEUE_LIMIT
        assert spilled[0].endswith(f"capture_{postprocess.QUEUE_LIMIT}") and spilled[-1].endswith(
            f"_{total - 1}"
        )
        left = handover.drain(timeout_s=30)  # the process ends: the pipe still full
        assert len(left) == postprocess.QUEUE_LIMIT  # the one in the writer's hands included
        assert post.spool_left(left) == []
    lines = post.spool.read_bytes().splitlines()
    assert sorted(int(wire.job_from_line(line).rank_dir.rsplit("_", 1)[1]) for line in lines) == list(
        range(total)
    )


def test_chrome_trace_copies_without_a_post_processor_leave_no_exit_hook_per_capture(tmp_path: Path) -> None:
    """--export-chrome-trace where no post-processor takes the copy: each capture's copy thread was
    registered with atexit, one entry (and its thread) per capture for the job's life. One hook now, and
    only the copies still running are kept; each copy is still whole."""
    import atexit
    import threading

    from npuprof.agent import chrome_trace

    class Log:
        def info(self, message: str) -> None:
            pass

        def warn_once(self, key: str, message: str) -> None:
            raise AssertionError(message)

    source = tmp_path / "trace.json"
    source.write_text('{"traceEvents": []}')
    chrome_trace.copy_in_background(source, tmp_path / "copy_first.json", Log())
    hooks = atexit._ncallbacks()
    for n in range(300):
        chrome_trace.copy_in_background(source, tmp_path / f"copy_{n}.json", Log())
    assert atexit._ncallbacks() == hooks
    for thread in threading.enumerate():
        if thread.name == "npuprof-chrome-trace":
            thread.join(30)
    assert len(chrome_trace._copying) <= 300  # what was running at the last start: all done now
    assert all(not thread.is_alive() for thread in chrome_trace._copying)
    chrome_trace.copy_in_background(source, tmp_path / "copy_last.json", Log())
    assert len(chrome_trace._copying) <= 2
    chrome_trace._join_copies()
    assert all((tmp_path / f"copy_{n}.json").read_text() == source.read_text() for n in range(300))


def test_jobs_spilled_to_a_post_processor_that_died_are_kept_unparsed_not_lost(tmp_path: Path) -> None:
    """Past QUEUE_LIMIT jobs waiting, the next ones went to the post-processor's spool; when it died (killed
    during the run) and none replaced it (the kill came after the last capture, or its restarts were spent),
    the process's end handed back only the jobs still in memory: the spilled ones stayed in a spool nobody
    reads, their captures never parsed nor said (helper-188). They are taken back, kept unparsed as the
    others (docs/architecture.md, "The step path")."""

    from npuprof.results import handover as wire
    from npuprof.results import postprocess

    post = postprocess.Postprocessor(tmp_path, "run")
    post.spool = tmp_path / "spool.jsonl"
    record = wire.record_plain(wire.CaptureRecord(status="complete", steps=[7]))
    total = postprocess.QUEUE_LIMIT + 5
    with _handover_to_a_full_pipe(post) as handover:
        for n in range(total):
            handover.put({"rank_dir": str(tmp_path / f"capture_{n}"), "record": record, "written": True})
        assert handover.spilled == 5
        left = handover.drain(timeout_s=30)
        handover.broken = True  # its pipe said EPIPE: the post-processor is gone, none replaced it
        kept = post.spool_left(left)
    assert sorted(int(job["rank_dir"].rsplit("_", 1)[1]) for job in kept) == list(range(total))
    assert all(job["record"]["steps"] == [7] and job["written"] for job in kept)
    assert not post.spool.exists()  # taken: not parsed a second time by anyone


def test_the_spool_never_grows_past_what_its_reader_reads(tmp_path: Path, monkeypatch: Any) -> None:
    """Jobs spilled during the run were appended to the spool whatever its size; past SPOOL_LIMIT its
    reader (spooled_jobs) takes it for a file npuprof did not write and reads none of it: every spilled
    capture lost without a word (helper-188). An append that would take it past the limit is refused:
    the job waits in memory, or is kept unparsed at the end, as when the disk is full."""
    from npuprof.results import postprocess

    spool = tmp_path / "spool.jsonl"
    line = b'{"rank_dir":"x"}\n'
    monkeypatch.setattr(postprocess, "SPOOL_LIMIT", 10 * len(line))
    appended = 0
    for _ in range(15):
        with contextlib.suppress(OSError):
            postprocess.append_to_spool(spool, line)
            appended += 1
    assert appended == 10
    assert list(postprocess.spooled_jobs(spool)) == [line.strip()] * 10
