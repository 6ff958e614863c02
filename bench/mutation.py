"""Mutation score of the core logic, measured with mutmut: how many small deliberate breaks the tests catch.

    .venv/bin/python bench/mutation.py                  # every module group (~35 minutes, 1 worker, 2 cores)
    .venv/bin/python bench/mutation.py schedule config  # some groups
    .venv/bin/python bench/mutation.py --workers 2 steps  # mutmut's children (default 1: a shared machine)
    .venv/bin/python bench/mutation.py --list           # the groups, their modules and tests
    .venv/bin/python bench/mutation.py --at HEAD --overlay tests/test_x.py intervals
                                      # the committed tree plus a new test (others' work in progress aside)

Each group mutates one module (mutmut 3: operators, comparisons, constants, arguments, return values) in a
copy of the tree under a temporary directory and runs the tests named for it against every mutant. The copy
is put first on PYTHONPATH, so the tests' subprocesses (`python -m npuprof ...`) run the mutant too. A group
that names functions (config: its validation; the report's slow-rank rule) runs and counts only the mutants
of those (mutmut's mutant-name patterns). The agent's and config's groups use in-process tests
(tests/test_*_units.py, tests/test_controller.py, tests/test_config.py): their `npuprof run` tests take ~5 s
a mutant, hours a module. Some mutants cannot change behaviour (equivalent mutants: ``a // b >= n`` and
``a / b >= n`` for integers, a loop bound that is never reached); the survivors are printed for reading,
and the known equivalent ones are listed in bench/README.md ("Mutation score"). Prints one table: module,
mutants, killed, survived, timed out, kill rate. Not a CI job: it runs the chosen tests once per mutant.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MUTMUT = Path(sys.executable).with_name("mutmut")

# group -> (module to mutate, functions to count (None: all), tests that should catch its breaks)
GROUPS: dict[str, tuple[str, tuple[str, ...] | None, tuple[str, ...]]] = {
    "schedule": ("npuprof/agent/schedule.py", None, ("tests/test_controller.py", "tests/test_config.py")),
    "steps": ("npuprof/agent/steps.py", None, ("tests/test_steps_units.py", "tests/test_step_kinds.py")),
    "controller": (
        "npuprof/agent/controller.py",
        None,
        ("tests/test_controller_units.py", "tests/test_controller.py"),
    ),
    "step_breakdown": (
        "npuprof/analysis/step_breakdown.py",
        None,
        (
            "tests/test_step_breakdown_edges.py",
            "tests/test_intervals.py",
            "tests/test_step_breakdown.py",
            "tests/test_analysis_rules.py",
            "tests/test_analyse_tables.py",
            "tests/test_golden_outputs.py",
        ),
    ),
    "intervals": (
        "npuprof/analysis/intervals.py",
        None,
        (
            "tests/test_intervals.py",
            "tests/test_step_breakdown_edges.py",
            "tests/test_step_breakdown.py",
            "tests/test_analysis_rules.py",
            "tests/test_analyse_tables.py",
            "tests/test_golden_outputs.py",
        ),
    ),
    "slow_rank_rule": (
        "npuprof/analysis/report.py",
        ("cross_rank", "slowest", "_outlier", "_slow", "_skew", "start_skew", "_median", "_z"),
        ("tests/test_analysis_rules.py", "tests/test_analyse_tables.py"),
    ),
    # config.py's validation: the checks of every value, the flag parsers, the rank filter and the
    # environment payload (its config-file reader and writer, set_option and the file I/O are not counted)
    "config": (
        "npuprof/config.py",
        (
            "validate",  # Schedule.validate, ProfileConfig.validate, _validate_window, _validate_dynamic
            "first_steps_needed",
            "__init__",  # ConfigError's, the only one mutmut mutates there
            "one_line",
            "to_payload",
            "from_payload",
            "to_env",
            "decode_env_payload",
            "wants_rank",
            "_is_safe_name",
            "parse_level",
            "parse_activities",
            "parse_ranks",
            "_check_rank",
            "_shown",
            "parse_metadata",  # and parse_metadata_json
            "parse_step_on",
            "parse_min_free_space",
            "free_bytes",  # required_free_bytes, _free_bytes
            "_check_metadata",
            "_match_choice",
        ),
        ("tests/test_config_units.py", "tests/test_config.py"),
    ),
    # the agent's moves of the recursion limit (--step-on's recursion, a decision's headroom)
    "recursion_limit": (
        "npuprof/agent/recursion_limit.py",
        None,
        (
            "tests/test_recursion_limit_units.py",
            "tests/test_controller_units.py",
            "tests/test_steps_units.py",
            # their stack depth is counted to the frame: mutmut's trampoline around move() adds frames
            "--deselect=tests/test_controller_units.py::test_captures_at_boundaries_near_the_recursion_limit_cost_the_job_no_stack",
        ),
    ),
    # analyse's scratch tables (read-only results, a full disk): made, removed, and removed at a signal
    "scratch": (
        "npuprof/analysis/scratch.py",
        None,
        ("tests/test_scratch_units.py", "tests/test_postprocess_space.py"),
    ),
    # the run's processes read from /proc (real sleeping processes, no npuprof run)
    "job_processes": (
        "npuprof/job_processes.py",
        None,
        (
            "tests/test_job_processes.py",
            "tests/test_fault_inputs.py::test_a_capture_whose_process_outlived_its_killed_launcher_is_in_progress",
        ),
    ),
    # the names shortened for the terminal and their control characters shown
    "text": (
        "npuprof/reports/text.py",
        None,
        (
            "tests/test_text_units.py",
            "tests/test_terminal_width.py::test_comm_ranges_across_ranks_keep_their_op_and_size_at_80_columns",
        ),
    ),
}
_STATUS = re.compile(r"^\s*(\S+): (\w[\w ]*)$")

# mutmut runs for each mutant only the tests that called the mutated function in its in-process "stats" run;
# most of npuprof runs in subprocesses (the launcher, the agent in the training process), which that run
# cannot see. This conftest addition, written only into the temporary copy, says every selected test covers
# every mutated function, so each mutant meets all of its group's tests.
_COVER_ALL = """

@pytest.fixture(autouse=True)
def _mutation_bench_covers_everything():
    if os.environ.get("MUTANT_UNDER_TEST") != "stats":
        yield
        return
    import json as _json
    from pathlib import Path as _Path

    from mutmut.stats import record_trampoline_hit

    for meta in (_Path.cwd() / "mutants").rglob("*.py.meta"):
        for key in _json.loads(meta.read_text())["exit_code_by_key"]:
            record_trampoline_hit(key.partition("__mutmut_")[0])
    # the tests' subprocesses run the original code while the stats are taken (their trampolines would
    # try to record hits in a process that has no mutmut state)
    os.environ.pop("MUTANT_UNDER_TEST")
    try:
        yield
    finally:
        os.environ["MUTANT_UNDER_TEST"] = "stats"
"""


TREE = ("npuprof", "tests", "docs", "bench", "examples", "README.md")


@dataclass(frozen=True)
class Source:
    """Where the copy comes from: the working tree (``at`` None), or the tree committed at ``at`` with the
    working tree's ``overlay`` paths on top (new tests, while unrelated work in progress breaks the tree)."""

    at: str | None = None
    overlay: tuple[str, ...] = ()


def _copy_path(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
    else:
        shutil.copy2(src, dest)


def _copy_tree(dest: Path, module: str, tests: tuple[str, ...], source: Source) -> None:
    if source.at is None:
        for name in TREE:
            _copy_path(ROOT / name, dest / name)
    else:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", "--format=tar", source.at, *TREE],
            capture_output=True,
            check=True,
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(dest, filter="data")
        for path in source.overlay:
            _copy_path(ROOT / path, dest / path)
    conftest = dest / "tests" / "conftest.py"
    conftest.write_text(conftest.read_text() + _COVER_ALL)
    (dest / "mutants").mkdir()  # on PYTHONPATH before mutmut fills it: an absent path would be cached as such
    test_args = ", ".join(f'"{t}"' for t in tests)
    (dest / "pyproject.toml").write_text(
        "[tool.mutmut]\n"
        'source_paths = ["npuprof/"]\n'
        f'only_mutate = ["{module}"]\n'
        f"pytest_add_cli_args_test_selection = [{test_args}]\n"
        'also_copy = ["README.md", "docs", "bench", "examples"]\n'
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q", "-x"]\n'
        "timeout_multiplier = 4.0\n"
        "[tool.pytest.ini_options]\n"
        'testpaths = ["tests"]\n'
        'markers = ["torchrun: slow", "interop: external tool"]\n'
    )


def _results(cwd: Path, env: dict[str, str]) -> dict[str, str]:
    listing = subprocess.run(
        [str(MUTMUT), "results", "--all", "true"], cwd=cwd, env=env, capture_output=True, text=True
    ).stdout
    found = {}
    for line in listing.splitlines():
        match = _STATUS.match(line)
        if match:
            found[match[1]] = match[2].strip()
    return found


def _show(cwd: Path, env: dict[str, str], name: str) -> str:
    text = subprocess.run(
        [str(MUTMUT), "show", name], cwd=cwd, env=env, capture_output=True, text=True
    ).stdout
    return "\n".join(
        line
        for line in text.splitlines()
        if line.startswith(("-", "+")) and not line.startswith(("---", "+++"))
    )


def _counted(mutant: str, functions: tuple[str, ...] | None) -> bool:
    """Whether a mutant (``npuprof.config.x_parse_ranks__mutmut_3``, ``...xǁScheduleǁvalidate__mutmut_1``)
    belongs to the functions a group counts: one of them is part of its function's name."""
    return functions is None or any(f in mutant.split("ǁ")[-1] for f in functions)


def run_group(name: str, keep: bool, source: Source, workers: int = 1) -> dict[str, object]:
    module, functions, tests = GROUPS[name]
    work = Path(tempfile.mkdtemp(prefix=f"npuprof-mutation-{name}-"))
    try:
        _copy_tree(work, module, tests, source)
        env = {k: v for k, v in os.environ.items() if not k.startswith("NPUPROF_")}
        env["PYTHONPATH"] = str(work / "mutants")  # the tests' subprocesses run the mutant too
        env["OMP_NUM_THREADS"] = "1"
        started = time.monotonic()
        # mutmut runs only the mutants these patterns name (every one of the counted ones, as _counted says)
        patterns = [] if functions is None else [f"*{f}*" for f in functions]
        run = subprocess.run(
            [str(MUTMUT), "run", "--max-children", str(workers), *patterns],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
        )
        seconds = time.monotonic() - started
        if run.returncode != 0:
            print(f"{name}: mutmut run failed ({run.returncode}):\n{run.stdout[-2000:]}{run.stderr[-2000:]}")
        statuses = _results(work, env)
        statuses = {m: s for m, s in statuses.items() if _counted(m, functions)}
        survivors = [m for m, s in statuses.items() if s == "survived"]
        killed = sum(1 for s in statuses.values() if s == "killed")
        timeouts = sum(1 for s in statuses.values() if s == "timeout")
        other = len(statuses) - killed - timeouts - len(survivors)
        for mutant in survivors:
            print(f"survived {mutant}:\n{_show(work, env, mutant)}\n", flush=True)
        return {
            "group": name,
            "module": module,
            "mutants": len(statuses),
            "killed": killed,
            "timeout": timeouts,
            "survived": len(survivors),
            "other": other,
            "seconds": seconds,
        }
    finally:
        if keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("groups", nargs="*", help="groups to run (default: all)")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the mutated copies")
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="mutants tested at once (mutmut's children; default 1)",
    )
    parser.add_argument(
        "--at", metavar="REV", help="copy the tree as committed at REV (git archive), not the working tree"
    )
    parser.add_argument(
        "--overlay",
        metavar="PATH",
        action="append",
        default=[],
        help="with --at: this working-tree file or directory on top (repeatable; e.g. a new test file)",
    )
    args = parser.parse_args()
    if args.list:
        for name, (module, functions, tests) in GROUPS.items():
            print(f"{name}: {module} {functions or ''} <- {' '.join(tests)}")
        return 0
    if not MUTMUT.exists():
        print(f"mutation: {MUTMUT} not found; pip install mutmut (a test dependency)", file=sys.stderr)
        return 1
    unknown = [g for g in args.groups if g not in GROUPS]
    if unknown:
        print(f"mutation: unknown group(s) {unknown}; see --list", file=sys.stderr)
        return 2
    rows = []
    for name in args.groups or GROUPS:
        rows.append(run_group(name, args.keep, Source(args.at, tuple(args.overlay)), max(args.workers, 1)))
        row = rows[-1]
        print(
            f"{name}: {row['killed']} killed, {row['timeout']} timed out, {row['survived']} survived, "
            f"{row['other']} other of {row['mutants']} ({row['seconds']:.0f} s)",
            flush=True,
        )
    print("\nmutation score (bench/mutation.py; killed = a test failed or timed out)")
    columns = ("group", "module", "mutants", "killed", "timeout", "survived", "other", "kill rate", "time")
    widths = (14, 35, 7, 6, 7, 8, 5, 9, 6)
    print(" " + " | ".join(f"{c:<{w}}" for c, w in zip(columns, widths, strict=True)))
    for r in rows:
        caught = int(r["killed"]) + int(r["timeout"])
        total = caught + int(r["survived"])
        rate = f"{100 * caught / total:.0f}%" if total else "-"
        print(
            f" {r['group']:<14} | {r['module']:<35} | {r['mutants']:>7} | {r['killed']:>6} | "
            f"{r['timeout']:>7} | {r['survived']:>8} | {r['other']:>5} | {rate:>9} | {r['seconds']:.0f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
