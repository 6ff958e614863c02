"""Bad command-line input found by helper-211: one line naming what is wrong and the fix, exit 2."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from conftest import clean_env, npuprof


@pytest.mark.parametrize(
    "step_on, job, fix",
    [
        ("cnn.py:train_step", ["cnn.py"], "--step-on __main__:train_step (cnn.py is the script being run)"),
        (
            "./cnn.py:train_step",
            ["-u", "cnn.py"],
            "--step-on __main__:train_step (cnn.py is the script being run)",
        ),
        ("cnn.py:train_step", ["train.py"], "--step-on cnn:train_step"),
        ("models/cnn.py:Net.step", ["train.py"], "--step-on models.cnn:Net.step"),
    ],
)
def test_step_on_a_file_name_is_refused_before_the_job(
    tmp_path: Path, step_on: str, job: list[str], fix: str
) -> None:
    """``--step-on cnn.py:train_step`` (a file where a module belongs) was taken as module ``cnn.py`` and
    reported only after the whole job had run; the job here would leave a file if it ran."""
    script = tmp_path / job[-1]
    script.write_text("open('ran', 'w').close()\n")
    result = npuprof("run", "-o", "out", "--step-on", step_on, "--", "python", *job, cwd=tmp_path, timeout=60)
    module = step_on.partition(":")[0]
    assert (result.returncode, result.stdout) == (2, "")
    assert (
        result.stderr
        == f"npuprof run: error: --step-on: {module!r} is a file name, not a module name; {fix}\n"
    )
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize(
    "step_on, command, fix",
    [
        # a launcher's option that takes a file: the first .py word was taken for the script
        ("train.py:step", "accelerate launch --config_file c.py train.py", "--step-on __main__:step"),
        ("c.py:step", "accelerate launch --config_file c.py train.py", "--step-on __main__:step where c.py"),
        (
            "train.py:step",
            "accelerate launch --num_processes=2 --multi_gpu train.py",
            "--step-on __main__:step",
        ),
        ("train.py:step", "accelerate launch --multi-gpu train.py --cfg c.py", "--step-on __main__:step"),
        (
            "train.py:step",
            "python -m torch.distributed.run --nnodes 1 train.py -c c.py",
            "--step-on __main__:step",
        ),
        ("c.py:step", "torchrun --standalone train.py --config c.py", "--step-on c:step"),
        ("t.py:step", "env A=1 python -W ignore -X dev t.py", "--step-on __main__:step"),
        ("t.py:step", "srun -m block python t.py", "--step-on __main__:step"),  # srun's -m takes a value
        # -m: the module's file is __main__ (was told pkg.train:step, which counts nothing)
        ("pkg/train.py:step", "python -m pkg.train", "--step-on __main__:step"),
        ("pkg/train.py:step", "python -um pkg.train 3", "--step-on __main__:step"),
        ("src/pkg/train.py:step", "torchrun --nproc-per-node 2 -m pkg.train", "--step-on __main__:step"),
        ("pkg/eval.py:step", "python -m pkg.train", "--step-on pkg.eval:step"),
        # a package's __main__.py run by -m (was pkg.__main__:step); its __init__.py (was pkg.__init__:step)
        ("pkg/__main__.py:step", "python -m pkg", "--step-on __main__:step"),
        ("pkg/__init__.py:step", "python train.py", "--step-on pkg:step"),
        # a script named as an interpreter begins (python_train.py) was read as one: was python_train:step
        (
            "python_train.py:step",
            "torchrun --nproc-per-node 2 python_train.py --lr 0.1",
            "--step-on __main__:step",
        ),
        # a shell's -c line: its words were taken for one (was train:step, which counts nothing)
        ("train.py:step", "bash -c 'python train.py --lr 0.1'", "--step-on __main__:step"),
        ("pkg/train.py:step", "srun bash -lc 'python -m pkg.train'", "--step-on __main__:step"),
        # a switch not known to be one (srun's -u) took the interpreter for its value, the launcher module
        # for the script (was pkg.train:step)
        (
            "pkg/train.py:step",
            "srun -u python -m torch.distributed.run --nproc-per-node 2 -m pkg.train",
            "--step-on __main__:step",
        ),
        (
            "pkg/train.py:step",
            "srun -l python3 -m torch.distributed.run pkg/train.py",
            "--step-on __main__:step",
        ),
        # the script hidden, or only maybe the script: both said
        # a module not known as a launcher, which runs train.py (was train:step, which counts nothing there)
        (
            "train.py:step",
            "python -m torch.backends.xeon.run_cpu --ninstances 2 train.py",
            "--step-on __main__:step where train.py",
        ),
        ("train.py:step", "bash run.sh", "--step-on __main__:step where train.py"),
        ("train.py:step", "sh -c 'cd /w && python train.py'", "--step-on __main__:step where train.py"),
        (
            "train.py:step",
            "launcher --new_switch train.py --cfg c.py",
            "--step-on __main__:step where train.py",
        ),
    ],
)
def test_a_file_name_is_answered_by_the_script_the_command_runs(step_on: str, command: str, fix: str) -> None:
    """--step-on FILE:f named __main__ only where FILE was the command's first .py word: `accelerate launch
    --config_file c.py train.py` took c.py for the script (train.py:step was told train:step, which counts
    nothing: the script is __main__), and `python -m pkg.train` had no script (pkg/train.py:step was told
    pkg.train:step, which counted nothing either, as a new user found). The script is read as the
    launcher reads its options; a .py word that may be an option's value gets both fixes."""
    from npuprof.config import ConfigError, parse_step_on

    with pytest.raises(ConfigError) as refused:
        parse_step_on(step_on, command=shlex.split(command))
    said = refused.value.fix
    assert said == fix or said.startswith((f"{fix} (", f"{fix} is the script being run, else")), said


def test_a_module_run_with_m_is_named_main_before_the_job(tmp_path: Path) -> None:
    """`npuprof run --step-on pkg/train.py:step -- python -m pkg.train` was told --step-on pkg.train:step,
    with which the job then ran to its end counting nothing (no process imports the module it runs as
    __main__); the fix given is the one that counts."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "train.py").write_text("open('ran', 'w').close()\n")
    result = npuprof(
        "run", "-o", "out", "--step-on", "pkg/train.py:step", "--", "python", "-m", "pkg.train",
        cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "npuprof run: error: --step-on: 'pkg/train.py' is a file name, not a module name; --step-on "
        "__main__:step (pkg/train.py is the script being run: -m pkg.train)\n"
    )
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize(
    "step_on, expected",
    [
        ("cnn.py:f:g", "'cnn.py' is a file name, not a module name"),
        ("cnn.py:<lambda>", "'cnn.py' is a file name, not a module name"),
        ("cnn.py", "'cnn.py' is a file name, not MODULE:QUALNAME"),
        ("cnn.pyc:train_step", "'cnn.pyc' is a file name, not a module name"),
    ],
)
def test_the_fix_a_file_name_is_given_is_itself_accepted(step_on: str, expected: str) -> None:
    """``--step-on cnn.py:f:g`` was told ``--step-on __main__:f:g``, ``--step-on cnn.py`` ``--step-on
    __main__:cnn.py``: the first refused in turn, the second ran the whole job to say no process defined
    cnn; ``cnn.pyc:f`` ran the whole job. The fix named, its FUNCTION filled in, is a --step-on value."""
    from npuprof.config import ConfigError, parse_step_on

    for command in (["python", "cnn.py"], ["python", "train.py"]):
        with pytest.raises(ConfigError) as refused:
            parse_step_on(step_on, command=command)
        assert refused.value.problem == expected, refused.value.one_line()
        suggested = refused.value.fix.split()[1].replace("FUNCTION", "train_step")  # --step-on VALUE ...
        assert parse_step_on(suggested, command=command)[1] == "train_step", suggested


@pytest.mark.parametrize("command", ["status", "trigger"])
def test_status_and_trigger_without_dir_say_one_line(command: str) -> None:
    """With no DIR, status and trigger printed their whole help (typer's no_args_is_help) where analyse,
    export-stacks, memory-timeline and run give one line naming what is missing, exit 2."""
    result = npuprof(command, timeout=60)
    assert result.returncode == 2 and result.stdout == "", result.stdout
    assert result.stderr == (
        f"npuprof {command}: error: Missing argument 'DIR': give the directory of npuprof run --dynamic DIR; "
        f"see npuprof {command} --help\n"
    )


@pytest.mark.parametrize(
    "args, line",
    [
        (
            ["export-stacks", ""],
            "npuprof export-stacks: source: is empty; give a rank directory (*_ascend_pt) or a trace file",
        ),
        (
            ["memory-timeline", "", "-o", "m.json"],
            "npuprof memory-timeline: source: is empty; give a rank directory (*_ascend_pt), a trace file or "
            "a *.raw.json.gz",
        ),
        (
            ["trigger", ""],
            "npuprof trigger: error: DIR: is empty; give the directory of npuprof run --dynamic DIR",
        ),
        (
            ["status", ""],
            "npuprof status: error: DIR: is empty; give the directory of npuprof run --dynamic DIR",
        ),
    ],
)
def test_an_empty_path_is_refused_not_taken_for_the_current_directory(
    tmp_path: Path, args: list[str], line: str
) -> None:
    """typer's Path made "" the current directory: export-stacks '' and memory-timeline '' read the capture
    the current directory held, trigger '' wrote a request into it (analyse, run -o and --config refuse
    "" already)."""
    rank_dir = tmp_path / "host_1_20260101000000000_ascend_pt"  # a capture, and a dynamic DIR's files
    rank_dir.mkdir()
    (rank_dir / "host.1.pt.trace.json").write_text('{"traceEvents": []}')
    (tmp_path / "profiler_config.json").write_text("{}")
    (tmp_path / "log").mkdir()
    result = npuprof(*args, cwd=rank_dir if args[0] != "trigger" and args[0] != "status" else tmp_path)
    assert result.returncode == 2, result
    assert result.stderr.splitlines() == [line]
    assert result.stdout == ""
    assert (tmp_path / "profiler_config.json").read_text() == "{}"
    assert sorted(p.name for p in rank_dir.iterdir()) == ["host.1.pt.trace.json"]


@pytest.mark.parametrize(
    "args, last_words",
    [
        (["--help"], ["memory-timeline", "info"]),
        ([], ["memory-timeline", "info"]),
        (["export-stacks", "--help"], ["--keep-idle-threads", "--rank"]),
        (["trigger", "--help"], ["--export-type", "Examples:"]),
    ],
)
def test_help_is_whole_where_stdout_cannot_encode_every_character(
    args: list[str], last_words: list[str]
) -> None:
    """In an ASCII locale (LC_ALL=C without Python's UTF-8 mode, PYTHONIOENCODING=ascii) the 'µs' of
    export-stacks' help raised UnicodeEncodeError, which stopped stdout: `npuprof --help` ended after its
    first panel, `npuprof export-stacks --help` at its Usage line, exit 0; the character is escaped now."""
    result = npuprof(*args, env=clean_env(PYTHONIOENCODING="ascii", COLUMNS="80"))
    assert result.returncode == (2 if not args else 0), result.stderr
    for word in last_words:
        assert word in result.stdout, result.stdout


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_every_typer_the_package_allows_carries_its_own_click() -> None:
    """``typer>=0.12`` let an environment keep a typer that takes click from pip: typer 0.12 with click 8.5
    raised TypeError building every command (a traceback for ``npuprof analyse --top x``), 0.13-0.15 with
    click >= 8.2 on ``npuprof status``; click 8.2.0 put "(env var: 'None')" in every bad value's message.
    Typer carries its own click from 0.26 (its metadata requires none), and 0.26.0-0.26.6 garbled "No
    such option"; the suite runs on the typer installed, which must be one the package allows."""
    import re
    from importlib import metadata

    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    low, high = re.search(r'"typer>=([0-9.]+),<([0-9.]+)"', text).groups()  # type: ignore[union-attr]
    assert _version(low) >= (0, 27)
    installed = _version(metadata.version("typer"))
    assert _version(low) <= installed < _version(high)
    assert not [r for r in metadata.requires("typer") or [] if re.match(r"click\b", r)]


def test_export_stacks_refuses_one_file_for_both_the_stacks_and_the_svg(tmp_path: Path) -> None:
    """helper-325: `-o x.folded --svg ./x.folded` (or a hard link of it) wrote the stacks, then the flame
    graph over them, and said "wrote x.folded (1 stacks ...)" twice of a file that was an SVG: one line,
    exit 2, nothing written. /dev/null, written into, may take both."""
    rank_dir = tmp_path / "host_1_20260101000000000_ascend_pt"
    rank_dir.mkdir()
    frame = {"ph": "X", "cat": "python_function", "name": "train.py(1): <module>", "pid": 1, "tid": 1}
    operator = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 50}
    trace = {"traceEvents": [{**frame, "ts": 0, "dur": 100, "args": {"Python id": 1}}, operator]}
    (rank_dir / "host.1.pt.trace.json").write_text(json.dumps(trace))
    (tmp_path / "kept.folded").write_text("main 1\n")
    (tmp_path / "link.folded").hardlink_to(tmp_path / "kept.folded")
    for out, svg in (("x.folded", "./x.folded"), ("kept.folded", "link.folded")):
        result = npuprof("export-stacks", str(rank_dir), "-o", out, "--svg", svg, cwd=tmp_path)
        assert result.returncode == 2, result
        assert result.stderr.splitlines() == [
            f"npuprof export-stacks: -o {out} and --svg {svg} name the same file: the flame graph would "
            "replace the stacks; give each its own name (e.g. -o cpu.folded --svg flame.svg)"
        ]
    assert sorted(p.name for p in tmp_path.iterdir()) == [rank_dir.name, "kept.folded", "link.folded"]
    assert (tmp_path / "kept.folded").read_text() == "main 1\n"
    both = npuprof("export-stacks", str(rank_dir), "-o", "/dev/null", "--svg", "/dev/null", cwd=tmp_path)
    assert "same file" not in both.stderr, both.stderr
