"""One report covers one run (npuprof/analysis/runs.py): a directory holding the captures of several runs is
reported on the latest (or --run ID, or --run all), and nothing is written into the runs left out; the
parts of one job (the nodes of a multi-node job, npuprof started inside torchrun) stay one run."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from _forked_cli import npuprof  # report commands forked from a process that imported them: see its doc
from analyse_support.handmade import cpu_trace, write_rank_dir
from conftest import clean_env

from npuprof.analysis.report import cross_ranges
from npuprof.analysis.report_schema import ReportRange


def _capture(root: Path, rank: int | None, run_id: str, step_us: int, began: float) -> Path:
    """A finished capture of step 7 lasting ``step_us``, recorded by run ``run_id`` from ``began`` (epoch
    s) for a second: its directory named by that time, as npuprof and torch_npu name them."""
    trace = cpu_trace()
    (step,) = [e for e in trace["traceEvents"] if e.get("name") == "ProfilerStep#7"]
    step["dur"] = step_us
    if rank is None:
        del trace["distributedInfo"]
    else:
        trace["distributedInfo"]["rank"] = rank
    stamp = time.strftime("%Y%m%d%H%M%S", time.localtime(began)) + "000"
    rank_dir = write_rank_dir(root, trace, rank=rank, name=f"host_{rank}{run_id[:4]}_{stamp}")
    record = {
        "status": "complete",
        "run_id": run_id,
        "rank": rank,
        "steps": [7],
        "updated_ns": int((began + 1) * 1e9),
    }
    (rank_dir / "npuprof_capture.json").write_text(json.dumps(record))
    return rank_dir


T0 = time.time() - 86_400  # a day ago


def _report(*args: str) -> tuple[dict, str]:
    proc = npuprof("analyse", *args, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stderr


def _steps(report: dict) -> dict[int | None, float]:
    return {r["rank"]: r["steps"][0]["duration_us"] for r in report["ranks"]}


def test_two_runs_in_one_directory_are_reported_apart(tmp_path: Path) -> None:
    out = tmp_path / "npuprof_result"  # the default -o of every run started here
    old = [_capture(out, rank, "aaaa11112222", 2000, T0) for rank in (0, 1)]
    new = [_capture(out, rank, "bbbb33334444", 1500, T0 + 3600) for rank in (0, 1)]

    latest, said = _report(str(out), "--export-type", "db")
    assert _steps(latest) == {0: 1500.0, 1: 1500.0}  # not rank 0's step 7 of one run beside another's
    assert sorted(r["rank_dir"] for r in latest["ranks"]) == sorted(map(str, new))
    assert [s["step"] for s in latest["cross_rank"]["steps"]] == [7]
    assert "holds the captures of 2 runs" in said and "aaaa11112222: 2 rank dirs" in said, said
    listed = said.split("the others:", 1)[1]  # the run reported is named once, in the head, not listed again
    assert listed.startswith("\n  aaaa11112222: 2 rank dirs"), said  # a line of its own (helper-109: "\x0a")
    assert "aaaa11112222" in listed and "bbbb33334444" not in listed, said
    assert all((d / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db").parent.exists() for d in new)
    for rank_dir in old:  # the run left out is not written into (no tables, no db)
        assert not (rank_dir / "ASCEND_PROFILER_OUTPUT").exists()

    older, _ = _report(str(out), "--run", "aaaa")  # a prefix, as git takes
    assert _steps(older) == {0: 2000.0, 1: 2000.0}
    pooled, said = _report(str(out), "--run", "all")
    assert len(pooled["ranks"]) == 4 and "--run all" in said

    wrong = npuprof("analyse", str(out), "--run", "cccc")
    assert wrong.returncode == 2, wrong.stderr
    assert wrong.stderr.strip().splitlines() == [
        "npuprof analyse: error: --run: no run 'cccc' here (runs: aaaa11112222, bbbb33334444); or --run all"
    ]


def test_the_parts_of_one_job_stay_one_run(tmp_path: Path) -> None:
    """Two nodes' results copied side by side (a launcher, so a run id, per node; ranks 0-1 and 2-3), and
    npuprof started inside torchrun (a run id per worker, one directory); a single-process run beside
    them is a run of its own."""
    job = tmp_path / "job"
    for rank in (0, 1):
        _capture(job / "node0", rank, "node0run0000", 1000, T0)
    for rank in (2, 3):
        _capture(job / "node1", rank, "node1run0000", 1200, T0 + 0.4)  # clocks a little apart
    report, said = _report(str(job))
    assert _steps(report) == {0: 1000.0, 1: 1000.0, 2: 1200.0, 3: 1200.0}
    assert report["cross_rank"]["steps"][0]["ranks"] == {"0": 1000.0, "1": 1000.0, "2": 1200.0, "3": 1200.0}
    assert "runs" not in said, said

    inside = tmp_path / "inside"
    for rank in (0, 1):
        _capture(inside, rank, f"worker{rank}0000", 1000 + rank, T0)
    _capture(inside, None, "single000000", 3000, T0 + 60)
    latest, said = _report(str(inside))
    assert _steps(latest) == {None: 3000.0} and "holds the captures of 2 runs" in said
    both, _ = _report(str(inside), "--run", "worker0")
    assert _steps(both) == {0: 1000.0, 1: 1001.0}


def test_jobs_one_after_the_other_are_not_pooled_even_when_their_ranks_are_apart(tmp_path: Path) -> None:
    """In one -o: job A inside torchrun (a run id per worker), job B with --ranks 0 (rank 0 only), job C
    as A; then two jobs around torchrun, one with --ranks 0, the next with --ranks 1. Ranks that do not
    overlap are not enough: B's rank 0 and C's rank 1 are not a run."""
    out = tmp_path / "tin"
    for job, began in (("A", T0), ("B", T0 + 30), ("C", T0 + 60)):
        for rank in (0,) if job == "B" else (0, 1):
            _capture(out, rank, f"{job}{rank}{job * 10}", 1000 + 10 * rank, began)
    latest, said = _report(str(out))
    assert sorted(_steps(latest)) == [0, 1] and "holds the captures of 3 runs" in said, said
    assert "B0BBBBBBBBBB: 1 rank dir" in said, said
    only_b, _ = _report(str(out), "--run", "B0")
    assert list(_steps(only_b)) == [0]

    split = tmp_path / "tr"
    _capture(split, 0, "first0000000", 1000, T0)
    _capture(split, 1, "second000000", 1500, T0 + 30)
    report, said = _report(str(split))
    assert _steps(report) == {1: 1500.0} and "holds the captures of 2 runs" in said, said


def test_a_range_over_two_captures_of_one_process_is_on_one_rank() -> None:
    def totals(t: float) -> list[ReportRange]:
        return [ReportRange(name="fwd", kind="range", count=2, total_us=t, mean_us=t / 2, max_us=t)]

    (one,) = cross_ranges([(None, totals(10.0)), (None, totals(30.0))], top=5)
    assert (one.ranks, one.count, one.total_us, one.max_rank) == (1, 4, 40.0, None)
    (two,) = cross_ranges([(0, totals(10.0)), (1, totals(30.0)), (0, totals(5.0))], top=5)
    assert (two.ranks, two.count, two.max_rank) == (2, 6, 1)


def test_run_on_a_trace_file_is_a_usage_error(tmp_path: Path) -> None:
    rank_dir = _capture(tmp_path, 0, "aaaa11112222", 1000, T0)
    trace = next(rank_dir.glob("*.pt.trace.json"))
    wrong = npuprof("analyse", str(trace), "--run", "aaaa")
    assert wrong.returncode == 2 and "--run picks a run of a directory" in wrong.stderr, wrong.stderr


def test_a_later_run_that_wrote_no_capture_is_named(tmp_path: Path) -> None:
    """The default report is of the latest run with captures; a run recorded after it that wrote none
    (too few steps, a crash) is named, so the older table is not taken for the newer run's."""
    write_rank_dir(tmp_path, cpu_trace())
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(time.time() + 60))  # after the capture
    later = tmp_path / "npuprof_run.20261202121940858.11001.json"
    later.write_text(json.dumps({"run_id": "3cac53e7a1fa", "start": started, "exit_code": 1, "captures": []}))
    # a run that began while the reported one recorded is a part of its job (npuprof inside torchrun, --ranks
    # leaving one worker without a capture), not a later run
    during = tmp_path / "npuprof_run.20261202121940858.11002.json"
    began = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    during.write_text(json.dumps({"run_id": "4cac53e7a1fa", "start": began, "exit_code": 0, "captures": []}))
    earlier = tmp_path / "npuprof_run.json"
    earlier.write_text(json.dumps({"run_id": "0123456789ab", "captures": []}))
    os.utime(earlier, ns=(1, 1))  # recorded long before the capture: not a later run
    result = npuprof("analyse", str(tmp_path), env=clean_env())
    assert result.returncode == 0, result.stderr
    notes = [line for line in result.stderr.splitlines() if "wrote no capture" in line]
    assert notes == [
        f"npuprof analyse: note: a later run here, 3cac53e7a1fa (started {started}, exit code 1), wrote no "
        f"capture (see {later.name} and npuprof.log); this report is of an earlier run"
    ], result.stderr


def test_a_run_started_right_after_the_reported_one_ended_is_named_though_within_seconds(
    tmp_path: Path,
) -> None:
    """helper-267: two runs one after the other into one -o (a script's `npuprof run ...; npuprof run ...`,
    the second left without a capture): the second began within a second of the first's last capture, and
    was taken for a part of its job (as a worker's npuprof inside torchrun is), the first's table reported
    with no word of it. A run that began after the reported run's npuprof had ended (its record's last
    write; the later run's record name holds its start to the ms) is a later one; one that began before,
    a part."""
    host = os.uname().nodename
    now = time.time()

    def iso(t: float) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(t))

    def record(name: str, content: dict, written: float) -> Path:
        path = tmp_path / name
        path.write_text(json.dumps({"host": host, "exit_code": 0, **content}))
        os.utime(path, ns=(int(written * 1e9), int(written * 1e9)))
        return path

    def stamped(t: float, pid: int) -> str:
        seconds = time.strftime("%Y%m%d%H%M%S", time.localtime(t))
        return f"npuprof_run.{seconds}{int(t * 1000) % 1000:03d}.{pid}.json"

    rank_dir = _capture(tmp_path, None, "aaaa11112222", 2000, now - 1)  # its last write: now
    captures = [{"rank_dir": str(rank_dir)}]
    record(
        "npuprof_run.json",
        {"run_id": "aaaa11112222", "start": iso(now - 5), "end": iso(now), "captures": captures},
        now,
    )
    later = record(
        stamped(now + 0.6, 901),
        {"run_id": "bbbb11112222", "start": iso(now + 0.6), "end": iso(now + 2), "captures": []},
        now + 2,
    )
    record(
        stamped(now - 1, 902),
        {"run_id": "cccc11112222", "start": iso(now - 1), "end": iso(now + 1), "captures": []},
        now + 2,
    )
    result = npuprof("analyse", str(tmp_path), env=clean_env())
    assert result.returncode == 0, result.stderr
    notes = [line for line in result.stderr.splitlines() if "wrote no capture" in line]
    assert notes == [
        f"npuprof analyse: note: a later run here, bbbb11112222 (started {iso(now + 0.6)}, exit code 0), "
        f"wrote no capture (see {later.name} and npuprof.log); this report is of an earlier run"
    ], result.stderr


def test_a_run_whose_npuprof_was_killed_is_said_to_have_no_known_exit_code(tmp_path: Path) -> None:
    """kill -9 of npuprof leaves its run record without an end: the report of that run says the job's exit
    code is not known; once the record has its end, the note is gone."""
    out = tmp_path / "npuprof_result"
    _capture(out, 0, "dead11112222", 2000, T0)
    finished = subprocess.Popen(["true"])
    finished.wait()
    record = {
        "run_id": "dead11112222",
        "host": os.uname().nodename,
        "launcher_pid": finished.pid,
        "start": "2026-12-01T10:00:00+0000",
        "end": None,
        "exit_code": None,
        "captures": [],
    }
    (out / "npuprof_run.json").write_text(json.dumps(record))
    _report_json, said = _report(str(out))
    notes = [line for line in said.splitlines() if "no end" in line]
    assert notes == [
        "npuprof analyse: note: run dead11112222's npuprof ended without recording how the job ended "
        "(npuprof_run.json has no end: it was killed, its machine went down, or its disk was full): the "
        "job's exit code is not known"
    ], said
    (out / "npuprof_run.json").write_text(
        json.dumps({**record, "end": "2026-12-01T10:01:00+0000", "exit_code": 0})
    )
    assert "no end" not in _report(str(out))[1]
    # a run of another host that has no end may be going on there: it was said both killed and going
    (out / "npuprof_run.json").write_text(json.dumps({**record, "host": "another-node.example"}))
    said = _report(str(out))[1]
    assert "no end" not in said and "run dead11112222 is still going (its run has not ended on" in said, said


def test_a_link_planted_as_the_elsewhere_notes_is_not_followed(tmp_path: Path) -> None:
    from npuprof.results import layout

    out, planted = tmp_path / "out", tmp_path / "planted"
    out.mkdir()
    planted.mkdir()
    (out / layout.ELSEWHERE_DIR).symlink_to(planted)
    try:
        layout.note_capture_root(out, "abcdef123456", tmp_path / "other")
    except OSError:
        pass
    assert list(planted.iterdir()) == []
    (planted / "abcdef123456.h.1").write_text(f"{tmp_path / 'other'}\n")
    assert layout.capture_roots(out, "abcdef123456") == []


def test_a_capture_into_a_prof_dir_below_the_output_is_the_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--dynamic with a relative prof_dir (`sub`): its captures, below -o, were not noted, and the run's
    summary, which looks into -o itself, said "no capture was written"; analyse of -o reports them and
    sends nobody to analyse -o/sub apart."""
    from test_export_type import _Backend, _NoAnnotations, _Post

    from npuprof.agent import capture
    from npuprof.agent.log import AgentLog
    from npuprof.analysis.report import build_report
    from npuprof.config import ProfileConfig
    from npuprof.results.run_record import captures_of_run

    monkeypatch.setattr(capture, "CaptureAnnotations", _NoAnnotations)  # marks are process-wide state
    out, sub = tmp_path / "out", tmp_path / "out" / "sub"
    out.mkdir()  # made by npuprof run
    cfg, request = ProfileConfig(output=str(out)).validate(), ProfileConfig(output=str(sub)).validate()
    run = {"run_id": "abcdef123456", "output": str(out)}
    backend, log = _Backend(False, sub), AgentLog(None, "t")
    writer = capture.CaptureWriter(cfg, run, backend, log, lambda: 0, "w", _Post())
    writer.begin(3, request)
    writer.finish(None, 4)
    found = captures_of_run(out, "abcdef123456")
    assert [(c.rank_dir.parent, c.steps, c.status) for c in found] == [(sub, [3, 4], "complete")]
    (trace,) = found[0].rank_dir.glob("*.pt.trace.json")
    trace.write_text(json.dumps(cpu_trace()))
    notes: list[str] = []
    report = build_report(out, jobs=1, on_note=notes.append)
    assert [r.rank_dir for r in report.ranks] == [str(found[0].rank_dir)]
    assert not [note for note in notes if "also captured into" in note], notes


def test_a_dynamic_capture_skipped_for_space_is_recorded_in_its_own_prof_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A --dynamic request skipped for lack of space left its record in the last capture's prof_dir (-o at
    first): `npuprof status` / `analyse` of the request's prof_dir found nothing there. It lands in the
    request's prof_dir now, once for each, which the run notes in -o as it does its captures'."""
    from test_export_type import _Backend, _NoAnnotations, _Post

    from npuprof.agent import capture
    from npuprof.agent.log import AgentLog
    from npuprof.config import ProfileConfig
    from npuprof.results import layout
    from npuprof.results.run_record import captures_of_run

    monkeypatch.setattr(capture, "CaptureAnnotations", _NoAnnotations)  # marks are process-wide state
    out, first, full = tmp_path / "out", tmp_path / "first", tmp_path / "full" / "prof"
    out.mkdir()  # made by npuprof run
    cfg, request = ProfileConfig(output=str(out)).validate(), ProfileConfig(output=str(first)).validate()
    run = {"run_id": "abcdef123456", "output": str(out)}
    writer = capture.CaptureWriter(
        cfg, run, _Backend(False, first), AgentLog(None, "t"), lambda: 0, "w", _Post()
    )
    why = f"capture at step 9 skipped: only 400.0 KiB free at {full}, below --min-free-space (1.0 MiB)"
    writer.skipped(2, why.replace("step 9", "step 2"), str(out))  # a request into -o, before any capture
    writer.begin(3, request)
    writer.finish(None, 4)
    writer.skipped(9, why, str(full))
    writer.skipped(12, why.replace("step 9", "step 12"), str(full))  # said once for each directory
    by_dir = {(c.rank_dir.parent, tuple(c.steps), c.status) for c in captures_of_run(out, "abcdef123456")}
    assert by_dir == {(out, (2,), "incomplete"), (first, (3, 4), "complete"), (full, (9,), "incomplete")}
    (skipped,) = layout.find_rank_dirs(full, levels=1)
    assert layout.read_capture_record(skipped)["detail"] == why  # what status and analyse show of it
    assert len(layout.find_rank_dirs(first, levels=1)) == 1


def _skipping_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, read_only: set[Path]
) -> tuple[Any, list[str]]:
    """A capture writer whose run's -o is ``tmp_path/out``, the directories ``read_only`` refusing a rank
    dir as a read-only filesystem does (root writes into a 0o555 directory); and its log."""
    import errno

    from test_export_type import _Backend, _NoAnnotations, _Post

    from npuprof.agent import capture
    from npuprof.agent.log import AgentLog
    from npuprof.config import ProfileConfig
    from npuprof.results import layout

    monkeypatch.setattr(capture, "CaptureAnnotations", _NoAnnotations)  # marks are process-wide state
    new_rank_dir = layout.new_rank_dir

    def refused_where_read_only(output: Path, worker: str) -> Path:
        if Path(output) in read_only:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(output))
        return new_rank_dir(output, worker)

    monkeypatch.setattr(layout, "new_rank_dir", refused_where_read_only)
    out = tmp_path / "out"
    out.mkdir()
    log = AgentLog(None, "t")
    lines: list[str] = []
    monkeypatch.setattr(log, "warning", lines.append)
    monkeypatch.setattr(log, "error", lines.append)
    cfg = ProfileConfig(output=str(out)).validate()
    run = {"run_id": "abcdef123456", "output": str(out)}
    writer = capture.CaptureWriter(cfg, run, _Backend(False, out), log, lambda: 0, "w", _Post())
    return writer, lines


def test_a_capture_skipped_into_a_read_only_prof_dir_is_recorded_in_the_runs_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A --dynamic request's prof_dir on a read-only filesystem (its free space 0: skipped for space) logged
    "could not record the skipped capture": stderr and status said the skip, the record was lost. It goes
    into the run's -o now, which the run's summary and analyse of -o read, naming the prof_dir and why."""
    from npuprof.results import layout
    from npuprof.results.run_record import captures_of_run

    read_only = tmp_path / "ro" / "prof"
    read_only.mkdir(parents=True)
    writer, lines = _skipping_writer(tmp_path, monkeypatch, {read_only})
    why = f"capture at step 9 skipped: only 0 B free at {read_only}, below --min-free-space (1.0 MiB)"
    writer.skipped(9, why, str(read_only))
    out = tmp_path / "out"
    (skip,) = captures_of_run(out, "abcdef123456")
    assert (skip.rank_dir.parent, skip.steps, skip.status) == (out, [9], "incomplete")
    detail = layout.read_capture_record(skip.rank_dir)["detail"]
    assert detail == f"{why}; recorded here: {read_only} cannot be written (Read-only file system)"
    assert lines == [
        f"the capture skipped at step 9 is recorded in {skip.rank_dir}: {read_only} cannot be written "
        "(Read-only file system)"
    ]
    assert list(read_only.iterdir()) == []


def test_a_skip_no_directory_takes_says_its_log_line_is_its_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """-o read-only too: nothing is left but the log's line, which holds what the record would have."""
    out = tmp_path / "out"
    read_only = tmp_path / "ro"
    writer, lines = _skipping_writer(tmp_path, monkeypatch, {read_only, out})
    why = f"capture at step 4 skipped: only 0 B free at {read_only}, below --min-free-space (1.0 MiB)"
    writer.skipped(4, why, str(read_only))
    assert lines == [
        f"the capture skipped at step 4 has no record but this line: {read_only} cannot be written "
        f"(Read-only file system), nor {out} (Read-only file system); {why}"
    ]
    assert list(out.iterdir()) == []


def test_ranks_whose_step_started_far_apart_are_said_to_be_of_different_runs(tmp_path: Path) -> None:
    """Trace files of two runs left in one directory (a reused log dir): step 7 of rank 1 started 20 s
    after rank 0's, a 1 ms step; the report compared them without a word."""
    for gap_ns, root in ((20 * 10**9, tmp_path / "apart"), (200_000, tmp_path / "together")):
        for rank in (0, 1):
            trace = cpu_trace()
            trace["distributedInfo"]["rank"] = rank
            trace["baseTimeNanoseconds"] = 1_700_000_000_000_000_000 + rank * gap_ns
            root.mkdir(exist_ok=True)
            (root / f"w{rank}.pt.trace.json").write_text(json.dumps(trace))
        done = npuprof("analyse", str(root), "-j", "1")
        assert done.returncode == 0, done.stderr
        said = " ".join(done.stderr.split())
        if root.name == "apart":
            assert "step 7 started 20000 ms later on rank 1 than on rank 0" in said
            assert "likely of different runs" in said
        else:
            assert "different runs" not in said


def test_a_capture_the_run_record_lists_and_that_is_gone_is_named(tmp_path: Path) -> None:
    """rank 1's directory deleted: analyse reported rank 0 alone, with no word of the rank it lacks. The
    run's record lists its captures; one of its output directory that is not there is named; a capture of a
    --dynamic prof_dir elsewhere is not; the same directory moved elsewhere whole lacks nothing."""
    out = tmp_path / "result"
    kept = _capture(out, 0, "aaaa11112222", 2000, T0)
    gone = _capture(out, 1, "aaaa11112222", 2000, T0)
    captures = [{"rank_dir": str(d), "rank": r, "status": "complete"} for r, d in ((0, kept), (1, gone))]
    captures.append({"rank_dir": "/elsewhere/h_9_20250101000000000_ascend_pt", "rank": 2})  # a prof_dir
    record = {"run_id": "aaaa11112222", "config": {"output": str(out)}, "captures": captures, "end": None}
    (out / "npuprof_run.json").write_text(json.dumps(record))
    import shutil

    moved = tmp_path / "moved"
    shutil.copytree(out, moved)  # whole, before the deletion below
    shutil.rmtree(gone)
    report, said = _report(str(out))
    assert [r["rank"] for r in report["ranks"]] == [0]
    assert (
        f"run aaaa11112222's record lists 1 capture(s) that are not here (deleted or moved?), left out of "
        f"this report: rank 1 ({gone.name})"
    ) in " ".join(said.split()), said
    _, said = _report(str(moved))
    assert "not here" not in said, said


def test_the_run_summary_names_a_run_only_where_analyse_would_report_another(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """helper-109: npuprof started inside torchrun is a launcher and run id per worker; each worker's summary
    ended with `--run` and its own id, as if its report covered its rank alone, where analyse reports the
    workers as one run. The summary names its run only when analyse, given the directory, would report
    another one: here once a later run recorded into it."""
    from npuprof.config import ProfileConfig
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import CaptureSummary

    out = tmp_path / "res"
    workers = {
        rank: _capture(out, rank, run_id, 1500, T0) for rank, run_id in ((0, "aaaa1111"), (1, "bbbb2222"))
    }
    for name, run_id in (("npuprof_run.json", "aaaa1111"), ("npuprof_run.1.json", "bbbb2222")):
        (out / name).write_text(json.dumps({"run_id": run_id, "captures": []}))

    def next_line(rank: int, run_id: str) -> list[str]:
        capture = CaptureSummary(workers[rank], "complete", rank, 7, [7], 1000, "", True)
        print_run_summary(out, [capture], 0, ProfileConfig(), out / "npuprof.log", run_id=run_id)
        (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("next:")]
        return line.split()[3:]

    assert next_line(0, "aaaa1111")[:2] == [str(out), "(exit"]
    assert next_line(1, "bbbb2222")[:2] == [str(out), "(exit"]
    _capture(out, 0, "cccc3333", 1500, T0 + 3600)  # a later run into the same directory
    assert next_line(1, "bbbb2222")[:3] == [str(out), "--run", "bbbb2222"]


def test_the_directory_a_dynamic_job_watches_is_named_as_such(tmp_path: Path) -> None:
    """helper-130: `npuprof run --dynamic cfg` then `npuprof analyse cfg` (the directory the user typed) said
    only "no rank directory (a capture) under cfg": the captures are in the run's output, which it names."""
    from npuprof.agent.dynamic_files import CONFIG_NAME, LOG_DIR

    cfg = tmp_path / "cfg"
    (cfg / LOG_DIR).mkdir(parents=True)
    (cfg / CONFIG_NAME).write_text("{}")
    env = clean_env(PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    result = npuprof("analyse", str(cfg), env=env)
    assert result.returncode == 1 and len(result.stderr.splitlines()) == 1, result.stderr
    assert "the directory npuprof run --dynamic watches" in result.stderr, result.stderr
    assert f"npuprof status {cfg}" in result.stderr and "npuprof_result" in result.stderr, result.stderr


def test_a_rank_dirs_own_trace_is_analysed_as_its_rank_dir(tmp_path: Path) -> None:
    """helper-248: `npuprof analyse <rank dir>/<its .pt.trace.json.gz>` (or its tables' trace_view.json)
    read the file as a bare trace: the capture's record went unread, so the step the job died in (SIGTERM)
    counted whole in the mean step time, and the trace's tables were written into the rank dir
    (`<trace>.npuprof/`). The rank dir is analysed, and a note says so, as for its tables' folder."""
    from analyse_support.handmade import with_steps

    from npuprof.analysis.report import build_report
    from npuprof.results import layout

    durations = {7: 1000, 8: 5000}  # step 8: cut short by SIGTERM, its length no step's
    rank_dir = write_rank_dir(tmp_path, with_steps(cpu_trace(), durations), rank=0)
    record = {"status": "complete", "run_id": "r1", "rank": 0, "steps": [7, 8], "last_step_partial": True}
    (rank_dir / layout.CAPTURE_RECORD).write_text(json.dumps({**record, "detail": "stopped by SIGTERM"}))
    (trace,) = rank_dir.glob("*.pt.trace.json")
    notes: list[str] = []
    report = build_report(trace, jobs=1, on_note=notes.append)
    (rank,) = report.ranks
    assert [(s.step, s.partial is True) for s in rank.steps] == [(7, False), (8, True)]
    assert rank.step_time_mean_us == durations[7]
    assert notes == [f"{trace} is the trace of the rank directory {rank_dir}: that is analysed"]
    assert not list(rank_dir.glob("*.npuprof"))  # nothing of a bare trace's written into the rank dir
    view = rank_dir / layout.PARSED_DIR / layout.PARSED_TRACE  # the tables' trace, once parsed
    assert view.is_file()
    notes.clear()
    assert build_report(view, jobs=1, on_note=notes.append).ranks[0].step_time_mean_us == durations[7]
    assert notes == [f"{view} is the trace of the rank directory {rank_dir}: that is analysed"]
    # a trace beside the rank dirs, none's own, is still a bare trace
    loose = tmp_path / "loose.pt.trace.json"
    loose.write_text(trace.read_text())
    assert build_report(loose, jobs=1).ranks[0].step_time_mean_us == (durations[7] + durations[8]) / 2


def test_a_partial_steps_reason_says_it_is_partial_once(tmp_path: Path) -> None:
    """helper-258: a capture of `--repeat 0` cut by the job's end, whose record's detail has a note after
    "step 40 is partial" (the post-processor ran during it), was reported as "step 40 is partial
    (training ended ...; step 40 is partial; the post-processor ran ...)": the clause is left out wherever
    it sits, the notes kept."""
    import io

    from analyse_support.handmade import with_steps
    from rich.console import Console

    from npuprof.analysis.report import build_report
    from npuprof.reports import terminal
    from npuprof.results import layout

    rank_dir = write_rank_dir(tmp_path, with_steps(cpu_trace(), {39: 1000, 40: 5000}), rank=0)
    ended = "training ended before the capture's last step"
    late = "the post-processor ran during this capture"
    for detail in (f"{ended}; step 40 is partial; {late}", "step 40 is partial"):
        record = {"status": "complete", "rank": 0, "steps": [39, 40], "last_step_partial": True}
        (rank_dir / layout.CAPTURE_RECORD).write_text(json.dumps({**record, "detail": detail}))
        out = io.StringIO()
        terminal.render_table(build_report(tmp_path, jobs=1), Console(file=out, width=400))
        said = " ".join(out.getvalue().split())
        assert said.count("step 40 is partial") == 1, said
        expected = f"({ended}; {late})" if ended in detail else "(the capture ended during it)"
        assert f"step 40 is partial {expected}: left out of the mean step time" in said, said
