"""agent/entry.py + agent/chrome_trace.py: an --export-chrome-trace copy made without a post-processor for
the capture that the process's exit finalises (a schedule cut short by the job's end, --delay without
--duration). atexit's wait for the copies, registered at the first copy, runs before the agent's exit hook
(registered earlier: the last registered runs first), or never (registered during the exit, or under
os._exit): that copy's daemon thread died with the interpreter, the file never written, nothing said.

In-process: the agent's exit (as test_run_reasons drives it) with a controller whose finish at exit makes
such a copy, slowed as on a busy filesystem."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from npuprof.agent import chrome_trace, entry
from npuprof.config import ProfileConfig

SLOW_S = 0.3  # each copy's stall before it writes


class _Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, message: str) -> None:
        self.lines.append(message)

    def warn_once(self, key: str, message: str) -> None:
        self.lines.append(message)


@pytest.fixture
def slow_copies(monkeypatch: pytest.MonkeyPatch) -> _Log:
    """chrome_trace's copies in a fresh state (none under way, its atexit wait not registered in this
    process), each stalled SLOW_S before it writes; the log the copies and the exit's wait write to."""
    from npuprof.agent import log as agent_log

    real = shutil.copyfileobj

    def stalled(source: Any, target: Any, length: int = 0) -> None:
        time.sleep(SLOW_S)
        real(source, target)

    log = _Log()
    monkeypatch.setattr(shutil, "copyfileobj", stalled)
    monkeypatch.setattr(chrome_trace, "_copying", [])
    monkeypatch.setattr(chrome_trace, "_copying_joined", [True])
    monkeypatch.setattr(chrome_trace, "_exit_wait_began", [], raising=False)
    monkeypatch.setattr(agent_log, "get_log", lambda: log)
    return log


def test_the_copy_of_the_capture_finalised_at_exit_is_written_before_the_exit_ends(
    tmp_path: Path, slow_copies: _Log
) -> None:
    source = tmp_path / "trace.json"
    source.write_bytes(b'{"traceEvents": []}' * 1000)
    target = tmp_path / "exported" / "rank0.json"
    target.parent.mkdir()

    def finish_at_exit(reason: str, cut: str = "") -> None:  # the capture in flight saved: its copy begins
        chrome_trace.copy_in_background(source, target, slow_copies)

    agent = entry.Agent.__new__(entry.Agent)
    agent.cfg = ProfileConfig()
    agent.log = _Log()  # type: ignore[assignment]
    agent.controller = SimpleNamespace(  # type: ignore[assignment]
        step_function_wrapped=False, armed=True, step=7, windows_skipped=0, finish_at_exit=finish_at_exit
    )
    agent._counts_logged_in = None  # type: ignore[assignment]
    agent._hand_over_the_rest = lambda copies_s=0.0: None  # type: ignore[method-assign]
    agent._finalise_at_exit("training ended")
    assert target.read_bytes() == source.read_bytes()  # written whole before the process may end
    assert [line for line in slow_copies.lines if "not written" in line] == []
