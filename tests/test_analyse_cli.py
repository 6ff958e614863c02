"""`npuprof analyse` end to end on real CPU captures (1 process and 2 torchrun gloo ranks)."""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _forked_cli import npuprof  # report commands forked from a process that imported them: see its doc
from analyse_support.handmade import cpu_trace, write_rank_dir
from conftest import clean_env, run_trainer, sched


@pytest.fixture(scope="session")
def two_ranks(torchrun_capture: Path, tmp_path_factory) -> Path:
    copy = tmp_path_factory.mktemp("two_ranks") / "out"
    shutil.copytree(torchrun_capture, copy)
    return copy


@pytest.fixture(scope="session")
def one_rank(torchrun_capture: Path, tmp_path_factory) -> Path:
    """A directory holding one real CPU capture alone: rank 0 of the session's torchrun capture (its trace
    plain: rank 1's is gzipped), a copy. Its own capture process (a torch import, ~3 CPU-s) gave the tests
    that read it nothing that capture has not."""
    (rank0,) = [d for d in torchrun_capture.glob("*_ascend_pt") if (d / "profiler_info_0.json").is_file()]
    assert list(rank0.glob("*.pt.trace.json")), sorted(p.name for p in rank0.iterdir())
    copy = tmp_path_factory.mktemp("single") / "out"
    copy.mkdir()
    shutil.copytree(rank0, copy / rank0.name)
    return copy


def _union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def _length_inside(spans: list[tuple[float, float]], lo: float, hi: float) -> float:
    return sum(max(0.0, min(b, hi) - max(a, lo)) for a, b in spans)


def _raw_trace(rank_dir: Path) -> dict:
    (raw,) = rank_dir.glob("*.pt.trace.json*")
    opener = gzip.open if raw.name.endswith(".gz") else open
    with opener(raw, "rt") as handle:
        return json.load(handle)


def breakdown_from_raw_trace(rank_dir: Path) -> dict[int, dict[str, float]]:
    """The CPU step breakdown worked out from the raw trace with plain json and Python loops (not
    npuprof's reader): computing = the step thread's operators other than collective calls, communication
    = the gloo worker threads' spans and the step thread's collective calls (where it waits for them),
    exposed = communication outside computing."""
    events = _raw_trace(rank_dir)["traceEvents"]
    steps = {
        int(e["name"].split("#")[1]): e
        for e in events
        if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")
    }
    step_threads = {(e["pid"], e["tid"]) for e in steps.values()}
    collective_call = ("c10d::", "record_param_comms", "gloo:", "nccl:")
    compute = _union(
        [
            (e["ts"], e["ts"] + e["dur"])
            for e in events
            if e.get("ph") == "X"
            and e.get("cat") == "cpu_op"
            and (e["pid"], e["tid"]) in step_threads
            and not e["name"].startswith(collective_call)
        ]
    )
    comm = _union(
        [
            (e["ts"], e["ts"] + e["dur"])
            for e in events
            if e.get("ph") == "X"
            and (
                e["name"].startswith("gloo:")
                or (
                    e.get("cat") == "cpu_op"
                    and (e["pid"], e["tid"]) in step_threads
                    and e["name"].startswith(collective_call)
                )
            )
        ]
    )
    out = {}
    for num, e in steps.items():
        lo, hi = e["ts"], e["ts"] + e["dur"]
        computing = _length_inside(compute, lo, hi)
        busy = _length_inside(_union(compute + comm), lo, hi)
        out[num] = {
            "duration_us": hi - lo,
            "computing_us": computing,
            "communication_us": _length_inside(comm, lo, hi),
            "comm_not_overlapped_us": busy - computing,
        }
    return out


REPORT_KEYS = {"version", "path", "steps_filter", "ranks", "problems", "cross_rank"}
RANK_KEYS = {
    "rank",
    "rank_dir",
    "status",
    "device",
    "trace",
    "steps",
    "step_time_mean_us",
    "top_operators",
    "top_kernels",
    "memory_peak_mb",
    "memory_peak_reserved_mb",
    "communication",
    "time_base_ns",  # Kineto's baseTimeNanoseconds: the steps' start_us count from it
}
STEP_KEYS = {
    "step",
    "start_us",
    "duration_us",
    "computing_us",
    "communication_us",
    "comm_not_overlapped_us",
    "overlapped_us",
    "free_us",
    "bubble_us",
    "preparing_us",
    "memory_peak_mb",
    "memory_peak_reserved_mb",
}


@pytest.mark.torchrun
def test_two_ranks_json_schema(two_ranks: Path) -> None:
    proc = npuprof("analyse", str(two_ranks), "--format", "json", "--top", "5", "-j", "2")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert set(report) == REPORT_KEYS and report["problems"] == []
    assert [r["rank"] for r in report["ranks"]] == [0, 1]
    for r in report["ranks"]:
        assert set(r) == RANK_KEYS and r["device"] == "CPU"
        assert [s["step"] for s in r["steps"]] == [3, 4]
        assert r["time_base_ns"] == _raw_trace(Path(r["rank_dir"]))["baseTimeNanoseconds"]
        expected = breakdown_from_raw_trace(Path(r["rank_dir"]))
        for s in r["steps"]:
            assert set(s) == STEP_KEYS
            want = expected[s["step"]]
            for key in ("duration_us", "computing_us", "communication_us", "comm_not_overlapped_us"):
                assert s[key] == pytest.approx(want[key], abs=0.002), (s["step"], key)
            assert s["communication_us"] > 0  # the gloo all-reduces
        assert 0 < len(r["top_operators"]) <= 5
        selfs = [o["self_us"] for o in r["top_operators"]]
        assert selfs == sorted(selfs, reverse=True)
        assert r["memory_peak_mb"] > 0 and r["communication"]["operators"] >= 6
    cross = report["cross_rank"]
    assert [s["step"] for s in cross["steps"]] == [3, 4]
    durations = {r["rank"]: {s["step"]: s["duration_us"] for s in r["steps"]} for r in report["ranks"]}
    for s in cross["steps"]:
        per_rank = {rank: steps[s["step"]] for rank, steps in durations.items()}
        assert s["ranks"] == {str(rank): us for rank, us in per_rank.items()}
        assert (s["max_us"], s["min_us"]) == (max(per_rank.values()), min(per_rank.values()))
    means = {rank: sum(steps.values()) / 2 for rank, steps in durations.items()}
    slowest = max(means, key=means.__getitem__)
    assert cross["slowest"]["rank"] == slowest, (means, cross["slowest"])
    assert cross["slowest"]["mean_step_us"] == pytest.approx(means[slowest], abs=0.001)
    # 2 ranks of 2 shared steps: too few for either to be an outlier (at least 5 steps for 2 ranks)
    assert cross["slowest"]["outlier"] is False
    assert len(cross["start_skew"]) == 2
    for rank_dir in two_ranks.glob("*_ascend_pt"):
        out = rank_dir / "ASCEND_PROFILER_OUTPUT"
        for name in (
            "trace_view.json",
            "kernel_details.csv",
            "operator_details.csv",
            "op_statistic.csv",
            "step_trace_time.csv",
            "communication.json",
            "communication_matrix.json",
            "memory_record.csv",
            "operator_memory.csv",
            "analyse.done",
        ):
            assert (out / name).is_file(), name
        comm = json.loads((out / "communication.json").read_text())
        assert set(comm) == {"step3", "step4"}
        assert all("Total Op Info" in comm[s]["collective"] for s in comm)
        assert isinstance(json.loads((out / "trace_view.json").read_text()), list)  # torch_npu's bare array


@pytest.mark.torchrun
def test_steps_filter_csv_and_table(two_ranks: Path) -> None:
    proc = npuprof("analyse", str(two_ranks), "--format", "csv", "--steps", "4")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert [(r["rank"], r["step"]) for r in rows] == [("0", "4"), ("1", "4")]
    table = npuprof("analyse", str(two_ranks), "--top", "3")
    assert table.returncode == 0 and "slowest rank" in table.stdout and "top operators" in table.stdout
    assert "note:" not in proc.stderr
    none = npuprof("analyse", str(two_ranks), "--format", "csv", "--steps", "99")  # no rank has it
    assert (none.returncode, none.stdout) == (1, ""), none.stderr  # no empty table: one line, what there is
    assert none.stderr.splitlines() == [
        f"npuprof analyse: nothing to analyse: no step of --steps 99 in the 2 capture(s) of {two_ranks}: "
        "their steps are 3-4"
    ]
    # a range some captures have: the others are named in one line, however many they are
    some = npuprof("analyse", str(two_ranks), "--format", "json", "--steps", "3-99")
    assert some.returncode == 0 and "no step of" not in some.stderr
    asked = json.loads(some.stdout)
    assert (asked["steps_asked"], asked["steps_filter"]) == ("3-99", [3, 99])
    # an open end and a list: what is kept, and what the report says was asked (sorted, merged)
    opened = npuprof("analyse", str(two_ranks), "--format", "csv", "--steps", "4-")
    assert opened.returncode == 0, opened.stderr
    rows = list(csv.DictReader(io.StringIO(opened.stdout)))
    assert [(r["rank"], r["step"]) for r in rows] == [("0", "4"), ("1", "4")]
    listed = json.loads(npuprof("analyse", str(two_ranks), "--format", "json", "--steps", "4, 9,3").stdout)
    assert (listed["steps_asked"], listed["steps_filter"]) == ("3-4,9", None)
    assert [[s["step"] for s in r["steps"]] for r in listed["ranks"]] == [[3, 4], [3, 4]]
    bad = npuprof("analyse", str(two_ranks), "--steps", "4-3")
    assert (bad.returncode, bad.stdout) == (2, "")
    assert bad.stderr.splitlines() == [
        "npuprof analyse: error: Invalid value for --steps: '4-3': the range 4-3 ends before it starts; use "
        "e.g. 3, 3-5, 10- or 3,5,8-10; see npuprof analyse --help"
    ]
    # --csv-table picks a table of the csv format: alone it is a usage error, not ignored
    ranges = npuprof("analyse", str(two_ranks), "--format", "csv", "--csv-table", "ranges")
    assert ranges.returncode == 0 and ranges.stdout.splitlines()[0].startswith("rank,"), ranges.stdout[:200]
    # this capture has no marks: a header alone said nothing (helper-87)
    assert len(ranges.stdout.splitlines()) == 1, ranges.stdout
    assert "note: no ranges in these captures: the table holds npuprof.mark" in ranges.stderr, ranges.stderr
    alone = npuprof("analyse", str(two_ranks), "--csv-table", "ranges")
    assert alone.returncode == 2 and alone.stdout == ""
    assert alone.stderr.splitlines() == [
        "npuprof analyse: error: Invalid value for --csv-table: picks a table of --format csv: add --format "
        "csv (not table); see npuprof analyse --help"
    ]


def test_one_rank_bad_and_interrupted(one_rank: Path, tmp_path: Path) -> None:
    root = tmp_path / "mixed"
    shutil.copytree(one_rank, root / "good")
    good = next((root / "good").glob("*_ascend_pt"))
    bad = root / "bad" / "host_2_20250101000000000_ascend_pt"
    bad.mkdir(parents=True)
    raw = next(good.glob("*.pt.trace.json"))
    text = raw.read_bytes()  # cut inside its first event: nothing to read (a later cut is read up to it)
    (bad / raw.name).write_bytes(text[: text.index(b"{", text.index(b'"traceEvents"')) + 5])
    (bad / "profiler_info_1.json").write_text("{}")
    cut = write_rank_dir(root / "cut", cpu_trace(), rank=2)
    (cut / "npuprof_capture.json").write_text(json.dumps({"status": "capturing"}))
    for trace in cut.glob("*.pt.trace.json"):  # killed while it wrote: a whole trace means a finished capture
        trace.write_bytes(trace.read_bytes()[:-40])
    # three unrelated sources (a capture alone, foreign rank dirs): --run all reports them together
    proc = npuprof("analyse", str(root), "--format", "json", "--run", "all")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert len(report["ranks"]) == 1 and report["ranks"][0]["device"] == "CPU"
    problems = {Path(p["rank_dir"]).name: p for p in report["problems"]}
    assert problems[bad.name]["status"] == "truncated"
    assert problems[cut.name]["status"] == "incomplete" and "interrupted" in problems[cut.name]["reason"]
    assert bad.name in proc.stderr
    again = npuprof("analyse", str(root / "good"), "--format", "json")
    assert json.loads(again.stdout)["ranks"][0]["status"] == "cached"


def test_bare_trace_and_nothing(one_rank: Path, tmp_path: Path) -> None:
    raw = next(one_rank.glob("*/*.pt.trace.json"))
    bare = tmp_path / "x.pt.trace.json"
    shutil.copy(raw, bare)
    proc = npuprof("analyse", str(bare), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["ranks"][0]["steps"]
    assert (tmp_path / "x.pt.trace.json.npuprof" / "step_trace_time.csv").is_file()
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = npuprof("analyse", str(empty))
    assert nothing.returncode == 1 and "nothing to analyse" in nothing.stderr
    (tmp_path / "broken.pt.trace.json").write_text('{"traceEvents": [{"ph": "X"')
    broken = npuprof("analyse", str(tmp_path / "broken.pt.trace.json"))
    assert broken.returncode == 1 and "truncated" in broken.stderr
    flag = npuprof("analyse", str(empty), "--steps", "4-3")
    assert flag.returncode == 2 and "--steps" in flag.stderr


def test_a_bare_traces_tables_have_the_profiler_info_msprof_analyze_looks_for(tmp_path: Path) -> None:
    """msprof-analyze's advisor gave no Overall Summary of `<trace>.npuprof/`: it finds the profiling data by
    a file named profiler_info* below the folder it is given (advisor/analyzer/overall's get_profile_path),
    which a rank dir has and the bare trace's tables had not. They have one now; npuprof still reads the
    folder holding the trace as that one trace, never the tables folder as a capture of its own."""
    import os

    from npuprof.analysis.report import NothingToAnalyse, build_report

    bare = tmp_path / "x.pt.trace.json"
    bare.write_text(json.dumps(cpu_trace()))
    report = build_report(bare, jobs=1)
    tables = tmp_path / "x.pt.trace.json.npuprof"
    found = [
        root for root, _dirs, files in os.walk(tables) if any(f.startswith("profiler_info") for f in files)
    ]
    assert found == [str(tables)], sorted(p.name for p in tables.iterdir())
    again = build_report(tmp_path, jobs=1)
    assert [r.rank_dir for r in again.ranks] == [r.rank_dir for r in report.ranks] == [str(bare)], again.ranks
    assert not again.problems, again.problems
    with pytest.raises(NothingToAnalyse, match="holds the tables npuprof analyse made for"):
        build_report(tables, jobs=1)
    # tables an older npuprof made, read again as they are (cached): they get one too
    (tables / "profiler_info.json").unlink()
    assert build_report(bare, jobs=1).ranks[0].status == "cached"
    assert (tables / "profiler_info.json").is_file()


def test_tables_left_by_a_gunzipped_trace_are_no_capture_hiding_the_new_one(tmp_path: Path) -> None:
    """`npuprof analyse x.json.gz` wrote x.json.gz.npuprof/; the trace gunzipped (or renamed) since, its
    folder's profiler_info.json made it a capture of its own: the directory's report was the old tables',
    the trace now beside them (another run's, say) left out without a word."""
    from npuprof.analysis.report import build_report

    old = tmp_path / "x.pt.trace.json.gz"
    old.write_bytes(gzip.compress(json.dumps(cpu_trace()).encode()))
    assert [s.step for s in build_report(old, jobs=1).ranks[0].steps] == [7]
    old.unlink()
    new_trace = cpu_trace()
    for event in new_trace["traceEvents"]:
        if event["name"] == "ProfilerStep#7":
            event["name"] = "ProfilerStep#9"
    new = tmp_path / "x.pt.trace.json"
    new.write_text(json.dumps(new_trace))
    report = build_report(tmp_path, jobs=1)
    assert [(r.rank_dir, [s.step for s in r.steps]) for r in report.ranks] == [(str(new), [9])], report.ranks


def test_module_entry(tmp_path: Path) -> None:
    rank_dir = write_rank_dir(tmp_path, cpu_trace())
    cmd = [sys.executable, "-m", "npuprof.analysis.parse", str(rank_dir)]
    ok = subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and (rank_dir / "ASCEND_PROFILER_OUTPUT" / "analyse.done").exists()
    missing = subprocess.run(
        [*cmd[:-1], str(tmp_path / "nope")], env=clean_env(), capture_output=True, text=True
    )
    assert missing.returncode == 1 and "nope" in missing.stderr


BOX = re.compile("[\u2500-\u257f]")


def table_rows(text: str) -> list[list[str]]:
    """The cells of each table line of rich's output, box drawing removed (whatever box style it uses)."""
    rows = []
    for line in text.splitlines():
        if BOX.search(line):
            cells = [c.strip() for c in BOX.split(line)]
            cells = [c for c in cells if c]
            if cells:
                rows.append(cells)
    return rows


def step_durations_from_raw_trace(trace: Path) -> dict[int, float]:
    """ProfilerStep#N durations read with plain json, not npuprof's reader."""
    events = json.loads(trace.read_text())["traceEvents"]
    return {
        int(e["name"].split("#")[1]): e["dur"]
        for e in events
        if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")
    }


def test_many_steps_table_shows_the_slowest(tmp_path: Path) -> None:
    from npuprof.analysis.synthetic import write_synthetic_trace

    trace = tmp_path / "long.pt.trace.json"
    write_synthetic_trace(trace, 12)
    durations = step_durations_from_raw_trace(trace)
    assert len(durations) > 30  # more than a terminal table lists
    every = npuprof("analyse", str(trace), "--format", "json")
    assert every.returncode == 0, every.stderr
    steps = json.loads(every.stdout)["ranks"][0]["steps"]
    assert {s["step"]: s["duration_us"] for s in steps} == pytest.approx(durations, abs=0.001)
    slowest = sorted(durations, key=lambda n: -durations[n])[:10]
    table = npuprof("analyse", str(trace), "--top", "2", env={**clean_env(), "COLUMNS": "200"})
    assert table.returncode == 0, table.stderr
    steps_table = table.stdout.split("top operators")[0]
    rows = table_rows(steps_table)
    shown = [int(cells[0]) for cells in rows if cells[0].isdigit()]
    assert shown == sorted(slowest)  # the steps table, only the 10 slowest, in step order
    said = f"the 10 of {len(durations)} steps with the largest step time, then all whole steps (mean ms); "
    assert any(line.startswith(said) for line in table.stdout.splitlines()), table.stdout
    mean_ms = sum(durations.values()) / len(durations) / 1000
    assert [cells[1] for cells in rows if cells[0] == "all"] == [f"{mean_ms:.3f}"]


def test_many_steps_across_ranks_shows_the_widest_spread(tmp_path: Path) -> None:
    from npuprof.analysis.synthetic import write_synthetic_trace

    per_rank = []
    for rank in (0, 1):
        rank_dir = tmp_path / "result" / f"host_{100 + rank}_20250101000000000_ascend_pt"
        rank_dir.mkdir(parents=True)
        (rank_dir / f"profiler_info_{rank}.json").write_text("{}")
        trace = rank_dir / f"host_{100 + rank}.pt.trace.json"
        write_synthetic_trace(trace, 12, rank=rank, world=2)
        per_rank.append(step_durations_from_raw_trace(trace))
    common = sorted(set(per_rank[0]) & set(per_rank[1]))
    assert len(common) > 30
    spread = {n: abs(per_rank[0][n] - per_rank[1][n]) for n in common}
    widest = sorted(common, key=lambda n: -spread[n])[:10]
    table = npuprof("analyse", str(tmp_path / "result"), "--top", "1", env={**clean_env(), "COLUMNS": "200"})
    assert table.returncode == 0, table.stderr
    across = table.stdout.split("step time across ranks")[1]
    shown = [int(cells[0]) for cells in table_rows(across) if cells[0].isdigit()]
    assert shown == sorted(widest)
    # the caption a line of its own (was: wrapped to the table's width, four lines of a narrow table)
    caption = f"the 10 of {len(common)} steps with the largest spread across ranks; --steps A-B picks steps"
    assert any(line.startswith(caption) for line in across.splitlines()), across


@pytest.fixture(scope="module")
def analysed_run(tmp_path_factory) -> Path:
    """One `npuprof run` (skip 1, record 2 of 5 steps), its capture analysed by the run, as it ended: the
    output directory. The two tests below each take a copy of it (they delete its files)."""
    out = tmp_path_factory.mktemp("analysed_run") / "out"
    run = run_trainer(out, *sched(1, 0, 2), train=("--steps", "5"), analyse=True)
    assert run.returncode == 0, run.stderr
    return out


def _copy_of(run: Path, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(run, out, symlinks=True)
    return out


def test_force_without_the_raw_trace_reads_the_tables_of_the_earlier_parse(
    analysed_run: Path, tmp_path: Path
) -> None:
    """helper-129: a capture of `npuprof run` whose raw trace was deleted after its parse (to save space):
    `analyse --force` said "torch_npu's parse left none of its tables in ASCEND_PROFILER_OUTPUT/ ...
    FRAMEWORK/, PROF_* are gone: capture again" beside its whole tables, which a plain `analyse` reported.
    --force has nothing to parse again there: the tables stand, reported with a warning that says why;
    with the tables gone too, the reason names the missing trace, not torch_npu."""
    out = _copy_of(analysed_run, tmp_path)
    (rank_dir,) = out.glob("*_ascend_pt")
    first = npuprof("analyse", str(out), "--format", "json")
    assert first.returncode == 0, first.stderr
    steps = [s["step"] for s in json.loads(first.stdout)["ranks"][0]["steps"]]
    for raw in rank_dir.glob("*.pt.trace.json*"):
        raw.unlink()
    forced = npuprof("analyse", str(out), "--force", "--format", "json")
    assert forced.returncode == 0, forced.stderr
    (rank,) = json.loads(forced.stdout)["ranks"]
    assert [s["step"] for s in rank["steps"]] == steps and rank["status"] == "cached"
    assert any("--force" in w and "raw trace" in w for w in rank.get("warnings") or []), rank
    assert "torch_npu" not in forced.stderr, forced.stderr
    for table in (rank_dir / "ASCEND_PROFILER_OUTPUT").iterdir():
        if table.name != "analyse.done":
            table.unlink()
    gone = npuprof("analyse", str(out), "--force")
    assert gone.returncode == 1 and "no *.pt.trace.json(.gz) in" in gone.stderr, gone.stderr
    assert "torch_npu" not in gone.stderr, gone.stderr


def test_the_runs_summary_names_its_trace_as_gzipped(analysed_run: Path) -> None:
    """The post-processor parses, then gzips the trace: npuprof_summary.json (docs/formats.md) named the
    plain trace, a file gone by the time a script read it."""
    (rank_dir,) = analysed_run.glob("*_ascend_pt")
    (trace,) = rank_dir.glob("*.pt.trace.json*")
    assert trace.name.endswith(".pt.trace.json.gz")
    summary = json.loads((rank_dir / "ASCEND_PROFILER_OUTPUT" / "npuprof_summary.json").read_text())
    assert summary["trace"] == trace.name


def test_force_without_the_raw_trace_does_not_drop_a_db_asked_for_in_silence(
    analysed_run: Path, tmp_path: Path
) -> None:
    """helper-131: `analyse --force --export-type db` on a capture whose raw trace was deleted after its
    parse reported the earlier tables with exit 0 and wrote no db, with no word of it (without --force the
    same command says the trace is missing). The db cannot be made without the trace: it says so."""
    out = _copy_of(analysed_run, tmp_path)
    (rank_dir,) = out.glob("*_ascend_pt")
    for raw in rank_dir.glob("*.pt.trace.json*"):
        raw.unlink()
    forced = npuprof("analyse", str(out), "--force", "--export-type", "db")
    dbs = list((rank_dir / "ASCEND_PROFILER_OUTPUT").glob("*.db"))
    assert forced.returncode != 0 or dbs, forced.stderr
    assert "no *.pt.trace.json(.gz) in" in forced.stderr, forced.stderr


def test_no_step_to_compare_across_ranks_is_said_not_left_out(tmp_path: Path) -> None:
    """helper-153: with --steps leaving one rank no whole step, the section across ranks vanished and
    nothing said why."""
    root = tmp_path / "result"
    for rank, steps in ((0, (7,)), (1, (7, 8))):
        trace = cpu_trace()
        step = trace["traceEvents"][0]
        trace["traceEvents"] = [
            {**step, "name": f"ProfilerStep#{n}", "ts": 1000 * k} for k, n in enumerate(steps)
        ] + trace["traceEvents"][1:]
        trace["distributedInfo"]["rank"] = rank
        write_rank_dir(root, trace, rank=rank, name=f"host_{10 + rank}_20250101000000000")
    both = npuprof("analyse", str(root), env={**clean_env(), "COLUMNS": "200"})
    assert both.returncode == 0, both.stderr
    assert "step time across ranks (ms)" in both.stdout and "nothing to compare" not in both.stdout
    only_one = npuprof("analyse", str(root), "--steps", "8", env={**clean_env(), "COLUMNS": "200"})
    assert only_one.returncode == 0, only_one.stderr
    assert "step time across ranks (ms)" not in only_one.stdout
    said = " ".join(only_one.stdout.split())
    assert "step time across ranks: nothing to compare (no whole step among --steps 8 on rank(s) 0;" in said
