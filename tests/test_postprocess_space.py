"""The post-processor never takes the disk below --min-free-space: a parse writes ~1.5x the trace
(trace_view.json and the tables), a gzip ~0.25x; the job's own writes (a checkpoint) must find the room the
run promised them (a 20-step capture's parse took a 200 MiB tmpfs to 0 bytes and the job's checkpoint
failed). The free space is set here by replacing statvfs; the capture is a real file, parsed for real."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from analyse_support.handmade import cpu_trace, write_rank_dir
from conftest import clean_env

from npuprof.results import handover, layout, postprocess

MIB = 1 << 20


def _job(rank_dir: Path, gzip: bool = True, min_free_space: str = "10MiB") -> handover.CaptureJob:
    (trace,) = rank_dir.glob("*.pt.trace.json")
    return handover.CaptureJob(
        rank_dir=str(rank_dir),
        trace=str(trace),
        record=handover.CaptureRecord(status="complete", trace=trace.name),
        analyse=True,
        gzip=gzip,
        min_free_space=min_free_space,
    )


def _free(monkeypatch: pytest.MonkeyPatch, rank_dir: Path, free_bytes: int) -> None:
    """``free_bytes`` free, plus what the gzip of the plain trace gave back once it is done."""
    (trace,) = rank_dir.glob("*.pt.trace.json")
    size = trace.stat().st_size

    def statvfs(path: object) -> SimpleNamespace:
        packed = list(rank_dir.glob("*.pt.trace.json.gz"))
        freed = size - packed[0].stat().st_size if packed and not trace.exists() else 0
        return SimpleNamespace(f_bavail=free_bytes + freed, f_frsize=1, f_blocks=1 << 30)

    monkeypatch.setattr(postprocess.os, "statvfs", statvfs)


def _tables_fail(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, failure: Callable[[Path, Path], int | None]
) -> Path:
    """Table writes fail with ``failure(out_dir, scratch)``'s errno where it gives one (a full disk, a
    read-only mount) and go on elsewhere; the one scratch root is ``tmp_path/scratch``, returned."""
    from npuprof.analysis import parse, report

    real = parse.write_outputs
    scratch = tmp_path / "scratch"
    scratch.mkdir()

    def writes(raw: Path, out_dir: Path, *args: object, **kwargs: object) -> list[str]:
        code = failure(out_dir, scratch)
        if code is not None:
            raise OSError(code, os.strerror(code), str(out_dir / "trace_view.json"))
        return real(raw, out_dir, *args, **kwargs)

    monkeypatch.setattr(parse, "write_outputs", writes)
    monkeypatch.setattr(report, "write_outputs", writes)
    monkeypatch.setattr(report, "SCRATCH_ROOTS", (str(scratch),))
    return scratch


@pytest.mark.parametrize(
    ("extra", "parsed", "gzipped"),
    [
        (1000.0, True, True),  # room for both
        # 10 MiB must stay free: the parse (1.5x the trace) would take the disk below it, the gzip not,
        # nor would the parse after the gzip (the gzipped trace and the parse: ~0.75x)
        (0.5, False, True),
        # the parse fits once the gzip has freed the plain trace's room: gzipped first, then parsed
        (0.9, True, True),
        (0.1, False, False),  # room for neither: the plain trace is kept
    ],
)
def test_parse_and_gzip_keep_the_free_space_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: float, parsed: bool, gzipped: bool
) -> None:
    # the factors alone: the fixed-size outputs' allowance, far above this tiny trace, is tested below
    monkeypatch.setattr(layout, "PARSE_SPACE_ALLOWANCE", 0)
    rank_dir = write_rank_dir(tmp_path, cpu_trace())
    job = _job(rank_dir)
    size = os.path.getsize(job.trace or "")
    _free(monkeypatch, rank_dir, 10 * MIB + int(size * extra))  # beyond the 10 MiB that must stay free
    status = postprocess.run_job(job)
    assert (rank_dir / layout.PARSED_DIR).exists() is parsed
    assert any(rank_dir.glob("*.pt.trace.json.gz")) is gzipped
    assert any(rank_dir.glob("*.pt.trace.json")) is not gzipped
    log = (tmp_path / layout.RUN_LOG).read_text() if (tmp_path / layout.RUN_LOG).exists() else ""
    if parsed:
        assert status == 0 and (rank_dir / layout.PARSED_DIR / layout.ANALYSE_DONE).exists(), log
        record = json.loads((rank_dir / layout.CAPTURE_RECORD).read_text())
        assert record["trace"].endswith(".pt.trace.json.gz")
        # the summary names the trace there is, gzipped before its parse or after (docs/formats.md)
        summary = json.loads((rank_dir / layout.PARSED_DIR / "npuprof_summary.json").read_text())
        assert summary["trace"] == record["trace"] and (rank_dir / summary["trace"]).is_file()
    else:
        assert status == 1
        assert "not analysed (it needs about" in log and "less than --min-free-space (10.0 MiB)" in log, log
        assert "run npuprof analyse on it later" in log
    if not gzipped:
        assert "not gzipped (it needs about" in log and "the plain trace is kept" in log, log


def _written_by_a_parse(tmp_path: Path) -> int:
    """What a real parse of the tiny trace writes, as tmpfs counts it: each file at least a 4 KiB page."""
    rank_dir = write_rank_dir(tmp_path / "measured", cpu_trace())
    job = _job(rank_dir, gzip=False, min_free_space="0")
    assert postprocess.run_job(job) == 0
    files = [p for p in (rank_dir / layout.PARSED_DIR).rglob("*") if p.is_file()]
    return sum(max(-(-p.stat().st_size // 4096), 1) * 4096 for p in files) + 4096  # + the directory


@pytest.mark.parametrize("room_of_what_it_writes", [0.9, 2.0])
def test_a_tiny_traces_parse_is_refused_where_its_fixed_size_outputs_do_not_fit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, room_of_what_it_writes: float
) -> None:
    """A 2.8 KiB capture on a 300 KiB tmpfs passed the check (1.5x the trace), then its tables, each a
    4 KiB page at least, failed with ENOSPC."""
    written = _written_by_a_parse(tmp_path)
    rank_dir = write_rank_dir(tmp_path / "run", cpu_trace())
    job = _job(rank_dir, gzip=False)
    size = os.path.getsize(job.trace or "")
    assert written > 4 * size  # the fixed-size outputs, not the trace's size, are what must fit
    _free(monkeypatch, rank_dir, 10 * MIB + int(written * room_of_what_it_writes))
    status = postprocess.run_job(job)
    log = (tmp_path / "run" / layout.RUN_LOG).read_text()
    if room_of_what_it_writes < 1:
        assert status == 1 and not (rank_dir / layout.PARSED_DIR).exists(), log
        assert "not analysed (it needs about" in log and "less than --min-free-space (10.0 MiB)" in log, log
    else:
        assert status == 0 and (rank_dir / layout.PARSED_DIR / layout.ANALYSE_DONE).exists(), log


def test_what_the_post_processor_says_of_a_capture_outside_the_run_output_is_in_the_runs_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A --dynamic request's prof_dir outside -o on a nearly full disk: the post-processor wrote "not
    analysed (...)" into prof_dir/npuprof.log, and the run's summary, which reads -o's log, said instead
    "a post-processor stopped, killed, or still at work in the background: see <-o>/npuprof.log"."""
    output, rank_dir = tmp_path / "out", write_rank_dir(tmp_path / "prof", cpu_trace())
    output.mkdir()
    job = _job(rank_dir)
    _free(monkeypatch, rank_dir, 10 * MIB)  # nothing beyond the 10 MiB that must stay free
    spool = output / f"{postprocess.SPOOL_PREFIX}1.0.abcdef.jsonl"
    spool.write_bytes(handover.job_line(job))  # read once its pipe (stdin, at EOF here) is done
    argv = postprocess._postprocessor_argv(spool, 4, 5, 6, "run1")[3:]  # after `python -m module`
    for flag in ("--lock-fd", "--ready-fd", "--parent-fd"):  # none here: this process is no post-processor
        del argv[argv.index(flag) : argv.index(flag) + 2]
    monkeypatch.setattr(postprocess, "yield_to_training", lambda: None)  # not this test process's priority
    monkeypatch.setattr(postprocess, "_RUN_LOG", {}, raising=False)  # set by main: not left to later tests
    read_end, write_end = os.pipe()
    os.close(write_end)
    monkeypatch.setattr(sys, "stdin", os.fdopen(read_end))
    try:
        assert postprocess.main(argv) == 1
    finally:
        sys.stdin.close()
    log = (output / layout.RUN_LOG).read_text() if (output / layout.RUN_LOG).exists() else ""
    assert f"[postprocess pid={os.getpid()}] {rank_dir.name}: not analysed (it needs about" in log
    assert not (rank_dir.parent / layout.RUN_LOG).exists()


def test_a_capture_an_analyse_parsed_first_is_not_said_analysed_by_the_post_processor(tmp_path: Path) -> None:
    """`npuprof analyse` of a run in flight parsed a capture before its post-processor, which then logged
    "analysed in 0.1 s: " with no file: it had written none."""
    from npuprof.analysis.parse import parse_rank_dir

    rank_dir = write_rank_dir(tmp_path, cpu_trace())
    assert parse_rank_dir(rank_dir).status == "parsed"
    job = _job(rank_dir)
    job.gzip = False
    assert postprocess.run_job(job) == 0
    log = (tmp_path / layout.RUN_LOG).read_text()
    assert f"{rank_dir.name}: already analysed (by another parse, an npuprof analyse?)" in log, log
    assert "analysed in" not in log, log


@pytest.mark.parametrize("extra", [0.5, 2.0])
def test_the_chrome_trace_copy_keeps_the_free_space_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: float
) -> None:
    """--export-chrome-trace's copy (--no-gzip, or another disk than -o's) wrote the whole plain trace
    whatever room was left: the disk went below --min-free-space, as the parse and the gzip never take it."""
    rank_dir = write_rank_dir(tmp_path, cpu_trace())
    job = _job(rank_dir)
    job.analyse, job.gzip = False, False
    target = tmp_path / "chrome.json"
    job.chrome_trace = (job.trace or "", str(target))
    size = os.path.getsize(job.trace or "")
    _free(monkeypatch, rank_dir, 10 * MIB + int(size * extra))  # beyond the 10 MiB that must stay free
    status = postprocess.run_job(job)
    log = (tmp_path / layout.RUN_LOG).read_text() if (tmp_path / layout.RUN_LOG).exists() else ""
    if extra > 1:
        assert status == 0 and target.read_bytes() == Path(job.trace or "").read_bytes(), log
    else:
        assert status == 1 and not target.exists()
        assert f"not produced: --export-chrome-trace: {target}: not copied (it needs about" in log, log
        assert "less than --min-free-space (10.0 MiB)" in log, log


_RAW = [[i * 1000, 1, 512 + i, i % 8] for i in range(20_000)]


def _exports_job(rank_dir: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[handover.CaptureJob, Path]:
    """A capture with --export-stacks and --memory-timeline json to finish; its memory snapshot a stand-in
    whose categorised timeline is 20,000 allocations (categorising a real one needs torch)."""
    from npuprof.agent.memory_snapshot import SNAPSHOT_FILE
    from npuprof.reports import memory_categories
    from npuprof.reports import memory_timeline as mt
    from npuprof.reports.stacks import HOST_METRIC

    snapshot = rank_dir / SNAPSHOT_FILE
    snapshot.write_bytes(b"stand-in")
    data = mt.MemoryData("cpu", mt.SOURCE_CATEGORISED, _RAW, 1 << 20, 2 << 20)  # type: ignore[arg-type]
    monkeypatch.setattr(memory_categories, "from_snapshot", lambda *_args, **_kwargs: data)
    job = _job(rank_dir)
    job.analyse, job.gzip = False, False
    job.exports = handover.ExportsJob(
        stacks=[HOST_METRIC], memory_formats=["json"], memory_device="cpu", memory_snapshot=SNAPSHOT_FILE
    )
    return job, snapshot


@pytest.mark.parametrize("room", [100, 8000, 100 * MIB])
def test_stacks_and_memory_timeline_keep_the_free_space_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, room: int
) -> None:
    """The stacks and memory timeline files the post-processor writes were written whatever room was left:
    the disk the job writes to went below --min-free-space (10 MiB here), where the parse, the gzip and the
    chrome trace copy never take it. Each file is left, named at the run's end with the command that makes
    it later; the memory snapshot stays for that command. ``room``: bytes free beyond the 10 MiB, less than
    any file (100), enough for the stacks only (8000), for everything."""
    from npuprof.results.extras import not_produced_notes

    rank_dir = write_rank_dir(tmp_path, cpu_trace())
    job, snapshot = _exports_job(rank_dir, monkeypatch)
    _free(monkeypatch, rank_dir, 10 * MIB + room)
    postprocess.run_job(job)
    lines = (tmp_path / layout.RUN_LOG).read_text().splitlines()
    stacks = rank_dir / "stacks_self_cpu_time_total.folded"
    timeline = {rank_dir / "memory_timeline.raw.json.gz", rank_dir / "memory_timeline.json"}
    notes = sorted(not_produced_notes(lines))  # what `npuprof run` shows at the end
    if room > MIB:
        assert stacks.exists() and all(path.exists() for path in timeline) and not snapshot.exists(), lines
        assert notes == [], lines
        return
    assert not any(path.exists() for path in timeline) and snapshot.read_bytes() == b"stand-in", lines
    assert not list(rank_dir.glob(".*.tmp")), list(rank_dir.iterdir())
    where = f"({rank_dir.name}): not written (it needs about"
    assert notes[0].startswith(f"memory_timeline.* not produced {where}"), notes
    assert f"fix: npuprof memory-timeline {rank_dir} -o memory.html" in notes[0], notes
    assert all("less than --min-free-space (10.0 MiB)" in note for note in notes), notes
    above = f"{room} B" if room < 1024 else f"{room / 1024:.1f} KiB"  # what is free beyond the 10 MiB
    assert all(f"only {above} is free above what must stay free" in note for note in notes), notes
    if room > 1000:  # the stacks file (5 lines) fits; the gzipped timeline alone does not
        assert len(gzip.compress(json.dumps(_RAW).encode())) > room
        assert stacks.stat().st_size < room and len(notes) == 1, notes
        return
    _stacks_said_not_produced(stacks, notes, where, rank_dir)


def test_analyse_on_a_full_disk_reports_from_tables_made_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rank dir's disk is full (ENOSPC at its first table): analyse printed no report at all. It now
    makes the tables in a scratch directory, reports from them and removes them; the rank dir keeps no
    table (none looks parsed) and the note says how to keep them. A scratch without room: as before."""
    import errno

    from npuprof.analysis import report

    rank_dir = write_rank_dir(tmp_path / "full", cpu_trace())
    scratch = _tables_fail(
        monkeypatch, tmp_path, lambda out_dir, _: errno.ENOSPC if out_dir.is_relative_to(rank_dir) else None
    )
    notes: list[str] = []
    made = report.build_report(rank_dir, jobs=1, on_note=notes.append)
    assert not made.problems and [s.step for s in made.ranks[0].steps] == [7]
    # cpu_trace's step [0, 1000): computing 300, communication 300 (its docstring's figures)
    assert (made.ranks[0].steps[0].computing_us, made.ranks[0].steps[0].communication_us) == (300.0, 300.0)
    (note,) = notes
    assert note.startswith(f"{rank_dir}: the disk is full: its tables are not kept there"), note
    assert list(scratch.iterdir()) == []  # removed once the report is made
    assert not (rank_dir / layout.PARSED_DIR / "analyse.done").exists()

    monkeypatch.setattr(report, "SCRATCH_ROOTS", (str(tmp_path / "nowhere"), None))  # no scratch: no report

    def all_full() -> str:  # as tempfile says when no temporary directory can take a file (helper-88)
        raise FileNotFoundError("No usable temporary directory found in ['/tmp']")

    monkeypatch.setattr("tempfile.gettempdir", all_full)
    made = report.build_report(rank_dir, jobs=1)
    (problem,) = made.problems
    assert problem.status == "failed" and problem.reason.startswith("the disk is full"), problem


@pytest.mark.parametrize("room_of_what_it_writes", [0.9, 2.0])
def test_analyses_scratch_tables_ask_for_the_room_of_their_fixed_size_outputs_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, room_of_what_it_writes: float
) -> None:
    """The post-processor's parse asks for its fixed-size outputs' room beside its share of the trace;
    analyse's scratch tables asked for twice the trace alone: a tiny trace's tables, each a 4 KiB page at
    least, began on a scratch disk that could not take them."""
    import errno

    from npuprof.analysis import report

    written = _written_by_a_parse(tmp_path)
    rank_dir = write_rank_dir(tmp_path / "full", cpu_trace())
    (trace,) = rank_dir.glob("*.pt.trace.json")
    size = trace.stat().st_size
    assert written > 4 * size  # the fixed-size outputs, not the trace's size, are what must fit
    scratch = _tables_fail(
        monkeypatch, tmp_path, lambda out_dir, _: errno.ENOSPC if out_dir.is_relative_to(rank_dir) else None
    )
    real_usage = shutil.disk_usage

    def disk_usage(path: object) -> Any:
        if Path(str(path)) != scratch:
            return real_usage(path)  # type: ignore[arg-type]
        return SimpleNamespace(total=1 << 30, used=0, free=2 * size + int(written * room_of_what_it_writes))

    monkeypatch.setattr(shutil, "disk_usage", disk_usage)
    made = report.build_report(rank_dir, jobs=1)
    if room_of_what_it_writes < 1:  # no report, as with no scratch room at all
        (problem,) = made.problems
        assert problem.status == "failed" and problem.reason.startswith("the disk is full"), problem
    else:
        assert not made.problems and [s.step for s in made.ranks[0].steps] == [7], made.problems
    assert list(scratch.iterdir()) == []


def _loose_copy(rank_dir: Path, folder: Path) -> Path:
    """A copy of the rank dir's trace alone in ``folder``: a bare trace (one inside its rank dir is analysed
    as that rank dir, its capture record read)."""
    (trace,) = rank_dir.glob("*.pt.trace.json")
    folder.mkdir(parents=True)
    return Path(shutil.copy2(trace, folder / trace.name))


def test_analyse_of_read_only_results_with_no_writable_cache_reports_from_tables_made_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Results no one may write in (a read-only mount) analysed by a user whose home takes no cache (a
    read-only or missing home, HOME=/nonexistent): "nothing could be analysed", and its advice, analyse the
    trace file itself, failed the same way. The report is now made from scratch tables, as on a full disk,
    for a rank dir and a bare trace (helper-152)."""
    import errno

    from npuprof.analysis import report

    rank_dir = write_rank_dir(tmp_path / "results", cpu_trace())
    bare = _loose_copy(rank_dir, tmp_path / "results" / "loose")
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    scratch = _tables_fail(
        monkeypatch,
        tmp_path,
        lambda out_dir, _: (
            errno.EROFS
            if out_dir.is_relative_to(tmp_path / "results") or out_dir.is_relative_to(cache)
            else None
        ),
    )
    for target in (rank_dir, bare):
        notes: list[str] = []
        made = report.build_report(target, jobs=1, on_note=notes.append)
        assert not made.problems and [s.step for s in made.ranks[0].steps] == [7], made.problems
        assert made.ranks[0].steps[0].computing_us == 300.0  # cpu_trace's figure
        assert notes[-1].startswith(
            f"{target}: its tables can be written neither there nor in the user's cache "
            f"({cache / 'npuprof' / 'traces'}): this report is made from tables in {scratch}"
        ), notes
        assert list(scratch.iterdir()) == []  # removed once the report is made


def test_a_missing_home_is_not_made_for_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """HOME=/nonexistent (a system user's, a bare container's): a trace beside which no table may go was
    analysed into $HOME/.cache, and make_dir made the missing home on the way (as root, /nonexistent at
    the filesystem's root). The cache is the home's only: without a home the scratch tables serve
    (helper-159)."""
    from npuprof.analysis import report

    rank_dir = write_rank_dir(tmp_path / "results", cpu_trace())
    bare = _loose_copy(rank_dir, tmp_path / "loose")
    home = tmp_path / "nonexistent"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    scratch = _tables_fail(monkeypatch, tmp_path, lambda out_dir, _: None)
    bare.parent.chmod(0o555)  # nothing beside the trace, root included
    try:
        notes: list[str] = []
        made = report.build_report(bare, jobs=1, on_note=notes.append)
    finally:
        bare.parent.chmod(0o755)
    assert not home.exists()
    assert not made.problems and [s.step for s in made.ranks[0].steps] == [7], made.problems
    (note,) = notes  # no word of tables going to a cache in the missing home
    assert (
        f"nor in the user's cache ({home / '.cache' / 'npuprof' / 'traces'}): this report is made from "
        f"tables in {scratch}" in note
    ), notes


def test_read_only_results_with_no_room_anywhere_give_no_advice_that_already_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """helper-156: with no scratch room either, the failure still advised analysing the trace file alone
    (its tables then in the user's cache), which had failed the same way: for a bare trace, the very
    command just run."""
    import errno

    from npuprof.analysis import report

    rank_dir = write_rank_dir(tmp_path / "results", cpu_trace())
    (bare,) = rank_dir.glob("*.pt.trace.json")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    scratch = _tables_fail(
        monkeypatch,
        tmp_path,
        lambda out_dir, scratch: errno.ENOSPC if out_dir.is_relative_to(scratch) else errno.EROFS,
    )
    for target in (rank_dir, bare):
        made = report.build_report(target, jobs=1)
        said = " ".join(str(p) for p in made.problems)
        assert "its trace file itself" not in said, said
        assert (
            f"nor in {scratch} (no room): analyse a copy in a writable place, or set XDG_CACHE_HOME" in said
        )
        assert list(scratch.iterdir()) == []


def test_a_scratch_root_that_fails_for_another_reason_than_room_is_said_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run of the suite under load: read-only results whose scratch tables failed too were said to have
    "no room" anywhere, whatever the failure (every exception of the scratch parse was taken for that);
    each root's own reason is said."""
    import errno

    from npuprof.analysis import report

    rank_dir = write_rank_dir(tmp_path / "results", cpu_trace())
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    scratch = _tables_fail(
        monkeypatch,
        tmp_path,
        lambda out_dir, scratch: errno.EIO if out_dir.is_relative_to(scratch) else errno.EROFS,
    )
    made = report.build_report(rank_dir, jobs=1)
    said = " ".join(str(p) for p in made.problems)
    assert "no room" not in said, said
    assert f"nor in {scratch} (Input/output error: {scratch}/" in said, said
    assert list(scratch.iterdir()) == []


_KILLED_DURING_THE_REPORT = """
import errno, os, signal, sys
from pathlib import Path
from npuprof.analysis import parse, report

rank_dir, scratch, signum = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
real = parse.write_outputs

def read_only_there(raw, out_dir, *args, **kwargs):
    if not out_dir.is_relative_to(scratch):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(out_dir / "trace_view.json"))
    written = real(raw, out_dir, *args, **kwargs)
    os.kill(os.getpid(), signum)  # the scheduler's time limit, a closed terminal: the tables are there
    return written

parse.write_outputs = report.write_outputs = read_only_there
report.SCRATCH_ROOTS = (scratch,)
report.build_report(rank_dir, jobs=1)
print("the report was made")
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_analyse_ended_by_a_signal_leaves_no_scratch_tables(tmp_path: Path, signum: int) -> None:
    """A report made from scratch tables (read-only results, no writable cache) ended by SIGTERM or SIGHUP
    left them in /dev/shm, memory that nothing else frees (3 of 5 kills of a real analyse left 19 MB each);
    they are removed, then the process dies of the signal as before (helper-156). A plain Python process,
    no torch."""
    rank_dir = write_rank_dir(tmp_path / "results", cpu_trace())
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    tests = Path(__file__).resolve().parent
    env = clean_env(PYTHONPATH=os.pathsep.join([str(tests.parent), str(tests)]))
    env.update(XDG_CACHE_HOME=str(tmp_path / "cache"))
    done = subprocess.run(
        [sys.executable, "-c", _KILLED_DURING_THE_REPORT, str(rank_dir), str(scratch), str(int(signum))],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == -signum, (done.returncode, done.stdout, done.stderr)
    assert list(scratch.iterdir()) == []


def test_scratch_tables_of_many_ranks_are_not_all_held_until_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read-only results of several ranks and no writable cache: each rank's whole set of scratch tables
    (trace_view.json: 18 MB of a 20 MB set for a 60-step capture) stayed in /dev/shm until the report was
    made, every rank's at once; only what the report reads (the summary, the annotations) stays now, and
    the report is the same (helper-156)."""
    import errno

    from npuprof.analysis import parse, report
    from npuprof.analysis.annotation_schema import ANNOTATIONS_FILE

    results = tmp_path / "results"
    for rank in (0, 1):
        write_rank_dir(results, cpu_trace(), rank=rank, name=f"host_{rank + 1}_20250101000000000")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    scratch = _tables_fail(
        monkeypatch,
        tmp_path,
        lambda out_dir, scratch: None if out_dir.is_relative_to(scratch) else errno.EROFS,
    )
    held: list[set[str]] = []
    load = report._load_summary

    def load_summary(parsed_dir: Path) -> tuple[object, str]:
        held.append({p.name for p in scratch.rglob("*") if p.is_file()})
        return load(parsed_dir)

    monkeypatch.setattr(report, "_load_summary", load_summary)
    made = report.build_report(results, jobs=1)
    assert not made.problems and [r.rank for r in made.ranks] == [0, 1], made.problems
    assert [s.computing_us for s in made.ranks[1].steps] == [300.0]  # cpu_trace's figure
    assert held and held[-1] <= {parse.SUMMARY_FILE, ANNOTATIONS_FILE}, held
    assert list(scratch.iterdir()) == []


def test_scratch_tables_of_a_killed_analyse_are_removed_by_the_next(tmp_path: Path) -> None:
    """helper-156: an analyse killed by SIGKILL (the OOM killer) ran no handler, and its scratch tables
    stayed in /dev/shm, memory, for ever. The next analyse that makes scratch tables there removes those of
    dead analyses on this host; a live one's, and another host's (a shared TMPDIR), stay."""
    import subprocess

    from npuprof.analysis.scratch import PREFIX, ScratchDirs, _host

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead = tmp_path / f"{PREFIX}{_host()}-{gone.pid}-abc123"
    live = tmp_path / f"{PREFIX}{_host()}-{os.getppid()}-def456"
    elsewhere = tmp_path / f"{PREFIX}otherhost-{gone.pid}-ghi789"
    for folder in (dead, live, elsewhere):
        (folder / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
        (folder / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").write_text("[]")
    scratch = ScratchDirs()
    made = scratch.make(str(tmp_path))
    try:
        assert not dead.exists()
        assert live.exists() and elsewhere.exists() and made.exists()
    finally:
        scratch.remove_all()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, elsewhere.name])


def test_the_scratch_room_asked_for_a_gzipped_trace_is_its_plain_size(tmp_path: Path) -> None:
    """helper-156: the scratch room asked for a gzipped trace was 8 times the file, where a capture's trace
    ran 16 times: a scratch root that fitted 8x filled partway (in /dev/shm, memory the jobs beside it
    share) before the next was tried. The gzip trailer states the plain size; 8x stays the least."""
    import gzip

    from npuprof.analysis.report import plain_size

    events = [{"ph": "X", "name": "aten::mm", "ts": i, "dur": 1, "pid": 1, "tid": 1} for i in range(20000)]
    data = json.dumps({"traceEvents": events}).encode()
    packed = tmp_path / "t.pt.trace.json.gz"
    packed.write_bytes(gzip.compress(data))
    assert len(data) > 16 * packed.stat().st_size  # the repetitive trace compresses past 16x
    assert plain_size(packed) == len(data)
    plain = tmp_path / "t.pt.trace.json"
    plain.write_bytes(data)
    assert plain_size(plain) == len(data)
    barely = tmp_path / "random.pt.trace.json.gz"  # incompressible: still 8x, as before
    barely.write_bytes(gzip.compress(os.urandom(4096)))
    assert plain_size(barely) == 8 * barely.stat().st_size


class _NpuProfile:
    """torch_npu's profile as npuprof's step uses it (the stand-in's API, tests/fake_torch_npu): its
    collection flags on its interface (prof.prof_if), its stacks written as folded lines, its memory
    timeline as a gzipped raw timeline, each into the path it is given."""

    STACKS = b"train.py(9): step;aten::mm 1200\ntrain.py(9): step;aten::add 300\n"

    def __init__(self) -> None:
        self.prof_if = SimpleNamespace(record_shapes=True, profile_memory=True, with_stack=True)
        self.asked: list[str] = []

    def export_stacks(self, path: str, metric: str) -> None:
        self.asked.append("export_stacks")
        Path(path).write_bytes(self.STACKS)

    def export_memory_timeline(self, path: str, device: str) -> None:
        self.asked.append("export_memory_timeline")
        Path(path).write_bytes(gzip.compress(json.dumps(_RAW).encode()))


def _npu_capture_end(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    free_bytes: int,
    torch_npu_wrote: Callable[[Path], None] | None = None,
) -> tuple[Path, list[str], _NpuProfile, list[str]]:
    """The step's exports of a torch_npu capture (--export-stacks, --memory-timeline json, --min-free-space
    10MiB), ``free_bytes`` free as the disk guard's thread last measured (``torch_npu_wrote`` into the rank
    dir after that, as its export in the step does); the rank dir, the log's lines, the profile, and the
    statvfs calls made during the step's part."""
    from test_export_type import _NoAnnotations, _Post

    from npuprof.agent import capture
    from npuprof.agent.disk_guard import DiskGuard
    from npuprof.agent.log import AgentLog
    from npuprof.config import ProfileConfig

    monkeypatch.setattr(capture, "CaptureAnnotations", _NoAnnotations)  # marks are process-wide state
    out = tmp_path / "out"
    rank_dir = out / "w_1_20250101000000000_ascend_pt"
    rank_dir.mkdir(parents=True)
    asked: list[str] = []

    def statvfs(path: object) -> SimpleNamespace:
        asked.append(str(path))
        return SimpleNamespace(f_bavail=free_bytes, f_frsize=1, f_blocks=1 << 30)

    monkeypatch.setattr(os, "statvfs", statvfs)
    log = AgentLog(None, "t")
    cfg = ProfileConfig(
        output=str(out),
        min_free_space="10MiB",
        with_stack=True,
        record_shapes=True,
        profile_memory=True,
        export_stacks=["self_cpu_time_total"],
        memory_timeline=["json"],
    ).validate()
    guard = DiskGuard(cfg.output, cfg.min_free_space, log)
    guard.check()  # what its thread does every 2 s (it warns of a disk below the floor)
    asked.clear()
    if torch_npu_wrote is not None:
        torch_npu_wrote(rank_dir)
    lines: list[str] = []
    monkeypatch.setattr(log, "warning", lines.append)
    backend = SimpleNamespace(name="torch_npu", device="npu:0", writes_own_layout=True)
    writer = capture.CaptureWriter(cfg, {"run_id": "r"}, backend, log, lambda: 0, "w", _Post(), space=guard)
    prof = _NpuProfile()
    writer._extras(prof, rank_dir)
    return rank_dir, lines, prof, asked


@pytest.mark.parametrize("room", [100, 8000, 100 * MIB])
def test_torch_npus_own_exports_in_the_step_keep_the_free_space_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, room: int
) -> None:
    """On torch_npu the stacks and the memory timeline are its own exports, written by the training step,
    and were written whatever room was left, where the post-processor's keep --min-free-space. They keep it
    now as the disk guard last measured it (no statvfs in the step), each said not produced with its fix.
    ``room``: bytes free beyond the 10 MiB: less than any file (100), the stacks only (8000), all."""
    from npuprof.results.extras import not_produced_notes

    rank_dir, lines, prof, asked = _npu_capture_end(tmp_path, monkeypatch, 10 * MIB + room)
    assert asked == [], "statvfs on the step path"
    assert prof.asked == ["export_stacks", "export_memory_timeline"]
    stacks = rank_dir / "stacks_self_cpu_time_total.folded"
    timeline = [rank_dir / "memory_timeline.raw.json.gz", rank_dir / "memory_timeline.json"]
    notes = sorted(not_produced_notes([f"[WARNING] [agent pid=1] {line}" for line in lines]))
    assert not [p for p in rank_dir.iterdir() if p.name.startswith(".")], list(rank_dir.iterdir())
    if room > MIB:
        assert stacks.read_bytes() == _NpuProfile.STACKS and all(p.exists() for p in timeline), lines
        assert json.loads(timeline[1].read_text()), "an empty timeline"
        assert notes == [], lines
        return
    assert not any(p.exists() for p in timeline), lines
    assert len(gzip.compress(json.dumps(_RAW).encode())) > room  # the raw timeline alone does not fit
    where = f"({rank_dir.name}): not written (it needs about"
    assert notes[0].startswith(f"memory_timeline.* not produced {where}"), notes
    assert f"fix: npuprof memory-timeline {rank_dir} -o memory.html" in notes[0], notes
    above = f"{room} B" if room < 1024 else f"{room / 1024:.1f} KiB"
    assert all(f"only {above} is free above what must stay free" in note for note in notes), notes
    if room > len(_NpuProfile.STACKS):
        assert stacks.read_bytes() == _NpuProfile.STACKS and len(notes) == 1, notes
        return
    _stacks_said_not_produced(stacks, notes, where, rank_dir)


def test_torch_npus_exports_are_not_asked_for_on_a_disk_below_the_floor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Below --min-free-space already: torch_npu's exports write scratch files of their own size, so they
    are not asked for at all."""
    rank_dir, lines, prof, asked = _npu_capture_end(tmp_path, monkeypatch, 3 * MIB)
    assert asked == [] and prof.asked == []
    assert sorted(p.name for p in rank_dir.iterdir()) == []
    below = f"only 3.0 MiB free at {rank_dir.parent}, below --min-free-space (10.0 MiB)"
    assert sorted(lines) == [
        f"{rank_dir.name}: not produced: memory_timeline.*: not made ({below}); fix: npuprof memory-timeline "
        f"{rank_dir} -o memory.html (from the trace, no categories)",
        f"{rank_dir.name}: not produced: stacks_self_cpu_time_total.folded: not made ({below}); fix: npuprof "
        f"export-stacks {rank_dir} --metric self_cpu_time_total -o stacks_self_cpu_time_total.folded",
    ]


def test_torch_npus_exports_count_what_its_export_wrote_since_the_disk_was_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch_npu writes its data and parse into the rank dir in the step that ends the capture, after the
    disk guard's last measurement: its exports were judged by that measurement alone, and written into
    room the trace had just taken. What was written since is counted (a file older than the measurement,
    its data of earlier steps, is in it already)."""
    from npuprof.results.extras import not_produced_notes

    room = 100 * MIB
    trace_bytes = room - 10  # leaves 10 B above the floor: no export fits
    assert len(_NpuProfile.STACKS) > room - trace_bytes

    def parse_in_the_step(rank_dir: Path) -> None:
        earlier = rank_dir / "FRAMEWORK" / "torch.op_range"  # written during the capture, long before
        earlier.parent.mkdir()
        with earlier.open("wb") as handle:
            handle.truncate(room)  # sparse: its size, no disk
        os.utime(earlier, (time.time() - 3600, time.time() - 3600))
        (rank_dir / "ASCEND_PROFILER_OUTPUT").mkdir()
        with (rank_dir / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").open("wb") as handle:
            handle.truncate(trace_bytes)

    free = 10 * MIB + room
    rank_dir, lines, prof, asked = _npu_capture_end(tmp_path, monkeypatch, free, parse_in_the_step)
    assert asked == [], "statvfs on the step path"
    assert prof.asked == ["export_stacks", "export_memory_timeline"]  # made, then held back
    notes = sorted(not_produced_notes([f"[WARNING] [agent pid=1] {line}" for line in lines]))
    names = [n.split(" not produced")[0] for n in notes]
    assert names == ["memory_timeline.*", "stacks_self_cpu_time_total.folded"], notes
    above = f"only {room - trace_bytes} B is free above what must stay free"
    assert all("not written (it needs about" in note and above in note for note in notes), notes
    assert not (rank_dir / "stacks_self_cpu_time_total.folded").exists()


def test_written_since_the_measurement_can_take_the_disk_below_the_floor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """12 MiB free when measured, 10 MiB to keep: 3 MiB written since leave it below, said with both."""
    from npuprof.agent.disk_guard import DiskGuard
    from npuprof.agent.log import AgentLog

    measured = SimpleNamespace(f_bavail=12 * MIB, f_frsize=1, f_blocks=1 << 30)
    monkeypatch.setattr(os, "statvfs", lambda _p: measured)
    guard = DiskGuard(str(tmp_path), "10MiB", AgentLog(None, "t"))
    guard.check()
    assert guard.short_of(str(tmp_path), 0, written=MIB) == ""
    assert guard.short_of(str(tmp_path), 0, written=3 * MIB) == (
        f"only 9.0 MiB free at {tmp_path} once the 3.0 MiB written there since it was measured are counted, "
        "below --min-free-space (10.0 MiB)"
    )


@pytest.mark.parametrize("room", [100, 100 * MIB])
def test_the_memory_snapshot_keeps_the_free_space_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, room: int
) -> None:
    """The memory snapshot the capture's hand-over thread writes (the event tree's copy, megabytes) was
    written whatever room was left. Where it would cross --min-free-space it is not written, said not
    produced with the fix from the trace, and the job handed over asks for no snapshot: the
    post-processor said again "the training process did not write" it, and the record named it."""
    from npuprof.agent import memory_snapshot, threads
    from npuprof.owned_fd import OwnedFd
    from npuprof.results.extras import not_produced_notes

    content = b"s" * 5000
    monkeypatch.setattr(memory_snapshot.SnapshotTask, "_copy", lambda self: None)
    monkeypatch.setattr(memory_snapshot.SnapshotTask, "encode", lambda self: content)
    monkeypatch.setattr(threads, "start", lambda target, name: False)  # the hand-over runs here
    rank_dir = tmp_path / "w_1_20250101000000000_ascend_pt"
    rank_dir.mkdir()
    monkeypatch.setattr(
        os, "statvfs", lambda path: SimpleNamespace(f_bavail=10 * MIB + room, f_frsize=1, f_blocks=1 << 30)
    )
    lines: list[str] = []
    prof = SimpleNamespace(
        profiler=SimpleNamespace(kineto_results=SimpleNamespace(experimental_event_tree=lambda: []))
    )
    path = rank_dir / memory_snapshot.SNAPSHOT_FILE
    task = memory_snapshot.SnapshotTask(prof, path, lines.append, "10MiB")
    record = {"status": "complete", "extras": [path.name]}
    exports = {"memory_snapshot": path.name, "memory_formats": ["json"], memory_snapshot.TASK_KEY: task}
    read_end, write_end = os.pipe()
    handover = postprocess._Handover(OwnedFd(write_end))
    sent: list[Any] = []
    handover._write = lambda job: sent.append(job) or True  # type: ignore[method-assign,func-returns-value]
    try:
        handover.put({"rank_dir": str(rank_dir), "exports": exports, "record": record})
    finally:
        os.close(read_end)
    (job,) = sent
    if room > MIB:
        assert path.read_bytes() == content and lines == []
        assert job["exports"]["memory_snapshot"] == path.name and job["record"]["extras"] == [path.name]
        return
    assert not path.exists() and not list(rank_dir.iterdir())
    assert job["exports"]["memory_snapshot"] is None and job["record"]["extras"] == [], job
    (note,) = not_produced_notes([f"[WARNING] [agent pid=1] {line}" for line in lines])
    assert note == (
        f"memory_timeline.* not produced ({rank_dir.name}): its memory snapshot was not written (it needs "
        "about 4.9 KiB, only 100 B is free above what must stay free: that would leave less than "
        f"--min-free-space (10.0 MiB)); fix: npuprof memory-timeline {rank_dir} -o memory.html (from the "
        "trace, no categories)"
    )


def _stacks_said_not_produced(stacks: Path, notes: list[str], where: str, rank_dir: Path) -> None:
    """The stacks file left out, said in the second note with its fix."""
    assert not stacks.exists() and len(notes) == 2, notes
    assert notes[1].startswith(f"stacks_self_cpu_time_total.folded not produced {where}"), notes
    assert f"fix: npuprof export-stacks {rank_dir} --metric self_cpu_time_total" in notes[1], notes
