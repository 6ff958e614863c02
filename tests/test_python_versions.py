"""What differs between the Python versions npuprof supports (>= 3.10), shown on the one the tests run on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import clean_env


def test_run_works_with_a_signal_module_without_sigstkflt(tmp_path: Path) -> None:
    """Python names signal.SIGSTKFLT only from 3.11 on: on 3.10 the launcher's import read it and every
    `npuprof run` died of an AttributeError traceback before starting the job. Here the launcher runs with
    the name taken out of its signal module, as 3.10's is; the job runs and its record is written, and the
    signal is still passed on by its number where the C library knows it (Linux's 16)."""
    out = tmp_path / "out"
    launcher = (
        "import signal, sys\n"
        "vars(signal).pop('SIGSTKFLT', None)\n"
        "from npuprof import launch\n"
        "print('forwarded 16:', 16 in launch.FORWARDED_SIGNALS, file=sys.stderr)\n"
        f"sys.argv = ['npuprof', 'run', '-o', {str(out)!r}, '--', sys.executable, '-c', 'print(42)']\n"
        "from npuprof.cli.main import main\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", launcher], env=clean_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert "42" in done.stdout
    if sys.platform == "linux":
        assert "forwarded 16: True" in done.stderr
    assert json.loads((out / "npuprof_run.json").read_text())["exit_code"] == 0
