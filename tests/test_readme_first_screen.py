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
