"""README's first screen: its first two commands stay first (tests/test_invocation.py's docstring and CI
read them), and its "What you get" example, the bundled example's real output, keeps the columns that
`npuprof analyse` prints (a column renamed or added leaves README stale, as a flag does its flag table:
tests/test_options.py). In-process, a hand-made capture: no torch job."""

from __future__ import annotations

import io
import re
from pathlib import Path

from analyse_support.handmade import cpu_trace, write_rank_dir
from rich.console import Console

from npuprof.analysis.report import build_report
from npuprof.reports import terminal

README = Path(__file__).resolve().parent.parent / "README.md"


def _headers(text: str) -> list[list[str]]:
    """Each table's header words (rich's "┃ step ┃    ms ┃ ..." rows), in order."""
    return [
        [cell.strip() for cell in line.strip("┃").split("┃")] for line in text.splitlines() if "┃" in line
    ]


def test_readme_what_you_get_shows_the_columns_analyse_prints(tmp_path: Path) -> None:
    readme = README.read_text()
    blocks = re.findall(r"```(?:bash)?\n(.*?)```", readme, re.S)
    assert ".venv/bin/npuprof run -o npuprof_result -- .venv/bin/python examples/train.py" in blocks[0]
    assert ".venv/bin/python -m pytest" in blocks[0]
    section = readme[readme.index("\n## What you get\n") : readme.index("\n## Commands\n")]
    shown = [b for b in re.findall(r"```\n(.*?)```", section, re.S) if "top operators by self time" in b]
    assert len(shown) == 1, "README's What you get lost its analyse example"
    write_rank_dir(tmp_path, cpu_trace(), rank=None)
    out = io.StringIO()
    terminal.render_table(build_report(tmp_path, jobs=1), Console(file=out, width=80))
    printed = _headers(out.getvalue())
    # the step table's and the top operators' headers (a CPU-only capture has no kernel table)
    assert _headers(shown[0]) == printed[:2], out.getvalue()


def _shape(line: str) -> str:
    """A summary line with its numbers, sizes and paths made alike (README's run was another machine's)."""
    line = re.sub(r"\S*/\S*", "PATH", line)
    line = re.sub(r"\d+(\.\d+)?", "N", line)
    return " ".join(line.split())


def test_readme_first_command_prints_the_summary_readme_shows(tmp_path: Path) -> None:
    """README's first command, run as written (a plain `npuprof run` of examples/train.py), must end with
    the lines README's "What you get" shows, and no other: it once ended with "npuprof: torchrun restarted the
    job -1 time(s)" under a plain python job, and every test passed."""
    import subprocess
    import sys

    from conftest import ROOT, clean_env

    readme = README.read_text()
    section = readme[readme.index("\n## What you get\n") : readme.index("\n## Commands\n")]
    shown = re.findall(r"```\n(.*?)```", section, re.S)[0].splitlines()
    out = tmp_path / "npuprof_result"
    job = [sys.executable, str(ROOT / "examples" / "train.py"), "--steps", "20"]
    ran = subprocess.run(
        [sys.executable, "-m", "npuprof", "run", "-o", str(out), "--", *job],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert ran.returncode == 0, ran.stderr
    said = [line for line in ran.stderr.splitlines() if line.strip() and not line.startswith("USDT:")]
    expected = [line for line in shown if not line.startswith("step ")]  # the job's own lines: its stdout
    assert [_shape(line) for line in said[:-1]] == [_shape(line) for line in expected[:-1]], ran.stderr
    assert said[-1].startswith("next: ") and said[-1].endswith("(exit code of the job: 0)"), ran.stderr
    assert expected[-1].endswith("(exit code of the job: 0)") and len(said) == len(expected), ran.stderr
    assert [line for line in shown if line.startswith("step ")] == ran.stdout.splitlines()
