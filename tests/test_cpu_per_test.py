"""tests/cpu_per_test.py, the plugin that says where the suite's CPU goes (README, "Development"): a real
pytest run with it counts a test's child process's CPU under that test, and the reader sums it per file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import cpu_per_test
from conftest import clean_env


def test_a_tests_child_process_cpu_is_counted_under_that_test_and_summed_per_file(tmp_path: Path) -> None:
    tests = tmp_path / "suite"
    tests.mkdir()
    burn = "import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.3: pass\\n"
    (tests / "test_burns.py").write_text(
        "import subprocess, sys\n"
        f"def test_child_burns():\n    subprocess.run([sys.executable, '-c', '{burn}'], check=True)\n"
        "def test_idle():\n    pass\n"
    )
    folder = tmp_path / "cpu"
    env = clean_env(PYTHONPATH=str(Path(cpu_per_test.__file__).parent), CPU_PER_TEST_DIR=str(folder))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "cpu_per_test", "-p", "no:cacheprovider", str(tests)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    (row,) = cpu_per_test.per_file(folder).values()
    assert row["tests"] == 2
    assert 0.3 <= row["children"] < 5, row  # the child's 0.3 s of CPU, and its interpreter's start
    shown = subprocess.run(
        [sys.executable, cpu_per_test.__file__, str(folder)], capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 0 and "test_burns.py" in shown.stdout and " 2 tests" in shown.stdout, shown
    bad = subprocess.run([sys.executable, cpu_per_test.__file__], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "usage:" in bad.stderr
