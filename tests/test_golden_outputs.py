"""Every reader's output on fixed traces, byte for byte, against the digests of the code before the
reshape of the analysis (issue 16). A difference names the outputs that changed; see tests/golden_support."""

from __future__ import annotations

import json
from pathlib import Path

from golden_support import GOLDEN, digests, produce


def test_outputs_are_byte_identical_to_the_golden_digests(tmp_path: Path) -> None:
    expected = json.loads(GOLDEN.read_text())
    actual = digests(produce(tmp_path))
    assert set(actual) == set(expected), sorted(set(actual) ^ set(expected))
    changed = sorted(name for name in expected if actual[name] != expected[name])
    assert not changed, f"outputs changed: {changed} (see tests/golden_support to compare)"
