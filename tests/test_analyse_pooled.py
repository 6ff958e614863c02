"""A process with many captures (--repeat 0, a --dynamic job triggered often) is one section of the report,
its captures pooled (npuprof/analysis/pooling.py); the JSON keeps each capture and adds the pooled ones.
Expected values are computed here from the raw traces, not read back from npuprof."""

from __future__ import annotations

import itertools
import json
import re
import shlex
from collections import Counter
from pathlib import Path

import pytest
from _forked_cli import npuprof  # report commands forked from a process that imported them: see its doc
from analyse_support.handmade import cpu_trace, write_rank_dir
from conftest import clean_env, load_trace, rank_dirs, run_trainer


@pytest.fixture(scope="module")
def repeated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real job captured every other step: one step a capture, 7 captures of one process."""
    out = tmp_path_factory.mktemp("pooled") / "result"
    flags = ("--repeat", "0", "--skip-first", "1", "--wait", "1", "--warmup", "0", "--active", "1")
    result = run_trainer(out, *flags, train=("--steps", "16"), timeout=120)
    assert result.returncode == 0, result.stderr
    assert len(rank_dirs(out)) > 3, result.stderr
    return out


def _spans(rank_dir: Path) -> dict[int, float]:
    return {
        int(e["name"].split("#", 1)[1]): float(e["dur"])
        for e in load_trace(rank_dir)["traceEvents"]
        if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
    }


def test_the_captures_of_one_process_are_one_section(repeated: Path) -> None:
    dirs = rank_dirs(repeated)
    analysed = npuprof("analyse", str(repeated), "--format", "json", "--top", "100", timeout=120)
    assert analysed.returncode == 0, analysed.stderr
    report = json.loads(analysed.stdout)
    assert len(report["ranks"]) == len(dirs)  # each capture stays in the JSON
    (pooled,) = report["pooled"]
    assert pooled["captures"] == [str(d) for d in dirs]  # named by their start: in time order
    # every step of every capture, in order, each as long as its ProfilerStep span
    spans: dict[int, float] = {}
    for d in dirs:
        spans.update(_spans(d))
    assert [s["step"] for s in pooled["steps"]] == sorted(spans)
    for s in pooled["steps"]:
        assert s["duration_us"] == pytest.approx(spans[s["step"]], abs=0.01)
    # a step's start on one time base: later steps start later
    starts = [s["start_us"] for s in pooled["steps"]]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)
    # the operators' calls over every capture, counted in the raw traces
    calls: Counter[str] = Counter()
    for d in dirs:
        calls.update(e["name"] for e in load_trace(d)["traceEvents"] if e.get("cat") == "cpu_op")
    reported = {o["name"]: o["count"] for o in pooled["top_operators"]}
    for name in ("aten::addmm", "aten::mm", "aten::relu"):
        if name in calls:
            assert reported[name] == calls[name], name
    assert "aten::addmm" in reported
    whole = [s["duration_us"] for s in pooled["steps"] if not s.get("partial")]
    assert pooled["step_time_mean_us"] == pytest.approx(sum(whole) / len(whole), abs=0.01)


def test_the_table_shows_the_pooled_section_once(repeated: Path) -> None:
    dirs = rank_dirs(repeated)
    analysed = npuprof("analyse", str(repeated), timeout=120)
    assert analysed.returncode == 0, analysed.stderr
    titles = [line for line in analysed.stdout.splitlines() if line.startswith("rank ")]
    assert len(titles) == 1 and f"{len(dirs)} captures pooled" in titles[0], analysed.stdout
    assert analysed.stdout.count("top operators by self time") == 1


def test_the_pooled_sections_export_stacks_command_runs_as_given(repeated: Path, tmp_path: Path) -> None:
    """helper-326: the CPU-only note under a pooled section said "npuprof export-stacks RESULT --svg
    flame.svg", the folder of its captures, which export-stacks refuses (exit 1: "holds 7 rank
    directories: give one of them"). It names the section's latest capture, and that command works."""
    analysed = npuprof("analyse", str(repeated), env={**clean_env(), "COLUMNS": "1000"}, timeout=120)
    assert analysed.returncode == 0, analysed.stderr
    (said,) = re.findall(
        r"what the free time was: (npuprof export-stacks .*? --svg flame\.svg)", analysed.stdout
    )
    command = shlex.split(said)
    assert command[2] == str(rank_dirs(repeated)[-1]), said  # the latest, by its name's start stamp
    # captured without --with-stack: the graph is operator nesting only, and the note says so (helper-371)
    assert "no Python stacks, so that shows operator nesting only" in analysed.stdout, analysed.stdout
    svg = tmp_path / "flame.svg"
    made = npuprof(*command[1:-1], str(svg), timeout=120)
    assert made.returncode == 0, made.stderr
    assert svg.read_text().startswith("<?xml")


def test_a_daylight_saving_change_inside_the_job_keeps_its_captures_one_section(
    repeated: Path, tmp_path: Path
) -> None:
    """A job running as the clocks went back an hour: its later captures' names (local time) read an hour
    earlier than its earlier ones'. Sorted by name, the process was cut into two sections, the later
    captures first, as if it had replaced itself (helper-355: one job over the change, TZ=Europe/Berlin,
    gave "rank - (33 captures pooled)" then "rank - (6 captures pooled)")."""
    import shutil

    copy = tmp_path / "result"
    shutil.copytree(repeated, copy)
    dirs = rank_dirs(copy)
    renamed = []
    for k, d in enumerate(dirs):
        if k >= 3:  # after the change: the same instant an hour earlier on the clock
            d = _named_earlier(d, 3600)
        renamed.append(d)
    _pooled_as_one_section_in_order(copy, renamed)


def test_a_wall_clock_set_back_inside_the_job_keeps_its_captures_one_section(
    repeated: Path, tmp_path: Path
) -> None:
    """A wall clock stepped back two hours inside the job (NTP, by hand): its later captures'
    collectionTimeBegin and names read earlier than its earlier ones'. Ordered by them, the process was cut
    into two pooled sections, the later captures first. Its monotonic start (MonotonicTimeBegin, untouched
    here as the step leaves it) keeps them in order."""
    import shutil

    copy = tmp_path / "result"
    shutil.copytree(repeated, copy)
    dirs = rank_dirs(copy)
    step_ns = 2 * 3600 * 10**9
    renamed = []
    for k, d in enumerate(dirs):
        if k >= 3:  # after the step: the wall clock two hours behind
            (info,) = d.glob("profiler_info*.json")
            record = json.loads(info.read_text())
            record["start_info"]["collectionTimeBegin"] = (
                int(record["start_info"]["collectionTimeBegin"]) - step_ns
            )
            info.write_text(json.dumps(record))
            d = _named_earlier(d, step_ns // 10**9)
        renamed.append(d)
    _pooled_as_one_section_in_order(copy, renamed)


def _named_earlier(rank_dir: Path, seconds: int) -> Path:
    """``rank_dir`` renamed as if its local clock had read ``seconds`` earlier when it began."""
    import time

    head, stamp = re.fullmatch(r"(.+_\d+)_(\d{17})_ascend_pt", rank_dir.name).groups()  # type: ignore[union-attr]
    before = time.mktime(time.strptime(stamp[:14], "%Y%m%d%H%M%S")) - seconds
    stamp = time.strftime("%Y%m%d%H%M%S", time.localtime(before)) + stamp[14:]
    return rank_dir.rename(rank_dir.parent / f"{head}_{stamp}_ascend_pt")


def _pooled_as_one_section_in_order(result: Path, captures: list[Path]) -> None:
    """``analyse`` of ``result`` pools ``captures`` (one process's, in the order they ran, which their names
    no longer tell) into one section, in that order, every step of theirs in it."""
    assert sorted(captures) != captures  # the names no longer say the order
    analysed = npuprof("analyse", str(result), "--format", "json", timeout=120)
    assert analysed.returncode == 0, analysed.stderr
    (pooled,) = json.loads(analysed.stdout)["pooled"]
    assert pooled["captures"] == [str(d) for d in captures]
    spans: dict[int, float] = {}
    for d in captures:
        spans.update(_spans(d))
    assert [s["step"] for s in pooled["steps"]] == sorted(spans)


def _captures(root: Path, count: int, rank: int | None, stamps_from: int = 0) -> list[Path]:
    dirs = []
    for k in range(stamps_from, stamps_from + count):
        trace = cpu_trace()
        (step,) = [e for e in trace["traceEvents"] if e.get("name") == "ProfilerStep#7"]
        step["name"] = f"ProfilerStep#{7 + k - stamps_from}"
        trace["baseTimeNanoseconds"] = 1_700_000_000_000_000_000 + k * 10_000_000  # 10 ms apart
        if rank is None:
            del trace["distributedInfo"]
        dirs.append(write_rank_dir(root, trace, rank=rank, name=f"host_42_{20250101000000000 + k}"))
    return dirs


@pytest.mark.parametrize("count", [3, 4])
def test_pooled_only_beyond_three_captures(tmp_path: Path, count: int) -> None:
    _captures(tmp_path, count, rank=None)
    analysed = npuprof("analyse", str(tmp_path), "--format", "json", timeout=120)
    assert analysed.returncode == 0, analysed.stderr
    report = json.loads(analysed.stdout)
    assert len(report["ranks"]) == count
    if count <= 3:
        assert "pooled" not in report
        return
    (pooled,) = report["pooled"]
    assert [s["step"] for s in pooled["steps"]] == [7, 8, 9, 10]
    # each capture's step starts 10 ms after the one before: one time base for all
    starts = [s["start_us"] for s in pooled["steps"]]
    assert [round(b - a) for a, b in itertools.pairwise(starts)] == [10_000] * 3
    # the trace's own figures, 4 times: aten::mm 200 µs and aten::add 100 µs of self time each capture
    ops = {o["name"]: o for o in pooled["top_operators"]}
    assert ops["aten::mm"]["count"] == 4 and ops["aten::add"]["count"] == 4
    assert ops["aten::add"]["self_us"] == pytest.approx(400.0)


def test_a_process_that_replaced_itself_is_two_programs(tmp_path: Path) -> None:
    """``os.exec`` keeps the pid, and the new program counts its steps from the start again: its captures
    were pooled with the first program's (steps 7-10 twice, one mean over both)."""
    first = _captures(tmp_path, 4, rank=None)
    second = _captures(tmp_path, 4, rank=None, stamps_from=4)  # the same pid, later, steps 7-10 again
    analysed = npuprof("analyse", str(tmp_path), "--format", "json", timeout=120)
    assert analysed.returncode == 0, analysed.stderr
    pooled = json.loads(analysed.stdout)["pooled"]
    assert [p["captures"] for p in pooled] == [[str(d) for d in first], [str(d) for d in second]]
    assert [[s["step"] for s in p["steps"]] for p in pooled] == [[7, 8, 9, 10], [7, 8, 9, 10]]


def test_ranks_are_pooled_apart(tmp_path: Path) -> None:
    _captures(tmp_path / "a", 4, rank=0)
    for d in _captures(tmp_path / "b", 4, rank=1):
        d.rename(tmp_path / "a" / d.name.replace("host_42", "host_43"))
    analysed = npuprof("analyse", str(tmp_path / "a"), "--format", "json", timeout=120)
    assert analysed.returncode == 0, analysed.stderr
    pooled = json.loads(analysed.stdout)["pooled"]
    assert sorted(p["rank"] for p in pooled) == [0, 1]
    assert all(len(p["captures"]) == 4 for p in pooled)


def test_a_partial_step_is_flagged_in_its_own_capture_only(tmp_path: Path) -> None:
    """Two captures of one rank with a step of the same number (a process started again): the first one's
    step 2 is a stub, the second one's a whole step; pooled, both were flagged partial by their number."""
    spans = [[(1, 1000), (2, 10)], [(2, 3000), (3, 1100)], [(4, 1200), (5, 1300)], [(6, 1400), (7, 1500)]]
    for k, steps in enumerate(spans):
        events, t = [], 0
        for number, dur in steps:
            events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{number}", "ts": t,
                           "dur": dur, "pid": 1, "tid": 1, "args": {}})  # fmt: skip
            if dur > 100:  # a whole step: an operator in it
                events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": t + 10, "dur": dur - 20,
                               "pid": 1, "tid": 1, "args": {}})  # fmt: skip
            t += dur
        trace = {"traceEvents": events, "distributedInfo": {"rank": 0, "world_size": 1}}
        write_rank_dir(tmp_path, trace, rank=0, name=f"host_{40 + k}_2025010100000000{k}")
    analysed = npuprof("analyse", str(tmp_path), "--format", "json", timeout=120)
    assert analysed.returncode == 0, analysed.stderr
    (pooled,) = json.loads(analysed.stdout)["pooled"]
    got = [(s["step"], s["duration_us"], bool(s.get("partial"))) for s in pooled["steps"]]
    expected = [(n, float(d), d == 10) for steps in spans for n, d in steps]
    assert got == expected
    whole = [d for steps in spans for _n, d in steps if d != 10]
    assert pooled["step_time_mean_us"] == pytest.approx(sum(whole) / len(whole), abs=0.01)


def test_pooled_operators_are_exact_beyond_each_captures_kept_top(tmp_path: Path) -> None:
    """Each capture has 100 operators of 10 µs of its own and aten::x of 9 µs: outside every capture's kept
    top 100, first over the four (36 µs). Pooled from the kept tops it was missing."""
    from npuprof.analysis.summary_schema import TOP_PER_STEP

    for k in range(4):
        events = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "ts": 0, "dur": 5000,
                   "pid": 1, "tid": 1, "args": {}}]  # fmt: skip
        for i in range(TOP_PER_STEP):
            events.append({"ph": "X", "cat": "cpu_op", "name": f"op_{k}_{i}", "ts": 1 + 20 * i, "dur": 10,
                           "pid": 1, "tid": 1, "args": {}})  # fmt: skip
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::x", "ts": 4000, "dur": 9, "pid": 1,
                       "tid": 1, "args": {}})  # fmt: skip
        write_rank_dir(tmp_path, {"traceEvents": events}, rank=None, name=f"host_42_2025010100000000{k}")
    analysed = npuprof("analyse", str(tmp_path), "--format", "json", "--top", "3", timeout=120)
    assert analysed.returncode == 0, analysed.stderr
    (pooled,) = json.loads(analysed.stdout)["pooled"]
    first = pooled["top_operators"][0]
    assert (first["name"], first["count"], first["self_us"]) == ("aten::x", 4, 36.0)


def test_the_traces_of_one_tensorboard_worker_are_one_section(tmp_path: Path) -> None:
    """torch's tensorboard_trace_handler writes <host>_<pid>.<ns>.pt.trace.json per capture: a process with
    more than 3 of them, no rank in them, was one section per file (helper-137), though the README says a
    process gets one section."""
    from analyse_support.handmade import T0, x

    folder = tmp_path / "tb"
    folder.mkdir()
    mine = []
    for n, step in enumerate((7, 9, 11, 13)):
        events = [
            x(f"ProfilerStep#{step}", "user_annotation", 5000 * n, 1000 + n),
            x("aten::mm", "cpu_op", 5000 * n + 100, 200, **{"External id": 1}),
        ]
        name = folder / f"host_7.{int(T0 * 1000) + n}.pt.trace.json"
        name.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
        mine.append(name)
    other = [x("ProfilerStep#7", "user_annotation", 0, 900), x("aten::mm", "cpu_op", 100, 200)]
    (folder / f"host_8.{int(T0 * 1000)}.pt.trace.json").write_text(json.dumps({"traceEvents": other}))
    analysed = npuprof("analyse", str(folder), "--format", "json", timeout=120)
    assert analysed.returncode == 0, analysed.stderr
    report = json.loads(analysed.stdout)
    assert len(report["ranks"]) == 5
    (pooled,) = report["pooled"]
    assert [Path(c).name for c in pooled["captures"]] == [p.name for p in mine]
    assert [(s["step"], s["duration_us"]) for s in pooled["steps"]] == [
        (7, 1000),
        (9, 1001),
        (11, 1002),
        (13, 1003),
    ]
    assert {o["name"]: o["count"] for o in pooled["top_operators"]} == {"aten::mm": 4}


def test_a_copy_of_a_capture_is_counted_once_and_named(tmp_path: Path) -> None:
    """A rank dir copied under the result dir (`cp -r`) was pooled with its original: its steps listed
    twice, its operators' calls counted twice, with only a note that step 7 "may be different runs". The
    copy is left out, a warning naming both."""
    import shutil

    from npuprof.analysis.report import build_report

    dirs = _captures(tmp_path, 4, rank=0)
    copy = tmp_path / "rank0_backup"
    shutil.copytree(dirs[1], copy)
    traces = [json.loads(next(d.glob("*.pt.trace.json")).read_text()) for d in dirs]
    steps = sorted(int(e["name"].split("#")[1]) for t in traces for e in t["traceEvents"]
                   if e["name"].startswith("ProfilerStep#"))  # fmt: skip
    mm_calls = sum(e["name"] == "aten::mm" for t in traces for e in t["traceEvents"])
    report = build_report(tmp_path, jobs=1)
    assert sorted(r.rank_dir for r in report.ranks) == sorted(map(str, dirs))
    (pooled,) = report.pooled
    assert [s.step for s in pooled.steps] == steps
    assert {o.name: o.count for o in pooled.top_operators}["aten::mm"] == mm_calls
    (kept,) = [r for r in report.ranks if r.rank_dir == str(dirs[1])]
    assert f"{dirs[1]} and {copy}: the same capture (a copy?); counted once, from {dirs[1]}" in " ".join(
        kept.warnings or []
    )


BESIDE = (
    "the post-processor ran during this capture ({} earlier captures waited for it): its work may have "
    "slowed these steps"
)


def test_the_same_note_of_many_captures_is_one_warning(tmp_path: Path) -> None:
    """helper-326: `npuprof analyse` of a --repeat 0 run (35 captures) printed 32 warnings, one a capture,
    each "its capture record says: the post-processor ran during this capture (N earlier captures waited
    for it)". Three or more captures in a row with the same note, numbers aside, are one warning."""
    dirs = _captures(tmp_path, 5, rank=None)
    waited = [None, 3, 7, 4, None]
    for k, (d, n) in enumerate(zip(dirs, waited, strict=True)):
        record = {"status": "complete", "steps": [7 + k], "last_step_partial": False}
        if n is not None:
            record["detail"] = BESIDE.format(n)
        (d / "npuprof_capture.json").write_text(json.dumps(record))
    analysed = npuprof("analyse", str(tmp_path), "--format", "json", timeout=120)
    assert analysed.returncode == 0, analysed.stderr
    warned = [line for line in analysed.stderr.splitlines() if "its capture record says" in line]
    assert warned == [
        f"npuprof analyse: warning: {dirs[1]} .. {dirs[3]} (3 captures): its capture record says: "
        + BESIDE.format("3 to 7")
    ], analysed.stderr
    ranks = json.loads(analysed.stdout)["ranks"]  # the JSON keeps each capture's own
    assert [r.get("warnings") for r in ranks][1:4] == [
        [f"its capture record says: {BESIDE.format(n)}"] for n in (3, 7, 4)
    ]
    # --steps 7: only the first capture (step 7, no note) is reported; the notes of the others are about
    # steps left out ("may have slowed these steps": none shown) and were said all the same
    only = npuprof("analyse", str(tmp_path), "--steps", "7", "--format", "json", timeout=120)
    assert only.returncode == 0, only.stderr
    assert "its capture record says" not in only.stderr, only.stderr
    assert f"no step of --steps 7 in 4 of the 5 captures: {dirs[1]}, {dirs[2]}, {dirs[3]} and 1 more" in (
        only.stderr
    )
    # --steps 8: the second capture's (step 8) note stays
    second = npuprof("analyse", str(tmp_path), "--steps", "8", "--format", "json", timeout=120)
    assert f"npuprof analyse: warning: {dirs[1]}: its capture record says: {BESIDE.format(3)}" in (
        second.stderr.splitlines()
    ), second.stderr


def test_a_steps_none_of_many_captures_has_is_one_short_line(tmp_path: Path) -> None:
    """helper-374: `npuprof analyse --steps 10` of a --repeat 0 run of 350 captures, none with step 10,
    said so in one line of 6 KB, every capture's steps listed ("their steps are 206-207, 409-410, ..."):
    the first and last few now, and how many are left out."""
    count = 30
    steps = [7 + 100 * k for k in range(count)]
    for k, step in enumerate(steps):
        trace = cpu_trace()
        (span,) = [e for e in trace["traceEvents"] if e.get("name") == "ProfilerStep#7"]
        span["name"] = f"ProfilerStep#{step}"
        trace["baseTimeNanoseconds"] = 1_700_000_000_000_000_000 + k * 10_000_000
        del trace["distributedInfo"]
        write_rank_dir(tmp_path, trace, rank=None, name=f"host_42_{20250101000000000 + k}")
    analysed = npuprof("analyse", str(tmp_path), "--steps", "3", timeout=120)
    assert analysed.returncode != 0
    (line,) = [line for line in analysed.stderr.splitlines() if "no step of --steps 3" in line]
    first, last = ", ".join(map(str, steps[:4])), ", ".join(map(str, steps[-4:]))
    assert line.endswith(f"their steps are {first}, ... ({count - 8} more), {last}"), line
    assert len(line) < 300, line
