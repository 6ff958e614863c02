"""The npuprof commands that messages suggest run as the user ran npuprof: README's first command is
`.venv/bin/npuprof run ...` in a venv not activated, whose `next: npuprof analyse DIR` was "command not
found"."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import clean_env, sched, trainer


def _console_script(bin_dir: Path) -> Path:
    """An `npuprof` as pip installs it into a venv's bin/: this Python runs npuprof's main."""
    bin_dir.mkdir(parents=True)
    script = bin_dir / "npuprof"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nfrom npuprof.cli.main import main\n\nsys.exit(main())\n"
    )
    script.chmod(0o755)
    return script


def _env(*first_on_path: Path) -> dict[str, str]:
    env = clean_env()
    env["PATH"] = os.pathsep.join([*map(str, first_on_path), env.get("PATH", os.defpath)])
    return env


def _as_typed(
    where: Path, command: list[str], timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``command`` run as the user types it, from ``where``, with the tests' environment (or ``env``)."""
    env = _env() if env is None else env
    return subprocess.run(command, cwd=where, env=env, capture_output=True, text=True, timeout=timeout)


def test_the_run_summary_suggests_the_path_the_user_ran(tmp_path: Path) -> None:
    _console_script(tmp_path / "my venv" / "bin")  # not on PATH, a space in its path
    out = tmp_path / "out"
    argv = ["my venv/bin/npuprof", "run", "-o", "out", "--no-analyse", *sched(1, 0, 1)]
    result = _as_typed(tmp_path, [*argv, "--", *trainer("--steps", "4")], timeout=300)
    assert result.returncode == 0, result.stderr
    (next_line,) = [line for line in result.stderr.splitlines() if line.startswith("next:")]
    assert next_line.startswith(f"next: 'my venv/bin/npuprof' analyse {shlex.quote(str(out))}   "), next_line
    # what it suggests runs, from where the user is
    again = _as_typed(tmp_path, ["sh", "-c", next_line.split("   ")[0].removeprefix("next: ")])
    assert again.returncode == 0, again.stderr


def test_npuprof_on_path_is_suggested_bare_and_another_path_as_given(tmp_path: Path) -> None:
    script = _console_script(tmp_path / "venv" / "bin")
    watched = tmp_path / "dyn"
    watched.mkdir()
    (watched / "profiler_config.json").write_text("{}")  # as `npuprof run --dynamic` leaves it
    for how, env, expected in [
        ("venv/bin/npuprof", _env(), "venv/bin/npuprof"),  # not on PATH
        (str(script), _env(), str(script)),
        ("venv/bin/npuprof", _env(script.parent), "npuprof"),  # PATH's npuprof is this one
        ("npuprof", _env(script.parent), "npuprof"),
    ]:
        result = _as_typed(tmp_path, [how, "trigger", str(watched), "--active", "1"], 60, env)
        assert result.returncode == 0, result.stderr
        assert f"; see {expected} status {watched}\n" in result.stdout, (how, result.stdout)


def test_usage_errors_point_at_the_help_as_the_user_can_run_it(tmp_path: Path) -> None:
    """A usage error ended 'see npuprof status --help' (status or trigger without DIR, an unknown flag or
    command, run without a command: 'e.g. npuprof run -- python train.py'): "command not found" for
    npuprof run as 'my venv/bin/npuprof' with no npuprof on PATH."""
    script = _console_script(tmp_path / "my venv" / "bin")
    typed = "my venv/bin/npuprof"
    quoted = shlex.quote(typed)
    for args, ends in [
        (["status"], f"; see {quoted} status --help"),
        (["trigger"], f"; see {quoted} trigger --help"),
        (["analyse", "--bogus"], f"; see {quoted} analyse --help"),
        (["bogus"], f"; see {quoted} --help"),
        (["run"], f"e.g. {quoted} run -- python train.py ({quoted} run --help: the flags)"),
    ]:
        result = _as_typed(tmp_path, [typed, *args], timeout=60)
        assert result.returncode == 2 and result.stderr.endswith(f"{ends}\n"), (args, result.stderr)
    helped = _as_typed(tmp_path, ["sh", "-c", f"{quoted} status --help"])  # what it points at runs
    assert helped.returncode == 0 and "Usage:" in helped.stdout, (script, helped.stderr)


def test_the_env_pythonpath_warning_names_npuprof_as_run(tmp_path: Path) -> None:
    """`npuprof run -- env PYTHONPATH=x python t.py` was told to run 'PYTHONPATH=x npuprof run -- ...'
    instead, bare npuprof where the user ran 'my venv/bin/npuprof'."""
    _console_script(tmp_path / "my venv" / "bin")
    command = [
        "my venv/bin/npuprof",
        "run",
        "-o",
        "out",
        "--",
        "env",
        "PYTHONPATH=/x",
        sys.executable,
        "-c",
        "",
    ]
    result = _as_typed(tmp_path, command, timeout=120)
    assert result.returncode == 0, result.stderr
    said = " ".join(result.stderr.split())
    assert "set it before npuprof instead (PYTHONPATH=/x 'my venv/bin/npuprof' run -- ...)" in said, said


def test_python_m_npuprof_is_suggested_as_typed_unless_path_has_this_installation(tmp_path: Path) -> None:
    """`python -m npuprof` suggested bare `npuprof ...`: "command not found" where no npuprof is on PATH
    (a venv not activated, README's install), and another installation's where PATH has one. It is
    suggested as the interpreter was typed (relative, from where the user is), with `-m npuprof`, unless
    PATH's npuprof is this interpreter's console script."""
    watched = tmp_path / "dyn"
    watched.mkdir()
    (watched / "profiler_config.json").write_text("{}")  # as `npuprof run --dynamic` leaves it
    typed = os.path.relpath(sys.executable, tmp_path)  # e.g. ../../.venv/bin/python
    other = tmp_path / "other" / "bin"  # another installation's npuprof: another interpreter's script
    other.mkdir(parents=True)
    (other / "npuprof").write_text(f"#!{tmp_path / 'elsewhere' / 'python'}\n")
    (other / "npuprof").chmod(0o755)
    ours = _console_script(tmp_path / "ours" / "bin").parent  # `#!sys.executable`, as pip writes it
    for first, expected in [
        (tmp_path / "empty", f"{shlex.quote(typed)} -m npuprof"),  # no npuprof on PATH
        (other, f"{shlex.quote(typed)} -m npuprof"),
        (ours, "npuprof"),
    ]:
        env = clean_env(PATH=os.pathsep.join([str(first), "/usr/bin", "/bin"]))
        result = _as_typed(
            tmp_path, [typed, "-m", "npuprof", "trigger", str(watched), "--active", "1"], 60, env
        )
        assert result.returncode == 0, result.stderr
        assert f"; see {expected} status {watched}\n" in result.stdout, (first, result.stdout)
        # what it points at runs, from where the user is (the "ours" script runs this interpreter)
        again = _as_typed(tmp_path, ["sh", "-c", f"{expected} status --help"], env=env)
        assert again.returncode == 0 and "Usage:" in again.stdout, (first, again.stderr)


def test_python_m_npuprof_quotes_the_interpreter_and_reads_pips_sh_exec_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The interpreter as typed is quoted for the shell (a space in its path); a console script pip writes
    for an interpreter path with a space (`#!/bin/sh`, then `'''exec' "PYTHON" "$0" "$@"`) is this
    installation's when PYTHON is this interpreter."""
    from npuprof import invocation

    monkeypatch.setattr(sys, "orig_argv", ["my venv/bin/python", "-m", "npuprof", "status"])
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert invocation.as_module() == "'my venv/bin/python' -m npuprof"
    (tmp_path / "bin").mkdir()
    script = tmp_path / "bin" / "npuprof"
    script.write_text(f"#!/bin/sh\n'''exec' \"{sys.executable}\" \"$0\" \"$@\"\n' '''\nimport sys\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", str(script.parent))
    assert invocation.as_module() == "npuprof"
