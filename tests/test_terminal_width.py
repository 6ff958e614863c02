"""`npuprof run --help` fits 80 columns and never cuts a flag name (a new user's first screen)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _forked_cli import npuprof  # report commands forked from a process that imported them: see its doc
from analyse_support.handmade import cpu_trace, write_rank_dir
from conftest import clean_env, rank_dirs, sched, trainer

from npuprof.options import RUN_OPTIONS


def test_run_help_fits_80_columns_with_every_flag_whole() -> None:
    result = npuprof("run", "--help", env=clean_env(COLUMNS="80"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    too_long = [line for line in lines if len(line) > 80]
    assert not too_long, too_long
    assert "…" not in result.stdout
    words = set(result.stdout.replace(",", " ").replace("/", " ").split())
    for option in RUN_OPTIONS:
        for flag in option.flags:
            assert flag in words, f"{flag} missing or cut in run --help"
        if option.kind == "bool":
            assert f"--no-{option.flag[2:]}" in words
    assert "Examples:" in result.stdout
    # -h is the same help
    short = npuprof("run", "-h", env=clean_env(COLUMNS="80"))
    assert short.returncode == 0 and short.stdout == result.stdout
    # the epilog's paragraphs are wrapped whole (was: a line break after "Optimizer.step()"), flags unbroken
    tail = result.stdout[result.stdout.index("Default schedule:") :]
    assert all(len(line) > 60 for line in tail.splitlines()[:-1]), tail
    assert "--with-stack" in words


def test_run_without_a_command_says_so_in_one_line() -> None:
    for flags in ((), ("--with-stack",)):
        result = npuprof("run", *flags, env=clean_env(COLUMNS="80"))
        assert result.returncode == 2 and result.stdout == "", result
        assert result.stderr.splitlines() == [
            "npuprof run: error: COMMAND: missing; put the command after --, e.g. npuprof run -- python "
            "train.py (npuprof run --help: the flags)"
        ]


def _trace_with_long_names(path: Path, name: str) -> None:
    """A Kineto trace (object form) with one step holding one operator and one kernel of that name."""
    events = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#1",
            "pid": 1,
            "tid": 1,
            "ts": 0,
            "dur": 100,
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": name,
            "pid": 1,
            "tid": 1,
            "ts": 10,
            "dur": 50,
            "args": {"External id": 7},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": name + "_kernel",
            "pid": 0,
            "tid": 7,
            "ts": 20,
            "dur": 30,
            "args": {"External id": 7, "device": 0, "stream": 7},
        },
    ]
    path.write_text(json.dumps({"traceEvents": events}))


def test_analyse_shortens_long_names_in_the_middle_at_80_columns(tmp_path: Path) -> None:
    name = "autograd::engine::evaluate_function: " + "Very" * 20 + "LongBackward0"
    trace = tmp_path / "w.1.pt.trace.json"
    _trace_with_long_names(trace, name)
    result = npuprof("analyse", str(trace), env=clean_env(COLUMNS="80"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    operator_rows = [line for line in lines if "autograd::" in line and "_kernel" not in line]
    kernel_rows = [line for line in lines if "_kernel" in line]
    # one row each (never wrapped), start and end of the name kept, the middle cut
    assert len(operator_rows) == 1 and "LongBackward0" in operator_rows[0] and "…" in operator_rows[0]
    assert len(kernel_rows) == 1 and "autograd::" in kernel_rows[0]


def test_run_summary_keeps_each_directory_on_one_line(tmp_path: Path) -> None:
    out = tmp_path / "out"
    worker = "a-rather-long-hostname.cluster.example.com"
    result = npuprof(
        "run",
        "-o",
        str(out),
        "--worker-name",
        worker,
        *sched(1, 1, 1),
        "--no-analyse",
        "--",
        *trainer("--steps", "4"),
        env=clean_env(COLUMNS="80"),
    )
    assert result.returncode == 0, result.stderr
    (rank_dir,) = rank_dirs(out)
    table = result.stderr[result.stderr.index("capture(s) in") :].splitlines()
    rows = [line for line in table if line.startswith("-") or line[:1].isdigit()]
    assert len(rows) == 1, table
    # not a terminal (a CI log, a pipe): the name whole on its row, to be copied, whatever COLUMNS says
    assert rows[0].split()[-1] == rank_dir.name, rows


def test_run_summary_gives_a_status_detail_under_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A capture's status detail goes under the table, naming the directory: at 80 columns the row stays
    one line and the directory's name (which the user copies) stays whole."""
    from npuprof.config import ProfileConfig
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import CaptureSummary

    monkeypatch.setenv("COLUMNS", "80")
    name = "vm_8952_20261202121245485_ascend_pt"
    capture = CaptureSummary(
        rank_dir=tmp_path / name,
        status="partial",
        rank=None,
        pid=8952,
        steps=[6, 7, 8],
        size_bytes=3 << 20,
        detail="the job exited with 1 during step 7; steps 6 and 7 recorded",
        parsed=True,
    )
    print_run_summary(tmp_path, [capture], 1, ProfileConfig(), tmp_path / "npuprof.log")
    err = capsys.readouterr().err
    lines = err.splitlines()
    (row,) = [line for line in lines if line.startswith("-")]
    assert row.split() == ["-", "6-8", "partial*", "3.0", "MiB", "yes", name], row
    # the title and the command to copy stay whole, however long (the terminal folds them)
    assert all(len(line) <= 80 for line in lines if not line.startswith(("next:", "npuprof:"))), err
    assert [line for line in lines if line.startswith("next: npuprof analyse ")] == [
        f"next: npuprof analyse {tmp_path}   (exit code of the job: 1)"
    ]
    said = " ".join(err[err.index(f"* {name}: ") :].split())
    assert said.startswith(f"* {name}: the job exited with 1 during step 7; steps 6 and 7 recorded"), said


def test_run_summary_in_a_log_keeps_every_line_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """stderr a pipe or a log and no COLUMNS (a scheduler, `2>&1 | tee`): the title and the `next:` line
    were wrapped at 80 columns, a long output directory split mid-name, so that the command could not be
    copied. Without COLUMNS nothing is wrapped; a no-capture note neither."""
    from npuprof.config import ProfileConfig
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import CaptureSummary

    monkeypatch.delenv("COLUMNS", raising=False)
    output = tmp_path / ("a_long_output_directory_" * 4) / "of_this_run"
    name = "vm_8952_20261202121245485_ascend_pt"
    capture = CaptureSummary(
        rank_dir=output / name, status="complete", rank=None, pid=8952, steps=[6, 7, 8], size_bytes=3 << 20,
        detail="", parsed=True,
    )  # fmt: skip
    print_run_summary(output, [capture], 0, ProfileConfig(), output / "npuprof.log")
    lines = capsys.readouterr().err.splitlines()
    assert f"npuprof: 1 capture(s) in {output}" in [line.rstrip() for line in lines], lines
    (next_line,) = [line for line in lines if line.startswith("next:")]
    assert next_line.split()[:3] == ["next:", "npuprof", "analyse"] and next_line.split()[3] == str(output)
    # another run's record in the same -o (two runs at once, or one after the other): analyse would report
    # the latest, maybe not this one, so the command names this run
    output.mkdir(parents=True, exist_ok=True)
    (output / "npuprof_run.json").write_text(json.dumps({"run_id": "0123456789ab", "captures": []}))
    print_run_summary(output, [capture], 0, ProfileConfig(), output / "npuprof.log", run_id="ba9876543210")
    (next_line,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("next:")]
    assert next_line.split()[3:6] == [str(output), "--run", "ba9876543210"], next_line
    print_run_summary(output, [], 3, ProfileConfig(), output / "npuprof.log")
    (note,) = capsys.readouterr().err.splitlines()
    assert note.startswith("npuprof: no capture was written (exit code 3)") and len(note) > 80, note


def test_run_summary_says_when_complete_captures_were_not_parsed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A post-processor killed (or failed) before it parsed: the summary says where to look and what to
    run, instead of a bare "parsed no"; with --no-analyse nothing is said (nothing was asked)."""
    from npuprof.config import ProfileConfig
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import CaptureSummary

    monkeypatch.setenv("COLUMNS", "200")
    capture = CaptureSummary(
        tmp_path / "vm_1_20261202121245485_ascend_pt", "complete", None, 1, [6], 1, "", False
    )
    log = tmp_path / "npuprof.log"
    print_run_summary(tmp_path, [capture], 0, ProfileConfig(), log)
    said = (
        "1 complete capture(s) not parsed when npuprof ended (a post-processor stopped, killed, or still at "
        f"work in the background: see {log}): npuprof analyse parses them"
    )
    assert said in " ".join(capsys.readouterr().err.split())
    print_run_summary(tmp_path, [capture], 0, ProfileConfig(analyse=False), log)
    assert "not parsed" not in capsys.readouterr().err
    # the files the post-processor would have made: said too, with the commands that make them
    capture.rank_dir.mkdir()
    (capture.rank_dir / "npuprof_capture.json").write_text(
        json.dumps({"status": "complete", "backend": "torch-cpu"})
    )
    asked = ProfileConfig(export_stacks=["self_cpu_time_total"], memory_timeline=["html"], with_stack=True)
    print_run_summary(tmp_path, [capture], 0, asked, log)
    assert (
        "their --export-stacks and --memory-timeline files were not made either (npuprof export-stacks DIR "
        "-o FILE, npuprof memory-timeline DIR -o FILE make them)"
    ) in " ".join(capsys.readouterr().err.split())
    # the post-processor makes them before it parses: a parse that failed on a full disk after them
    # (helper-129: the summary said they were not made, beside them) leaves them made; only what is missing
    (capture.rank_dir / "stacks_self_cpu_time_total.folded").write_text("a;b 1\n")
    print_run_summary(tmp_path, [capture], 0, asked, log)
    said = " ".join(capsys.readouterr().err.split())
    assert "their --memory-timeline files were not made either (npuprof memory-timeline DIR" in said, said
    (capture.rank_dir / "memory_timeline.html").write_text("<html></html>")
    print_run_summary(tmp_path, [capture], 0, asked, log)
    said = " ".join(capsys.readouterr().err.split())
    assert "1 complete capture(s) not parsed when npuprof ended" in said and "not made" not in said, said


def test_run_summary_says_when_a_parsed_capture_lacks_the_exports_asked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A post-processor killed after the parse and the stacks, before the memory timeline (helper-84: the
    summary was clean, the timeline missing): its memory snapshot is left, and the summary says so with the
    command that makes it; a stacks file missing too, for a metric the capture's backend records."""
    from npuprof.config import ProfileConfig
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import CaptureSummary

    monkeypatch.setenv("COLUMNS", "200")
    rank_dir = tmp_path / "vm_1_20261202121245485_ascend_pt"
    rank_dir.mkdir()
    (rank_dir / "npuprof_capture.json").write_text(json.dumps({"status": "complete", "backend": "torch-cpu"}))
    (rank_dir / "memory_timeline.snapshot.msgpack").write_bytes(b"\x90")
    (rank_dir / "stacks_self_cpu_time_total.folded").write_text("a;b 1\n")
    capture = CaptureSummary(rank_dir, "complete", None, 1, [6], 1, "", True)
    log = tmp_path / "npuprof.log"
    # self_cuda_time_total means nothing on the CPU: its file is not missed
    asked = ProfileConfig(
        export_stacks=["self_cpu_time_total", "self_cuda_time_total"], memory_timeline=["json"]
    )
    print_run_summary(tmp_path, [capture], 0, asked, log)
    said = " ".join(capsys.readouterr().err.split())
    assert (
        "1 capture(s) lack their --memory-timeline files (not made by the post-processor, or not yet where "
        f"it goes on in the background: see {log}): "
        f"npuprof memory-timeline {rank_dir} -o FILE makes them"
    ) in said, said
    assert "--export-stacks files" not in said, said
    (rank_dir / "stacks_self_cpu_time_total.folded").unlink()
    (rank_dir / "memory_timeline.snapshot.msgpack").unlink()  # rendered: the post-processor removes it
    print_run_summary(tmp_path, [capture], 0, asked, log)
    said = " ".join(capsys.readouterr().err.split())
    assert "lack their --export-stacks files" in said and "--memory-timeline files" not in said, said
    print_run_summary(tmp_path, [capture], 0, ProfileConfig(), log)  # nothing asked: nothing said
    assert "lack their" not in capsys.readouterr().err


def test_a_post_processor_killed_after_the_categorised_timeline_leaves_its_formats_said_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A post-processor killed (kill -9) after it wrote memory_timeline.raw.json.gz and removed the
    snapshot, while it drew memory_timeline.html: the summary said nothing, the html asked for missing.
    Until it is done with the capture its record names the snapshot, not the raw file; once done, a format
    it could not make was logged "not produced" (said there, not again here)."""
    from npuprof.config import ProfileConfig
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import CaptureSummary

    monkeypatch.setenv("COLUMNS", "200")
    rank_dir = tmp_path / "vm_1_20261202121245485_ascend_pt"
    rank_dir.mkdir()
    record = {"status": "complete", "backend": "torch-cpu", "extras": ["memory_timeline.snapshot.msgpack"]}
    (rank_dir / "npuprof_capture.json").write_text(json.dumps(record))
    (rank_dir / "memory_timeline.raw.json.gz").write_bytes(b"")
    (rank_dir / "memory_timeline.meta.json").write_text("{}")
    (rank_dir / "memory_timeline.json").write_text("[[], []]")
    capture = CaptureSummary(rank_dir, "complete", None, 1, [6], 1, "", True)
    log = tmp_path / "npuprof.log"
    asked = ProfileConfig(memory_timeline=["json", "html"])
    print_run_summary(tmp_path, [capture], 0, asked, log)
    said = " ".join(capsys.readouterr().err.split())
    assert (
        f"1 capture(s) lack their --memory-timeline files (not made by the post-processor, or not yet where "
        f"it goes on in the background: see {log}): npuprof memory-timeline {rank_dir} -o FILE makes them"
    ) in said, said
    print_run_summary(tmp_path, [capture], 0, ProfileConfig(memory_timeline=["json"]), log)
    assert "lack their" not in capsys.readouterr().err  # what was asked is there
    record["extras"] = ["memory_timeline.raw.json.gz", "memory_timeline.meta.json", "memory_timeline.json"]
    (rank_dir / "npuprof_capture.json").write_text(json.dumps(record))  # its post-processor was done
    print_run_summary(tmp_path, [capture], 0, asked, log)
    assert "lack their" not in capsys.readouterr().err


def test_a_dynamic_request_without_stacks_or_memory_lacks_no_exports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """helper-248: `npuprof run --dynamic DIR --export-stacks ... --memory-timeline json`, then `npuprof
    trigger DIR --active 2` without --with-stack: the agent made no stacks for that capture, as its log
    says, and the summary said "1 capture(s) lack their --export-stacks files (not made by the
    post-processor ...)", blaming it. A capture made without with_stack (or, unparsed, without
    profile_memory / record_shapes) lacks nothing; one made with them still does."""
    from npuprof.config import ProfileConfig
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import CaptureSummary

    monkeypatch.setenv("COLUMNS", "200")
    asked = ProfileConfig(export_stacks=["self_cpu_time_total"], memory_timeline=["json"])
    log = tmp_path / "npuprof.log"
    said = {}
    for recorded in (False, True):
        rank_dir = tmp_path / f"vm_{int(recorded)}_20261202121245485_ascend_pt"
        rank_dir.mkdir()
        record = {"status": "complete", "backend": "torch-cpu"}
        (rank_dir / "npuprof_capture.json").write_text(json.dumps(record))
        options = {"with_stack": recorded, "profile_memory": recorded, "record_shapes": recorded}
        (rank_dir / "profiler_info.json").write_text(json.dumps({"config": {"common_config": options}}))
        for parsed in (True, False):
            capture = CaptureSummary(rank_dir, "complete", None, 1, [80, 81], 1, "", parsed)
            print_run_summary(tmp_path, [capture], 0, asked, log)
            said[recorded, parsed] = " ".join(capsys.readouterr().err.split())
    assert "lack" not in said[False, True] and "lack" not in said[False, False], said
    assert "1 capture(s) lack their --export-stacks files" in said[True, True], said
    assert "their --export-stacks and --memory-timeline files were not made either" in said[True, False], said
    assert "files were not made" not in said[False, False], said


def test_analyse_never_cuts_a_figure_at_80_columns(tmp_path: Path) -> None:
    """A 123,456.789 ms step numbered 1234567 (an output piped to a file: 80 columns): every figure of
    the steps table is whole (rich cut them to "12345…"), and the table still fits 80 columns."""
    trace = tmp_path / "w.1.pt.trace.json"
    _trace_with_long_names(trace, "aten::mm")
    events = json.loads(trace.read_text())
    events["traceEvents"][0].update(name="ProfilerStep#1234567", dur=123_456_789)
    trace.write_text(json.dumps(events))
    result = npuprof("analyse", str(trace), env=clean_env(COLUMNS="80"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    (row,) = [line for line in lines if line.split()[:1] == ["1234567"]]
    assert "123456.789" in row.split(), row
    assert "…" not in result.stdout
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]


def test_the_all_steps_row_leaves_the_partial_step_out_as_the_mean_does() -> None:
    """The note under the table says a partial step is left out of the mean: so is the "all" row (it
    showed the mean over every step, the partial one's 3 ms included)."""
    from npuprof.analysis.report_schema import ReportStep
    from npuprof.reports.terminal import _all_steps_row

    def step(number: int, duration_us: float, partial: bool = False) -> ReportStep:
        times = dict.fromkeys(
            ("computing_us", "communication_us", "comm_not_overlapped_us", "overlapped_us", "bubble_us"), 0.0
        )
        extra = {"partial": True} if partial else {}
        return ReportStep(
            step=number, start_us=0.0, duration_us=duration_us, free_us=duration_us, preparing_us=0.0,
            **times, **extra,
        )  # fmt: skip

    steps = [step(n, 50_000.0 + 1_000.0 * (n % 3)) for n in range(11, 44)] + [step(44, 3_200.0, True)]
    whole = [s.duration_us for s in steps[:-1]]
    row = _all_steps_row(steps)
    assert row[0] == "all" and row[1] == f"{sum(whole) / len(whole) / 1000:.3f}"


def test_a_run_of_many_captures_lists_its_first_last_and_troubled_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--repeat 0 over a job of days: the summary listed every one of its thousands of captures."""
    from npuprof.config import ProfileConfig
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import CaptureSummary

    monkeypatch.setenv("COLUMNS", "200")
    captures = [
        CaptureSummary(
            tmp_path / f"vm_1_2026120212124{k:04d}_ascend_pt", "complete", None, 1, [k], 1024, "", True
        )
        for k in range(100)
    ]
    captures[50] = CaptureSummary(
        captures[50].rank_dir, "incomplete", None, 1, [50], 0, "export failed", False
    )
    print_run_summary(tmp_path, captures, 0, ProfileConfig(), tmp_path / "npuprof.log")
    said = capsys.readouterr().err
    listed = [k for k in range(100) if f"2026120212124{k:04d}" in said]
    assert listed == [*range(10), 50, *range(90, 100)], listed
    assert "npuprof: 100 capture(s)" in said
    assert "... and 79 more complete, parsed capture(s) between those (99.0 KiB in all;" in " ".join(
        said.split()
    )


def test_thousands_of_unparsed_captures_are_counted_not_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A post-processor killed early in a job of days leaves thousands of captures unparsed: the summary
    listed each (5,667 lines); it lists the first 30 of them and counts the others."""
    from npuprof.config import ProfileConfig
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import CaptureSummary

    monkeypatch.setenv("COLUMNS", "200")
    captures = [
        CaptureSummary(
            tmp_path / f"vm_1_202612021{k:08d}_ascend_pt", "complete", None, 1, [k], 1024, "", k < 100
        )
        for k in range(1000)
    ]
    print_run_summary(tmp_path, captures, 0, ProfileConfig(), tmp_path / "npuprof.log")
    said = capsys.readouterr().err
    listed = [k for k in range(1000) if f"202612021{k:08d}" in said]
    # the first and last 10, and the first 30 unparsed ones (captures 100 to 129)
    assert listed == [*range(10), *range(100, 130), *range(990, 1000)], listed
    assert (
        "... and 90 more complete, parsed capture(s) and 860 more not complete, not parsed or with a note "
        "between" in " ".join(said.split())
    )


def test_captures_left_unparsed_by_no_analyse_are_not_listed_as_troubled(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """helper-92: with --no-analyse every capture is unparsed by design; the summary listed 50 of 61 as
    if each had a problem. Unparsed counts only where a parse was asked for."""
    from npuprof.config import ProfileConfig
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import CaptureSummary

    monkeypatch.setenv("COLUMNS", "200")
    captures = [
        CaptureSummary(
            tmp_path / f"vm_1_202612021{k:08d}_ascend_pt", "complete", None, 1, [k], 1024, "", False
        )
        for k in range(61)
    ]
    print_run_summary(tmp_path, captures, 0, ProfileConfig(analyse=False), tmp_path / "npuprof.log")
    said = capsys.readouterr().err
    listed = [k for k in range(61) if f"202612021{k:08d}" in said]
    assert listed == [*range(10), *range(51, 61)], listed
    assert "... and 41 more complete capture(s) between those" in " ".join(said.split())


def test_the_ranks_step_tables_share_one_style_when_one_needs_more_than_80_columns(tmp_path: Path) -> None:
    """At 80 columns (a pipe), a rank whose step table fits with rules kept them while the next rank's,
    one column wider, lost them: two styles in one report read as a bug (helper-85). One too wide now
    takes the rules off every rank's step table."""
    from analyse_support.handmade import write_rank_dir, x

    for rank, step_us in ((0, 4_485.0), (1, 123_456.0)):  # "4.485" fits 80 columns with rules, "123.456" not
        trace = {
            "schemaVersion": 1,
            "distributedInfo": {"backend": "gloo", "rank": rank, "world_size": 2},
            "traceEvents": [
                x("ProfilerStep#6", "user_annotation", 0, step_us),
                x("aten::mm", "cpu_op", 10, step_us / 2, **{"External id": 1}),  # comp ~50.0%
            ],
        }
        write_rank_dir(tmp_path, trace, rank=rank, name=f"host_{rank + 1}_20250101000000000")
    result = npuprof("analyse", str(tmp_path), env=clean_env(COLUMNS="80"))
    assert result.returncode == 0, result.stderr
    headers = [line.split() for line in result.stdout.splitlines() if "comp" in line and "exposed" in line]
    assert [h[0] for h in headers] == ["step", "step"], result.stdout  # both plain ("┃ step" with rules)
    wide = npuprof("analyse", str(tmp_path), env=clean_env(COLUMNS="120"))
    headers = [line.split() for line in wide.stdout.splitlines() if "comp" in line and "exposed" in line]
    assert [h[:2] for h in headers] == [["┃", "step"], ["┃", "step"]], wide.stdout  # room: both ruled


def test_a_run_without_captures_on_a_terminal_says_why_in_bold_at_its_width(tmp_path: Path) -> None:
    """The note of a run without captures is wrapped to the terminal's width there (no COLUMNS): the code
    that asks the terminal its size once called a function that does not exist, so every such run on a
    terminal ended in an internal error instead of its reason. Run on a real pseudo-terminal, 60 wide."""
    import fcntl
    import os
    import pty
    import struct
    import subprocess
    import sys
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 60, 0, 0))
    env = {k: v for k, v in clean_env().items() if k != "COLUMNS"}
    env["TERM"] = "xterm"
    proc = subprocess.Popen(
        [sys.executable, "-m", "npuprof", "run", "-o", str(tmp_path / "out"), "--", sys.executable, "-c",
         "pass"],
        stdin=follower, stdout=follower, stderr=follower, env=env, start_new_session=True,
    )  # fmt: skip
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the terminal's last writer has closed it
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait(timeout=60) == 0
    text = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
    assert "internal error" not in text and "Traceback" not in text, text
    assert "\x1b[1;33mnpuprof:\x1b[0m no capture was written (exit code 0)" in text, text
    note = text[text.index("\x1b[1;33mnpuprof:") :].replace("\x1b[1;33m", "").replace("\x1b[0m", "")
    assert all(len(line) <= 60 or " " not in line.strip() for line in note.splitlines()), note  # a path
    assert len(note.splitlines()) > 1, note  # wrapped, not one long line


def test_comm_ranges_across_ranks_keep_their_op_and_size_at_80_columns() -> None:
    """helper-153: a 2-rank pipeline with --msprof-tx, piped (80 columns): the table across ranks cut the
    names in their middle to 16 characters, `comm:re…32,16384` and `comm:se…32,16384`, where `re` may be
    recv, reduce or reduce_scatter. A comm: range loses its group and dtype first; two ops, or two sizes of
    one op, still read apart; a cut is always shown by an ellipsis."""
    import io
    from types import SimpleNamespace

    from rich.console import Console

    from npuprof.analysis.report_schema import CrossRange
    from npuprof.reports.terminal import _render_cross_ranges

    names = [
        "comm:recv,default_pg,float32,16384",
        "comm:reduce_scatter,default_pg,float32,16384",
        "comm:all_gather_single,default_pg,float32,8256",
        "comm:all_gather_single,default_pg,float32,645",
    ]
    ranges = [
        CrossRange(
            name=n,
            kind="comm",
            ranks=2,
            count=18,
            total_us=21885.0,
            mean_us=1216.0,
            max_us=1851.0,
            max_rank=0,
        )
        for n in names
    ]
    report = SimpleNamespace(ranks=[0, 1], cross_rank=SimpleNamespace(ranges=ranges))
    out = io.StringIO()
    _render_cross_ranges(report, Console(file=out, width=80, color_system=None))  # type: ignore[arg-type]
    rows = [line.split("│")[1].strip() for line in out.getvalue().splitlines() if line.startswith("│")]
    assert all(len(line) <= 80 for line in out.getvalue().splitlines()), out.getvalue()
    assert rows[0].startswith("comm:recv,") and rows[0].endswith("16384") and "…" in rows[0], rows
    assert rows[1].startswith("comm:reduc") and rows[1].endswith("16384") and "…" in rows[1], rows
    assert rows[2].endswith(",8256") and rows[3].endswith(",645") and rows[2] != rows[3], rows
    assert all(row.startswith("comm:all_g") and "…" in row for row in rows[2:]), rows


def test_run_summary_names_dynamic_captures_whose_request_did_not_ask_what_the_exports_need(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`npuprof run --dynamic cfg --export-stacks ... --memory-timeline json`, then `npuprof trigger cfg`
    (no --with-stack): the capture had neither file and the summary was clean; the dynamic log alone said
    it."""
    from npuprof.config import ProfileConfig
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import CaptureSummary

    monkeypatch.setenv("COLUMNS", "200")

    def capture(name: str, steps: list[int], **recorded: bool) -> CaptureSummary:
        rank_dir = tmp_path / name
        rank_dir.mkdir()
        (rank_dir / "npuprof_capture.json").write_text(
            json.dumps({"status": "complete", "backend": "torch-cpu"})
        )
        common = {"record_shapes": False, "profile_memory": False, "with_stack": False, **recorded}
        (rank_dir / "profiler_info.json").write_text(json.dumps({"config": {"common_config": common}}))
        return CaptureSummary(rank_dir, "complete", None, 1, steps, 1, "", True)

    bare = capture("vm_1_20261202121245485_ascend_pt", [74, 75])
    stacks = capture("vm_1_20261202121246485_ascend_pt", [40, 41], with_stack=True)
    (stacks.rank_dir / "stacks_self_cpu_time_total.folded").write_text("a;b 1\n")
    asked = ProfileConfig(dynamic="cfg", export_stacks=["self_cpu_time_total"], memory_timeline=["json"])
    print_run_summary(tmp_path, [bare, stacks], 0, asked, tmp_path / "npuprof.log")
    said = " ".join(capsys.readouterr().err.split())
    assert (
        "--export-stacks: 1 capture(s) (steps 74-75) have no stacks: their request did not ask for "
        "with_stack (each request says it: npuprof trigger cfg --with-stack)"
    ) in said, said
    assert (
        "--memory-timeline: 2 capture(s) (steps 74-75, 40-41) have no memory timeline: their request did not "
        "ask for profile_memory, record_shapes and with_stack (each request says it: npuprof trigger cfg "
        "--profile-memory --record-shapes --with-stack)"
    ) in said, said
    print_run_summary(tmp_path, [stacks], 0, ProfileConfig(dynamic="cfg"), tmp_path / "npuprof.log")
    assert "request did not ask" not in capsys.readouterr().err  # no export asked: nothing said


def test_run_summary_says_why_a_capture_not_asked_to_be_parsed_reads_parsed_no(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`npuprof run --config tmpl.json --active 2` (torch_npu's template: "analyse": false), or a trigger
    with --ranks: the summary's "parsed no" was unexplained, and read as a failed parse."""
    from npuprof.config import ProfileConfig
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import CaptureSummary

    monkeypatch.setenv("COLUMNS", "200")
    rank_dir = tmp_path / "vm_1_20261202121245485_ascend_pt"
    rank_dir.mkdir()
    (rank_dir / "npuprof_capture.json").write_text(json.dumps({"status": "complete", "backend": "torch-cpu"}))
    unasked = CaptureSummary(rank_dir, "complete", None, 1, [6, 7], 1, "", False, parse_asked=False)
    from_file = ProfileConfig(analyse=False, given_as={"analyse": "analyse false (tmpl.json)"})
    print_run_summary(tmp_path, [unasked], 0, from_file, tmp_path / "npuprof.log")
    said = " ".join(capsys.readouterr().err.split())
    assert f"1 capture(s) not parsed, as analyse false (tmpl.json) asks: npuprof analyse {tmp_path}" in said
    print_run_summary(tmp_path, [unasked], 0, ProfileConfig(dynamic="cfg"), tmp_path / "npuprof.log")
    said = " ".join(capsys.readouterr().err.split())
    assert '1 capture(s) not parsed, as their request\'s "analyse": false asks' in said, said
    asked = CaptureSummary(rank_dir, "complete", None, 1, [6, 7], 1, "", False, parse_asked=True)
    print_run_summary(tmp_path, [asked], 0, ProfileConfig(), tmp_path / "npuprof.log")
    assert " asks" not in capsys.readouterr().err  # one that was to be parsed: said otherwise, above
    print_run_summary(tmp_path, [unasked], 0, ProfileConfig(analyse=False), tmp_path / "npuprof.log")
    assert " asks" not in capsys.readouterr().err  # --no-analyse typed: nothing to explain


def test_run_summary_names_a_request_planned_for_a_step_the_job_never_reached(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`npuprof trigger cfg --start-step 100000` on a job that ended at step 600, after other captures: the
    summary listed those and said nothing of it (only a run without captures did). Another job's log in the
    same log/ (pid 999) is not this run's."""
    from npuprof.config import ProfileConfig
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import CaptureSummary

    monkeypatch.setenv("COLUMNS", "200")
    cfg = tmp_path / "cfg"
    (cfg / "log").mkdir(parents=True)
    rank_dir = tmp_path / "vm_1234_20261202121245485_ascend_pt"
    rank_dir.mkdir()
    (rank_dir / "npuprof_capture.json").write_text(json.dumps({"status": "complete", "backend": "torch-cpu"}))

    def log(pid: int, *lines: str) -> None:
        text = "".join(
            f"2026-12-06 23:48:17,000 +0000 [INFO] [{pid}] npuprof.dynamic: {line}\n" for line in lines
        )
        (cfg / "log" / f"dp_vm_{pid}_rank_-1.log").write_text(text)

    log(
        999,
        "[step 5] capture planned: steps 500-501 (capture 2 step(s) from step 500)",
        "[step 9] the process ends",
    )
    capture = CaptureSummary(rank_dir, "complete", None, 1234, [63, 64], 1, "", True)
    asked = ProfileConfig(dynamic=str(cfg))
    print_run_summary(tmp_path, [capture], 0, asked, tmp_path / "npuprof.log")
    assert "was planned" not in capsys.readouterr().err  # pid 999's, not this run's
    log(
        1234,
        f"[step 65] capture 1 of steps 63-64 complete in {rank_dir}",
        "[step 326] capture planned: steps 100000-100001 (capture 2 step(s) from step 100000 on every rank)",
        "[step 600] the process ends",
    )
    print_run_summary(tmp_path, [capture], 0, asked, tmp_path / "npuprof.log")
    said = " ".join(capsys.readouterr().err.split())
    assert (
        "npuprof: a capture of steps 100000-100001 was planned, but the job ended at step 600, before its "
        f"first step (see npuprof status {cfg})"
    ) in said, said


def test_run_summary_names_the_export_files_made_and_the_flame_graph_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """helper-293: a run with --export-stacks and --memory-timeline html listed the capture directories and
    `next: npuprof analyse`, and never said that the stacks and the timeline were made, nor where."""
    import shlex

    from npuprof.config import ProfileConfig
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import CaptureSummary

    monkeypatch.setenv("COLUMNS", "400")
    rank_dir = tmp_path / "my run" / "vm_1_20261202121245485_ascend_pt"
    rank_dir.mkdir(parents=True)
    (rank_dir / "npuprof_capture.json").write_text(json.dumps({"status": "complete", "backend": "torch-cpu"}))
    (rank_dir / "stacks_self_cpu_time_total.folded").write_text("a;b 1\n")
    (rank_dir / "memory_timeline.html").write_text("<html></html>")
    capture = CaptureSummary(rank_dir, "complete", None, 1, [6], 1, "", True)
    log = tmp_path / "npuprof.log"
    asked = ProfileConfig(export_stacks=["self_cpu_time_total"], memory_timeline=["html"], with_stack=True)
    print_run_summary(tmp_path / "my run", [capture], 0, asked, log)
    lines = capsys.readouterr().err.splitlines()
    [line] = [x for x in lines if x.startswith("in each capture's directory: ")]
    listed, command = line.removeprefix("in each capture's directory: ").split(" (a flame graph: ")
    assert listed == "stacks_self_cpu_time_total.folded, memory_timeline.html", line
    expected = ["npuprof", "export-stacks", str(rank_dir), "--svg", "flame.svg"]
    assert shlex.split(command.removesuffix(")")) == expected, line
    (rank_dir / "stacks_self_cpu_time_total.folded").unlink()  # the timeline alone: no flame graph to name
    print_run_summary(tmp_path / "my run", [capture], 0, asked, log)
    said = capsys.readouterr().err
    assert "in each capture's directory: memory_timeline.html\n" in said and "flame graph" not in said, said
    print_run_summary(tmp_path / "my run", [capture], 0, ProfileConfig(), log)  # nothing asked: nothing said
    assert "in each capture's directory" not in capsys.readouterr().err


def test_a_report_saved_to_a_file_keeps_notes_and_names_whole(tmp_path: Path) -> None:
    """`npuprof analyse DIR > report.txt` wrapped at rich's 80 columns: notes split mid sentence with
    trailing spaces, names in the tables cut (``enumerate(DataLoa…aderIter.__next__``). Not a terminal and
    no COLUMNS: each line whole, as the run summary's; COLUMNS is still honoured."""
    name = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__" + "_and_then_some" * 3
    trace = cpu_trace()
    for event in trace["traceEvents"]:
        if event["name"] == "aten::mm":
            event["name"] = name
    rank_dir = write_rank_dir(tmp_path / ("a_directory_of_a_long_name" * 3), trace)
    env = {k: v for k, v in clean_env().items() if k != "COLUMNS"}
    saved = npuprof("analyse", str(rank_dir), env=env)
    assert saved.returncode == 0, saved.stderr
    lines = saved.stdout.splitlines()
    assert any(name in line for line in lines), saved.stdout
    (note,) = [line for line in lines if line.startswith("no device kernels")]  # the CPU-only note
    assert note.endswith(f"{rank_dir} --svg flame.svg") and len(note) > 200, saved.stdout
    narrow = npuprof("analyse", str(rank_dir), env={**env, "COLUMNS": "80"})
    assert narrow.returncode == 0, narrow.stderr
    assert max(map(len, narrow.stdout.splitlines())) <= 80 and name not in narrow.stdout, narrow.stdout


@pytest.mark.parametrize("columns", ["0", "²"])
def test_a_columns_rich_cannot_use_loses_no_line(
    tmp_path: Path, columns: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """COLUMNS=0: rich made a console 0 wide, which printed nothing: the run summary lost its title and its
    `next:` line, analyse its notes, every typer help its whole text (exit 0). COLUMNS=² (a digit int()
    refuses): rich's ValueError, a traceback. Such a COLUMNS is taken as unset."""
    from npuprof.config import ProfileConfig
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import CaptureSummary

    monkeypatch.setenv("COLUMNS", columns)
    output = tmp_path / "out"
    capture = CaptureSummary(
        rank_dir=output / "vm_8952_20261202121245485_ascend_pt", status="complete", rank=None, pid=8952,
        steps=[6, 7], size_bytes=3 << 20, detail="", parsed=True,
    )  # fmt: skip
    print_run_summary(output, [capture], 0, ProfileConfig(), output / "npuprof.log")
    lines = capsys.readouterr().err.splitlines()
    assert f"npuprof: 1 capture(s) in {output}" in [line.rstrip() for line in lines], lines
    assert lines[-1].startswith(f"next: npuprof analyse {output}   (exit code of the job: 0)"), lines
    env = {**clean_env(), "COLUMNS": columns}
    rank_dir = write_rank_dir(tmp_path / "r", cpu_trace())
    report = npuprof("analyse", str(rank_dir), env=env)
    assert report.returncode == 0 and "Traceback" not in report.stderr, report.stderr
    (note,) = [line for line in report.stdout.splitlines() if line.startswith("no device kernels")]
    assert note.endswith(f"{rank_dir} --svg flame.svg"), report.stdout  # whole: as without COLUMNS
    helped = npuprof("status", "--help", env=env)
    assert helped.returncode == 0 and "Usage:" in helped.stdout, (helped.stdout, helped.stderr)


@pytest.mark.parametrize("width", ["0", "abc"])
def test_a_terminal_width_typer_cannot_use_loses_no_help(width: str) -> None:
    """TERMINAL_WIDTH (typer's own variable for its help's width, read when typer is imported): ``abc`` gave
    a ValueError traceback for `npuprof --help` and `analyse --help`, ``0`` an empty help, exit 0 (helper-329
    found the first). Such a value is taken as unset, as a COLUMNS rich cannot use is."""
    env = {**clean_env(), "TERMINAL_WIDTH": width}
    for command in (["--help"], ["analyse", "--help"], ["status", "--help"]):
        helped = npuprof(*command, env=env)
        assert helped.returncode == 0 and "Traceback" not in helped.stderr, (command, helped.stderr)
        assert "Usage:" in helped.stdout, (command, helped.stdout)


def test_force_color_in_a_log_keeps_lines_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """FORCE_COLOR=1 (a CI log in colour) makes rich take any stream for a terminal: a report saved to a
    file or a run summary in a log wrapped at 80 columns again, the suggested commands split over two lines
    and directory names shortened with an ellipsis. The width follows the stream itself."""
    import re

    from npuprof.config import ProfileConfig
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import CaptureSummary

    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")
    output = tmp_path / ("a_long_output_directory_" * 4) / "of_this_run"
    name = "vm_8952_20261202121245485_ascend_pt" + "_renamed" * 8
    capture = CaptureSummary(
        rank_dir=output / name, status="complete", rank=None, pid=8952, steps=[6, 7], size_bytes=3 << 20,
        detail="", parsed=True,
    )  # fmt: skip
    print_run_summary(output, [capture], 0, ProfileConfig(), output / "npuprof.log")
    plain = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().err)
    assert f"next: npuprof analyse {output}   (exit code of the job: 0)" in plain.splitlines(), plain
    assert name in plain, plain
    rank_dir = write_rank_dir(tmp_path / "r", cpu_trace())
    env = {k: v for k, v in clean_env().items() if k != "COLUMNS"}
    report = npuprof("analyse", str(rank_dir), env={**env, "FORCE_COLOR": "1"})
    assert report.returncode == 0, report.stderr
    lines = re.sub(r"\x1b\[[0-9;]*m", "", report.stdout).splitlines()
    (note,) = [line for line in lines if line.startswith("no device kernels")]
    assert note.endswith(f"{rank_dir} --svg flame.svg"), report.stdout


@pytest.mark.parametrize("extra", [{}, {"COLUMNS": "80"}, {"FORCE_COLOR": "1"}])
def test_no_line_of_a_saved_report_ends_in_blanks(
    tmp_path: Path,
    extra: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`npuprof analyse DIR > report.txt` and the run summary in a job's log: rich padded each table's title
    to the table's width, and the summary's plain table its header and shorter rows to its last column's
    width, so that lines ended in up to dozens of blanks (before the colour's reset with FORCE_COLOR)."""
    import re

    from npuprof.config import ProfileConfig
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import CaptureSummary

    blank_end = re.compile(r" (?:\x1b\[[0-9;]*m)*$")
    env = {**{k: v for k, v in clean_env().items() if k != "COLUMNS"}, **extra}
    rank_dir = write_rank_dir(tmp_path / "r", cpu_trace())
    report = npuprof("analyse", str(rank_dir), env=env)
    assert report.returncode == 0, report.stderr
    lines = report.stdout.splitlines()
    titles = [line for line in lines if "top operators by self time" in line]
    assert len(titles) == 1 and lines[0].startswith("\x1b[3mrank" if extra.get("FORCE_COLOR") else "rank")
    assert [line for line in lines if blank_end.search(line)] == [], report.stdout
    if "COLUMNS" not in extra:  # the title a line of its own, whole (was: wrapped to the table's width)
        assert re.sub(r"\x1b\[[0-9;]*m", "", lines[0]) == f"rank 0  (CPU, {rank_dir})", lines[0]

    for name, value in extra.items():
        monkeypatch.setenv(name, value)
    if "COLUMNS" not in extra:
        monkeypatch.delenv("COLUMNS", raising=False)
    output = tmp_path / "out"
    captures = [
        CaptureSummary(
            rank_dir=output / f"vm_{pid}_20261202121245485_ascend_pt{suffix}", status="complete", rank=rank,
            pid=pid, steps=[6, 7, 8], size_bytes=3 << 20, detail="", parsed=True,
        )
        for rank, pid, suffix in ((0, 8952, ""), (1, 8953, "_renamed"))
    ]  # fmt: skip
    print_run_summary(output, captures, 0, ProfileConfig(), output / "npuprof.log")
    summary = capsys.readouterr().err
    header = [line for line in summary.splitlines() if "directory" in line]
    assert len(header) == 1 and "vm_8953" in summary, summary  # the last column wider than its header
    assert [line for line in summary.splitlines() if blank_end.search(line)] == [], summary


def test_a_cpu_only_report_has_no_device_time_column(tmp_path: Path) -> None:
    """A CPU-only capture's operators table had a `device ms` column of 0.000 on every row, which a new
    user read as the device doing nothing (the note under it says there is none); a trace with kernels
    keeps it."""
    cpu = npuprof("analyse", str(write_rank_dir(tmp_path / "cpu", cpu_trace())), env=clean_env())
    assert cpu.returncode == 0, cpu.stderr
    (header,) = [line for line in cpu.stdout.splitlines() if "self ms" in line]
    assert [cell.strip() for cell in header.split("┃")[1:-1]] == ["operator", "calls", "self ms", "total ms"]
    trace = tmp_path / "w.1.pt.trace.json"
    _trace_with_long_names(trace, "aten::mm")
    device = npuprof("analyse", str(trace), env=clean_env())
    assert device.returncode == 0, device.stderr
    (header,) = [line for line in device.stdout.splitlines() if "self ms" in line]
    assert header.split("┃")[-2].strip() == "device ms", header


def test_a_saved_report_with_a_long_run_of_blanks_is_written_at_once(tmp_path: Path) -> None:
    """A table whose one long name (a C++ template kernel's, thousands of characters) pads each other row
    with as many blanks: the saved report's lines were stripped of their trailing blanks by a regular
    expression tried at each blank of a run, its length squared (`npuprof analyse DIR > report.txt`: 10 s
    for a 3000-character kernel name, a minute for 8000, against 0.4 s). 300000 blanks inside a line, then
    a line ending in blanks before a colour code, in a process bounded by a generous time."""
    import subprocess
    import sys

    blanks = 300_000
    code = (
        "import sys\n"
        "from npuprof.reports.saved_lines import WithoutTrailingBlanks\n"
        "out = WithoutTrailingBlanks(sys.stdout)\n"
        f"out.write('a' + ' ' * {blanks} + 'b\\n')\n"
        "out.write('c   \\x1b[0m  ')\n"
        "out.write('\\n')\n"
        "out.flush()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "a" + " " * blanks + "b\nc\x1b[0m\n"
