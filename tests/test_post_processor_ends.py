"""How a training process tells, and says, why its background post-processor ended: one whose pipe the
script closed (``os.closerange``, as daemonising code does) ended at the EOF that made, and was not
killed; one killed (kill -9, an OOM kill) was found dead. The run summary counts only the latter as deaths
(npuprof.results.postprocess.deaths_in; tests/test_run_reasons.py has the summary's words)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from analyse_support.handmade import cpu_trace, write_rank_dir
from conftest import post_processor_pid, post_processor_served, wait_for_end

from npuprof.owned_fd import OwnedFd
from npuprof.results import handover, postprocess, spawner

RUN_ID = "abcdef123456"


class Said:
    """The agent's log, as the post-processor's handle speaks to it."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, message: str) -> None:
        self.lines.append(message)

    warning = error = info

    def warn_once(self, key: str, message: str) -> None:
        self.lines.append(message)


@pytest.fixture
def said(monkeypatch: pytest.MonkeyPatch) -> Said:
    log = Said()
    monkeypatch.setattr(postprocess, "_agent_log", lambda: log)
    monkeypatch.delenv(spawner.ENV_SPAWN, raising=False)  # started through sh: no launcher here
    return log


def _job(tmp_path: Path) -> dict[str, Any]:
    """A capture to gzip (no parse: the test is of who takes it, not of the parse)."""
    rank_dir = write_rank_dir(tmp_path, cpu_trace(), name="host_1_20250101000000000")
    (trace,) = rank_dir.glob("*.pt.trace.json")
    return _job_of(trace)


def _job_of(trace: Path) -> dict[str, Any]:
    rank_dir = trace.parent
    record = handover.CaptureRecord(status="complete", trace=trace.name, steps=[7])
    return {
        "rank_dir": str(rank_dir), "trace": str(trace), "record": handover.record_plain(record),
        "analyse": False, "gzip": True, "written": True,
    }  # fmt: skip


ENDS = ["the script closed its pipe", "the script closed its pipe, it runs yet", "killed"]


@pytest.mark.parametrize("end", ENDS)
def test_a_post_processor_whose_pipe_the_script_closed_is_not_found_dead(
    tmp_path: Path, said: Said, end: str
) -> None:
    """helper-151: a forked child that closed every descriptor (os.closerange(3, 65536)) closed its
    post-processor's pipe, which ended at the EOF; the run's summary said it "was found dead (killed? out of
    memory?)". Its end is now told by our pipe: closed by the script, that ended it (or ends it once it is
    done), and a new post-processor takes the next capture all the same; a post-processor killed while our
    pipe to it was whole is still one found dead."""
    post = postprocess.Postprocessor(tmp_path, RUN_ID)
    post.start()
    old = post_processor_pid(post)
    try:
        if end == "killed":
            os.kill(old, signal.SIGKILL)
        else:
            if end.endswith("runs yet"):
                os.kill(old, signal.SIGSTOP)  # it cannot see the EOF, and lives on
            os.closerange(post._pipe, post._pipe + 1)  # type: ignore[arg-type]
        if not end.endswith("runs yet"):
            wait_for_end(old)
        job = _job(tmp_path)
        assert post.submit(job)
        new = post_processor_pid(post)
    finally:
        with contextlib.suppress(ProcessLookupError):  # where it was stopped: it ends at its EOF
            os.kill(old, signal.SIGCONT)
        post.forget()
    wait_for_end(new)
    assert new != old
    assert Path(job["trace"] + ".gz").is_file()  # taken by the new one
    (line,) = said.lines
    if end == "killed":
        assert postprocess.deaths_in([line]) == {str(old)}, line
        assert not postprocess.pipe_closed(line), line
    else:
        assert postprocess.deaths_in([line]) == set(), line
        assert postprocess.pipe_closed(line) and f"post-processor pid {old} " in line, line
        fate = "it ends once done" if end.endswith("runs yet") else "it ended of that (its input closed)"
        assert fate in line, line


@pytest.mark.parametrize("closed_by", ["the script", "its reader's end"])
def test_the_hand_over_tells_a_pipe_the_script_closed_from_a_dead_post_processor(
    said: Said, closed_by: str
) -> None:
    """The hand-over thread, finding our pipe's number no longer ours (closed by the script between the
    capture's end and its write), said "the background post-processor has ended (the script closed it)":
    a death to the run summary. Only a write that fails (EPIPE: nobody reads) is one now."""
    read_end, write_end = os.pipe()
    handing = postprocess._Handover(OwnedFd(write_end), SimpleNamespace(pid=7))  # type: ignore[arg-type]
    os.close(write_end if closed_by == "the script" else read_end)
    try:
        assert handing._write(_job_of(Path("/nowhere"))) is False
    finally:
        os.close(read_end if closed_by == "the script" else write_end)
    assert handing.broken
    (line,) = said.lines
    if closed_by == "the script":
        assert postprocess.deaths_in([line]) == set() and postprocess.pipe_closed(line), line
    else:
        assert "(pid 7) has ended (Broken pipe)" in line and postprocess.deaths_in([line]) == {"7"}, line


@pytest.mark.parametrize("closed", ["its pipe", "every descriptor of it"])
def test_a_post_processor_held_when_the_script_closed_its_pipe_is_let_go(
    tmp_path: Path, said: Said, monkeypatch: pytest.MonkeyPatch, closed: str
) -> None:
    """helper-151: a script that closed every descriptor (or only the job pipe) during a capture, while the
    post-processor was held (stopped, so that its work does not slow the steps recorded), left it stopped
    until the training process ended, with the captures it was handed unparsed till then: the capture's end
    hands its trace over (and replaces the post-processor) before it continues the one it held, and our
    pidfd of it may be gone. It is continued as it is replaced, by pid where the pidfd was closed."""
    from conftest import wait_for_state

    post, old = post_processor_served(tmp_path, RUN_ID, monkeypatch)  # hold() needs the spawner
    try:
        deadline = time.monotonic() + 20
        while not post._held and time.monotonic() < deadline:  # held once it may be (see hold)
            post.hold(True)
            time.sleep(0.01)
        assert wait_for_state(old, {"T"}) == "T"
        mine = [post._pipe] if closed == "its pipe" else [post._pipe, post._pidfd, post._ready_fd]
        for fd in mine:
            os.close(fd)  # type: ignore[arg-type]
        assert post.submit(_job(tmp_path))  # the capture's end: its trace handed over first ...
        post.hold(False)  # ... then the hold lifted
        wait_for_end(old)  # continued, it ends at its EOF (left stopped, it would not)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(old, signal.SIGCONT)
        post.forget()
    (line,) = said.lines
    assert postprocess.deaths_in([line]) == set() and postprocess.pipe_closed(line), line


def test_the_post_processor_that_ends_after_the_last_replacement_is_said_too(
    tmp_path: Path, said: Said, monkeypatch: pytest.MonkeyPatch
) -> None:
    """helper-216: four kills of a training process's post-processor read "found dead 3 time(s)" in the
    run's summary: the one killed after RESTARTS replacements was not replaced, and not said either. It is
    said once (a death the summary counts), and its captures are kept unparsed."""
    monkeypatch.setattr(postprocess, "RESTARTS", 0)  # the last replacement made
    post = postprocess.Postprocessor(tmp_path, RUN_ID)
    post.start()
    old = post_processor_pid(post)
    try:
        os.kill(old, signal.SIGKILL)
        wait_for_end(old)
        assert not post.submit(_job(tmp_path))
        assert not post.submit(_job(tmp_path / "later"))
    finally:
        post.forget()
    (line,) = said.lines
    assert postprocess.deaths_in([line]) == {str(old)}, line
    assert "not replaced" in line and "kept unparsed" in line, line


def test_what_a_post_processor_meets_in_an_output_made_read_only_is_in_the_log(
    tmp_path: Path, said: Said
) -> None:
    """helper-355: the output directory made read-only during the run (a read-only bind mount over it) and
    writable again later: the post-processor opened npuprof.log for each line, so its reasons for the
    captures it could not write were lost, and the run's summary said of them "a post-processor stopped,
    killed, or still at work". It holds the log open from its start, as the agent does."""
    out = tmp_path / "out"
    out.mkdir()
    job = _job(out)
    (out / "npuprof.log").write_text("")  # the launcher's, made at the run's start
    post = postprocess.Postprocessor(out, RUN_ID)
    post.start()
    pid = post_processor_pid(post)  # its ready line: it holds the log from before it
    bound = subprocess.run(["mount", "--bind", str(out), str(out)], capture_output=True, text=True)
    if bound.returncode != 0:
        post.forget()
        pytest.skip(f"cannot bind-mount here (needs root or CAP_SYS_ADMIN): {bound.stderr.strip()}")
    try:
        made = subprocess.run(["mount", "-o", "remount,ro,bind", str(out)], capture_output=True, text=True)
        assert made.returncode == 0, made.stderr
        assert post.submit(job)
        post.forget()
        wait_for_end(pid)
    finally:
        subprocess.run(["umount", "-l", str(out)], capture_output=True, check=False)
    lines = [
        line for line in (out / "npuprof.log").read_text().splitlines() if f"[postprocess pid={pid}" in line
    ]
    rank_dir = Path(job["rank_dir"]).name
    assert any(f"{rank_dir}: " in line and "Read-only file system" in line for line in lines), lines
