"""msprof-analyze's db recipes run in one process of its own side environment (.ci/interop.sh), and the
tables they write read back: the checks of the db export (tests/test_db_export.py, tests/test_marks.py)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

# each recipe through msprof-analyze's own entry point (Interface: what `msprof-analyze cluster -m X`
# runs), all in one process: its start-up (~2 s) is paid once
_RUNNER = """
import sys
from msprof_analyze.cluster_analyse.cluster_analysis import Interface
base = dict(profiling_path=sys.argv[1], output_path=None, force=False, parallel_mode="concurrent",
            export_type="db", rank_list="all", step_id=-1)
for mode in sys.argv[2:]:
    Interface(dict(base, mode=mode)).run()
"""


def msprof_analyze() -> str | None:
    """The msprof-analyze executable (NPUPROF_MSPROF_ANALYZE, else on PATH), or None."""
    exe = os.environ.get("NPUPROF_MSPROF_ANALYZE") or shutil.which("msprof-analyze")
    return exe if exe and os.access(exe, os.X_OK) else None


def python_of(exe: str | None) -> str | None:
    """The Python that runs the msprof-analyze script (its own readers are imported from there)."""
    if exe is None:
        return None
    beside = Path(exe).with_name("python")
    if beside.exists():
        return str(beside)
    first = Path(exe).read_text(errors="replace").splitlines()[0]
    return first[2:].strip() if first.startswith("#!") else None


def run_recipes(python: str, cluster: Path, *modes: str) -> str:
    """Run ``modes`` on ``cluster``; their log (msprof-analyze exits 0 even when a recipe fails: judge
    by the tables)."""
    proc = subprocess.run(
        [python, "-c", _RUNNER, str(cluster), *modes],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONWARNINGS": "ignore", "MSPROF_ANALYZE_LOG_LEVEL": "ERROR"},
    )
    return proc.stdout + proc.stderr


def cluster_of(exe: str, result: Path, work: Path) -> tuple[Path, str]:
    """``msprof-analyze cluster -m all`` on a copy of ``result`` at ``work``: its output folder and its log
    (judge by the files: it exits 0 when it fails)."""
    shutil.copytree(result, work)
    proc = subprocess.run(
        [exe, "cluster", "-d", str(work), "-m", "all", "--force"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    return work / "cluster_analysis_output", proc.stdout + proc.stderr


def rows(db: Path, table: str) -> list[dict[str, Any]]:
    """The rows of ``table`` as dicts ([] when the db or the table is missing)."""
    if not db.is_file():
        return []
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute(f"SELECT * FROM {table}")]
    except sqlite3.OperationalError:
        return []
    finally:
        con.close()
