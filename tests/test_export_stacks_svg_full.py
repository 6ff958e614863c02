"""`export-stacks -o FILE --svg SVG` where only the SVG cannot be written (a full disk after the folded
stacks): one line that says so and names the folded stacks written, exit 1 (docs/formats.md: a requested
file that cannot be written is said, with what was made)."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from analyse_support.handmade import cuda_trace, write_rank_dir

from npuprof.cli.export_stacks import export_stacks


def test_an_svg_that_cannot_be_written_names_the_stacks_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rank_dir = write_rank_dir(tmp_path, cuda_trace())
    folded = tmp_path / "x.folded"
    with pytest.raises(typer.Exit) as ended:
        export_stacks(str(rank_dir), "self_cpu_time_total", folded, Path("/dev/full"), 0.1, False, None)
    assert ended.value.exit_code == 1
    (line,) = [line for line in capsys.readouterr().err.splitlines() if "cannot write" in line]
    assert line == (
        f"npuprof export-stacks: cannot write /dev/full: No space left on device ({folded} was written)"
    ), line
    assert folded.read_text().strip()
