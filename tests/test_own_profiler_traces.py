"""Traces a user recorded with torch.profiler itself (no npuprof run), checked against what torch measured
in the same process (key_averages, the steps it numbered, a timer around each iteration) and against the
raw events: analyse must report those numbers, not its own idea of them. Files torch writes that are not
Chrome traces get one line that says what they are."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from _forked_cli import npuprof  # report commands forked from a process that imported them: see its doc
from conftest import SCRIPTS, clean_env


@pytest.fixture(scope="module")
def own(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("own") / "out"
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / "own_profiler.py"), str(out)],
        env=clean_env(), capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def _report(target: Path, *flags: str) -> dict:
    done = npuprof("analyse", str(target), "--format", "json", "--top", "100", *flags)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _raw_steps(trace: Path) -> dict[int, float]:
    events = json.loads(trace.read_text())["traceEvents"]
    steps = [e for e in events if e.get("name", "").startswith("ProfilerStep#")]
    return {int(e["name"].split("#")[1]): e["dur"] for e in steps}


def test_each_capture_of_each_worker_is_reported_as_torch_measured_it(own: Path) -> None:
    """tensorboard_trace_handler, 2 worker processes x 3 cycles in one folder: 6 captures, each with its own
    2 steps, nothing merged or counted twice; every operator's calls, self and total time as torch's own
    key_averages() of that capture. helper-137: an operator that runs one of the same name (aten::sum
    calling aten::sum.dim_IntList, both "aten::sum" in the trace) was 2 calls with both totals summed,
    where torch counts 1 call and the outer total (here 16 calls against 8 over a capture)."""
    report = _report(own / "tb")
    ranks = report["ranks"]
    assert len(ranks) == 6
    for worker in ("w0", "w1"):
        facts = json.loads((own / "tb" / f"facts_{worker}.json").read_text())
        mine = sorted((r for r in ranks if r["trace"].startswith(f"{worker}.")), key=lambda r: r["trace"])
        assert [[s["step"] for s in r["steps"]] for r in mine] == [c["steps"] for c in facts["captures"]]
        for rank, capture in zip(mine, facts["captures"], strict=True):
            raw = _raw_steps(own / "tb" / rank["trace"])
            for step in rank["steps"]:
                assert step["duration_us"] == pytest.approx(raw[step["step"]], abs=0.002)
                # the step holds the iteration that the script timed
                assert step["duration_us"] >= facts["wall_us"][step["step"]] - 1.0
            ops = {o["name"]: o for o in rank["top_operators"]}
            torch_ops = {name: v for name, v in capture["ops"].items() if name.startswith("aten::")}
            assert torch_ops["aten::sum"][0] > 0
            assert set(torch_ops) <= set(ops)
            for name, (count, self_us, total_us) in torch_ops.items():
                got = ops[name]
                assert got["count"] == count, (rank["trace"], name, got, count)
                assert got["self_us"] == pytest.approx(self_us, rel=1e-3, abs=0.01), (name, got, self_us)
                assert got["total_us"] == pytest.approx(total_us, rel=1e-3, abs=0.01), (name, got, total_us)


def _thread_busy_us(trace: Path) -> float:
    """Per thread, the union of its operator and record_function spans; summed."""
    events = json.loads(trace.read_text())["traceEvents"]
    spans: dict[object, list[tuple[float, float]]] = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation"):
            spans.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"]))
    busy = 0.0
    for thread_spans in spans.values():
        reach = float("-inf")
        for start, end in sorted(thread_spans):
            busy += max(end - max(start, reach), 0.0)
            reach = max(reach, end)
    return busy


def test_ranges_named_like_steps_inside_a_step_are_ranges(own: Path) -> None:
    """record_function("ProfilerStep#99") (with "ProfilerStep#100" inside it) in each step of a scheduled
    profile: analyse listed steps 99 and 100 beside the real 0-3 (and warned that 99 repeats and overlaps
    step 0); export-stacks cut the real step at each of them, made them roots, and lost 44 of 2,592 µs
    (helper-137). They are ranges of the step they are in."""
    facts = json.loads((own / "labels_facts.json").read_text())
    rank = _report(own / "labels.json")["ranks"][0]
    assert [s["step"] for s in rank["steps"]] == facts["steps"]
    done = npuprof("analyse", str(own / "labels.json"))
    said = " ".join(done.stderr.split())
    assert "6 span(s) named like a step (ProfilerStep#99, ProfilerStep#100) lie inside another step" in said
    assert "appear more than once" not in said and "overlap in time" not in said
    stacks = npuprof("export-stacks", str(own / "labels.json"))
    assert stacks.returncode == 0, stacks.stderr
    assert "ran into the next step" not in stacks.stderr
    folded = {line.rsplit(" ", 1)[0]: int(line.rsplit(" ", 1)[1]) for line in stacks.stdout.splitlines()}
    assert sum(folded.values()) == pytest.approx(_thread_busy_us(own / "labels.json"), abs=len(folded))
    assert {stack.split(";")[0] for stack in folded} == {"ProfilerStep"}
    assert any(s.startswith("ProfilerStep;ProfilerStep#99;ProfilerStep#100;") for s in folded)
    assert any(s.startswith("ProfilerStep;ProfilerStep#x;ProfilerStep#;") for s in folded)


@pytest.mark.parametrize(
    ("name", "what"),
    [
        ("stacks.txt", "it is folded stacks"),
        ("et.json", "it is a PyTorch execution trace (ExecutionTraceObserver"),
        ("mem.json", "it is torch's memory timeline plot data"),
        ("mem.raw.json.gz", "it is torch's raw memory timeline"),
        ("mem.html", "it is an HTML page"),
    ],
)
def test_files_torch_writes_that_are_not_traces_are_named(
    own: Path, tmp_path: Path, name: str, what: str
) -> None:
    """prof.export_stacks, ExecutionTraceObserver and export_memory_timeline files, given to each reader
    (named as given, and named *.pt.trace.json in a folder): one line that says what the file is. They
    were "neither a result directory nor a trace file", "corrupt", or "an event of the wrong shape" (and
    the execution trace's line advised naming it *.pt.trace.json, which made it "corrupt") (helper-137)."""
    source = own / name
    done = npuprof("analyse", str(source))
    assert done.returncode == 1
    assert done.stderr.startswith(f"npuprof analyse: nothing to analyse: {source}: {what}"), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    renamed = tmp_path / "logs" / ("w0.1.pt.trace.json" + (".gz" if name.endswith(".gz") else ""))
    renamed.parent.mkdir()
    renamed.write_bytes(source.read_bytes())
    done = npuprof("analyse", str(renamed.parent))
    assert done.returncode == 1
    assert f"{renamed}: {what[len('it is ') :]}" in done.stderr, done.stderr
    for command in ("export-stacks", "memory-timeline"):
        if command == "memory-timeline" and name == "mem.raw.json.gz":
            continue  # it reads that one
        done = npuprof(command, str(source), "-o", str(tmp_path / "out.json"))
        assert done.returncode == 1, done.stderr
        assert f"{source}: {what[len('it is ') :]}" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_files_of_a_result_given_for_their_directory_name_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file of npuprof's own result tree given where its directory was meant (the run's record or log,
    a capture's record, a table of its parse), to each reader: one line that names the directory to give.
    analyse advised naming the record *.pt.trace.json "if it is a trace", export-stacks and memory-timeline
    said "not a Chrome trace?", and the log's last line, ending in a number, was called folded stacks
    (helper-174). In process: no torch is needed."""
    from npuprof.cli.main import _run_typer
    from npuprof.results import layout

    # what an earlier call in this process passed over (test_status_reads_the_request_as_the_job_does's
    # FIFO, in the same test worker) was said by this analyse as its own
    layout.note_skipped(
        tmp_path / "elsewhere" / "profiler_config.json", "a FIFO, not a regular file: not read"
    )
    out = tmp_path / "out"
    rank_dir = out / "vm_4874_20261129161424560_ascend_pt"
    (rank_dir / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    (out / "npuprof_run.json").write_text('{"run_id": "0ab69677c548", "captures": []}')
    (out / "npuprof.log").write_text("2026-12-05 22:29:21 [INFO] [agent pid=1] steps counted: 12\n")
    (rank_dir / "npuprof_capture.json").write_text('{"status": "complete", "steps": [6, 7, 8]}')
    (rank_dir / "ASCEND_PROFILER_OUTPUT" / "npuprof_summary.json").write_text('{"steps": []}')
    (rank_dir / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").write_text("Step,Computing\n6,1.0\n")
    tables = rank_dir / "ASCEND_PROFILER_OUTPUT"
    run, capture, parse = (
        f"npuprof run's record of the run in {out}, not a trace: give that directory, {out}",
        f"a file of the capture in {rank_dir}, not a trace: give that directory, {rank_dir}",
        f"a table of the parse of the capture in {rank_dir}, not a trace: give that directory, {rank_dir}",
    )
    given = {
        out / "npuprof_run.json": run,
        out / "npuprof.log": run.replace("record", "log"),
        rank_dir / "npuprof_capture.json": capture,
        tables / "npuprof_summary.json": parse,
        tables / "step_trace_time.csv": parse,
    }
    for path, what in given.items():
        for command in ("analyse", "export-stacks", "memory-timeline"):
            if command == "memory-timeline" and path.suffix == ".csv":
                continue  # it reads a table of allocator records (memory_record.csv) itself
            argv = ["npuprof", command, str(path)] + (
                ["-o", str(tmp_path / "m.json")] * (command != "analyse")
            )
            monkeypatch.setattr(sys, "argv", argv)
            assert _run_typer() == 1, (command, path)
            err = capsys.readouterr().err
            prefix = (
                "npuprof analyse: nothing to analyse: " if command == "analyse" else f"npuprof {command}: "
            )
            it = "it is " if command == "analyse" else ""
            assert err == f"{prefix}{path}: {it}{what}\n", (command, err)


def test_a_list_of_number_pairs_is_not_taken_for_torchs_memory_timeline() -> None:
    """helper-267: a script's own step timings, json.dump([[step, seconds], ...]), given to analyse by
    mistake were "torch's memory timeline plot data (export_memory_timeline's .json ...)". That file is
    [times, sizes by category]: a list of times, then a list of lists, however long the times run."""
    from npuprof.analysis.torch_files import describe

    timings = json.dumps([[step, 0.05 + step / 1000] for step in range(1, 24)]).encode()
    assert describe(timings) is None
    times = [1_796_589_437_107_265 + 10 * i for i in range(5000)]
    sizes = [[0, 288, 0, 0, 0, 0, 288, 0, 1024 * i] for i in range(5000)]
    for head in (json.dumps([times, sizes]).encode(), json.dumps([times[:3], sizes[:3]]).encode()):
        assert head[: 64 << 10].count(b"[[") == (1 if len(head) > 64 << 10 else 2)
        said = describe(head[: 64 << 10])
        assert said is not None and said.startswith("torch's memory timeline plot data"), said
