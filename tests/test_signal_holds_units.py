"""agent/signals.py's holds of the script's signals, in process on the main thread (helper-373's mutation
hunt: each of these could change with every in-process signal test passing): SIGINT's handler put back
after its hold and a Ctrl-C delivered or dropped as asked; SIGINT left to its own hold by the export's
deferral; and a handler deferred past the exit's finalise raising no SystemExit into npuprof's exit."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from npuprof.agent import signals


@pytest.fixture
def handlers() -> Iterator[None]:
    """SIGINT's and SIGUSR1's handlers put back after the test."""
    assert threading.current_thread() is threading.main_thread()
    kept = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGUSR1)}
    try:
        yield
    finally:
        for signum, handler in kept.items():
            signal.signal(signum, handler)


def test_a_ctrl_c_held_back_is_delivered_after_the_block_and_the_handler_put_back(handlers: None) -> None:
    got: list[int] = []

    def scripts(signum: int, frame: Any) -> None:
        got.append(signum)

    signal.signal(signal.SIGINT, scripts)
    with signals.sigint_held_back():
        signal.raise_signal(signal.SIGINT)
        assert got == []  # held
    assert got == [signal.SIGINT]
    assert signal.getsignal(signal.SIGINT) is scripts


def test_a_ctrl_c_held_back_without_delivery_is_dropped_and_the_handler_put_back(handlers: None) -> None:
    got: list[int] = []

    def scripts(signum: int, frame: Any) -> None:
        got.append(signum)

    signal.signal(signal.SIGINT, scripts)
    with signals.sigint_held_back(deliver=False):
        signal.raise_signal(signal.SIGINT)
    assert got == []
    assert signal.getsignal(signal.SIGINT) is scripts
    signal.raise_signal(signal.SIGINT)  # the script's again
    assert got == [signal.SIGINT]


def test_an_exports_deferral_leaves_sigint_to_its_own_hold(handlers: None) -> None:
    def scripts(signum: int, frame: Any) -> None:
        pass

    signal.signal(signal.SIGINT, scripts)
    signal.signal(signal.SIGUSR1, scripts)
    with signals.script_handlers_deferred(redeliver=lambda came: None):
        assert signal.getsignal(signal.SIGINT) is scripts
        assert signal.getsignal(signal.SIGUSR1) is not scripts  # deferred
    assert signal.getsignal(signal.SIGUSR1) is scripts


def test_a_handler_deferred_to_the_exits_decision_end_raises_nothing_into_the_exit(handlers: None) -> None:
    """A SIGUSR1 whose handler calls sys.exit, come during an export inside a decision: run at the decision's
    end; at the process's exit what it raises reaches no code of the script's (docs: deliver_queued)."""
    ran: list[bool] = []

    def exits(signum: int, frame: Any) -> None:
        ran.append(True)
        raise SystemExit(3)

    signal.signal(signal.SIGUSR1, exits)
    for exiting in (True, False):
        ran.clear()
        signals.decision_begins()
        with signals.script_handlers_deferred():
            signal.raise_signal(signal.SIGUSR1)
        assert ran == []  # not yet: the decision is under way
        if exiting:
            signals.decision_ends(exiting=True)
        else:
            with pytest.raises(SystemExit):  # mid-run, it reaches the script, as the handler meant
                signals.decision_ends()
        assert ran == [True]
        assert signal.getsignal(signal.SIGUSR1) is exits


def test_a_deferred_signal_runs_its_handler_once(handlers: None) -> None:
    ran: list[int] = []
    signal.signal(signal.SIGUSR1, lambda signum, frame: ran.append(signum))
    signals.decision_begins()
    with signals.script_handlers_deferred():
        signal.raise_signal(signal.SIGUSR1)
        signal.raise_signal(signal.SIGUSR1)  # come twice: raised again once, as a pending signal runs
    signals.decision_ends()
    assert ran == [signal.SIGUSR1]
