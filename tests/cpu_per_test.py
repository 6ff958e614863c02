"""Where the suite's CPU goes: a pytest plugin that writes each test's CPU seconds (its own process's, and
its waited-for children's: the jobs it runs) and wall seconds, one JSON line a test, and a reader that sums
them per file. Not used by the suite itself (README, "Development"):

    export PYTHONPATH=tests CPU_PER_TEST_DIR=/tmp/cpu
    .venv/bin/python -m pytest -q -n 3 --dist loadfile -p cpu_per_test
    .venv/bin/python tests/cpu_per_test.py /tmp/cpu

A process a test leaves running (a detached post-processor) is counted where it is waited for, if anywhere;
the forked report commands' children (tests/_forked_cli.py) are their server's, counted at its end."""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

_written: list[IO[str]] = []


def _cpu_seconds() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def _output() -> IO[str]:
    if not _written:
        folder = Path(os.environ.get("CPU_PER_TEST_DIR", "cpu_per_test"))
        folder.mkdir(parents=True, exist_ok=True)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        _written.append((folder / f"{worker}_{os.getpid()}.jsonl").open("a", encoding="utf-8"))
    return _written[0]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    own, children = _cpu_seconds()
    began = time.monotonic()
    yield
    own_after, children_after = _cpu_seconds()
    line = {"id": item.nodeid, "own": own_after - own, "children": children_after - children}
    line["wall"] = time.monotonic() - began
    out = _output()
    out.write(json.dumps(line) + "\n")
    out.flush()


def per_file(folder: Path) -> dict[str, dict[str, Any]]:
    """Each test file's CPU seconds (own, children), wall seconds and test count, from ``folder``'s lines."""
    files: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"own": 0.0, "children": 0.0, "wall": 0.0, "tests": 0}
    )
    for path in sorted(folder.glob("*.jsonl")):
        for text in path.read_text(encoding="utf-8").splitlines():
            line = json.loads(text)
            row = files[line["id"].split("::", 1)[0]]
            for key in ("own", "children", "wall"):
                row[key] += line[key]
            row["tests"] += 1
    return dict(files)


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("usage: python tests/cpu_per_test.py DIR   (the CPU_PER_TEST_DIR of a run)", file=sys.stderr)
        return 2
    files = per_file(Path(argv[0]))
    rows = sorted(files.items(), key=lambda item: -(item[1]["own"] + item[1]["children"]))
    total = sum(row["own"] + row["children"] for _name, row in rows)
    print(f"{total:8.1f} CPU-s in {len(rows)} files ({sum(row['tests'] for _n, row in rows)} tests)")
    for name, row in rows:
        cpu = row["own"] + row["children"]
        own, wall, tests = row["own"], row["wall"], row["tests"]
        print(f"{cpu:8.1f} CPU-s (own {own:6.1f})  wall {wall:7.1f} s  {tests:4d} tests  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
