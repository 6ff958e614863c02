"""Helpers of the export-stacks / memory-timeline tests: real captures shared between the test files."""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CAPTURE_SCRIPT = Path(__file__).with_name("capture.py")
# flamegraph.pl's parser for a folded line (stack, then the count)
FLAMEGRAPH_LINE = re.compile(r"^(\S.*?)\s+(\d+(?:\.\d*)?)$")
_cache: dict[str, Path] = {}
_root: Path | None = None


def env(extra_path: str | None = None) -> dict[str, str]:
    environ = dict(os.environ)
    environ["PYTHONPATH"] = os.pathsep.join([*([extra_path] if extra_path else []), str(REPO)])
    return environ


def capture(name: str, *args: str) -> Path:
    """The rank dir of a real capture (run once per test session and shared); ``args`` go to capture.py."""
    global _root
    if name in _cache:
        return _cache[name]
    if _root is None:
        _root = Path(tempfile.mkdtemp(prefix="npuprof_stacks_tests_"))
        atexit.register(shutil.rmtree, _root, True)
    out = _root / name
    proc = subprocess.run(
        [sys.executable, str(CAPTURE_SCRIPT), str(out), *args],
        cwd=REPO,
        env=env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    dirs = sorted(p for p in out.iterdir() if p.name.endswith("_ascend_pt"))
    assert len(dirs) == 1, dirs
    _cache[name] = dirs[0]
    return dirs[0]


# stacks + shapes + memory on; every export asked; torch's own export_stacks beside them
FULL_CAPTURE_ARGS = (
    "--torch-stacks",
    "--stacks",
    "self_cpu_time_total",
    "--memory-format",
    "html",
    "json",
    "json.gz",
    "raw.json.gz",
)


def full_capture() -> Path:
    """The capture made with FULL_CAPTURE_ARGS."""
    return capture("full", *FULL_CAPTURE_ARGS)


def exports_record(rank_dir: Path) -> dict:
    return json.loads((rank_dir / "ref_exports.json").read_text())


def cli(*args: str, extra_path: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run `npuprof <args>` in a subprocess, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "npuprof", *args],
        cwd=REPO,
        env=env(extra_path),
        capture_output=True,
        text=True,
        timeout=300,
    )


def trace_of(rank_dir: Path) -> Path:
    return next(p for p in rank_dir.iterdir() if ".pt.trace.json" in p.name)


def load_trace_json(path: Path) -> list[dict]:
    import gzip

    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return json.loads(data)["traceEvents"]


def captures(specs: dict[str, tuple[str, ...]]) -> dict[str, Path]:
    """The rank dirs of several real captures, each as ``capture(name, *args)`` makes it (run once per test
    session and shared: a later capture(name) gets it from the cache). Those not made yet are made by ONE
    process that imports torch once, then runs capture.py for each, as its __main__ with its own argv, in a
    child forked one after the other (a fresh process of its own: its own profiler, model and exports),
    which ends as the script does; each capture then costs no import of torch of its own (~2.5 CPU-s)."""
    global _root
    todo = {name: args for name, args in specs.items() if name not in _cache}
    if todo:
        if _root is None:
            _root = Path(tempfile.mkdtemp(prefix="npuprof_stacks_tests_"))
            atexit.register(shutil.rmtree, _root, True)
        argvs = {name: [str(CAPTURE_SCRIPT), str(_root / name), *args] for name, args in todo.items()}
        job = _root / f"captures_{len(_cache)}.py"
        job.write_text(
            "import gc, os, runpy, sys\n"
            "import torch, torch._dynamo, torch.profiler  # once here, not in each child\n"
            f"argvs, failed = {argvs!r}, []\n"
            "for name, argv in argvs.items():\n"
            "    sys.stdout.flush(); sys.stderr.flush()\n"
            "    gc.freeze()  # the parent's objects out of the child's collections\n"
            "    pid = os.fork()\n"
            "    if pid == 0:\n"
            "        sys.argv = argv\n"
            "        runpy.run_path(argv[0], run_name='__main__')\n"
            "        sys.exit(0)\n"
            "    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])\n"
            "    if code:\n"
            "        failed.append(f'{name} (exit code {code})')\n"
            "if failed:\n"
            "    sys.exit('captures failed: ' + ', '.join(failed))\n"
        )
        proc = subprocess.run(
            [sys.executable, str(job)], cwd=REPO, env=env(), capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        for name in todo:
            dirs = sorted(p for p in (_root / name).iterdir() if p.name.endswith("_ascend_pt"))
            assert len(dirs) == 1, dirs
            _cache[name] = dirs[0]
    return {name: _cache[name] for name in specs}
