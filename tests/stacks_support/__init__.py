"""Helpers of the export-stacks / memory-timeline tests: real captures shared between the test files."""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CAPTURE_SCRIPT = Path(__file__).with_name("capture.py")
# flamegraph.pl's parser for a folded line (stack, then the count)
FLAMEGRAPH_LINE = re.compile(r"^(\S.*?)\s+(\d+(?:\.\d*)?)$")
_cache: dict[str, Path] = {}
_root: Path | None = None
# Under pytest-xdist, the folder its workers share (pytest-N/, set by tests/conftest.py): the captures are
# made there once for all workers, under a lock, instead of once in each (~3 CPU-s each)
SHARED_ROOT: Path | None = None


def env(extra_path: str | None = None) -> dict[str, str]:
    environ = dict(os.environ)
    environ["PYTHONPATH"] = os.pathsep.join([*([extra_path] if extra_path else []), str(REPO)])
    return environ


@contextlib.contextmanager
def _made_by_any_worker(specs: dict[str, tuple[str, ...]]) -> Iterator[dict[str, tuple[str, ...]]]:
    """The captures of ``specs`` still to make, the others taken into the cache: those another xdist worker
    made (SHARED_ROOT), under a lock held while the caller makes the rest (each then marked made)."""
    global _root
    todo = {name: args for name, args in specs.items() if name not in _cache}
    if not todo or SHARED_ROOT is None:
        if todo and _root is None:
            _root = Path(tempfile.mkdtemp(prefix="npuprof_stacks_tests_"))
            atexit.register(shutil.rmtree, _root, True)
        yield todo
        return
    _root = SHARED_ROOT / "stacks_captures"
    _root.mkdir(exist_ok=True)
    with open(SHARED_ROOT / "stacks_captures.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for name, args in list(todo.items()):
            made = _root / f"{name}.made"
            if made.is_file():
                assert json.loads(made.read_text()) == list(args), f"capture {name!r} made with other args"
                _cache[name] = _rank_dir_of(_root / name)
                del todo[name]
            else:
                shutil.rmtree(_root / name, ignore_errors=True)  # a worker's failed try
        yield todo
        for name, args in todo.items():
            if name in _cache:
                (_root / f"{name}.made").write_text(json.dumps(list(args)))


def _rank_dir_of(out: Path) -> Path:
    dirs = sorted(p for p in out.iterdir() if p.name.endswith("_ascend_pt"))
    assert len(dirs) == 1, dirs
    return dirs[0]


def capture(name: str, *args: str) -> Path:
    """The rank dir of a real capture (run once per test session and shared); ``args`` go to capture.py."""
    with _made_by_any_worker({name: args}) as todo:
        if todo:
            _cache[name] = _capture_into(_root_made() / name, args)
    return _cache[name]


def _root_made() -> Path:
    assert _root is not None
    return _root


def _capture_into(out: Path, args: tuple[str, ...]) -> Path:
    proc = subprocess.run(
        [sys.executable, str(CAPTURE_SCRIPT), str(out), *args],
        cwd=REPO,
        env=env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return _rank_dir_of(out)


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
    with _made_by_any_worker(specs) as todo:
        if todo:
            _make_forked(todo)
    return {name: _cache[name] for name in specs}


def _make_forked(todo: dict[str, tuple[str, ...]]) -> None:
    root = _root_made()
    argvs = {name: [str(CAPTURE_SCRIPT), str(root / name), *args] for name, args in todo.items()}
    job = root / f"captures_{os.getpid()}_{len(_cache)}.py"
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
        _cache[name] = _rank_dir_of(root / name)
