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

# msprof-analyze's own command line in its Python, its workers forked. Its CLI imports its advisor, which
# sets multiprocessing's start method to "spawn" for the whole process: every worker of cluster, compare
# and advisor then starts a fresh interpreter that imports msprof-analyze and pandas again (~1.3
# CPU-s each; `cluster -m all` 8.8 CPU-s, forked 1.4). Forked workers run the same code on the same files
# and write the same tables; test_analyse_interop.py runs `cluster -m all` once as the executable does.
_FORKED_CLI = """
import multiprocessing, sys
from msprof_analyze.cli.entrance import msprof_analyze_cli
multiprocessing.set_start_method("fork", force=True)
sys.argv[0] = "msprof-analyze"
sys.exit(msprof_analyze_cli())
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


def run_forked(exe: str, *args: str, cwd: Path | None = None, timeout: float = 300) -> str:
    """``msprof-analyze ARGS`` with forked workers (_FORKED_CLI); its log (it exits 0 when it fails: judge
    by the files it writes)."""
    python = python_of(exe)
    assert python is not None, exe
    proc = subprocess.run(
        [python, "-c", _FORKED_CLI, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    return proc.stdout + proc.stderr


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
    """``msprof-analyze cluster -m all`` (run_forked) on a copy of ``result`` at ``work``: its output folder
    and its log (judge by the files: it exits 0 when it fails)."""
    shutil.copytree(result, work)
    log = run_forked(exe, "cluster", "-d", str(work), "-m", "all", "--force")
    return work / "cluster_analysis_output", log


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
