"""npuprof.proc_stat reads /proc/PID/stat of real processes: a sleeping one whose command's name holds
') T ' (the fields are those after the last ')'), a stopped one, a zombie, and one that is gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from npuprof.proc_stat import has_ended, start_ticks, stat_fields, state_of

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="Linux /proc only")


def _wait_for_state(pid: int, wanted: bytes) -> bytes | None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        state = state_of(pid)
        if state == wanted:
            return state
        time.sleep(0.01)
    return state_of(pid)


def test_a_command_name_holding_a_parenthesis_and_a_state_letter(tmp_path: Path) -> None:
    odd_name = tmp_path / "a) T 1 2"
    odd_name.symlink_to(sys.executable)
    child = subprocess.Popen([str(odd_name), "-c", "import time; time.sleep(30)"])
    try:
        assert _wait_for_state(child.pid, b"S") == b"S"
        line = Path(f"/proc/{child.pid}/stat").read_bytes()
        assert b"(a) T 1 2)" in line  # the name really holds the decoy
        fields = stat_fields(child.pid)
        assert int(fields[1]) == os.getpid()  # ppid: the field after the state
        assert not has_ended(state_of(child.pid))
    finally:
        child.kill()
        child.wait()


def test_a_stopped_process_then_a_zombie_then_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    os.kill(child.pid, signal.SIGSTOP)
    assert _wait_for_state(child.pid, b"T") == b"T"
    os.kill(child.pid, signal.SIGKILL)
    assert _wait_for_state(child.pid, b"Z") == b"Z"  # not reaped yet: we have not waited
    assert has_ended(state_of(child.pid))
    child.wait()
    assert state_of(child.pid) is None
    assert stat_fields(child.pid) == []
    assert start_ticks(child.pid) is None


def test_start_ticks_is_the_twenty_second_field_and_differs_for_a_later_process() -> None:
    line = Path("/proc/self/stat").read_text()
    by_hand = int(line[line.rindex(")") + 2 :].split()[19])
    assert start_ticks("self") == by_hand == start_ticks(os.getpid())
    time.sleep(0.05)  # a clock tick is 10 ms: a later process starts at a later tick
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        later = start_ticks(child.pid)
    finally:
        child.wait()
    assert later is not None and later > by_hand
