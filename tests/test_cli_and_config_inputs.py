"""Bad command-line and config-file input found by helper-220: one line naming the flag (or the file's key)
and the fix, exit 2; never a traceback, never a silent misreading. In-process, but for one plain-Python
subprocess (a POSIX locale)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from npuprof.cli import main


def _cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """``npuprof ARGS`` as main() runs it (the fast path of run included): (exit code, stderr); stdout is
    kept in ``_cli.out``."""

    def leave(code: int) -> None:
        raise SystemExit(code)

    monkeypatch.setattr(sys, "argv", ["npuprof", *args])
    monkeypatch.setattr(main, "_leave", leave)
    monkeypatch.setattr(main, "guard_streams", lambda: None)
    with pytest.raises(SystemExit) as ended:
        main._main()
    written = capsys.readouterr()
    _cli.out = written.out  # type: ignore[attr-defined]
    return int(ended.value.code or 0), written.err


def test_analyse_an_empty_run_is_refused_not_taken_for_the_latest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--run ''`` was no --run at all: the latest run was reported as if the user had picked it."""
    code, err = _cli(monkeypatch, capsys, "analyse", "--run", "", str(tmp_path))
    assert code == 2
    assert err.splitlines() == [
        "npuprof analyse: error: Invalid value for --run: is empty; give a run id (or its start), or all; "
        "see npuprof analyse --help"
    ]


def _config_file(tmp_path: Path, text: str) -> str:
    file = tmp_path / "profiler_config.json"
    file.write_text(text)
    file.chmod(0o600)
    return str(file)


def test_msprof_tx_and_mstx_that_disagree_are_refused(tmp_path: Path) -> None:
    """``msprof_tx: true`` beside ``mstx: false`` (the newer releases' name of the same switch) took
    msprof_tx without a word. Refused, naming both; a dynamic capture's reader (on_bad) hears of it and takes
    neither."""
    from npuprof.config import ConfigError, config_from_json, load_config_file

    path = _config_file(tmp_path, '{"experimental_config": {"msprof_tx": true, "mstx": false}}')
    with pytest.raises(ConfigError) as refused:
        load_config_file(path)
    assert refused.value.one_line() == (
        f"{path}: experimental_config.msprof_tx: is true and experimental_config.mstx (newer torch_npu's "
        "name of the same switch) false; keep one of the two keys"
    )
    bad: list[ConfigError] = []
    data = {"experimental_config": {"msprof_tx": False, "mstx": True}}
    assert config_from_json(data, "f.json", on_bad=bad.append).msprof_tx is False  # the base's value
    assert [e.source for e in bad] == ["f.json: experimental_config.msprof_tx"]
    for same in (True, False):  # the two names agreeing, or one alone: as before
        both = {"experimental_config": {"msprof_tx": same, "mstx": same}}
        assert config_from_json(both, "f.json").msprof_tx is same
        assert config_from_json({"experimental_config": {"mstx": same}}, "f.json").msprof_tx is same


def _run_flags(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, list]:
    """``npuprof run ARGS`` up to the launcher: (exit code, stderr, [(config, command)] it was given)."""
    import npuprof.runner

    given: list = []
    monkeypatch.setattr(npuprof.runner, "execute", lambda cfg, command: given.append((cfg, command)) or 0)
    code, err = _cli(monkeypatch, capsys, "run", *args)
    return code, err, given


def test_a_short_flag_with_an_equals_sign_takes_the_value_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``npuprof run -o=rr`` made a directory named ``=rr`` (click's reading of a short flag); argparse
    (torchrun, memray) reads ``rr``, as ``--output=rr``. The command's own ``-o=x`` is left as it is."""
    out = tmp_path / "rr"
    for command in (["--", "python", "x.py", "-o=zz"], ["python", "x.py", "-o=zz"]):
        code, err, given = _run_flags(monkeypatch, capsys, f"-o={out}", "--with-stack", *command)
        assert (code, err) == (0, "")
        assert [(Path(cfg.output), argv) for cfg, argv in given] == [(out, ["python", "x.py", "-o=zz"])]
    code, err, given = _run_flags(monkeypatch, capsys, "-o=", "--", "python", "x.py")
    assert (code, given) == (2, [])
    assert err == "npuprof run: error: --output: is empty; give a directory, e.g. -o npuprof_result\n"
    code, err, given = _run_flags(monkeypatch, capsys, "-h=x", "--", "python", "x.py")  # -h takes no value
    assert (code, given, err) == (2, [], "npuprof run: error: No such option: -=; see npuprof run --help\n")


def test_gc_detect_threshold_off_switches_off_the_config_files_threshold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A --config file's gc_detect_threshold could not be switched off from the command line: the flag took
    numbers only ('off', its shown default, was "not a valid float"). ``off`` is None, on both paths."""
    config = _config_file(tmp_path, '{"experimental_config": {"gc_detect_threshold": 5}}')
    out = tmp_path / "out"
    for flags in (["--gc-detect-threshold", "off"], ["--gc-detect-threshold=OFF"], ["--with-stack"]):
        for output in (["-o", str(out)], [f"-o{out}"]):  # the fast path; typer (a form it leaves to typer)
            code, err, given = _run_flags(
                monkeypatch, capsys, *output, "--config", config, *flags, "--", "python"
            )
            assert (code, err) == (0, ""), flags
            assert given[0][0].gc_detect_threshold == (5.0 if "--with-stack" in flags else None)
    code, err, given = _run_flags(monkeypatch, capsys, "--gc-detect-threshold", "2.5", "--", "python")
    assert given[0][0].gc_detect_threshold == 2.5
    code, err, given = _run_flags(monkeypatch, capsys, "--gc-detect-threshold", "never", "--", "python")
    assert (code, given) == (2, [])
    assert err == (
        'npuprof run: error: --gc-detect-threshold: must be a number of milliseconds or off, got "never"; '
        "e.g. --gc-detect-threshold 10, or --gc-detect-threshold off\n"
    )


@pytest.mark.parametrize("args, code", [(["trigger", "--help"], 0), (["trigger", "-h", "cfg"], 0)])
def test_trigger_help_at_80_columns_cuts_no_flag(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: list[str], code: int
) -> None:
    """typer's rich panels cut `npuprof trigger --help`'s flags at 80 columns (``--gc-detect-thresho…``,
    ``--data-simplificat…``, ``--no-record-op-ar…``); laid out as `run --help` (cli/run_help.py) now."""
    from npuprof.cli.trigger import TRIGGER_OPTIONS

    monkeypatch.setenv("COLUMNS", "80")
    assert _cli(monkeypatch, capsys, *args) == (code, "")
    out: str = _cli.out  # type: ignore[attr-defined]
    assert max(len(line) for line in out.splitlines()) <= 80 and "\u2026" not in out
    words = set(out.replace(",", " ").split())
    for option in TRIGGER_OPTIONS:
        flags = [*option.flags, *([f"--no-{option.flag[2:]}"] if option.kind == "bool" else [])]
        assert set(flags) <= words, flags
    assert {"DIR", "--start-step", "--active", "--warmup", "--cancel", "--help", "Examples:"} <= words


def test_config_file_errors_name_each_key_one_way(tmp_path: Path) -> None:
    """A key of experimental_config was named bare by one check (``f.json: profiler_level: ...``) and dotted
    by another (``f.json: experimental_config.aic_metrics: ...``), misspelt ones as ``f.json:
    experimental_config: unknown key(s) l2_cach``, and a file's empty prof_dir was told to use ``-o``. Every
    message names the key as the README's flag table does, and says to fix it in the file."""
    from npuprof.config import ConfigError, config_from_json, in_file_terms
    from npuprof.options import RUN_OPTIONS

    nested = [o for o in RUN_OPTIONS if o.config_key and "." in o.config_key and o.kind == "bool"]
    for option in nested:
        section, key = option.config_key.split(".")  # type: ignore[union-attr]
        with pytest.raises(ConfigError) as refused:
            config_from_json({section: {key: "yes"}}, "f.json")
        assert refused.value.source == f"f.json: {option.config_key}"
    bad: list[ConfigError] = []
    config_from_json(
        {"experimental_config": {"profiler_level": "Level9", "l2_cach": True}}, "f.json", on_bad=bad.append
    )
    assert [e.one_line() for e in bad] == [
        "f.json: unknown key(s) experimental_config.l2_cach (did you mean experimental_config.l2_cache?); "
        'see docs/formats.md, "profiler_config.json"',
        "f.json: experimental_config.profiler_level: unknown level 'Level9'; use none, 0, 1 or 2",
    ]
    with pytest.raises(ConfigError) as refused:
        config_from_json({"prof_dir": " "}, "f.json").validate()
    assert (
        in_file_terms(refused.value, "f.json").one_line()
        == "f.json: prof_dir: is empty; fix prof_dir in the file"
    )


def test_a_key_given_twice_in_a_config_file_is_refused(tmp_path: Path) -> None:
    """``{"active": 2, "active": 5, ...}`` (a value edited above a forgotten one) was read as 5 without a
    word, as json.loads keeps the last; so in experimental_config and metadata."""
    from npuprof.config import ConfigError, load_config_file

    for text, key in (
        ('{"start_step": 1, "active": 2, "active": 5}', "active"),
        ('{"experimental_config": {"l2_cache": true, "l2_cache": false}}', "l2_cache"),
        ('{"metadata": {"dp": 1, "dp": 2}}', "dp"),
    ):
        path = _config_file(tmp_path, text)
        with pytest.raises(ConfigError) as refused:
            load_config_file(path)
        assert refused.value.one_line() == (
            f"--config: {path!r} gives {key} twice in one object (a JSON reader keeps the last, torch_npu's "
            f"too); keep one {key}"
        )
    assert load_config_file(_config_file(tmp_path, '{"start_step": 1, "active": 5}')).schedule.active == 5


def test_trigger_names_a_long_warm_up_in_its_memory_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``npuprof trigger DIR --warmup 5000`` was told ``--active 1: a capture holds every step's events``:
    the warm-up (the profiler on, its steps not kept) was what made the capture long."""
    from npuprof.config import template_json

    _config_file(tmp_path, json.dumps(template_json()))  # as the job's --dynamic left it
    code, err = _cli(monkeypatch, capsys, "trigger", str(tmp_path), "--warmup", "5000")
    assert code == 0
    assert "npuprof trigger: note: --warmup 5000 --active 1: a capture holds every step's events" in err


def test_a_directory_given_as_config_names_the_file_in_it(tmp_path: Path) -> None:
    """torch_npu's PROF_CONFIG_PATH names a directory, and ``--config DIR`` was told only "not a regular
    file; give an existing file": the file in it, or --dynamic DIR, is what the user meant."""
    from npuprof.config import ConfigError, load_config_file

    with pytest.raises(ConfigError) as refused:
        load_config_file(tmp_path)
    assert refused.value.one_line() == (
        f"--config: cannot read {str(tmp_path)!r}: a directory, not a regular file; give the file "
        f"({str(tmp_path / 'profiler_config.json')!r}), or --dynamic {str(tmp_path)!r} to watch it while the "
        "job runs"
    )


def test_metadata_json_out_of_range_names_its_own_flag(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--metadata-json k=1e400`` (infinity) was refused as ``--metadata: entry 'k' ...``, a flag the user
    did not give."""
    code, err, given = _run_flags(monkeypatch, capsys, "--metadata-json", "k=[1e400]", "--", "python")
    assert (code, given) == (2, [])
    assert err == (
        "npuprof run: error: --metadata-json: k: holds a number out of JSON's range (infinity or NaN); give "
        "a finite number\n"
    )


def test_a_flags_second_word_before_the_dashes_is_not_run_as_the_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--min-free-space 5 GiB -- python ...`` ran the command ``GiB -- python ...``: exit 127, "command not
    found: 'GiB'", nothing saying that the flag took one word. A word before ``--`` that names no command is
    refused as the flag's stray value; one that names a command is still the command (its own ``--``)."""
    code, err, given = _run_flags(monkeypatch, capsys, "--min-free-space", "5", "GiB", "--", "python", "x.py")
    assert (code, given) == (2, [])
    assert err == (
        "npuprof run: error: 'GiB': before -- is not a command: --min-free-space takes one value (SIZE); the "
        "command goes after --\n"
    )
    code, err, given = _run_flags(monkeypatch, capsys, "--with-stack", sys.executable, "x.py", "--", "y")
    assert (code, err) == (0, "") and given[0][1] == [sys.executable, "x.py", "--", "y"]


def test_a_non_ascii_value_in_a_posix_locale_reaches_the_job(tmp_path: Path) -> None:
    """LC_ALL=POSIX without Python's UTF-8 mode: ``--metadata k=é`` ended `npuprof run` in a traceback
    (UnicodeEncodeError from posix_spawn: NPUPROF_CONFIG held an 'é' the locale's ASCII cannot encode) and
    the job never ran. The payload keeps such a character escaped; the job reads the same value."""
    from conftest import clean_env, npuprof

    show = "import os, json; print(ascii(json.loads(os.environ['NPUPROF_CONFIG'])['config']['metadata']))"
    env = clean_env(LC_ALL="POSIX", PYTHONUTF8="0", PYTHONCOERCECLOCALE="0")
    result = npuprof(
        "run", "-o", str(tmp_path / "out"), "--metadata", "k=é", "--", sys.executable, "-c", show, env=env
    )
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert result.stdout.splitlines() == ["{'k': '\\xe9'}"]


def test_metadata_read_in_a_c_locale_is_not_called_invalid_utf8() -> None:
    """In a C/POSIX locale Python reads ``--metadata k=é`` as the bytes c3 a9 (surrogate escapes): valid
    UTF-8, which the captures get as 'é'; it was said to be "not valid UTF-8; the captures get its bytes
    written as \\xNN". Bytes that are not UTF-8 are still said to be."""
    from npuprof.launch import text_metadata

    assert text_metadata({"k": "\udcc3\udca9", "l": ["\udcc3\udca9"]}) == ({"k": "é", "l": ["é"]}, [])
    texts, notes = text_metadata({"team": "a\udcffb"})
    assert texts == {"team": "a\\xffb"} and len(notes) == 1 and "not valid UTF-8" in notes[0]


def test_prof_config_path_that_is_no_directory_name_is_named_as_itself(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """PROF_CONFIG_PATH=' ': the note "is taken as --dynamic", then an error naming --dynamic, a flag the user
    never gave; a newline in it broke the note in two. The error names the variable, the note is one line."""
    from npuprof.cli import run_flags
    from npuprof.config import ConfigError

    with pytest.raises(ConfigError) as refused:
        run_flags.build_config(None, {}, environ={"PROF_CONFIG_PATH": " "})
    assert refused.value.one_line() == (
        'PROF_CONFIG_PATH (taken as --dynamic): " " is not a directory name; unset PROF_CONFIG_PATH, or give '
        "it a directory"
    )
    capsys.readouterr()
    with pytest.raises(ConfigError) as refused:  # as --dynamic's (helper-229: it cut the launcher's lines)
        run_flags.build_config(None, {}, environ={"PROF_CONFIG_PATH": "a\nb"})
    assert refused.value.one_line() == (
        'PROF_CONFIG_PATH (taken as --dynamic): "a\\nb" holds a control character; unset PROF_CONFIG_PATH, '
        "or give it a directory"
    )
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("npuprof: PROF_CONFIG_PATH='a\\nb' is taken as --dynamic 'a\\nb', and removed")


def test_export_chrome_trace_with_a_control_character_is_refused_as_output_is(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``-o 'a\\nb'`` is refused (a control character), ``--export-chrome-trace 't\\n.json'`` was taken: a
    trace file whose name breaks every line that names it (the run's summary, the log)."""
    code, err, given = _run_flags(monkeypatch, capsys, "--export-chrome-trace", "t\n.json", "--", "python")
    assert (code, given) == (2, [])
    shown = json.dumps(os.path.abspath("t\n.json"))
    assert err == (
        f"npuprof run: error: --export-chrome-trace: {shown} holds a control character; give a file name "
        "without one\n"
    )


def test_a_key_at_the_wrong_level_or_named_as_its_flag_is_refused_not_ignored() -> None:
    """``{"gc_detect_threshold": 5}`` at the top level (its place: experimental_config), ``{"level": 1}`` (the
    flag's name) or ``experimental_config.with_stack`` were warned as "keys of a newer torch_npu release?"
    and ignored: the run went on without the setting the file asked for. Refused with the key meant; a key
    npuprof cannot place is still warned and ignored."""
    from npuprof.config import ConfigError, config_from_json

    for data, meant in (
        (
            {"gc_detect_threshold": 5},
            "gc_detect_threshold (did you mean experimental_config.gc_detect_threshold?)",
        ),
        ({"level": 1}, "level (did you mean experimental_config.profiler_level?)"),
        (
            {"experimental_config": {"with_stack": True}},
            "experimental_config.with_stack (did you mean with_stack?)",
        ),
    ):
        with pytest.raises(ConfigError) as refused:
            config_from_json(data, "f.json")
        assert refused.value.one_line() == (
            f'f.json: unknown key(s) {meant}; see docs/formats.md, "profiler_config.json"'
        )
    warned: list[str] = []
    config_from_json({"host_sys_new": 1}, "f.json", warn=warned.append)
    assert warned == [
        "f.json: host_sys_new: not known to npuprof (keys of a newer torch_npu release?); ignored"
    ]


def test_a_key_named_as_a_flag_the_file_has_no_key_for_is_refused() -> None:
    """``{"step_on": "train:step"}`` (or export_stacks, memory_timeline...) was warned as "keys of a newer
    torch_npu release?" and ignored: the job ran whole, its steps counted at optimizer.step(). The flag
    has no key in the file: refused, naming it."""
    from npuprof.config import ConfigError, config_from_json

    for data, said in (
        ({"step_on": "train:step"}, "step_on (--step-on has no key in the file: give the flag)"),
        (
            {"experimental_config": {"export_stacks": "cpu"}},
            "experimental_config.export_stacks (--export-stacks has no key in the file: give the flag)",
        ),
    ):
        with pytest.raises(ConfigError) as refused:
            config_from_json(data, "f.json")
        assert refused.value.one_line() == (
            f'f.json: unknown key(s) {said}; see docs/formats.md, "profiler_config.json"'
        )


@pytest.mark.parametrize("flag", ["--nproc-per-node", "--nproc_per_node=8", "--standalone"])
def test_a_torchrun_flag_given_to_run_says_to_start_torchrun_after_the_dashes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    """``npuprof run --nproc-per-node 8 train.py`` (torchrun left out) was told "No such option:
    --nproc-per-node; see npuprof run --help", which names no fix: the flag is torchrun's."""
    code, err, given = _run_flags(monkeypatch, capsys, flag, "train.py")
    name = flag.split("=")[0]
    assert (code, given) == (2, [])
    assert err == (
        f"npuprof run: error: {name} is torchrun's flag, not npuprof's; start torchrun after --: npuprof run "
        f"[flags] -- torchrun {name} ... train.py\n"
    )


@pytest.mark.parametrize("flag", ["--steps", "--num_steps=3", "--start-step"])
def test_a_flag_for_the_steps_recorded_given_to_run_names_the_schedule_flags(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    """A new user's first try, ``npuprof run --steps 5 -- python train.py``, was offered --step-on (a
    MODULE:QUALNAME to count steps at), and ``--start-step 10`` (torch_npu's start_step) nothing."""
    code, err, given = _run_flags(monkeypatch, capsys, flag, "5", "--", "python", "train.py")
    name = flag.split("=")[0]
    assert (code, given) == (2, [])
    assert err == (
        f"npuprof run: error: {name} is not a flag of run: --skip-first N --warmup W --active M choose the "
        "steps recorded, N+W to N+W+M-1 (torch_npu's start_step is --skip-first; the default 5, 1, 3 records "
        "steps 6-8); see npuprof run --help\n"
    )


def test_a_schedule_flag_given_to_run_names_the_schedule_flags(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A torch.profiler user's guess, ``npuprof run --schedule 1,1,3 -- python train.py``, was answered
    "No such option: --schedule (Possible options: --help)" (helper-366)."""
    code, err, given = _run_flags(monkeypatch, capsys, "--schedule", "1,1,3", "--", "python", "train.py")
    assert (code, given) == (2, [])
    assert err == (
        "npuprof run: error: --schedule is not a flag of run: --skip-first N --warmup W --active M choose "
        "the steps recorded, N+W to N+W+M-1 (torch.profiler.schedule's arguments are flags of their own, "
        "--wait N and --repeat R too; the default 5, 1, 3 records steps 6-8); see npuprof run --help\n"
    )


def test_a_file_value_a_flag_conflicts_with_is_named_as_the_file_wrote_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`npuprof run --config f.json --level none`, the file setting experimental_config.op_attr: the error
    was "--op-attr: needs a profiler level other than none; add --level 0", a flag the user never typed and
    a fix against the one typed. It names the file's key now; a typed --op-attr is still the flag."""
    config = tmp_path / "f.json"
    config.write_text('{"experimental_config": {"op_attr": true}}')
    config.chmod(0o600)
    run = ("run", "--config", str(config), "--level", "none", "-o", str(tmp_path / "out"))
    code, err = _cli(monkeypatch, capsys, *run, "--", "python", "train.py")
    assert (code, err) == (
        2,
        f"npuprof run: error: {config}: experimental_config.op_attr: needs a profiler level other than none; "
        "fix experimental_config.op_attr in the file\n",
    )
    code, err = _cli(monkeypatch, capsys, *run, "--op-attr", "--", "python", "train.py")
    assert (code, err) == (
        2,
        "npuprof run: error: --op-attr: needs a profiler level other than none; add --level 0\n",
    )


def test_a_dynamic_directory_from_prof_config_path_is_named_by_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """PROF_CONFIG_PATH (torch_npu's variable, taken as --dynamic) naming a directory npuprof refuses: the
    error said "--dynamic '/x': ...", a flag the user never typed. It names the variable, and unsetting it
    as a fix; --dynamic itself is still named as the flag."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    missing = "/proc/no-such-dir"
    run = ("run", "-o", str(tmp_path / "out"), "--", "python", "train.py")
    said: dict[str, str] = {}
    for value in (str(shared), missing):
        monkeypatch.setenv("PROF_CONFIG_PATH", value)
        code, err = _cli(monkeypatch, capsys, *run)
        assert code == 2, err
        said[value] = err.splitlines()[-1]
    refused = f"npuprof run: error: PROF_CONFIG_PATH '{shared}' is writable by others"
    assert said[str(shared)].startswith(refused), said
    assert said[missing] == (
        f"npuprof run: error: PROF_CONFIG_PATH '{missing}': No such file or directory; give a directory you "
        "can write, or unset PROF_CONFIG_PATH"
    )
    monkeypatch.delenv("PROF_CONFIG_PATH")
    code, err = _cli(monkeypatch, capsys, "run", "--dynamic", str(shared), *run[1:])
    assert code == 2 and f"npuprof run: error: --dynamic '{shared}' is writable by others" in err, err


@pytest.mark.parametrize("given", [["--rank", "1"], ["--rank=1"]])
def test_analyse_rank_names_the_rank_dir_to_give_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], given: list[str]
) -> None:
    """helper-275: ``npuprof analyse result/ --rank 1`` (export-stacks' and memory-timeline's flag) was told
    "No such option: --rank (Possible options: --run)", --run being a run id, not a rank."""
    code, err = _cli(monkeypatch, capsys, "analyse", str(tmp_path), *given)
    assert code == 2
    assert err.splitlines() == [
        "npuprof analyse: error: --rank is not a flag of analyse: give that rank's directory "
        "(the *_ascend_pt under the result dir, which npuprof run's summary lists) to report it "
        "alone; export-stacks and memory-timeline take --rank N"
    ]
    # another unknown flag keeps click's suggestion
    code, err = _cli(monkeypatch, capsys, "analyse", str(tmp_path), "--rnk", "1")
    assert code == 2 and "No such option: --rnk" in err, err


@pytest.mark.parametrize("given", [["-o", "report.txt"], ["--output=report.txt"]])
def test_analyse_output_says_the_report_goes_to_stdout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], given: list[str]
) -> None:
    """``npuprof analyse result/ -o report.txt`` (export-stacks' and memory-timeline's -o) was told "No such
    option: -o; see npuprof analyse --help", whose help names no way to save the report either."""
    code, err = _cli(monkeypatch, capsys, "analyse", str(tmp_path), *given)
    assert code == 2
    assert err.splitlines() == [
        f"npuprof analyse: error: {given[0].split('=')[0]} is not a flag of analyse, which writes its report "
        "to stdout: npuprof analyse DIR > report.txt (--format json or csv for a file to read back)"
    ]
    assert not (tmp_path / "report.txt").exists()


@pytest.mark.parametrize("command", ["analyse", "export-stacks", "memory-timeline"])
def test_a_report_command_without_its_input_names_what_to_give(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """A new user's bare `npuprof analyse` was told "Missing argument 'path'; see npuprof analyse --help"
    (export-stacks and memory-timeline: 'source'), nothing of where npuprof run wrote."""
    code, err = _cli(
        monkeypatch, capsys, command, *(["-o", "m.json"] if command == "memory-timeline" else [])
    )
    assert code == 2
    (line,) = err.splitlines()
    given = {
        "analyse": "'path': give npuprof run's output directory (-o; ./npuprof_result without it)",
        "export-stacks": "'source': give a capture's directory (a *_ascend_pt",
        "memory-timeline": "'source': give a capture's directory (a *_ascend_pt",
    }[command]
    assert line.startswith(f"npuprof {command}: error: Missing argument {given}"), line
    assert line.endswith(f"; see npuprof {command} --help"), line


def test_memory_timeline_without_output_names_the_names_it_takes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``npuprof memory-timeline DIR`` (a new user's first try) was told "Missing option '--output' / '-o';
    see npuprof memory-timeline --help": the format follows -o's suffix, which only the help said."""
    code, err = _cli(monkeypatch, capsys, "memory-timeline", str(tmp_path))
    assert code == 2
    assert err.splitlines() == [
        "npuprof memory-timeline: error: Missing option '--output' / '-o': give e.g. -o memory.html "
        "(a plot), or a .json, .json.gz or .raw.json.gz name; see npuprof memory-timeline --help"
    ]


def test_run_dynamic_names_its_collection_flags_that_each_request_sets_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`npuprof run --dynamic cfg --with-stack`, then `npuprof trigger cfg`: the capture had no stacks, and
    nothing said so (the template and trigger write with_stack false). run now names such flags."""
    from npuprof.agent.dynamic_request import parse_request
    from npuprof.cli import run_flags
    from npuprof.config import template_json

    flags = {"dynamic": str(tmp_path / "cfg"), "with_stack": True, "level": "1", "gzip": False}
    cfg = run_flags.build_config(None, flags, environ={})
    said = " ".join(capsys.readouterr().err.split())
    assert "--with-stack, --level 1 set only what a request leaves out" in said, said
    assert f"npuprof trigger {tmp_path / 'cfg'} --with-stack --level 1`" in said, said
    assert "--gzip" not in said, said  # the run's own: no key of the file
    # what it says holds: the template's request takes neither from the run
    raw = json.dumps({**template_json(), "start_step": -1}).encode()
    request = parse_request(raw, "d", cfg, lambda level, line: None)
    assert request is not None and (request.cfg.with_stack, request.cfg.level) == (False, "Level0")
    run_flags.build_config(None, {"dynamic": str(tmp_path / "cfg"), "with_stack": False}, environ={})
    assert capsys.readouterr().err == ""  # npuprof's default given again changes nothing


@pytest.mark.parametrize(
    ("given", "instead"),
    [
        (["--export-stacks", "self_cpu_time_total"], "npuprof run --dynamic DIR, and --with-stack to each"),
        (["--memory-timeline", "html"], "--profile-memory --record-shapes --with-stack to each trigger"),
        (["--skip-first", "3"], "one window: --start-step N --warmup W --active M"),
        (["--no-gzip"], "it is the job's, set as npuprof run starts"),
    ],
)
def test_a_flag_of_run_given_to_trigger_says_whose_it_is_and_what_a_request_takes(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    given: list[str],
    instead: str,
) -> None:
    """`npuprof trigger cfg --export-stacks ...` was told "No such option (Possible options: --export-type,
    ...)": nothing said that the flag is run's, nor how a request asks for the stacks."""
    code, err = _cli(monkeypatch, capsys, "trigger", str(tmp_path), *given)
    assert code == 2 and not (tmp_path / "profiler_config.json").exists(), err
    assert err.startswith(f"npuprof trigger: error: {given[0]} is a flag of npuprof run, not of trigger: "), (
        err
    )
    assert instead in err and err.count("\n") == 1, err
    code, err = _cli(monkeypatch, capsys, "trigger", str(tmp_path), "--export-stack", "x")  # a typo: click's
    assert code == 2 and "No such option: --export-stack" in err, err


def test_trigger_help_puts_the_window_and_ranks_together_and_says_run_flags_are_not_used(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--ranks sat alone under run's "Schedule (torch.profiler.schedule semantics)" heading and the window's
    flags under "Options"; "Flags not given take npuprof run's defaults" read as the flags the job was
    started with, which a request never takes for the keys it writes (all of them)."""
    monkeypatch.setenv("COLUMNS", "100")
    assert _cli(monkeypatch, capsys, "trigger", "--help") == (0, "")
    out: str = _cli.out  # type: ignore[attr-defined]
    heading, under = "", {}
    for line in out.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            heading = line
        elif line.startswith("  --"):
            under[line.split()[0]] = heading
    assert "Schedule" not in " ".join(under.values()), under
    assert {under[flag] for flag in ("--start-step", "--active", "--warmup", "--cancel", "--ranks")} == {
        "Which steps and ranks:"
    }, under
    said = " ".join(out.split())
    assert "not with the flags npuprof run was given" in said and "take npuprof run's defaults" not in said


def test_status_help_at_80_columns_wraps_its_note_as_one_paragraph(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The note under the examples had newlines of its own, which typer kept: at 80 columns it read as
    lines cut half-way ("held by another process: the" / "pid given again) ...")."""
    monkeypatch.setenv("COLUMNS", "80")
    assert _cli(monkeypatch, capsys, "status", "--help") == (0, "")
    out: str = _cli.out  # type: ignore[attr-defined]
    lines = out.splitlines()
    first = next(i for i, line in enumerate(lines) if "A process whose log" in line)
    paragraph = []
    for line in lines[first:]:
        if not line.strip():
            break
        paragraph.append(line.rstrip())
    assert len(paragraph) > 1 and all(len(line) > 60 for line in paragraph[:-1]), paragraph
    assert "stopped" in " ".join(paragraph) and "kill -CONT PID" in " ".join(paragraph)


@pytest.mark.parametrize(
    ("given", "fix"), [(["--active", "2"], "drop it"), (["--active", "2", "--warmup", "1"], "drop them")]
)
def test_trigger_cancel_with_window_flags_says_drop_it_or_them(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    given: list[str],
    fix: str,
) -> None:
    """`npuprof trigger cfg --cancel --active 2` was told "excludes --active ...; drop them"."""
    code, err = _cli(monkeypatch, capsys, "trigger", str(tmp_path), "--cancel", *given)
    assert code == 2 and err.endswith(f"(it asks for no capture); {fix}\n"), err
    assert not (tmp_path / "profiler_config.json").exists()
