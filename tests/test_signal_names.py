"""One name for a signal in everything npuprof says: the launcher's messages, the run record and the run
summary named a real-time signal differently ("signal 37" against "SIGRTMIN+3")."""

from __future__ import annotations

import signal
import subprocess

import pytest

from npuprof import runner
from npuprof.reports import run_summary
from npuprof.signal_names import signal_name


def _bash_name(number: int) -> str:
    """bash's own name of a signal (``kill -l 37`` -> RTMIN+3), as the expected value."""
    return (
        "SIG"
        + subprocess.run(["bash", "-c", f"kill -l {number}"], capture_output=True, text=True).stdout.strip()
    )


@pytest.mark.parametrize(
    "number", [int(signal.SIGTERM), int(signal.SIGUSR1), signal.SIGRTMIN + 1, signal.SIGRTMIN + 3]
)
def test_a_signal_is_named_as_bash_names_it(number: int) -> None:
    assert signal_name(number) == _bash_name(number)


def test_a_number_of_no_signal_is_said_as_a_number() -> None:
    # glibc keeps 32 and 33 for its threads: no name, neither a real-time one the user could send
    assert signal_name(32) == "signal 32"


def test_the_launcher_and_the_summary_name_a_real_time_signal_alike() -> None:
    number = signal.SIGRTMIN + 3
    expected = _bash_name(number)
    assert runner._signal_name(number) == expected
    assert f"ended by {expected} (exit code {128 + number})" in run_summary._how_the_job_ended(
        128 + number, number
    )
    assert f"128 + {expected}," in run_summary._how_the_job_ended(128 + number)
