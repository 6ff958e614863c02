"""How `npuprof run` reads the values of its flags: numbers as Python reads them, a bad one named as given,
a flag given twice (README, "`npuprof run` flags"). In-process: no job starts."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from npuprof.cli import main


def _cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """``npuprof ARGS`` as main() runs it (the fast path of run included): (exit code, stderr); the config
    a run would have started with is kept in ``_cli.config`` (None: none started), stdout in ``_cli.out``."""
    import npuprof.runner

    started: list[Any] = []

    def leave(code: int) -> None:
        raise SystemExit(code)

    def execute(cfg: Any, command: list[str]) -> int:
        started.append(cfg)
        return 0

    monkeypatch.setattr(sys, "argv", ["npuprof", *args])
    monkeypatch.setattr(main, "_leave", leave)
    monkeypatch.setattr(main, "guard_streams", lambda: None)
    monkeypatch.setattr(npuprof.runner, "execute", execute)
    with pytest.raises(SystemExit) as ended:
        main._main()
    _cli.config = started[0] if started else None  # type: ignore[attr-defined]
    written = capsys.readouterr()
    _cli.out = written.out  # type: ignore[attr-defined]
    return int(ended.value.code or 0), written.err


@pytest.mark.parametrize(
    ("flag", "value", "said"),
    [
        ("--repeat", "0x10", "'0x10' is not a whole number"),
        ("--active", "1.5", "'1.5' is not a whole number"),
        ("--skip-first", "x\udcff", "'x\\udcff' is not a whole number"),  # a byte read in a C locale
        ("--wait", "a'b", '"a\'b" is not a whole number'),
        ("--delay", "0x1", "'0x1' is not a number"),
    ],
)
def test_a_bad_number_is_named_as_given(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], flag: str, value: str, said: str
) -> None:
    """``--repeat 0x10`` was said as "must be a whole number", without the word it was about."""
    code, err = _cli(monkeypatch, capsys, "run", flag, value, "--", "python", "-c", "pass")
    assert (code, _cli.config) == (2, None)  # type: ignore[attr-defined]
    assert err.splitlines() == [
        f"npuprof run: error: Invalid value for '{flag}': {said}; see npuprof run --help"
    ]


@pytest.mark.parametrize("value", ["3", "+3", " 3 ", "0_3", "٣", "３"])
def test_a_whole_number_is_read_as_python_reads_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    """As argparse's ``type=int``: a sign, spaces around it, underscores between digits, any script's
    digits (documented in the README)."""
    code, err = _cli(monkeypatch, capsys, "run", "--repeat", value, "--", "python", "-c", "pass")
    assert (code, err) == (0, "")
    assert _cli.config.schedule.repeat == 3  # type: ignore[attr-defined]


# the fast path takes the first form, typer the second ("+3" is no plain number to the fast path)
@pytest.mark.parametrize("three", ["3", "+3"])
def test_a_flag_given_two_values_says_which_is_used(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], three: str
) -> None:
    """The last wins, as in argparse and nsys, and a value overridden by another is said in one line
    (a wrapper's ``-o`` under the user's is no mistake; ``--repeat 2 ... --repeat 3`` may be)."""
    args = ["--repeat", "2", "--with-stack", "-o", "a", "--repeat", three, "--no-with-stack", "--output=b"]
    code, err = _cli(monkeypatch, capsys, "run", *args, "--", "python", "-c", "pass")
    cfg = _cli.config  # type: ignore[attr-defined]
    assert (code, cfg.schedule.repeat, cfg.with_stack, cfg.output) == (0, 3, False, "b")
    assert err.splitlines() == [
        f"npuprof run: warning: --repeat is given 2 times: --repeat 2, then --repeat {three}; the last is "
        "used",
        "npuprof run: warning: --with-stack is given 2 times: --with-stack, then --no-with-stack; the last "
        "is used",
        "npuprof run: warning: --output is given 2 times: -o a, then --output b; the last is used",
    ]
    code, err = _cli(monkeypatch, capsys, "run", "--repeat", "3", "--repeat", three, "--", "python")
    assert (code, err) == (0, "")  # the same value twice (3 and +3 too): nothing to say


@pytest.mark.parametrize("three", ["3", "+3"])
def test_a_metadata_key_given_by_both_flags_is_the_last_ones(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], three: str
) -> None:
    """``--metadata-json dp=2 --metadata dp=1`` gave dp 2: --metadata-json's entries went in after every
    --metadata's, whatever came last."""
    args = ["--repeat", three, "--metadata-json", "dp=2", "--metadata", "dp=1", "--metadata", "tp=4"]
    code, err = _cli(monkeypatch, capsys, "run", *args, "--", "python")
    assert (code, _cli.config.metadata) == (0, {"dp": "1", "tp": "4"})  # type: ignore[attr-defined]
    assert err.splitlines() == [
        "npuprof run: warning: metadata dp is given 2 times: --metadata-json dp=2, then --metadata dp=1; the "
        "last is used"
    ]


def test_a_bad_flag_beside_a_repeated_one_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _cli(
        monkeypatch, capsys, "run", "--wait", "1", "--wait", "2", "--active", "0", "--", "python"
    )
    assert (code, err) == (
        2,
        "npuprof run: error: --active: must be an integer >= 1, got 0; e.g. --active 3\n",
    )


def test_a_bad_value_beyond_ascii_is_shown_as_written(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--worker-name`` of 65 'é' (130 bytes: over 128) was said as ``"\\u00e9\\u00e9...``; what cannot be
    shown (a right-to-left override, a byte read in a C locale) stays escaped."""
    code, err = _cli(monkeypatch, capsys, "run", "--worker-name", "é" * 65, "--", "python")
    assert code == 2
    assert err.startswith('npuprof run: error: --worker-name: "' + "é" * 65 + '" may hold only letters')
    code, err = _cli(monkeypatch, capsys, "run", "--worker-name", "n\u202eé\udcff", "--", "python")
    assert code == 2
    assert err.startswith('npuprof run: error: --worker-name: "n\\u202eé\\udcff" may hold only letters')


_SAMPLE = {"int": 1, "float": 1.0, "str": "all", "path": "/tmp/npuprof_sample", "list": []}


@pytest.mark.parametrize("key", ["delay", "duration", "dynamic"])
def test_the_flags_an_option_excludes_are_the_ones_its_help_and_doc_name(key: str) -> None:
    """``--delay``'s README line said it "excludes the four schedule flags above" (five are refused),
    ``--dynamic``'s help "the schedule flags" (--step-on, of that panel, is not refused; --delay is)."""
    from npuprof.cli.run_flags import build_config
    from npuprof.config import ConfigError
    from npuprof.options import BY_KEY, RUN_OPTIONS

    option = BY_KEY[key]
    refused = []
    for other in RUN_OPTIONS:
        if other is option or other.kind in ("bool", "list") or {key, other.key} <= {"delay", "duration"}:
            continue  # (--delay and --duration go together)
        value = _SAMPLE[other.kind] if other.key != "step_on" else "m:f"
        flags = {key: _SAMPLE[option.kind], **({} if other.key == "config" else {other.key: value})}
        try:
            build_config("/nonexistent/p.json" if other.key == "config" else None, flags, environ={})
        except ConfigError as exc:
            if "exclude" in exc.problem:
                refused.append(other.flag)
    assert refused, key
    for flag in refused:
        assert flag in option.help and f"`{flag}`" in option.doc, (flag, option.help, option.doc)
    for other in RUN_OPTIONS:  # and no flag it takes is named as excluded
        if other.flag not in refused and other is not option:
            assert f"`{other.flag}`" not in option.doc.partition("exclude")[2].partition(".")[0], other.flag


@pytest.mark.parametrize("name", ["d\nx", "d\tx", "d\x1b[2Jx"])
def test_a_dynamic_directory_with_a_control_character_is_refused_as_output_is(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """``--dynamic $'d\\nx'`` was taken: the launcher's log line and the `npuprof trigger` command it
    suggests were cut in two, and the directory was made."""
    code, err = _cli(monkeypatch, capsys, "run", "--dynamic", name, "--", "python")
    assert (code, _cli.config) == (2, None)  # type: ignore[attr-defined]
    shown = name.replace("\n", "\\n").replace("\t", "\\t").replace("\x1b", "\\u001b")
    assert err == (
        f'npuprof run: error: --dynamic: "{shown}" holds a control character; give a directory name '
        "without one\n"
    )


def _help_of(text: str, flag: str) -> str:
    """``flag``'s entry of a --help text, as one line."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(flag + " "))
    entry = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.startswith("        "):
            break
        entry.append(line)
    return " ".join(" ".join(entry).split())


def test_help_lines_say_what_the_flags_do(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """run's --memory-timeline took --with-modules for --with-stack (on an NPU it does) and its help said
    only --with-stack; trigger's help took run's lines: a --config file trigger has none of, --analyse on
    where --ranks turns it off, a poll interval of "at least 1 s" (1 to 5 s, or run's --poll-interval)."""
    monkeypatch.setenv("COLUMNS", "100")
    args = ["--profile-memory", "--record-shapes", "--with-modules", "--memory-timeline", "html"]
    assert _cli(monkeypatch, capsys, "run", *args, "--", "python") == (0, "")
    _cli(monkeypatch, capsys, "run", "--help")
    assert "--with-modules" in _help_of(_cli.out, "--memory-timeline")  # type: ignore[attr-defined]
    _cli(monkeypatch, capsys, "trigger", "--help")
    said = _cli.out  # type: ignore[attr-defined]
    assert "--config" not in _help_of(said, "--gc-detect-threshold")
    assert "off with --ranks" in _help_of(said, "--analyse")
    assert "1 to 5 s" in " ".join(said.split())


def test_a_repeatable_flag_given_the_same_value_twice_takes_it_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--export-stacks self_npu_time_total`` twice put the metric twice into the config (and its "ignored
    on this backend" report twice); ``html`` and ``.html`` are one format."""
    args = ["--with-stack", "--profile-memory", "--record-shapes"]
    args += ["--export-stacks", "self_npu_time_total", "--export-stacks", "self_npu_time_total"]
    args += ["--memory-timeline", "html", "--memory-timeline", ".html", "--memory-timeline", "json"]
    assert _cli(monkeypatch, capsys, "run", *args, "--", "python") == (0, "")
    cfg = _cli.config  # type: ignore[attr-defined]
    assert (cfg.export_stacks, cfg.memory_timeline) == (["self_npu_time_total"], ["html", "json"])


def test_trigger_says_a_flag_given_two_values_as_run_does(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`npuprof trigger DIR --active 2 ... --active 3` took 3 without a word; DIR among the flags."""
    import json

    from npuprof.config import template_json

    (tmp_path / "profiler_config.json").write_text(json.dumps(template_json()))
    args = ["--active", "2", str(tmp_path), "--with-stack", "--active", "3", "--no-with-stack"]
    code, err = _cli(monkeypatch, capsys, "trigger", *args, "--start-step", "7", "--start-step", "9")
    assert code == 0, err
    written = json.loads((tmp_path / "profiler_config.json").read_text())
    assert (written["active"], written["with_stack"], written["start_step"]) == (3, False, 9)
    warned = [line for line in err.splitlines() if line.startswith("npuprof trigger: warning:")]
    assert warned == [
        "npuprof trigger: warning: --active is given 2 times: --active 2, then --active 3; the last is used",
        "npuprof trigger: warning: --with-stack is given 2 times: --with-stack, then --no-with-stack; the "
        "last is used",
        "npuprof trigger: warning: --start-step is given 2 times: --start-step 7, then --start-step 9; the "
        "last is used",
    ]
    code, err = _cli(monkeypatch, capsys, "trigger", str(tmp_path / "none"), "--active", "2", "--active", "3")
    assert code == 2 and len(err.splitlines()) == 1, err  # refused: that one line alone


@pytest.mark.parametrize(
    ("command", "args", "warned"),
    [
        (
            "analyse",
            ["--top", "3", "-j2", "--top", "4", "--jobs=3"],
            ["--top is given 2 times: --top 3, then --top 4", "--jobs is given 2 times: -j 2, then --jobs 3"],
        ),
        (
            "analyse",
            ["--steps", "3,3", "--steps", "3-4"],
            ["--steps is given 2 times: --steps 3,3, then --steps 3-4"],
        ),
        (
            "analyze",
            ["--force", "-j", "2", "--force", "--jobs", "3"],
            ["--jobs is given 2 times: -j 2, then --jobs 3"],
        ),
        (
            "status",
            ["--format", "table", "--format=json"],
            ["--format is given 2 times: --format table, then --format json"],
        ),
        (
            "export-stacks",
            ["-m", "self_cpu_time_total", "--metric", "self_npu_time_total"],
            ["--metric is given 2 times: -m self_cpu_time_total, then --metric self_npu_time_total"],
        ),
        (
            "memory-timeline",
            ["-oa.json", "-o", "b.json"],
            ["--output is given 2 times: -o a.json, then -o b.json"],
        ),
    ],
)
def test_every_report_command_says_a_flag_given_two_values_as_run_does(
    tmp_path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
    args: list[str],
    warned: list[str],
) -> None:
    """`npuprof analyse --top 3 ... --top 4` (status, export-stacks, memory-timeline) took the last without
    a word, where run and trigger say it (each flag named by its long form, ``analyze`` as ``analyse``)."""
    (tmp_path / "log").mkdir()  # (what status reads)
    monkeypatch.chdir(tmp_path)
    shown = "analyse" if command == "analyze" else command
    _code, err = _cli(monkeypatch, capsys, command, str(tmp_path), *args)
    said = [line for line in err.splitlines() if " is given " in line]
    assert said == [f"npuprof {shown}: warning: {line}; the last is used" for line in warned]


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("analyse", ["--top", "3", "--top", "+3", "-j2", "--jobs", "2"]),
        ("analyse", ["--steps", "3", "--steps", "3,3", "--steps=3-3"]),
        ("status", ["--format", "json", "--format=json"]),
        (
            "export-stacks",
            ["--min-width", "1", "--min-width", "1.0", "--keep-idle-threads", "--keep-idle-threads"],
        ),
    ],
)
def test_a_flag_given_the_same_value_twice_says_nothing(
    tmp_path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
    args: list[str],
) -> None:
    (tmp_path / "log").mkdir()
    _code, err = _cli(monkeypatch, capsys, command, str(tmp_path), *args)
    assert " is given " not in err and "Invalid" not in err, err


def test_a_refused_value_beside_a_repeated_flag_of_analyse_is_one_line(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _cli(monkeypatch, capsys, "analyse", str(tmp_path), "--top", "3", "--top", "0")
    assert (code, err.count("\n")) == (2, 1), err
    assert err.startswith("npuprof analyse: error: Invalid value for --top: must be at least 1")


@pytest.mark.parametrize("typed", ["memory_timeline", "export_stacks"])
def test_a_command_spelled_with_an_underscore_points_at_the_commands_help(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], typed: str
) -> None:
    """`npuprof memory_timeline x` said "npuprof memory_timeline: error: No such command ...; see npuprof
    memory_timeline --help", a help that is no command either."""
    code, err = _cli(monkeypatch, capsys, typed, "x")
    spelled = typed.replace("_", "-")
    assert (code, err) == (
        2,
        f"npuprof: error: No such command '{typed}'. Did you mean '{spelled}'?; see npuprof --help\n",
    )


@pytest.mark.parametrize(
    ("args", "start"),
    [
        (["analyse", "{}"], "npuprof analyse: nothing to analyse: {} does not exist"),
        (["status", "{}"], "npuprof status: error: {} does not exist"),
        (["trigger", "{}"], "npuprof trigger: error: {}: no profiler_config.json there"),
        (["export-stacks", "{}"], "npuprof export-stacks: {} does not exist"),
        (["memory-timeline", "{}", "-o", "m.json"], "npuprof memory-timeline: {} does not exist"),
    ],
)
@pytest.mark.parametrize("name", ["a\nb", "a\x1b[2Jb"])
def test_a_path_with_a_newline_or_an_escape_is_one_line_written_out(
    tmp_path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    start: str,
    name: str,
) -> None:
    """`npuprof analyse $'a\\nb'` said "a" on one line and "b does not exist" on the next (status, trigger,
    export-stacks and memory-timeline too), and analyse's ``\\x1b[2J`` cleared the terminal."""
    monkeypatch.chdir(tmp_path)
    code, err = _cli(monkeypatch, capsys, *[a.format(name) for a in args])
    shown = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in name)
    assert code in (1, 2)
    assert err.count("\n") == 1 and err.startswith(start.format(shown)), err


@pytest.mark.parametrize(
    ("flag", "said"),
    [
        ("-o", "npuprof export-stacks: -o: is empty; give a file name (-o - writes the stacks to stdout)\n"),
        ("--svg", "npuprof export-stacks: --svg: is empty; give a file name\n"),
    ],
)
def test_an_empty_stacks_file_is_said_empty_not_the_current_directory(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], flag: str, said: str
) -> None:
    """`npuprof export-stacks DIR -o ''` said "-o .: <the current directory> is a directory": typer made the
    empty word a Path, the current directory."""
    monkeypatch.chdir(tmp_path)
    assert _cli(monkeypatch, capsys, "export-stacks", str(tmp_path), flag, "") == (2, said)


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("", "-o: is empty; give a file name: one ending in .html, .json, .json.gz or .raw.json.gz"),
        ("out/m.txt", "-o: cannot tell the format of 'out/m.txt': end the name in .html, .json, .json.gz"),
    ],
)
def test_a_memory_timeline_name_of_no_format_is_named_as_given(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], given: str, said: str
) -> None:
    """`npuprof memory-timeline DIR -o ''` said "cannot tell the format of ''" (the name of Path(''), the
    current directory): neither what was typed nor what -o takes."""
    monkeypatch.chdir(tmp_path)
    code, err = _cli(monkeypatch, capsys, "memory-timeline", str(tmp_path), "-o", given)
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"npuprof memory-timeline: {said}"), err
    assert err.endswith("(-o - writes .json to stdout)\n"), err


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["export-stacks", "src", "-o", "{}"], "-o"),
        (["export-stacks", "src", "--svg", "{}"], "--svg"),
        (["memory-timeline", "src", "-o", "{}"], "-o"),
        (["run", "--export-chrome-trace", "{}", "--", "python"], "--export-chrome-trace"),
    ],
)
@pytest.mark.parametrize("typed", ["out/", "out/.", "made.json/"])
def test_an_output_file_named_as_a_directory_is_refused_not_written_as_a_file(
    tmp_path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    flag: str,
    typed: str,
) -> None:
    """`npuprof export-stacks DIR -o out/` (no `out` there) wrote the stacks into a file `out` and said
    "wrote out": the '/' was dropped (Path, abspath), where a shell's `> out/` and Python's `open('out/',
    'w')` fail; `--svg`, memory-timeline's `-o` (`flame.html/` too) and run's `--export-chrome-trace` the
    same. A file already there (made.json) is not replaced either."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "made.json").write_text("kept")
    code, err = _cli(monkeypatch, capsys, *[a.format(typed) for a in args])
    name = typed.rstrip("/.").rstrip("/")
    there = "is not a directory" if name == "made.json" else f"there is no directory {tmp_path / name}"
    assert (code, err.count("\n")) == (2, 1), err
    assert f"{flag}: " in err and f"{typed} ends with " in err and there in err, err
    assert _cli.config is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["made.json"]
    assert (tmp_path / "made.json").read_text() == "kept"


@pytest.mark.parametrize("name", ["flame.svg", "Flame.SVG"])
def test_a_stacks_file_named_svg_is_refused_with_the_svg_flag_to_use(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """`npuprof export-stacks DIR -o flame.svg` wrote the folded text into flame.svg and said "wrote
    flame.svg": a file no browser shows, where memory-timeline's -o picks its format by the suffix."""
    monkeypatch.chdir(tmp_path)
    code, err = _cli(monkeypatch, capsys, "export-stacks", str(tmp_path), "-o", name)
    assert (code, err.count("\n")) == (2, 1), err
    assert err.startswith(f"npuprof export-stacks: -o {name}: ") and f"give --svg {name} " in err, err
    assert not (tmp_path / name).exists()


def test_a_memory_timeline_file_that_is_a_link_names_its_flag_once(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`npuprof memory-timeline DIR -o link.json` said "-o: -o 'link.json' is a symbolic link ..."."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "link.json").symlink_to(tmp_path / "elsewhere.json")
    code, err = _cli(monkeypatch, capsys, "memory-timeline", str(tmp_path), "-o", "link.json")
    target = tmp_path / "elsewhere.json"
    assert (code, err) == (
        2,
        f"npuprof memory-timeline: -o 'link.json' is a symbolic link (-> '{target}'); give the real path "
        "instead\n",
    )


def test_a_misspelt_analyse_is_offered_analyse_alone(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`npuprof anaylse x` was offered "'analyse', 'analyze'": the alias, a hidden command, as a second
    command. ``analyze`` still runs analyse, and says so in analyse's name."""
    assert _cli(monkeypatch, capsys, "anaylse", "x") == (
        2,
        "npuprof: error: No such command 'anaylse'. Did you mean 'analyse'?; see npuprof --help\n",
    )
    missing = tmp_path / "none"
    assert _cli(monkeypatch, capsys, "analyze", str(missing)) == (
        1,
        f"npuprof analyse: nothing to analyse: {missing} does not exist\n",
    )


@pytest.mark.parametrize(
    ("command", "value", "said"),
    [
        (["export-stacks", "r"], "x", "Invalid value for '--rank': 'x' is not a whole number; see {help}"),
        (
            ["memory-timeline", "r", "-o", "m.json"],
            "1.5",
            "Invalid value for '--rank': '1.5' is not a whole number; see {help}",
        ),
        (
            ["export-stacks", "r"],
            "-1",
            "--rank -1: give a rank, 0 or more (as the run's summary numbers them)",
        ),
        (
            ["memory-timeline", "r", "-o", "m.json"],
            "-1",
            "--rank -1: give a rank, 0 or more (as the run's summary numbers them)",
        ),
    ],
)
def test_a_bad_rank_is_one_line_naming_the_flag(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    command: list[str],
    value: str,
    said: str,
) -> None:
    """``export-stacks --rank x`` said "'x' is not a whole number range" (click's integer range in our
    words, half-way) and --rank -1 "-1 is not in the range x>=0"."""
    monkeypatch.chdir(tmp_path)
    code, err = _cli(monkeypatch, capsys, *command, "--rank", value)
    assert code == 2
    helped = f"npuprof {command[0]} --help"
    prefix = f"npuprof {command[0]}: " + ("error: " if said.startswith("Invalid") else "")
    assert err.splitlines() == [prefix + said.format(help=helped)]
    assert list(tmp_path.iterdir()) == []  # no output begun
