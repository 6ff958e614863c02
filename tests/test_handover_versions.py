"""Typed, versioned hand-overs: a reader meeting another version of a file says which and what to do,
instead of failing later (or reading it wrongly)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from analyse_support.handmade import cuda_trace, write_rank_dir

from npuprof.analysis.parse import SUMMARY_FILE, parse_rank_dir


@pytest.fixture
def parsed(tmp_path: Path) -> Path:
    rank_dir = write_rank_dir(tmp_path / "result", cuda_trace())
    assert parse_rank_dir(rank_dir).ok
    return rank_dir


def _analyse(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "npuprof", "analyse", str(path), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _rewrite_summary(rank_dir: Path, change) -> None:
    path = rank_dir / "ASCEND_PROFILER_OUTPUT" / SUMMARY_FILE
    summary = json.loads(path.read_text())
    change(summary)
    path.write_text(json.dumps(summary))


def test_the_summary_written_is_read_back_whole(parsed: Path) -> None:
    result = _analyse(parsed.parent)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    written = json.loads((parsed / "ASCEND_PROFILER_OUTPUT" / SUMMARY_FILE).read_text())
    assert written["version"] == 1 and report["problems"] == []
    assert [s["duration_us"] for s in report["ranks"][0]["steps"]] == [
        s["duration_us"] for s in written["steps"]
    ]


def test_a_newer_summary_is_named_with_what_to_do(parsed: Path) -> None:
    _rewrite_summary(parsed, lambda s: s.update(version=2))
    result = _analyse(parsed.parent)
    assert "Traceback" not in result.stderr
    report = json.loads(result.stdout)
    assert [p["status"] for p in report["problems"]] == ["unreadable"]
    expected = "written by a newer npuprof (summary version 2, this one reads 1); upgrade npuprof"
    assert expected in report["problems"][0]["reason"], report["problems"][0]["reason"]


@pytest.mark.parametrize(
    ("version", "said"),
    [
        (0, "summary version 0"),
        (None, "summary version None"),
        ("1", "summary version '1'"),
    ],
)
def test_an_older_summary_is_parsed_again_from_its_trace(parsed: Path, version, said: str) -> None:
    """It said "re-run with --force"; analyse does that itself now, and says so (helper-289)."""
    _rewrite_summary(parsed, lambda s: s.update(version=version))
    result = _analyse(parsed.parent)
    assert json.loads(result.stdout)["problems"] == []
    said = f"written by an older npuprof ({said}, this one reads 1): parsed again from its raw trace"
    assert said in result.stderr, result.stderr
    assert json.loads((parsed / "ASCEND_PROFILER_OUTPUT" / SUMMARY_FILE).read_text())["version"] == 1


@pytest.mark.parametrize("force", [False, True])
def test_an_older_summary_whose_trace_is_gone_is_not_sent_to_force(parsed: Path, force: bool) -> None:
    """A summary of an older npuprof in a rank dir whose raw trace was deleted since (to save space) said
    "re-run with --force"; with --force it said "this report is made from the tables of its earlier parse",
    and no report was made. --force has nothing to parse: the line says so, with or without it."""
    from npuprof.analysis.report import build_report

    _rewrite_summary(parsed, lambda s: s.update(version=0))
    for trace in parsed.glob("*.pt.trace.json*"):
        trace.unlink()
    report = build_report(parsed.parent, force=force, jobs=1)
    assert report.ranks == []
    (problem,) = report.problems
    assert (problem.status, problem.reason) == (
        "unreadable",
        f"{SUMMARY_FILE}: written by an older npuprof (summary version 0, this one reads 1); an npuprof of "
        "that version reads it; its raw trace is gone (deleted since its parse?): --force has nothing to "
        "parse it again from",
    )


@pytest.mark.parametrize(
    ("change", "names"),
    [
        (lambda s: s["steps"][0].update(duration_us="slow"), "duration_us"),
        (lambda s: s["steps"][0].pop("free_us"), "free_us"),
        (lambda s: s["top_kernels"][0].update(count=True), "count"),
        (lambda s: s.update(rank=1.5), "rank"),
    ],
)
def test_a_damaged_field_is_named(parsed: Path, change, names: str) -> None:
    """With its trace there it is parsed again (tests/test_summary_rebuild.py); without, it is named."""
    _rewrite_summary(parsed, change)
    for trace in parsed.glob("*.pt.trace.json*"):
        trace.unlink()
    report = json.loads(_analyse(parsed.parent).stdout)
    reason = report["problems"][0]["reason"]
    assert "damaged" in reason and names in reason and "its raw trace is gone" in reason, reason


def test_force_rewrites_a_summary_of_another_version(parsed: Path) -> None:
    _rewrite_summary(parsed, lambda s: s.update(version=0))
    result = subprocess.run(
        [sys.executable, "-m", "npuprof", "analyse", str(parsed.parent), "--format", "json", "--force"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["problems"] == []


# ---- NPUPROF_CONFIG: launcher -> every process of the job ------------------------------------------------
def test_the_payload_reads_back_the_config_the_launcher_wrote() -> None:
    from npuprof.config import ProfileConfig
    from npuprof.payload import read_payload

    cfg = ProfileConfig(metadata={"dp": [1, 2]}, ranks=[0, 3], gc_detect_threshold=1.5, step_on="m:f")
    cfg.schedule.repeat = 0
    config, run = read_payload(
        cfg.validate().to_env({"run_id": "r1", "log": "/o/npuprof.log", "output": "/o"})
    )
    assert config == cfg
    assert (run.run_id, run.log, run.output) == ("r1", "/o/npuprof.log", "/o")


def test_a_payload_without_a_version_is_an_older_launchers_and_still_read() -> None:
    from npuprof.config import ProfileConfig
    from npuprof.payload import read_payload

    document = json.loads(ProfileConfig().to_env({"run_id": "r"}))
    del document["version"]
    config, run = read_payload(json.dumps(document))
    assert config == ProfileConfig() and run.run_id == "r"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: d.update(version=2), "version 2, this npuprof reads 1"),
        (
            lambda d: d["config"].update(record_shapes="yes"),
            "damaged (Expected `bool`, got `str` - at `$.record_shapes`)",
        ),
        (lambda d: d["config"]["schedule"].update(active=[3]), "at `$.schedule.active`"),
        (lambda d: d["run"].update(run_id=7), "at `$.run_id`"),
        # helper-117: a payload written by hand put the capture dirs outside the output
        (lambda d: d["config"].update(worker_name="../../up"), "worker_name '../../up' is no file name"),
        (lambda d: d["config"].update(worker_name="a/b"), "worker_name 'a/b' is no file name"),
        (lambda d: d["run"].update(run_id="../../esc"), "run_id '../../esc' is no file name"),  # helper-118
    ],
)
def test_a_payload_of_another_version_or_damaged_is_named(change, expected: str) -> None:
    from npuprof.config import ProfileConfig
    from npuprof.payload import PayloadError, read_payload

    document = json.loads(ProfileConfig().to_env({"run_id": "r"}))
    change(document)
    with pytest.raises(PayloadError) as caught:
        read_payload(json.dumps(document))
    assert expected in str(caught.value), caught.value


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda c, r: c["schedule"].update(wait=-1), "(--wait: must be an integer >= 0, got -1)"),
        (lambda c, r: c["schedule"].update(active=0), "(--active: must be an integer >= 1, got 0)"),
        (lambda c, r: c.update(delay=-5.0), "(--delay: must be 0 to 1e8 seconds, got -5.0)"),
        (lambda c, r: c.update(gc_detect_threshold=-1.0), "(--gc-detect-threshold: must be 0 to 1e9 ms"),
        (lambda c, r: c.update(output=""), "(--output: is empty)"),
        (lambda c, r: c.update(activities=["gpu"]), "(--activities: unknown activity 'gpu')"),
        (lambda c, r: c.update(ranks=[-1]), "(--ranks: rank -1 is not in 0-1048575)"),
        (lambda c, r: c.update(step_on="nocolon"), "(--step-on: 'nocolon' is not MODULE:QUALNAME)"),
        (lambda c, r: c.update(metadata={"k": float("nan")}), "a metadata number out of JSON's range"),
        (lambda c, r: r.update(launcher_pid=-1), "(run.launcher_pid -1 is out of range)"),
        (lambda c, r: c.update(output="/o/\ud800"), "(output '/o/\\ud800' is no usable path)"),
        (lambda c, r: r.update(log="/o/\ud800.log"), "(log '/o/\\ud800.log' is no usable path)"),
        (lambda c, r: r.update(shown_local_ranks=[-2]), "(run.shown_local_ranks [-2])"),
    ],
)
def test_a_payload_out_of_range_is_refused_as_the_flags_are(change, expected: str) -> None:
    """A payload written by hand (a child started without npuprof run) was typed but not range-checked: a
    --wait of -1, an empty output, a NaN in metadata reached the agent. The agent says the PayloadError in
    one line and trains on without profiling (the test above)."""
    from npuprof.config import ProfileConfig
    from npuprof.payload import PayloadError, read_payload

    document = json.loads(ProfileConfig().to_env({"run_id": "r"}))
    change(document["config"], document["run"])
    with pytest.raises(PayloadError) as caught:
        read_payload(json.dumps(document))
    assert expected in str(caught.value), caught.value


def test_metadata_the_launcher_wrote_as_escapes_is_read_whole() -> None:
    """The launcher writes bytes that are not UTF-8 as \\xNN (launch.text_metadata): a value within the
    4096-character limit as given is longer in the payload, and still read."""
    from npuprof.config import ProfileConfig
    from npuprof.launch import text_metadata
    from npuprof.payload import read_payload

    metadata, _notes = text_metadata({"k": "\udcff" * 4000})
    config, _run = read_payload(ProfileConfig(metadata=metadata).to_env({"run_id": "r"}))
    assert config.metadata == {"k": "\\xff" * 4000}


def test_a_payload_file_that_is_no_regular_file_or_too_large_is_refused_at_once(tmp_path: Path) -> None:
    """``NPUPROF_CONFIG=@/some/fifo`` (set by hand) blocked the job's ``import torch`` for good (the agent
    reads it there); a file over 16 MiB is no payload (``@/dev/zero`` read until memory ran out)."""
    import threading

    from npuprof.payload import PayloadError, read_payload

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    said: list[str] = []

    def read() -> None:
        try:
            read_payload(f"@{fifo}")
        except PayloadError as exc:
            said.append(str(exc))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(5)
    if reader.is_alive():  # blocked in open(): a writer lets it go
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(5)
    assert said == [f"NPUPROF_CONFIG cannot be read ({str(fifo)!r} is not a regular file)"]
    large = tmp_path / "large.json"
    with open(large, "wb") as handle:
        handle.truncate((16 << 20) + 1)
    with pytest.raises(PayloadError, match=r"large.json' is over 16 MiB: no npuprof payload\)$"):
        read_payload(f"@{large}")


def test_a_job_given_a_payload_it_cannot_read_trains_on_and_says_why_once(tmp_path: Path) -> None:
    """A job whose npuprof differs from the launcher's (a container with another install): one line on
    stderr, no traceback, the job's exit code unchanged. Plain Python: the payload is read as the agent
    wakes, at the import of a stand-in torch.optim (tests/_standin_jobs.py)."""
    from _standin_jobs import standin_torch
    from conftest import ROOT, clean_env

    from npuprof.config import ProfileConfig

    document = json.loads(ProfileConfig(output=str(tmp_path / "out")).to_env({"run_id": "r"}))
    document["version"] = 2
    env = clean_env(
        NPUPROF_CONFIG=json.dumps(document),
        NPUPROF_TRIGGERS="torch.optim",
        PYTHONPATH=os.pathsep.join(
            [str(ROOT / "npuprof" / "_bootstrap"), str(ROOT), str(standin_torch(tmp_path))]
        ),
    )
    script = "import torch.optim\nassert 'standin' in torch.optim.__file__\n"
    script += "for step in range(3):\n    print(step)\n"
    script += "raise SystemExit(7)\n"
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 7 and result.stdout == "0\n1\n2\n", result.stderr  # it trained on
    lines = [line for line in result.stderr.splitlines() if "npuprof" in line]
    assert len(lines) == 1 and "NPUPROF_CONFIG is version 2, this npuprof reads 1" in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_a_child_whose_payload_the_script_damaged_is_named_in_the_runs_last_line(tmp_path: Path) -> None:
    """helper-110: a job whose training child got a rewritten NPUPROF_CONFIG (a wrapper that edits its
    environment) said so only on the child's stderr, which the wrapper captured: the run's last line read
    "no process of the job imported torch.optim" of a child that trained 3 steps. Its agent's failure now
    reaches the run's log, and the last line names it. Plain Python: the child's agent wakes at the import of
    a stand-in torch.optim.optimizer (tests/_standin_jobs.py), and fails there on its payload."""
    from _standin_jobs import importing_torch_optim
    from conftest import clean_env, npuprof

    child_job, standin = importing_torch_optim(tmp_path)
    parent = tmp_path / "wrapper.py"
    parent.write_text(
        "import json, os, subprocess, sys\n"
        "env = dict(os.environ)\n"
        "payload = json.loads(env['NPUPROF_CONFIG']); payload['version'] = 2\n"
        "env['NPUPROF_CONFIG'] = json.dumps(payload)\n"
        f"done = subprocess.run({child_job!r}, env=env, capture_output=True)\n"
        "sys.exit(done.returncode)\n"
    )
    out = tmp_path / "out"
    result = npuprof("run", "-o", str(out), "--", sys.executable, str(parent), env=clean_env(**standin))
    assert result.returncode == 0, result.stderr
    said = " ".join(result.stderr.split())
    assert (
        "no capture was written (exit code 0): npuprof's agent failed to start in the job: NPUPROF_CONFIG is "
        "version 2, this npuprof reads 1"
    ) in said, said
    assert "imported torch.optim" not in said


# ---- the capture record and the capture job ------------------------------------------------------------
def _record_dir(tmp_path: Path, record: object) -> Path:
    rank_dir = tmp_path / "host_1_20250101000000000_ascend_pt"
    rank_dir.mkdir(parents=True)
    (rank_dir / "npuprof_capture.json").write_text(json.dumps(record))
    return rank_dir


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        ({"status": "complete", "version": 2}, "version 2, this npuprof reads 1: written by a newer npuprof"),
        ({"status": "done"}, "damaged (Invalid enum value 'done' - at `$.status`)"),
        ({"status": "complete", "steps": ["3"]}, "at `$.steps[0]`"),
        (["complete"], "not a JSON object"),
    ],
)
def test_a_capture_record_of_another_version_or_damaged_reads_as_incomplete_and_says_why(
    tmp_path: Path, record: object, expected: str
) -> None:
    from npuprof.results.layout import capture_status

    status = capture_status(_record_dir(tmp_path, record))
    assert status.status == "incomplete" and expected in status.detail, status


def test_a_record_without_a_version_is_read_as_version_1(tmp_path: Path) -> None:
    from npuprof.results.layout import capture_status

    status = capture_status(_record_dir(tmp_path, {"status": "complete", "steps": [3, 4], "detail": "x"}))
    assert (status.status, status.detail) == ("complete", "x")


def test_a_capture_job_survives_the_pipe_with_bytes_that_are_not_utf8() -> None:
    from npuprof.results import handover

    job = handover.job_from(
        {"rank_dir": os.fsdecode(b"/r/\xff"), "record": {"status": "complete", "steps": [1]}, "gzip": True}
    )
    line = handover.job_line(job)
    line.decode("utf-8")
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    again = handover.job_from_line(line)
    assert again == job and os.fsencode(again.rank_dir) == b"/r/\xff"
    with pytest.raises(handover.HandoverError, match="version 9"):
        handover.job_from_line(line.replace(b'"version":1}\n', b'"version":9}\n'))


def test_a_job_beyond_its_launchers_reach_says_nothing_false_of_its_post_processor(tmp_path: Path) -> None:
    """helper-117: a process with the run's payload but no launcher near (another node of a multi-node job)
    whose output dir did not exist yet said "no post-processor could be started (No such file or
    directory): captures are written in the step, unparsed"; its capture made the dir and started one."""
    from conftest import ROOT, SCRIPTS, clean_env

    from npuprof.config import ProfileConfig
    from npuprof.launch import OPTIMIZER_TRIGGER

    out = tmp_path / "not-yet"
    log = tmp_path / "npuprof.log"  # the run's log, on the launcher's node
    run = {"run_id": "r", "output": str(out), "log": str(log)}
    env = clean_env(
        NPUPROF_CONFIG=ProfileConfig(output=str(out)).to_env(run),
        NPUPROF_TRIGGERS=OPTIMIZER_TRIGGER,
        PYTHONPATH=os.pathsep.join([str(ROOT / "npuprof" / "_bootstrap"), str(ROOT)]),
    )
    result = subprocess.run(
        [sys.executable, str(SCRIPTS / "trainer.py"), "--steps", "10"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "post-processor" not in result.stderr, result.stderr
    (rank_dir,) = out.glob("*_ascend_pt")
    assert json.loads((rank_dir / "npuprof_capture.json").read_text())["status"] == "complete"
    assert "post-processor not started with training (FileNotFoundError" in log.read_text()


def test_the_record_of_a_capture_of_100000_steps_reads_as_complete(tmp_path: Path) -> None:
    """A --step-on function of a few µs, or a time window over short steps, recorded 100,000 steps: the
    record listing them (1.5 MB, written as the agent writes it) was over the 1 MiB a record could be, so
    the capture read as interrupted, was never parsed, and the run said "no capture was written"
    (helper-152)."""
    import msgspec

    from npuprof.results import layout
    from npuprof.results.atomic import write_json
    from npuprof.results.handover import CaptureRecord

    rank_dir = write_rank_dir(tmp_path / "result", cuda_trace())
    (trace,) = rank_dir.glob("*.pt.trace.json")
    steps = list(range(7, 100_007))
    record = CaptureRecord(status="complete", trace=trace.name, steps=steps)
    write_json(rank_dir / layout.CAPTURE_RECORD, msgspec.to_builtins(record), fsync=False)
    assert (rank_dir / layout.CAPTURE_RECORD).stat().st_size > layout.RECORD_LIMIT
    assert layout.capture_status(rank_dir).complete
    assert (layout.read_capture_record(rank_dir) or {}).get("steps") == steps
    outcome = parse_rank_dir(rank_dir)
    assert outcome.status == "parsed", outcome.reason


def test_a_corrupt_version_is_shown_cut_short() -> None:
    """helper-154: a summary whose version was a list nested hundreds deep (a corrupt or hand-made file) was
    pasted whole into the one-line error: 20,000 characters on 3.13, whose readers go 10,000 levels deep."""
    from npuprof.analysis.summary_schema import SummaryError, read_summary

    deep = "[" * 400 + "]" * 400
    with pytest.raises(SummaryError) as caught:
        read_summary(f'{{"version": {deep}}}'.encode())
    said = str(caught.value)
    assert said.startswith("written by an older npuprof (summary version [[[[") and "…" in said, said
    assert len(said) < 200, len(said)
