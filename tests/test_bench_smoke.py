"""The benches run end to end and print their tables (tiny --quick sizes: no figure is checked here)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT, clean_env

BENCH = ROOT / "bench"


ROWS = {
    "startup.py": ["launcher: npuprof run -- python -c pass", "bootstrap in a child that never uses torch"],
    "overhead.py": ["npuprof's step hook", "step outside captures", "step inside a capture", "RSS added"],
    "export_stall.py": ["step where a capture ends", "torch's gzip handler"],
}


def _bench(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def quick_outputs() -> dict[str, tuple[int, str, str]]:
    """Every bench in --quick mode, all at once (they are mostly waiting for torch to import)."""
    procs = {
        script: subprocess.Popen(
            [sys.executable, str(BENCH / script), "--quick"],
            cwd=ROOT,
            env=clean_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for script in ROWS
    }
    results = {}
    for script, proc in procs.items():
        out, err = proc.communicate(timeout=180)
        results[script] = (proc.returncode, out, err)
    return results


@pytest.mark.parametrize("script", sorted(ROWS))
def test_bench_prints_its_table(script: str, quick_outputs: dict[str, tuple[int, str, str]]) -> None:
    code, stdout, stderr = quick_outputs[script]
    assert code == 0, stderr[-3000:]
    lines = stdout.splitlines()
    header = [i for i, line in enumerate(lines) if "budget" in line and "verdict" in line]
    assert len(header) == 1, stdout
    for row in ROWS[script]:
        matching = [line for line in lines if row in line]
        assert matching, f"no row {row!r} in:\n{stdout}"
        # every row of the table ends with a verdict (met / MISSED) or '-' where no budget applies
        assert all(line.rstrip().endswith(("met", "MISSED", "-")) for line in matching), matching


def test_run_all_lists_every_bench() -> None:
    result = _bench("-c", "import sys; sys.path.insert(0, 'bench'); import run_all; print(run_all.BENCHES)")
    assert result.returncode == 0, result.stderr
    for script in ("startup.py", "overhead.py", "export_stall.py"):
        assert script in result.stdout
        assert (BENCH / script).exists()
