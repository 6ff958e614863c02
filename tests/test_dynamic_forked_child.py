"""Dynamic capture in a forked child that trains (helper-207), in-process with a real fork: the plan is
driven through the real controller with a recording backend (test_dynamic_units.Job)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from test_dynamic_units import Job

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or sys.platform != "linux", reason="fork")


def _in_child(job: Job, body: Any) -> dict[str, Any]:
    """Fork; in the child, reset as the agent's at-fork hook does and run ``body(job)``; its result back."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            os.close(read)
            job.controller.reset_after_fork()
            begun = len(job.sink.events)
            job.controller.arm()  # training starts in the child: its own watcher
            job.plan.first_look()
            result = body(job)
            result["events"] = [list(e[:2]) for e in job.sink.events[begun:]]
            os.write(write, json.dumps(result).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 1 << 16):
        chunks.append(chunk)
    os.close(read)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return json.loads(b"".join(chunks))


def test_a_forked_child_numbers_its_own_captures(tmp_path: Path) -> None:
    """The child's "capture N of steps" lines counted on from its parent's captures, and npuprof status
    showed that count as the child's (2 captures for its first)."""
    from npuprof.cli.status import _processes

    job = Job(tmp_path)
    job.steps(3)
    job.write(start_step=-1, active=1, trigger_id="parent")
    job.steps(4)
    assert job.captures() == [(4, 4)]
    job.write(start_step=0, trigger_id="cancel")  # what the child finds: no capture to take again
    job.log()

    def child(job: Job) -> dict[str, Any]:
        job.steps(3)
        job.write(start_step=-1, active=1, trigger_id="child")
        job.steps(4)
        job.plan.poll_once()
        return {"pid": os.getpid()}

    result = _in_child(job, child)
    assert [e[0] for e in result["events"]].count("finish") == 1, result
    (row,) = [p for p in _processes(job.dir / "log") if p["pid"] == result["pid"]]
    assert row["capture_count"] == 1, row
    text = next((job.dir / "log").glob(f"dp_*_{result['pid']}_rank_*.log")).read_text()
    assert "capture 1 of steps" in text and "capture 2 of" not in text, text


def test_a_forked_child_does_not_take_again_a_request_its_parent_read(tmp_path: Path) -> None:
    """A child forked less than 5 s (the clock slack) after a request its parent captured took it for its
    own and captured it again, from its step 1; the parent's reading of it is the child's."""
    job = Job(tmp_path)
    job.steps(3)
    job.write(start_step=-1, active=1, trigger_id="parent")
    job.steps(4)
    assert job.captures() == [(4, 4)]

    def child(job: Job) -> dict[str, Any]:
        job.steps(6)
        job.write(start_step=-1, active=2, trigger_id="child")  # its own request is its own
        job.steps(4)
        job.plan.poll_once()
        return {"pid": os.getpid()}

    result = _in_child(job, child)
    assert result["events"] == [["begin", 7], ["finish", 8]], result
    text = next((job.dir / "log").glob(f"dp_*_{result['pid']}_rank_*.log")).read_text()
    assert "(trigger parent)" not in text and "the process this one forked from read the file" in text, text


def test_a_request_whose_capture_was_skipped_neither_holds_back_nor_becomes_the_next(tmp_path: Path) -> None:
    """A request whose capture could not begin (the script's own profiler ran, the disk was full) kept its
    window: a later request was said to wait for "a capture" that did not run, and the decision it asked
    for opened the skipped request's window after all (500 steps) with its settings; the later one never
    ran."""
    job = Job(tmp_path)
    job.steps(3)
    refusal = job.controller._refusal
    job.controller._refusal = lambda step: (False, "the script's own profiler is running")  # type: ignore[method-assign]
    job.write(start_step=-1, active=500, with_stack=True, trigger_id="long")
    job.steps(3)
    job.controller._refusal = refusal  # type: ignore[method-assign]
    job.write(start_step=-1, active=2, trigger_id="again")
    job.steps(5)
    assert job.captures() == [(7, 8)], job.captures()
    assert not job.backend.configs[-1].with_stack
    text = job.log()
    assert "capture at step 4 skipped" in text and "waits for its end" not in text, text
