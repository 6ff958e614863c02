"""agent/signals.py: a SIGTERM while the main thread is blocked outside Python (a collective) and another
thread records: npuprof's watcher finishes that capture itself (_finished_from_the_watcher). After a hold (a
trace export, up to 20 s) and the handler's grace, that finish (the recording thread's next boundary, then
its export: up to 18 s) had no bound from the signal, so the process could die 40 s after it, the SIGKILL of
torchrun or Slurm at 30 s first (exit 137, npuprof's line never written). It is cut within SIGTERM_LIMIT_S
of the signal, as a started handler is. In-process, as test_adversary_299_sigterm_total drives the watcher;
the times scaled down."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

from npuprof.agent import signals
from npuprof.agent.log import AgentLog
from npuprof.agent.signals import TRACE_EXPORT, SigtermGuard

SCALE = 0.15  # torchrun's and Slurm's 30 s from SIGTERM to SIGKILL, 20 s for a hold, 18 s for a finish
SIGKILL_AFTER_S = 30.0 * SCALE
HOLD_LIMIT_S = 20.0 * SCALE


def test_a_capture_finished_from_the_watcher_after_a_hold_is_cut_before_the_sigkill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    died: list[float] = []
    finish_ends = threading.Event()

    def dies(signum: int) -> None:  # the process would be gone: the finish with it
        died.append(time.monotonic())
        finish_ends.set()

    monkeypatch.setattr(signals, "_die_of", dies)
    monkeypatch.setattr(signals, "HANDLER_LIMIT_S", HOLD_LIMIT_S)
    monkeypatch.setattr(signals, "SIGTERM_LIMIT_S", signals.SIGTERM_LIMIT_S * SCALE)
    log_path = tmp_path / "npuprof.log"
    guard = SigtermGuard(
        lambda: finish_ends.wait(18.0 * SCALE + 1.0),  # the recording thread's boundary, then its export
        AgentLog(str(log_path), "test"),
        recorded_off_main=lambda: True,  # the capture is a training thread's
    )
    watcher = threading.Thread(target=guard._give_handler_time)
    try:
        assert guard.install()
        guard._grace = 0.1  # the handler's grace (the main thread never starts it: blocked in C++)
        with signals.export_hold(TRACE_EXPORT):
            guard._export_deadline = time.monotonic() + HOLD_LIMIT_S
            arrived = time.monotonic()
            watcher.start()  # the watcher, as the signal comes
            time.sleep(18.0 * SCALE)  # the export goes on
        watcher.join(10)
    finally:
        finish_ends.set()
        guard.uninstall()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
    assert died, "the watcher never let the process die"
    assert died[0] - arrived < SIGKILL_AFTER_S, died[0] - arrived
    (line,) = [line for line in log_path.read_text().splitlines() if "took too long" in line]
    assert "since the signal); dying now" in line, line
