"""The short report at the end of `npuprof run`: what was captured, where, how big, what next."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from npuprof.config import ProfileConfig
from npuprof.results.run_record import CaptureSummary


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"


def _steps(steps: list[int]) -> str:
    if not steps:
        return "-"
    return str(steps[0]) if len(steps) == 1 else f"{steps[0]}-{steps[-1]}"


def print_run_summary(
    output: Path, captures: list[CaptureSummary], exit_code: int, cfg: ProfileConfig, log_path: Path
) -> None:
    if not captures:
        need = cfg.schedule.first_steps_needed()
        _note(
            f"no capture was written (exit code {exit_code}). The schedule needs "
            f"{need} steps; one step is one optimizer.step() (or --step-on). See {log_path}."
        )
        return
    from rich.console import Console
    from rich.table import Table

    console = Console(stderr=True, highlight=False)
    table = Table(title=f"npuprof: {len(captures)} capture(s) in {output}", title_justify="left")
    for column in ("rank", "pid", "steps", "status", "size", "parsed", "directory"):
        table.add_column(column, overflow="fold")
    for c in captures:
        status = c.status if not c.detail else f"{c.status} ({c.detail})"
        table.add_row(
            "-" if c.rank is None else str(c.rank),
            str(c.pid or "-"),
            _steps(c.steps),
            status,
            _size(c.size_bytes),
            "yes" if c.parsed else "no",
            c.rank_dir.name,
        )
    console.print(table)
    target = shlex.quote(str(output))
    console.print(f"next: [bold]npuprof analyse {target}[/]   (exit code of the job: {exit_code})")


def _note(text: str) -> None:
    """The one-paragraph note of a run without captures, as rich would print it (bold yellow
    "npuprof:" on a colour terminal, wrapped to its width) without rich's ~40 ms import."""
    stream = sys.stderr
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    width = 80
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        width = int(columns)
    elif tty:
        import shutil

        width = shutil.get_terminal_size((80, 24)).columns
    lines = _wrap("npuprof: " + text, max(width, 20))
    color = tty and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    if color and lines:
        lines[0] = "\x1b[1;33mnpuprof:\x1b[0m" + lines[0][len("npuprof:") :]
    stream.write("\n".join(lines) + "\n")
    stream.flush()


def _wrap(text: str, width: int) -> list[str]:
    """Greedy word wrap (textwrap's import alone costs ~5 ms)."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        lines.append(line)
    return lines
