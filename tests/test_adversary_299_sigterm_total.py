"""helper-299: a SIGTERM held during a hold (torch's start of the profiler, a trace export), then handled:
the two waits together, in-process as test_sigterm_duties drives the guard's watcher."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

from npuprof.agent import signals
from npuprof.agent.log import AgentLog
from npuprof.agent.signals import PROFILER_START, SigtermGuard

# torchrun's and Slurm's 30 s from SIGTERM to SIGKILL, 20 s for a hold and for a started handler
# (docs/architecture.md, "Signals"), all scaled down (0.3 s of margin before the scaled SIGKILL)
SCALE = 0.15
SIGKILL_AFTER_S = 30.0 * SCALE
HOLD_LIMIT_S = 20.0 * SCALE


def test_a_handler_started_after_a_long_hold_is_cut_before_the_sigkill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SIGTERM that came as torch started the profiler (seconds the first time; 18 s here) waited for the
    start, then the handler had 20 s more from its own start: the watcher let the process die 38 s after
    the signal, the SIGKILL at 30 s first (the job's exit 137, npuprof's line never written). The handler
    gets what is left of the signal's limit, within the 30 s."""
    died: list[float] = []
    monkeypatch.setattr(signals, "_die_of", lambda signum: died.append(time.monotonic()))
    monkeypatch.setattr(signals, "HANDLER_LIMIT_S", HOLD_LIMIT_S)
    monkeypatch.setattr(signals, "SIGTERM_LIMIT_S", signals.SIGTERM_LIMIT_S * SCALE)
    log_path = tmp_path / "npuprof.log"
    guard = SigtermGuard(lambda: None, AgentLog(str(log_path), "test"))
    watcher = threading.Thread(target=guard._give_handler_time)
    try:
        assert guard.install()
        with signals.export_hold(PROFILER_START):
            guard._export_deadline = time.monotonic() + HOLD_LIMIT_S  # the hold's limit, scaled
            arrived = time.monotonic()
            watcher.start()  # the watcher, as the signal comes
            time.sleep(18.0 * SCALE)  # torch's start goes on
        guard._handler_started.set()  # the held signal delivered: the handler runs, and never ends
        watcher.join(10)
    finally:
        guard.uninstall()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
    assert died, "the watcher never let the process die"
    assert died[0] - arrived < SIGKILL_AFTER_S, died[0] - arrived
    (line,) = [line for line in log_path.read_text().splitlines() if "finalising the capture" in line]
    assert "since the signal); dying now" in line, line
