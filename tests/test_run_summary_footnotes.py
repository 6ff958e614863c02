"""The notes under the run summary's table: like notes of consecutive captures are one footnote
(npuprof/reports/footnotes.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

BESIDE = (
    "the post-processor ran during this capture ({} earlier captures waited for it): its work may have "
    "slowed these steps"
)


def test_a_row_of_like_notes_is_one_footnote(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """helper-326: `npuprof run --repeat 0 --wait 1 --active 1` on a 70-step job printed 32 footnotes under
    its 35 captures, each "the post-processor ran during this capture (N earlier captures waited for
    it)": the note that differed (the last capture's partial step) was lost among them."""
    from npuprof.config import ProfileConfig
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import CaptureSummary

    out = tmp_path / "res"
    out.mkdir()
    names = [f"vm_42_2026120711000000{k}_ascend_pt" for k in range(6)]
    details = ["", BESIDE.format(3), BESIDE.format(7), BESIDE.format(4), "", "step 11 is partial"]
    captures = [
        CaptureSummary(out / name, "complete", None, 42, [2 * k + 1], 1000, detail, True)
        for k, (name, detail) in enumerate(zip(names, details, strict=True))
    ]
    print_run_summary(out, captures, 0, ProfileConfig(), out / "npuprof.log", run_id="r1")
    said = " ".join(capsys.readouterr().err.split())  # (a line may be folded at the console's width)
    grouped = f"* {names[1]} .. {names[3]} (3 captures): " + BESIDE.format("3 to 7")
    assert said.count("* vm_") == 2 and grouped in said and f"* {names[5]}: step 11 is partial" in said, said


def test_notes_apart_or_of_other_words_stay_apart() -> None:
    from npuprof.reports.footnotes import grouped

    notes = [("a", BESIDE.format(3)), ("b", None), ("c", BESIDE.format(3)), ("d", "stopped by SIGTERM")]
    assert grouped(notes) == [
        (["a"], BESIDE.format(3)),
        (["c"], BESIDE.format(3)),
        (["d"], "stopped by SIGTERM"),
    ]
    same = [("a", "step 7 is partial"), ("b", "step 7 is partial"), ("c", "step 7.5 is partial")]
    assert grouped(same) == [(["a", "b", "c"], "step 7 to 7.5 is partial")]
    two = [("a", BESIDE.format(3)), ("b", BESIDE.format(5))]  # two lines: each keeps its own
    assert grouped(two) == [(["a"], BESIDE.format(3)), (["b"], BESIDE.format(5))]
    paths = [(k, f"copied to /tmp/run{k}/trace_pid{k}.json") for k in range(3)]  # numbers inside names
    assert grouped(paths) == [([k], text) for k, text in paths]


def test_numbers_that_are_parts_of_something_else_are_not_merged() -> None:
    """A sign was left out of the number ("-5", "-3", "-7" merged into "-3 to 7"), and each part of a span,
    a time, a version or a thread's name merged on its own ("steps 5-9", "15-19", "25-29" into "steps 5
    to 25-9 to 29")."""
    from npuprof.reports.footnotes import grouped

    skews = [(k, f"its clock ran {ms} ms off the launcher's") for k, ms in enumerate(["-5", "-3", "-7"])]
    assert grouped(skews) == [([0, 1, 2], "its clock ran -7 to -3 ms off the launcher's")]
    signs = [(k, f"{ms} ms off") for k, ms in enumerate(["-5", "3", "-7"])]
    assert grouped(signs) == [([0, 1, 2], "-7 to 3 ms off")]
    for texts in [
        ["steps 5-9 kept", "steps 15-19 kept", "steps 25-29 kept"],
        ["written by torch 2.1.0", "written by torch 2.3.0", "written by torch 2.10.0"],
        ["ended at 12:30:01", "ended at 12:31:05", "ended at 12:32:00"],
        ["1,234 events", "1,567 events", "2,001 events"],
        ["Thread-3 took the steps", "Thread-4 took the steps", "Thread-5 took the steps"],
    ]:
        notes = list(enumerate(texts))
        assert grouped(notes) == [([k], text) for k, text in notes], texts
    ends = [(k, f"step {s} is partial.") for k, s in enumerate([3, 9, 6])]  # a sentence's full stop
    assert grouped(ends) == [([0, 1, 2], "step 3 to 9 is partial.")]


def test_a_footnote_counts_every_capture_between_its_ends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """helper-374: a `--repeat 0` run of 350 captures, 347 of them with the note above, said "vm_..4544 ..
    vm_..4234 (47 captures)": the footnote counted the 47 rows the table lists, not the 347 between its two
    ends that have the note (analyse said 347); a capture left out of the table without the note did not
    break the footnote either, which then named it among those with the note."""
    from npuprof.config import ProfileConfig
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import CaptureSummary

    out = tmp_path / "res"
    out.mkdir()
    count = 60
    names = [f"vm_42_2026120711{k:06d}_ascend_pt" for k in range(count)]
    quiet = {0, 1, 2, 45}  # no note: the first three, and one the table leaves out
    details = ["" if k in quiet else BESIDE.format(k + 3) for k in range(count)]
    captures = [
        CaptureSummary(out / name, "complete", None, 42, [2 * k + 1], 1000, detail, True)
        for k, (name, detail) in enumerate(zip(names, details, strict=True))
    ]
    print_run_summary(out, captures, 0, ProfileConfig(), out / "npuprof.log", run_id="r1")
    said = " ".join(capsys.readouterr().err.split())
    before, after = range(3, 45), range(46, count)  # the two runs of captures with the note
    for run in (before, after):
        first, last = run[0], run[-1]
        note = BESIDE.format(f"{first + 3} to {last + 3}")
        assert f"* {names[first]} .. {names[last]} ({len(run)} captures): {note}" in said, said
    assert said.count("* vm_") == 2, said


def test_a_capture_amiss_among_many_noted_is_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """helper-374: of a --repeat 0 run's many captures, nearly all had the note above; the table lists
    the first and last 10 and 30 with something to say, taken in order, so those 30 were all the note's, and
    a capture stopped for want of disk space later in the run was neither listed nor given its footnote."""
    from npuprof.config import ProfileConfig
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import CaptureSummary

    out = tmp_path / "res"
    out.mkdir()
    count, stopped = 80, 50
    names = [f"vm_42_2026120711{k:06d}_ascend_pt" for k in range(count)]
    why = "stopped at step 101: only 8.0 MiB free at /data, below --min-free-space (10.0 MiB)"
    captures = [
        CaptureSummary(out / name, "complete", None, 42, [2 * k + 1], 1000, BESIDE.format(k + 3), True)
        for k, name in enumerate(names)
    ]
    captures[stopped] = CaptureSummary(out / names[stopped], "incomplete", None, 42, [101], 1000, why, True)
    print_run_summary(out, captures, 0, ProfileConfig(), out / "npuprof.log", run_id="r1")
    said = " ".join(capsys.readouterr().err.split())
    assert f"101 incomplete* 1000 B yes {names[stopped]}" in said, said
    assert f"* {names[stopped]}: {why}" in said, said
