"""The script's own functions that the run's end names for --step-on (npuprof/script_functions.py): read from
its file, never imported, never blocking the launcher."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from npuprof.script_functions import defined_functions

SCRIPT = (
    "import torch\n"
    "def build(): pass\n"
    "class Loop:\n"
    "    def step(self): pass\n"
    "    def _hidden(self): pass\n"
    "if __name__ == '__main__':\n"
    "    def train_step(): pass\n"
)


def test_a_linked_script_is_read_through_its_link(tmp_path: Path) -> None:
    (tmp_path / "real.py").write_text(SCRIPT)
    (tmp_path / "train.py").symlink_to(tmp_path / "real.py")
    assert defined_functions(str(tmp_path / "train.py")) == ["build", "Loop.step", "train_step"]


def test_a_fifo_in_the_scripts_place_never_blocks_the_launcher(tmp_path: Path) -> None:
    """helper-381: a look (isfile) then open(): a FIFO put in the script's place between the two hung the
    launcher at the run's end, in open(), waiting for a writer that never comes."""
    fifo = tmp_path / "train.py"
    os.mkfifo(fifo)
    found: list[list[str]] = []
    reader = threading.Thread(target=lambda: found.append(defined_functions(str(fifo))), daemon=True)
    reader.start()
    reader.join(10)
    blocked = reader.is_alive()
    if blocked:  # let the blocked open() go before failing
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(10)
    assert not blocked and found == [[]]
