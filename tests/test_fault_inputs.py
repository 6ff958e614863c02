"""Hostile inputs to `npuprof run` and `npuprof analyse`: bytes that are not UTF-8, files planted in the
result tree (FIFOs, symlinks), a closed or broken terminal, a run still in flight, and the messages at the
end of a run.

Real subprocesses throughout: `npuprof run` around real jobs (CPU torch training where it matters), `npuprof
analyse` on real result trees, real FIFOs, real pipes.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import shlex
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _forked_cli import npuprof  # report commands forked from a process that imported them: see its doc
from _standin_jobs import importing_torch_optim, stepping_job, stepping_script
from analyse_support.handmade import cpu_trace, write_rank_dir
from conftest import clean_env, rank_dirs, sched, trainer

NPUPROF = [sys.executable, "-m", "npuprof"]
XFF = os.fsdecode(b"\xff")  # what Python makes of the byte 0xff in argv, paths and the environment


def _wait_for(condition, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _one_line_each(stderr: str, needle: str) -> list[str]:
    return [line for line in stderr.splitlines() if needle in line]


def _strict_json(path: Path) -> dict:
    """The file as JSON, read as strict UTF-8 (a record must be valid JSON text for any tool)."""
    return json.loads(path.read_bytes().decode("utf-8"))


# ---- 1. bytes that are not UTF-8 ---------------------------------------------------------------------
_SHOW_BYTES = (
    "import os, sys\n"
    "print(repr([os.fsencode(a) for a in sys.argv[1:]]))\n"
    "print(repr(os.fsencode(os.getcwd())))\n"
    "print(repr(os.environb.get(b'NPUPROF_TEST_BYTES')))\n"
)


@pytest.mark.parametrize("where", ["argv", "cwd", "output", "metadata", "environment"])
def test_bytes_that_are_not_utf8_reach_the_job_exactly_and_the_record_stays_json(
    tmp_path: Path, where: str
) -> None:
    script = tmp_path / "show.py"
    script.write_text(_SHOW_BYTES)
    cwd = tmp_path / ("work" + (XFF if where == "cwd" else ""))
    cwd.mkdir()
    out = tmp_path / ("result" + (XFF if where == "output" else ""))
    flags = ["--metadata", f"team=a{XFF}b"] if where == "metadata" else []
    args = [f"x{XFF}\udcfey"] if where == "argv" else ["plain"]
    env = clean_env(NPUPROF_TEST_BYTES=f"v{XFF}" if where == "environment" else "v")
    proc = subprocess.run(
        [*NPUPROF, "run", "-o", str(out), *flags, "--", sys.executable, str(script), *args],
        cwd=cwd, env=env, capture_output=True, timeout=120,
    )  # fmt: skip
    stderr = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    lines = proc.stdout.decode().splitlines()
    assert lines == [
        repr([os.fsencode(a) for a in args]),
        repr(os.fsencode(str(cwd))),
        repr(b"v\xff" if where == "environment" else b"v"),
    ]
    record = _strict_json(out / "npuprof_run.json")  # valid UTF-8 JSON, the bytes kept as \udcXX escapes
    assert [os.fsencode(a) for a in record["command"][2:]] == [os.fsencode(a) for a in args]
    assert os.fsencode(record["cwd"]) == os.fsencode(str(cwd))
    assert os.fsencode(record["config"]["output"]) == os.fsencode(str(out))
    assert record["exit_code"] == 0
    if where == "metadata":
        assert record["config"]["metadata"] == {"team": f"a{XFF}b"}
        (line,) = _one_line_each(stderr, "--metadata team")
        assert line.startswith("npuprof:") and "not valid UTF-8" in line


@pytest.fixture(scope="module")
def not_utf8_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """`npuprof run` (skip 1, no warm-up, record 2) around 4 steps, with a --metadata value and the output
    directory's name not UTF-8: (the output directory, the result), read by the two tests below."""
    out = tmp_path_factory.mktemp("not-utf8") / f"result{XFF}"
    proc = npuprof(
        "run", "-o", str(out), *sched(1, 0, 2), "--metadata", f"team=a{XFF}b", "--", *trainer("--steps", "4")
    )
    return out, proc


def test_metadata_that_is_not_utf8_still_gives_a_complete_capture(not_utf8_run) -> None:
    out, proc = not_utf8_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    (d,) = rank_dirs(out)
    assert _strict_json(d / "npuprof_capture.json")["status"] == "complete"
    assert _strict_json(d / "profiler_metadata.json")["team"] == "a\\xffb"
    assert _strict_json(out / "npuprof_run.json")["config"]["metadata"] == {"team": f"a{XFF}b"}


def test_paths_that_are_not_utf8_reach_a_strict_stdout_as_their_bytes(tmp_path: Path) -> None:
    """Where the locale's stdout is strict (en_US.UTF-8; PYTHONIOENCODING=utf-8:strict here), `npuprof
    analyse` of a directory named with a byte that is not UTF-8 wrote no report ("cannot write the report
    to stdout: ... surrogates not allowed", exit 1), nor `npuprof status` its table. The name is written
    as its bytes, as in the C locale."""
    root = tmp_path / f"res{XFF}"
    rank_dir = write_rank_dir(root, cpu_trace(), name=f"h{XFF}_1_20250101000000000")
    watched = tmp_path / f"dyn{XFF}"
    (watched / "log").mkdir(parents=True)
    env = clean_env(PYTHONIOENCODING="utf-8:strict")
    report = subprocess.run([*NPUPROF, "analyse", str(root), "--format", "csv"], capture_output=True, env=env)
    assert report.returncode == 0, report.stderr
    assert report.stdout.splitlines()[-1].endswith(b"," + os.fsencode(str(rank_dir))), report.stdout
    status = subprocess.run([*NPUPROF, "status", str(watched)], capture_output=True, env=env)
    assert status.returncode == 0, status.stderr
    assert status.stdout.startswith(os.fsencode(str(watched))), status.stdout


# ---- 2. FIFOs and symlinks planted in the result tree ------------------------------------------------
def _planted_tree(root: Path, outside: Path) -> dict[str, Path]:
    """A result dir with one good rank dir and the traps: FIFOs as a capture record, a trace and the run
    record; a symlinked trace and a symlinked rank dir leading outside the tree."""
    out = root / "result"
    write_rank_dir(out, cpu_trace(), rank=0, name="good_1_20250101000000000")
    fifo_record = out / "fiforecord_2_20250101000000000_ascend_pt"
    fifo_record.mkdir()
    os.mkfifo(fifo_record / "npuprof_capture.json")
    fifo_trace = out / "fifotrace_3_20250101000000000_ascend_pt"
    fifo_trace.mkdir()
    os.mkfifo(fifo_trace / "host.1.pt.trace.json")
    linked_trace = out / "linktrace_4_20250101000000000_ascend_pt"
    linked_trace.mkdir()
    outside.mkdir()
    secret = write_rank_dir(outside, cpu_trace(), rank=5, name="secret_5_20250101000000000")
    (linked_trace / "host.1.pt.trace.json").symlink_to(next(secret.glob("*.pt.trace.json")))
    (out / "linkdir_6_20250101000000000_ascend_pt").symlink_to(secret)
    os.mkfifo(out / "npuprof_run.json")
    capturing = out / "capturing_7_20250101000000000_ascend_pt"  # read as "in progress" needs the run record
    capturing.mkdir()
    (capturing / "npuprof_capture.json").write_text(json.dumps({"status": "capturing", "run_id": "r1"}))
    return {
        "record": fifo_record / "npuprof_capture.json",
        "trace": fifo_trace / "host.1.pt.trace.json",
        "linked_trace": linked_trace / "host.1.pt.trace.json",
        "linked_dir": out / "linkdir_6_20250101000000000_ascend_pt",
        "run_record": out / "npuprof_run.json",
        "secret": secret,
    }


def test_planted_fifos_and_symlinks_never_hang_or_lead_analyse_out_of_the_tree(tmp_path: Path) -> None:
    traps = _planted_tree(tmp_path, tmp_path / "outside")
    try:
        proc = npuprof("analyse", str(tmp_path / "result"), "--format", "json", timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("npuprof analyse hung on a planted FIFO")
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [Path(r["rank_dir"]).name for r in report["ranks"]] == ["good_1_20250101000000000_ascend_pt"]
    for name in ("record", "trace", "linked_trace", "linked_dir", "run_record"):
        (line,) = _one_line_each(proc.stderr, f"skipped {traps[name]}:")
        assert line.startswith("npuprof analyse: warning:"), line
    assert "not followed" in _one_line_each(proc.stderr, str(traps["linked_dir"]))[0]
    assert "FIFO" in _one_line_each(proc.stderr, str(traps["record"]))[0]
    assert not (traps["secret"] / "ASCEND_PROFILER_OUTPUT").exists(), "analyse wrote outside the tree"


def _never_hangs(*args: str) -> subprocess.CompletedProcess[str]:
    try:
        return npuprof(*args, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"npuprof {' '.join(args[:1])} hung on a FIFO planted as a capture's side file")


def test_fifos_planted_as_a_captures_side_files_never_hang(tmp_path: Path) -> None:
    """helper-129: the capture record, the run record and the trace were read without blocking, the rest
    not: a FIFO as profiler_info.json hung `npuprof analyse` (whether the capture asked for a db), as
    npuprof_summary.json or npuprof_annotations.json beside a deleted trace hung it too, as
    profiler_metadata.json hung `--export-type db`, and as memory_timeline.meta.json hung `npuprof
    memory-timeline`. Each is passed over as the file missing or unreadable would be."""
    info = write_rank_dir(tmp_path / "info", cpu_trace(), rank=None)
    (info / "profiler_info.json").unlink()
    os.mkfifo(info / "profiler_info.json")
    proc = _never_hangs("analyse", str(info), "--format", "json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["ranks"][0]["steps"], proc.stderr
    for name in ("npuprof_summary.json", "npuprof_annotations.json"):
        parsed = write_rank_dir(tmp_path / name, cpu_trace(), rank=0)
        assert _never_hangs("analyse", str(parsed)).returncode == 0
        next(parsed.glob("*.pt.trace.json")).unlink()  # deleted to save space: the tables are what is left
        (parsed / "ASCEND_PROFILER_OUTPUT" / name).unlink(missing_ok=True)
        os.mkfifo(parsed / "ASCEND_PROFILER_OUTPUT" / name)
        proc = _never_hangs("analyse", str(parsed), "--format", "json")
        assert "Traceback" not in proc.stderr, proc.stderr
        if name == "npuprof_summary.json":
            assert proc.returncode == 1 and "npuprof_summary.json" in proc.stderr, proc.stderr
        else:
            assert proc.returncode == 0 and json.loads(proc.stdout)["ranks"][0]["steps"], proc.stderr
    meta = write_rank_dir(tmp_path / "meta", cpu_trace(), rank=0)
    os.mkfifo(meta / "profiler_metadata.json")
    proc = _never_hangs("analyse", str(meta), "--export-type", "db", "--format", "json")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    timeline = tmp_path / "timeline_1_20250101000000000_ascend_pt"
    timeline.mkdir()
    with gzip.open(timeline / "memory_timeline.raw.json.gz", "wt") as raw:
        json.dump([[1000, 0, 4096, 1], [2000, 1, 4096, 1]], raw)
    os.mkfifo(timeline / "memory_timeline.meta.json")
    proc = _never_hangs("memory-timeline", str(timeline), "-o", str(tmp_path / "timeline.json"))
    assert proc.returncode == 0 and "(unknown device, 2 memory events" in proc.stderr, proc.stderr
    # the raw data read all the same: at 1 and 2 us, 4096 bytes more each time, of category 1
    # (OPTIMIZER_STATE, torch's second column after the plot's base 0)
    row = [0] * 9
    row[2] = 4096
    assert json.loads((tmp_path / "timeline.json").read_text()) == [[1, 2], [row, [*row[:2], 8192, *row[3:]]]]


def test_a_planted_fifo_never_hangs_the_launchers_summary(out: Path, tmp_path: Path) -> None:
    plant = tmp_path / "plant.py"  # the job plants them in the output dir while it runs
    plant.write_text(
        "import os, sys\n"
        "out = sys.argv[1]\n"
        "d = os.path.join(out, 'evil_9_20250101000000000_ascend_pt')\n"
        "os.mkdir(d)\n"
        "os.mkfifo(os.path.join(d, 'npuprof_capture.json'))\n"
        "os.symlink('/etc/passwd', os.path.join(d, 'x.pt.trace.json'))\n"
        "os.symlink('/etc', os.path.join(out, 'link_ascend_pt'))\n"
    )
    try:
        proc = npuprof("run", "-o", str(out), "--", sys.executable, str(plant), str(out), timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("npuprof run hung on a FIFO planted as a capture record")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    fifo = out / "evil_9_20250101000000000_ascend_pt" / "npuprof_capture.json"
    (line,) = _one_line_each(proc.stderr, f"skipped {fifo}:")
    assert line.startswith("npuprof:") and "FIFO" in line
    (line,) = _one_line_each(proc.stderr, f"skipped {out / 'link_ascend_pt'}:")
    assert "not followed" in line
    assert _strict_json(out / "npuprof_run.json")["exit_code"] == 0


def test_a_record_too_large_is_not_read(tmp_path: Path) -> None:
    out = tmp_path / "result"
    d = write_rank_dir(out, cpu_trace(), rank=0, name="big_1_20250101000000000")
    from npuprof.results.layout import CAPTURE_RECORD_LIMIT

    pad = "x" * (CAPTURE_RECORD_LIMIT + 1)  # beyond what a capture of a million steps lists
    (d / "npuprof_capture.json").write_text(json.dumps({"status": "complete", "pad": pad}))
    proc = npuprof("analyse", str(out), "--format", "json")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    (line,) = _one_line_each(proc.stderr, f"skipped {d / 'npuprof_capture.json'}:")
    assert "too large" in line
    (line,) = _one_line_each(proc.stderr, "not analysed:")
    assert "incomplete" in line


# ---- 3. a closed or broken terminal --------------------------------------------------------------------
def _exit_3_job(tmp_path: Path, body: str = "", before: str = "") -> list[str]:
    """A job that says it started (``before`` runs first), runs ``body``, prints and exits 3."""
    script = tmp_path / "job.py"
    script.write_text(
        "import os, pathlib, signal, sys, time\n"
        f"{before}"
        f"pathlib.Path({str(tmp_path / 'started')!r}).write_text(str(os.getpid()))\n"
        f"{body}"
        "print('job output', flush=True)\n"
        "sys.exit(3)\n"
    )
    return [sys.executable, str(script)]


def test_a_closed_stderr_keeps_the_jobs_exit_code(out: Path, tmp_path: Path) -> None:
    job = _exit_3_job(tmp_path)
    proc = subprocess.run(
        [*NPUPROF, "run", "-o", str(out), "--", *job],
        env=clean_env(), stdout=subprocess.PIPE, text=True, timeout=120, preexec_fn=lambda: os.close(2),
    )  # fmt: skip
    assert proc.returncode == 3
    assert proc.stdout == "job output\n"
    assert _strict_json(out / "npuprof_run.json")["exit_code"] == 3


def test_a_full_stderr_keeps_the_jobs_exit_code(out: Path, tmp_path: Path) -> None:
    job = _exit_3_job(tmp_path)
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [*NPUPROF, "run", "-o", str(out), "--", *job],
            env=clean_env(), stdout=subprocess.PIPE, stderr=full, text=True, timeout=120,
        )  # fmt: skip
    assert proc.returncode == 3
    assert _strict_json(out / "npuprof_run.json")["exit_code"] == 3


def test_a_broken_stderr_pipe_keeps_the_jobs_exit_code(out: Path, tmp_path: Path) -> None:
    job = _exit_3_job(tmp_path, "time.sleep(0.5)\n")
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader (a `| head` that has exited) is gone before npuprof writes a word
    try:
        proc = subprocess.run(
            [*NPUPROF, "run", "-o", str(out), "--", *job],
            env=clean_env(), stdout=subprocess.PIPE, stderr=write_end, text=True, timeout=120,
        )  # fmt: skip
    finally:
        os.close(write_end)
    assert proc.returncode == 3
    assert proc.stdout == "job output\n"
    assert _strict_json(out / "npuprof_run.json")["exit_code"] == 3


def test_a_broken_stderr_pipe_never_stops_npuprof_reaping_a_killed_job(out: Path, tmp_path: Path) -> None:
    from npuprof import launch

    # SIGINT noted, not obeyed, before the job says it started: the first Ctrl-C cannot come in between
    heard = tmp_path / "heard"
    notes = f"signal.signal(signal.SIGINT, lambda *_: open({str(heard)!r}, 'a').write('SIGINT\\n'))\n"
    job = _exit_3_job(tmp_path, "time.sleep(60)\n", before=notes)
    read_end, write_end = os.pipe()
    os.close(read_end)
    proc = subprocess.Popen(
        [*NPUPROF, "run", "-o", str(out), "--", *job],
        env=clean_env(), stdout=subprocess.DEVNULL, stderr=write_end, start_new_session=True,
    )  # fmt: skip
    os.close(write_end)
    try:
        _wait_for((tmp_path / "started").exists, "the job to start")
        proc.send_signal(signal.SIGINT)
        _wait_for(heard.exists, "the job to get the first SIGINT")
        # npuprof noted the first before passing it on: a second one SAME_CTRL_C_S after it is a Ctrl-C of
        # its own (a fixed 0.5 s from the send was none for a launcher off the CPU meanwhile)
        time.sleep(launch.SAME_CTRL_C_S + 0.05)
        proc.send_signal(signal.SIGINT)  # the second one kills the job and says so on the broken stderr
        proc.wait(timeout=60)
    finally:
        _kill_group(proc.pid)
    assert proc.returncode == -signal.SIGINT
    assert _strict_json(out / "npuprof_run.json")["exit_code"] == 128 + signal.SIGKILL


def test_analyse_into_a_closed_pipe_or_a_full_disk(tmp_path: Path) -> None:
    out = tmp_path / "result"
    for rank in range(3):
        write_rank_dir(out, cpu_trace(), rank=rank, name=f"h_{rank}_20250101000000000")
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            [*NPUPROF, "analyse", str(out), "--format", "json"],
            env=clean_env(), stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120,
        )  # fmt: skip
    finally:
        os.close(write_end)
    assert "Traceback" not in proc.stderr and "Error" not in proc.stderr, proc.stderr
    assert proc.returncode == 128 + signal.SIGPIPE, proc.stderr  # as a tool killed by SIGPIPE
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [*NPUPROF, "analyse", str(out)],
            env=clean_env(), stdout=full, stderr=subprocess.PIPE, text=True, timeout=120,
        )  # fmt: skip
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 1
    (line,) = _one_line_each(proc.stderr, "cannot write the report")
    assert line.startswith("npuprof analyse:") and "No space left" in line


def test_output_cut_short_under_pythonunbuffered_is_an_error_not_a_success(tmp_path: Path) -> None:
    """helper-248: with PYTHONUNBUFFERED=1 (many containers set it) sys.stdout writes to a bare FileIO,
    whose short write CPython's TextIOWrapper takes as whole: `npuprof export-stacks RANK_DIR | head -1`
    exited 0, and `> file` on a disk that filled kept its first 64 KiB and exited 0, unsaid. A reader
    that leaves during a write now ends the command with 141, as a tool killed by SIGPIPE."""
    text = "x" * (1 << 20)  # far more than a pipe holds: the write is blocked when the reader leaves
    code = (
        "import sys\n"
        "from npuprof.cli.main import check_stdout, guard_streams\n"
        "guard_streams()\n"
        f"sys.stdout.write('x' * {len(text)})\n"
        "try:\n"
        "    check_stdout('npuprof export-stacks', 'the stacks')\n"
        "except Exception as ended:\n"  # typer.Exit, as the command raises it
        "    sys.exit(ended.exit_code)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], env=clean_env(PYTHONUNBUFFERED="1"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(10) == b"x" * 10  # as `head -c 10`: some of it, then gone
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 128 + signal.SIGPIPE, err
    assert err == ""


def test_every_byte_gets_out_through_short_writes_under_pythonunbuffered() -> None:
    """A short write that is no error (a signal during a blocked write to a pipe) left the rest of the
    text unwritten; it is written on from where the file stopped."""
    import io

    from npuprof.cli.main import GuardedStream

    class ShortWrites(io.RawIOBase):
        def __init__(self) -> None:
            self.got = bytearray()

        def writable(self) -> bool:
            return True

        def write(self, data) -> int:  # type: ignore[override]
            self.got += bytes(data[:7])
            return min(len(data), 7)

    raw = ShortWrites()
    stream = GuardedStream(io.TextIOWrapper(raw, encoding="utf-8", write_through=True))  # type: ignore[arg-type]
    text = "step 3 ended the capture: 7.7 ms µs\n" * 50
    stream.write(text)
    stream.flush()
    assert stream.error is None
    assert raw.got.decode("utf-8") == text


# ---- 4. a run still in flight ----------------------------------------------------------------------------
_SLOW_TRAINING = (
    "import pathlib, sys, time, torch\n"
    "go, started = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])\n"
    "model = torch.nn.Linear(4, 4)\n"
    "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "for step in range(2000):\n"
    "    opt.zero_grad(); model(torch.randn(2, 4)).sum().backward(); opt.step()\n"
    "    if step == 3:\n"
    "        started.write_text('x')\n"
    "    if go.exists():\n"
    "        break\n"
    "    time.sleep(0.02)\n"
    "import gc; gc.freeze()\n"  # skip the exit-time collection over torch's objects
)


def test_analyse_of_a_run_in_progress_says_in_progress(out: Path, tmp_path: Path) -> None:
    script = tmp_path / "slow.py"
    script.write_text(_SLOW_TRAINING)
    go, started = tmp_path / "go", tmp_path / "started"
    proc = subprocess.Popen(
        [*NPUPROF, "run", "-o", str(out), "--no-analyse", *sched(1, 0, 1000), "--",
         sys.executable, str(script), str(go), str(started)],
        env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        _wait_for(started.exists, "the capture to start", timeout=120)
        (d,) = rank_dirs(out)
        assert json.loads((d / "npuprof_capture.json").read_text())["status"] == "capturing"
        table = npuprof("analyse", str(out))
        report = npuprof("analyse", str(out), "--format", "json")
        go.touch()
        _, stderr = proc.communicate(timeout=120)
    finally:
        _kill_group(proc.pid)
    assert proc.returncode == 0, stderr
    (line,) = _one_line_each(table.stderr, "not analysed:")
    assert f"{d}: in progress" in line and f"npuprof pid {proc.pid}" in line, line
    assert "interrupted" not in table.stderr and "process ended" not in table.stderr
    (problem,) = json.loads(report.stdout)["problems"]
    assert problem["status"] == "in progress"
    finished = npuprof("analyse", str(out), "--format", "json")  # once the run has ended: analysed
    assert finished.returncode == 0, finished.stderr
    assert json.loads(finished.stdout)["problems"] == []


def test_analyse_of_a_run_that_has_captured_nothing_yet_says_it_still_goes(out: Path, tmp_path: Path) -> None:
    """helper-117: analyse before a run's first capture said "nothing to analyse" and no more, as of a run
    that had failed."""
    go = tmp_path / "go"
    job = f"import os, time\nwhile not os.path.exists({str(go)!r}):\n    time.sleep(0.05)\n"
    proc = subprocess.Popen(
        [*NPUPROF, "run", "-o", str(out), "--", sys.executable, "-c", job],
        env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        _wait_for(lambda: any(out.glob("npuprof_run*.json")), "the run record", timeout=60)
        during = npuprof("analyse", str(out))
        go.touch()
        proc.communicate(timeout=60)
    finally:
        _kill_group(proc.pid)
    assert during.returncode == 1
    (line,) = during.stderr.splitlines()
    assert line.startswith("npuprof analyse: nothing to analyse: no rank directory"), line
    assert f"is still going (npuprof pid {proc.pid} on {os.uname().nodename}): its captures land here" in line
    after = npuprof("analyse", str(out))
    assert after.returncode == 1 and "still going" not in after.stderr, after.stderr


def _capture_of(out: Path, name: str, run_id: str, status: str, snapshot: bool = False) -> Path:
    """A capture of the run ``run_id`` as its training process leaves it for the post-processor: its trace
    (with [memory] events) and record, with ``snapshot`` the memory snapshot the timeline is made from."""
    from analyse_support.handmade import mem

    trace = cpu_trace()
    trace["traceEvents"] += [mem(110, 4096, 4096, 1), mem(700, -4096, 0, 1)]
    d = write_rank_dir(out, trace, rank=None, name=name)
    record = {"status": status, "run_id": run_id, "steps": [7], "trace": "host.1.pt.trace.json", "version": 1}
    if status == "capturing":
        (d / "host.1.pt.trace.json").unlink()
        record.pop("trace")
    (d / "npuprof_capture.json").write_text(json.dumps(record))
    if snapshot:
        (d / "memory_timeline.snapshot.msgpack").write_bytes(b"\x80")
    return d


def _written_run_id(out: Path) -> str | None:
    """The run id in OUT's run record once it is written: the launcher claims the record's name with an
    empty file first, then writes it whole (results/run_record.py, claim_record_path)."""
    for path in out.glob("npuprof_run*.json"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            return json.loads(path.read_text())["run_id"]
    return None


def test_a_runs_summary_and_record_leave_out_an_earlier_runs_captures(out: Path) -> None:
    """Runs one after the other into one -o: the captures of the earlier run (their records name its run id)
    are not this run's; a run that captured nothing says so, and its record lists no capture."""
    out.mkdir()
    _capture_of(out, "h_1_20250101000000000", "a0a0a0a0a0a0", "complete")
    result = npuprof("run", "-o", str(out), "--", sys.executable, "-c", "pass")
    assert result.returncode == 0, result.stderr
    assert json.loads((out / "npuprof_run.json").read_text())["captures"] == []
    assert "no capture was written (exit code 0)" in result.stderr, result.stderr


def test_readers_of_a_run_still_going_say_so(out: Path, tmp_path: Path) -> None:
    """helper-139: while a run went on, `analyse` reported the captures written so far with exit 0 and no
    word that the run was going; it warned that a --memory-timeline "was not made" while the post-processor
    had yet to make it; `memory-timeline` told to capture again with the flags the run had."""
    go = tmp_path / "go"
    job = f"import os, time\nwhile not os.path.exists({str(go)!r}):\n    time.sleep(0.05)\n"
    proc = subprocess.Popen(
        [*NPUPROF, "run", "-o", str(out), "--profile-memory", "--record-shapes", "--with-stack",
         "--memory-timeline", "json", "--", sys.executable, "-c", job],
        env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        _wait_for(lambda: _written_run_id(out) is not None, "the run record", timeout=60)
        run_id = _written_run_id(out)
        snapped = _capture_of(out, "h_1_20250101000000000", run_id, "complete", snapshot=True)
        exported = _capture_of(out, "h_1_20250101000000001", run_id, "complete")
        capturing = _capture_of(out, "h_1_20250101000000002", run_id, "capturing")
        during = npuprof("analyse", str(out), "--format", "json")
        timeline = npuprof("memory-timeline", str(exported), "-o", str(tmp_path / "m.json"))
        recording = npuprof("memory-timeline", str(capturing), "-o", str(tmp_path / "r.json"))
        go.touch()
        proc.communicate(timeout=60)
    finally:
        _kill_group(proc.pid)
    said = " ".join(during.stderr.split())
    assert during.returncode == 0 and len(json.loads(during.stdout)["ranks"]) == 2, during.stderr
    assert f"note: run {run_id} is still going (npuprof pid {proc.pid} on" in said, said
    assert "this report holds what it had written so far" in said, said
    assert "was not made" not in said, said  # its post-processor has yet to make it
    told = " ".join(timeline.stderr.split())
    assert timeline.returncode == 0 and (tmp_path / "m.json").is_file(), told
    assert "Categories UNKNOWN for now" in told and "its run is still going" in told, told
    assert "For categories: npuprof run" not in told, told  # the run has those flags
    assert recording.returncode == 1 and not (tmp_path / "r.json").exists(), recording.stderr
    (line,) = recording.stderr.splitlines()
    assert f"{capturing}: in progress: its run is still going" in line and "capture with" not in line, line
    after = npuprof("analyse", str(out))
    assert after.returncode == 0 and "still going" not in after.stderr, after.stderr
    assert f"warning: {snapped}: its memory timeline was not made" in after.stderr, after.stderr


_PARSED_AGAIN_AT_THE_END = (
    "import json, pathlib, subprocess, sys\n"
    "out, go = pathlib.Path(sys.argv[1]), sys.argv[2]\n"
    "run_id = json.loads(next(out.glob('npuprof_run*.json')).read_text())['run_id']\n"
    "d = out / 'h_1_20250101000000000_ascend_pt'\n"
    "(d / 'ASCEND_PROFILER_OUTPUT').mkdir(parents=True)\n"
    "(d / 'host.1.pt.trace.json').write_text('{}')\n"
    "(d / 'npuprof_capture.json').write_text(json.dumps({'status': 'complete', 'run_id': run_id}))\n"
    "holder = ('import fcntl, os, sys, time\\nfd = os.open(sys.argv[1], os.O_RDONLY)\\n'\n"
    "          'fcntl.flock(fd, fcntl.LOCK_EX)\\nprint(1, flush=True)\\n'\n"
    "          'while not os.path.exists(sys.argv[2]):\\n    time.sleep(0.05)\\n')\n"
    "p = subprocess.Popen([sys.executable, '-c', holder, str(d / 'ASCEND_PROFILER_OUTPUT'), go],\n"
    "                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)\n"
    "p.stdout.readline()\n"
)


def test_a_capture_parsed_again_as_the_run_ends_is_not_called_unparsed(out: Path, tmp_path: Path) -> None:
    """helper-139: an `analyse --force` beside the run's end (its parse takes analyse.done away while it
    writes) made the run's summary say the capture was "not parsed when npuprof ended (a post-processor
    stopped, killed, or still at work ...)". A capture a parse is at work on is said to be so."""
    script, go = tmp_path / "job.py", tmp_path / "go"
    script.write_text(_PARSED_AGAIN_AT_THE_END)
    try:  # the job leaves a capture of its run whose tables a parse of its own session holds
        result = subprocess.run(
            [*NPUPROF, "run", "-o", str(out), "--", sys.executable, str(script), str(out), str(go)],
            env=clean_env(), capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        go.touch()
    said = " ".join(result.stderr.split())
    assert result.returncode == 0, said
    assert "1 complete capture(s) being parsed as npuprof ended, by another process" in said, said
    assert "not parsed when npuprof ended" not in said, said


def test_a_dead_launchers_capture_is_interrupted_not_in_progress(tmp_path: Path) -> None:
    out = tmp_path / "result"
    d = out / "h_1_20250101000000000_ascend_pt"
    d.mkdir(parents=True)
    (d / "npuprof_capture.json").write_text(json.dumps({"status": "capturing", "run_id": "r1", "pid": 1}))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    record = {"run_id": "r1", "host": os.uname().nodename, "launcher_pid": int(dead.stdout), "end": None}
    (out / "npuprof_run.json").write_text(json.dumps(record))
    proc = npuprof("analyse", str(out))
    (line,) = _one_line_each(proc.stderr, "not analysed:")
    assert "incomplete" in line and "in progress" not in line


def test_a_capture_whose_process_outlived_its_killed_launcher_is_in_progress(tmp_path: Path) -> None:
    """helper-158: `npuprof run -- bash -c "python train.py; ..."` killed with kill -9 mid-capture: bash is
    the job's first process, so python trained and recorded on (as without npuprof), and `npuprof analyse`
    called its capture "interrupted: the process ended before the capture was finalised" while it
    recorded (it was whole a few seconds later). Its process still runs with the run's payload: in
    progress. A pid used again since (started after the capture began) or another run's process is not."""
    from npuprof.results.layout import capture_status, short_host_name

    out = tmp_path / "result"
    out.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    record = {"run_id": "r1", "host": os.uname().nodename, "launcher_pid": int(dead.stdout), "end": None}
    (out / "npuprof_run.json").write_text(json.dumps(record))
    sleep = [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"]
    ours = subprocess.Popen(
        sleep, env=clean_env(NPUPROF_CONFIG='{"run": {"id": "r1"}}'), stdout=subprocess.PIPE
    )
    # another run's, whose id starts as ours, in a directory whose path holds ours (a clone in /tmp/dur1
    # was taken for run r1's process: the id was looked for anywhere in the environment)
    other = subprocess.Popen(
        sleep,
        env=clean_env(NPUPROF_CONFIG='{"run": {"id": "r12"}}', WORKDIR="/tmp/dur1"),
        stdout=subprocess.PIPE,
    )
    try:
        for proc in (ours, other):
            assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"

        def said_of_ours_in_progress() -> str:
            (detail,) = [
                s.detail for d in out.glob(f"*_{ours.pid}_*") if (s := capture_status(d)).in_progress
            ]
            return detail

        def status(pid: int, began_ns: int) -> str:
            d = out / f"{short_host_name()}_{pid}_{began_ns}_ascend_pt"
            d.mkdir()
            capture = {"status": "capturing", "run_id": "r1", "pid": pid, "updated_ns": began_ns}
            (d / "npuprof_capture.json").write_text(json.dumps(capture))
            return capture_status(d).status

        assert status(ours.pid, time.time_ns()) == "capturing"
        assert status(ours.pid, time.time_ns() - 3600 * 10**9) == "incomplete"  # its pid, an hour ago
        assert status(other.pid, time.time_ns()) == "incomplete"
        assert said_of_ours_in_progress().endswith("its npuprof run gone")
        # torchrun killed mid-capture, its ranks training on: the launcher's own summary of its run said
        # "its npuprof run gone" as the launcher wrote it
        (out / "npuprof_run.json").write_text(json.dumps({**record, "launcher_pid": os.getpid()}))
        said = said_of_ours_in_progress()
        assert (
            said
            == f"in progress: its process (pid {ours.pid}) still runs, after the job's first process ended"
        )
    finally:
        for proc in (ours, other):
            proc.kill()
            proc.wait()


def test_a_capture_of_a_run_going_on_on_another_host_is_not_said_interrupted(tmp_path: Path) -> None:
    """helper-129: a multi-node job writing to a shared file system, analysed from the login node while it
    trains: a capture of another node, still recording, was "interrupted capture: the process ended before
    the capture was finalised", though its run had not ended (its record has no end) and nothing on this
    host can tell. It is in progress there, as far as this host knows: said so, with the other host."""
    out = tmp_path / "result"
    d = out / "node2_4242_20250101000000000_ascend_pt"
    d.mkdir(parents=True)
    (d / "npuprof_capture.json").write_text(json.dumps({"status": "capturing", "run_id": "r1", "pid": 4242}))
    record = {"run_id": "r1", "host": "node2", "launcher_pid": 4240, "start": "2025-01-01T00:00:00+0000"}
    (out / "npuprof_run.json").write_text(json.dumps({**record, "end": None}))
    proc = npuprof("analyse", str(out), "--format", "json")
    (problem,) = json.loads(proc.stdout)["problems"]
    assert problem["status"] == "in progress", problem
    assert "node2" in problem["reason"] and "process ended" not in problem["reason"], problem
    (out / "npuprof_run.json").write_text(json.dumps({**record, "end": "2025-01-01T01:00:00+0000"}))
    proc = npuprof("analyse", str(out), "--format", "json")  # its run has ended: interrupted after all
    (problem,) = json.loads(proc.stdout)["problems"]
    assert problem["status"] == "incomplete" and "process ended" in problem["reason"], problem


def test_a_temporary_file_of_a_run_going_on_on_another_host_is_never_removed(tmp_path: Path) -> None:
    """helper-129: analyse removes the temporary files of writers that died (a post-processor killed while
    it gzipped a trace), those whose pid is gone and idle for a minute. A pid of another host says nothing,
    and that host's post-processor waits, idle, while its process records: while their run has not ended
    there, its files are left alone; once it has, they are a dead writer's."""
    out = tmp_path / "result"
    d = write_rank_dir(out, cpu_trace(), name="node2_4242_20250101000000000")
    record = {"status": "complete", "run_id": "r1", "pid": 4242, "backend": "torch-cpu"}
    (d / "npuprof_capture.json").write_text(json.dumps(record))
    run = {"run_id": "r1", "host": "node2", "launcher_pid": 4240, "start": "2025-01-01T00:00:00+0000"}
    (out / "npuprof_run.json").write_text(json.dumps({**run, "end": None}))
    (trace,) = d.glob("*.pt.trace.json")
    gzipping = d / f".{trace.name}.gz.999999999-0123456789ab.tmp"  # a pid no process has on this host
    gzipping.write_bytes(b"\x1f\x8b" + b"\0" * 100)
    os.utime(gzipping, (time.time() - 600, time.time() - 600))
    proc = npuprof("analyse", str(out), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert gzipping.exists(), "a temporary file of a writer on another host, whose run goes on, was removed"
    (out / "npuprof_run.json").write_text(json.dumps({**run, "end": "2025-01-01T01:00:00+0000"}))
    proc = npuprof("analyse", str(out), "--format", "json", "--force")
    assert proc.returncode == 0, proc.stderr
    assert not gzipping.exists(), "its run has ended: the file is a dead writer's"


@pytest.mark.parametrize("whole", [True, False])
def test_a_whole_trace_beside_a_record_never_finalised_is_analysed(tmp_path: Path, whole: bool) -> None:
    """A full disk took the record's last update (and the post-processor's): the record still said
    "capturing" beside the whole trace the capture wrote at its end; analyse refused it as interrupted. A
    trace cut short stays interrupted."""
    d = write_rank_dir(tmp_path / "result", cpu_trace())
    (trace,) = d.glob("*.pt.trace.json")
    if not whole:
        trace.write_bytes(trace.read_bytes()[:-40])
    (d / "npuprof_capture.json").write_text(
        json.dumps({"status": "capturing", "run_id": "r1", "pid": 1, "backend": "torch-cpu", "steps": [7]})
    )
    proc = npuprof("analyse", str(tmp_path / "result"), "--format", "json")
    if whole:
        assert proc.returncode == 0, proc.stderr
        (rank,) = json.loads(proc.stdout)["ranks"]
        assert [s["step"] for s in rank["steps"]] == [7]
    else:
        (line,) = _one_line_each(proc.stderr, "not analysed:")
        assert "incomplete" in line, proc.stderr


def test_a_killed_processs_capture_is_interrupted_while_its_run_goes_on(tmp_path: Path) -> None:
    """A subprocess of the script killed mid-capture while the script (and npuprof) went on: its capture
    was said "in progress" for as long as the run lasted."""
    from npuprof.results.run_record import now_iso

    out = tmp_path / "result"
    host = os.uname().nodename.split(".")[0] or "host"
    # a live "npuprof" (what the run record's pid is checked to be)
    launcher = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "npuprof"])
    try:
        time.sleep(0.05)
        record = {"run_id": "r1", "host": os.uname().nodename, "launcher_pid": launcher.pid, "end": None}
        (out).mkdir()
        (out / "npuprof_run.json").write_text(json.dumps({**record, "start": now_iso()}))
        dead = int(
            subprocess.run(
                [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True
            ).stdout
        )
        for pid in (dead, launcher.pid):  # the killed child's, and one whose process still runs
            d = out / f"{host}_{pid}_20250101000000000_ascend_pt"
            d.mkdir()
            capture = {"status": "capturing", "run_id": "r1", "pid": pid}
            (d / "npuprof_capture.json").write_text(json.dumps(capture))
        proc = npuprof("analyse", str(out))
    finally:
        launcher.kill()
        launcher.wait()
    lines = _one_line_each(proc.stderr, "not analysed:")
    said = {Path(line.split(": ")[2]).name.split("_")[1]: line for line in lines}
    assert "incomplete" in said[str(dead)] and "in progress" not in said[str(dead)], lines
    assert "in progress" in said[str(launcher.pid)], lines


# ---- 5. "waiting for post-processing" only when there is some ------------------------------------------
@pytest.fixture(scope="module")
def too_few_steps_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """A schedule that records from step 11 around a job of 3 steps, so nothing is captured: (the output
    directory, the result), read by the tests of it. Its steps are a plain-Python job's (no capture, no
    torch: tests/_standin_jobs.py)."""
    out = tmp_path_factory.mktemp("too-few-steps") / "result"
    job = stepping_job(out.parent, 3)
    return out, npuprof("run", "-o", str(out), "--no-analyse", *sched(10, 1, 2), *job)


def test_no_waiting_message_when_nothing_was_captured(too_few_steps_run) -> None:
    out, proc = too_few_steps_run
    assert proc.returncode == 0, proc.stderr
    assert "waiting for" not in proc.stderr
    assert rank_dirs(out) == []


# ---- 6. why no capture was written ---------------------------------------------------------------------
def test_no_capture_because_no_rank_was_selected(out: Path) -> None:
    """A rank --ranks does not select writes nothing (its schedule would record step 1 of 3), logs why, and
    the summary names --ranks and the ranks it saw (was also test_run_capture's own job)."""
    job = stepping_job(out.parent, 3)  # plain Python: rank selection comes before any capture
    proc = npuprof(
        "run", "-o", str(out), "--no-analyse", "--ranks", "1", *sched(1, 0, 1), *job, env=clean_env(RANK="0")
    )
    assert proc.returncode == 0, proc.stderr
    assert rank_dirs(out) == []
    assert "rank 0 not selected" in (out / "npuprof.log").read_text()
    assert len(_one_line_each(proc.stderr, "no capture was written")) == 1
    text = " ".join(proc.stderr.split())
    assert "--ranks" in text and "ranks seen: 0" in text, proc.stderr
    assert "needs" not in text


def test_no_capture_because_the_step_on_module_was_never_imported(out: Path) -> None:
    step_on = ("--step-on", "never_imported_mod:step")
    # plain Python: the job imports a stand-in torch.optim, which must not wake the agent either
    job, path = importing_torch_optim(out.parent)
    proc = npuprof("run", "-o", str(out), *step_on, "--", *job, env=clean_env(**path))
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stderr.split())
    assert "never_imported_mod" in text and "no process of the job imported" in text, proc.stderr
    assert "needs" not in text


def test_no_capture_from_a_child_with_an_environment_of_its_own_says_it_was_not_reached(
    out: Path, tmp_path: Path
) -> None:
    """helper-125: a wrapper that starts its trainer with env= of its own (a PYTHONPATH of its repo) was told
    "no process of the job imported torch.optim", though the child trained: npuprof never reached it.
    (The child runs no torch: nothing it does reaches npuprof, whose summary reads only its own log.)"""
    child = "import sys; sys.exit(0)  # the trainer, out of npuprof's reach\n"
    wrapper = tmp_path / "wrapper.py"
    wrapper.write_text(
        "import os, subprocess, sys\n"
        "env = {'PATH': os.environ['PATH']}\n"
        f"subprocess.run([sys.executable, '-c', {child!r}], env=env, check=True)\n"
    )
    proc = npuprof("run", "-o", str(out), "--", sys.executable, str(wrapper))
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stderr.split())
    assert "a child started with an environment or PYTHONPATH of its own is not reached" in text, text


def test_no_capture_from_a_shell_that_runs_python_isolated_names_the_flag(out: Path) -> None:
    """helper-178: `bash -c "python -I train.py"` (a train.sh) is not read before the run; the end of it said
    only that children with an environment of their own are not reached, nothing of -E/-I/-S."""
    proc = npuprof("run", "-o", str(out), "--", "bash", "-c", f"{sys.executable} -I -c pass")
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stderr.split())
    assert "is not reached, nor a Python run with -E, -I or -S" in text, text


def test_a_step_function_of_a_script_run_by_runpy_is_told_to_be_outside_main(
    out: Path, tmp_path: Path
) -> None:
    """helper-125: under runpy.run_path (how debuggers run a script) the script's functions live outside the
    process's __main__: "train_step not found in __main__ (cell.py)" named the file that defines it."""
    # no torch needed: under --step-on the def in __main__ wakes the agent, not torch.optim (the same words, a
    # train_step found would count its returns without torch, as test_step_on_main's torch-free jobs do)
    cell = tmp_path / "cell.py"
    cell.write_text("def train_step():\n    pass\n\n\nfor _ in range(3):\n    train_step()\n")
    runner = f"import runpy; runpy.run_path({str(cell)!r}, run_name='__main__')"
    proc = npuprof(
        "run", "-o", str(out), "--step-on", "__main__:train_step", "--", sys.executable, "-c", runner
    )
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stderr.split())
    assert "a script run by a runner (runpy, a debugger" in text, text


def test_no_capture_because_the_job_died_before_its_first_step(out: Path) -> None:
    job = (
        "import torch\n"
        "opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)\n"
        "import gc; gc.freeze()\n"  # skip the exit-time collection over torch's objects
        "raise SystemExit(5)\n"
    )
    proc = npuprof("run", "-o", str(out), "--", sys.executable, "-c", job)
    assert proc.returncode == 5
    text = " ".join(proc.stderr.split())
    assert "the job failed (exit code 5)" in text, proc.stderr
    assert "needs" not in text


def test_a_process_the_job_left_running_is_named_not_blamed_for_no_steps(out: Path, tmp_path: Path) -> None:
    """The script forks and its first process exits at once; the child goes on (and may capture later):
    the summary said "no optimizer's step() ran in the job"."""
    release = tmp_path / "release"
    job = (
        "import os, sys, time\n"
        "if os.fork():\n    sys.exit(0)\n"
        "null = os.open(os.devnull, os.O_RDWR)\n"  # the test reads the job's output to its end
        "for fd in (0, 1, 2):\n    os.dup2(null, fd)\n"
        f"while not os.path.exists({str(release)!r}):\n    time.sleep(0.05)\n"
    )
    try:
        proc = npuprof("run", "-o", str(out), "--", sys.executable, "-c", job)
    finally:
        release.touch()  # the child ends
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stderr.split())
    said = "no capture was written yet (exit code 0): the job's first process ended, but 1 process(es)"
    assert said in text, text
    assert "no optimizer" not in text, text


def test_no_capture_because_the_job_ran_too_few_steps_still_names_the_schedule(too_few_steps_run) -> None:
    _, proc = too_few_steps_run  # (the run test_no_waiting_message_when_nothing_was_captured reads)
    assert proc.returncode == 0
    text = " ".join(proc.stderr.split())
    assert "records from step 11" in text and "needs 13 steps" in text, proc.stderr


def test_a_run_without_captures_is_told_by_the_reason_its_end_gave(too_few_steps_run) -> None:
    """helper-267: of the output of a run that captured nothing, `npuprof analyse OUT` said "no rank directory
    (a capture) under OUT, and it is not a trace file", export-stacks "OUT has no trace" and memory-timeline
    "capture with --profile-memory ...", flags that were not the problem. Each names the run and gives the
    line its end gave (the run's record keeps it)."""
    from npuprof.reports.inputs import InputError, single_rank_dir

    out, proc = too_few_steps_run  # (the run test_no_waiting_message_when_nothing_was_captured reads)
    # the run's end line as the terminal showed it, wrapped to its width where long (a longer tmp path)
    start = proc.stderr.index("npuprof: no capture was written")
    end = " ".join(proc.stderr[start:].split("\nnpuprof:")[0].split("\nnext:")[0].split())
    ran = "npuprof run -- " + shlex.join([sys.executable, str(stepping_script(out.parent)), "3"])
    expected = f"{out} is the output of {ran}, whose end said: {end.removeprefix('npuprof: ')}"
    report = npuprof("analyse", str(out))
    assert report.returncode == 1
    assert report.stderr == f"npuprof analyse: nothing to analyse: {expected}\n", report.stderr
    with pytest.raises(InputError) as refused:  # export-stacks' and memory-timeline's input
        single_rank_dir(out)
    assert str(refused.value) == expected


def test_a_run_record_without_the_reason_points_to_the_runs_log(tmp_path: Path) -> None:
    """A run whose end could not say why (its stderr closed) or an older npuprof's record: the log named."""
    from npuprof.reports.inputs import InputError, single_rank_dir

    record = {"run_id": "abc", "command": ["python", "my train.py"], "start": "2026-12-06T20:00:00+0000"}
    (tmp_path / "npuprof_run.json").write_text(json.dumps({**record, "end": "2026-12-06T20:01:00+0000"}))
    with pytest.raises(InputError) as refused:
        single_rank_dir(tmp_path)
    assert str(refused.value) == (
        f"{tmp_path} is the output of npuprof run -- python 'my train.py', which wrote no capture; "
        f"{tmp_path / 'npuprof.log'} tells what its processes did"
    )


def test_of_runs_started_within_one_second_the_last_claimed_is_the_one_told(tmp_path: Path) -> None:
    """helper-326: a loop of short runs into one -o (runs that captured nothing, 80 ms apart): analyse named
    an earlier run's command and reason, as the records' starts are to the second. The record a run claims
    later has the later stamp in its name (npuprof_run.<YYYYmmddHHMMSSmmm>.<pid>.json)."""
    from npuprof.reports.inputs import InputError, single_rank_dir

    start, end = "2026-12-06T20:00:00+0000", "2026-12-06T20:00:00+0000"
    runs = {  # in the order they ran: the first run's record has the plain name
        "npuprof_run.json": ("python -c pass", "first"),
        "npuprof_run.20261206200000100.11.json": ("python -c pass", "second"),
        "npuprof_run.20261206200000900.12.json": ("python train.py", "third"),
    }
    for name, (command, said) in runs.items():
        record = {"run_id": said, "command": command.split(), "start": start, "end": end, "no_capture": said}
        (tmp_path / name).write_text(json.dumps(record))
    with pytest.raises(InputError) as refused:
        single_rank_dir(tmp_path)
    expected = f"{tmp_path} is the output of npuprof run -- python train.py, whose end said: third"
    assert str(refused.value) == expected


# ---- 7. the partial last step ----------------------------------------------------------------------------
# (a capture the job's end ended inside its step: tests/test_capture_end_cost.py, its partial step flagged
# and left out of the mean)


def test_an_output_dir_whose_name_is_not_utf8_gets_complete_analysable_captures(not_utf8_run) -> None:
    out, proc = not_utf8_run  # (its --metadata value is not UTF-8 either)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (d,) = rank_dirs(out)
    assert _strict_json(d / "npuprof_capture.json")["status"] == "complete"
    assert (d / "ASCEND_PROFILER_OUTPUT" / "analyse.done").exists()
    steps = (d / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").read_text().splitlines()
    assert [row.split(",")[1] for row in steps[1:]] == ["1", "2"]  # skip 1, no warm-up, record 2


# ---- found by the adversary round ---------------------------------------------------------------------
def test_a_fifo_or_device_as_config_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "profiler_config.json"
    os.mkfifo(fifo)
    for config in (str(fifo), "/dev/zero", str(tmp_path)):
        result = npuprof("run", "--config", config, "--", sys.executable, "-c", "pass", timeout=30)
        assert result.returncode == 2, result.stderr
        assert result.stderr.count("\n") == 1 and "not a regular file" in result.stderr


def test_a_config_others_may_write_is_refused_in_one_line_naming_the_flag_once(tmp_path: Path) -> None:
    """helper-121: "--config: --config 'cfg.json' is writable by others ..." named the flag twice."""
    config = tmp_path / "cfg.json"
    config.write_text("{}")
    config.chmod(0o666)
    result = npuprof("run", "--config", str(config), "--", sys.executable, "-c", "pass", timeout=30)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.count("--config") == 1, result.stderr
    assert f"the file {str(config)!r} is writable by others (mode 0666)" in result.stderr


def test_empty_paths_are_refused_not_taken_for_the_current_directory(tmp_path: Path) -> None:
    for args in (["run", "-o", "", "--", sys.executable, "-c", "pass"], ["run", "--config", "", "--", "x"]):
        result = npuprof(*args, cwd=tmp_path)
        assert result.returncode == 2 and "is empty" in result.stderr, result.stderr
    analysed = npuprof("analyse", "", cwd=tmp_path)
    assert analysed.returncode == 2 and "is empty" in analysed.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written into the current directory


def test_a_capture_job_carrying_torchs_version_object_reaches_the_post_processor() -> None:
    """torch.__version__ is a TorchVersion (a str subclass): a job holding one is still sent."""
    import torch

    from npuprof.results import handover

    job = handover.job_from(
        {"rank_dir": "/r", "record": {"status": "complete"}, "files": {"i.json": {"v": torch.__version__}}}
    )
    assert json.loads(handover.job_line(job))["files"]["i.json"]["v"] == str(torch.__version__)


def test_the_summary_says_the_output_went_read_only_rather_than_blaming_the_schedule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An output filesystem that went read-only during the run (the adversary remounted it): the summary
    says so, instead of blaming the schedule and pointing at a log that could not be written."""
    from npuprof.config import ProfileConfig
    from npuprof.reports.run_summary import print_run_summary

    mount = tmp_path / "mnt"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)]).returncode != 0:
        pytest.skip("mounting a tmpfs is not permitted here")
    try:
        (mount / "out").mkdir()
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        print_run_summary(mount / "out", [], 0, ProfileConfig(), mount / "out" / "npuprof.log", run_id="r")
        line = " ".join(capsys.readouterr().err.split())  # (wrapped to the terminal's width)
        assert "no capture was written" in line and "read-only filesystem" in line, line
        assert "schedule" not in line and "See " not in line
    finally:
        subprocess.run(["umount", "-l", str(mount)])
    print_run_summary(
        tmp_path / "gone", [], 0, ProfileConfig(), tmp_path / "gone" / "npuprof.log", run_id="r"
    )
    assert "cannot be reached" in " ".join(capsys.readouterr().err.split())


def test_a_fifo_given_as_an_output_file_is_refused_and_left_alone(tmp_path: Path) -> None:
    """A device or FIFO named as an output file was replaced by the file (as root, -o /dev/null replaced
    the system's /dev/null): one line, exit 2, the node as it was, nothing run or written. (The text
    streams of export-stacks and memory-timeline are written into: a FIFO is a reader there.)"""
    fifo = tmp_path / "node.json"
    os.mkfifo(fifo)
    args = ["run", "--export-chrome-trace", str(fifo), "--", sys.executable, "-c", "print(1)"]
    result = npuprof(*args, cwd=tmp_path, timeout=60)
    assert result.returncode == 2, result.stderr
    assert "is a FIFO (writing the file would replace it)" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["node.json"]


@pytest.mark.parametrize("points_to", ["/proc/self/fd/1", "/dev/stderr", "fifo", "dir"])
def test_a_link_to_a_descriptor_or_a_node_given_as_the_chrome_trace_is_refused_and_left_alone(
    tmp_path: Path, points_to: str
) -> None:
    """helper-325: the check above looked at the path itself, and a symbolic link passed: as root,
    `--export-chrome-trace /dev/stdout` (a link to /proc/self/fd/1) put the trace in /dev in the place of
    the system's /dev/stdout, every later program's stdout in the container a plain file, whatever stdout
    was open on (a terminal, a pipe, a file the output was redirected to). A link to a descriptor, a
    FIFO or a directory: one line, exit 2, the link as it was, nothing run or written."""
    if points_to == "fifo":
        os.mkfifo(tmp_path / "node")
    elif points_to == "dir":
        (tmp_path / "node").mkdir()
    link = tmp_path / "trace.json"
    link.symlink_to(points_to if points_to.startswith("/") else "node")
    before = sorted(p.name for p in tmp_path.iterdir())
    args = ["run", "--export-chrome-trace", str(link), "--", sys.executable, "-c", "print(1)"]
    result = npuprof(*args, cwd=tmp_path, timeout=60)
    assert result.returncode == 2, result.stderr
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line, line
    assert line.startswith(f"npuprof run: error: --export-chrome-trace: {link} "), line
    assert "would replace the link" in line, line
    assert result.stdout == ""  # the job never ran
    assert os.readlink(link) == (points_to if points_to.startswith("/") else "node")
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_dash_as_the_chrome_trace_path_is_refused_not_written_as_a_file(tmp_path: Path) -> None:
    """helper-130: `--export-chrome-trace -` (stdout, as export-stacks' `-o -`) wrote a file named "-" in the
    working directory; one line, exit 2. `./-` still names that file."""
    result = npuprof(
        "run", "--export-chrome-trace", "-", "--", sys.executable, "-c", "print(1)", cwd=tmp_path
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        'npuprof run: error: --export-chrome-trace: "-" is not a file name (no trace is written to stdout); '
        "e.g. trace.json\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_export_stacks_into_dev_null_or_a_fifo_writes_into_it_as_it_is(tmp_path: Path) -> None:
    """`-o /dev/null` was refused (a device the rename would replace): a user discarding the stacks, or
    handing them to a reader through a named pipe, writes into the node, which stays what it was."""
    import threading

    trace = Path(__file__).parent / "fixtures" / "ascend-real" / "trace_view.json"
    plain = npuprof("export-stacks", str(trace), "-o", "-", timeout=60)
    assert plain.returncode == 0 and plain.stdout, plain.stderr
    null = npuprof("export-stacks", str(trace), "-o", "/dev/null", "--svg", "/dev/null", timeout=60)
    assert null.returncode == 0, null.stderr
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)
    fifo = tmp_path / "stacks.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    piped = npuprof("export-stacks", str(trace), "-o", str(fifo), timeout=60)
    reader.join(timeout=60)
    assert piped.returncode == 0, piped.stderr
    assert got == [plain.stdout.encode()]
    for name in ("/dev/stdout", "/dev/fd/1"):  # links to the standard output (helper-100: refused as links)
        named = npuprof("export-stacks", str(trace), "-o", name, timeout=60)
        assert named.returncode == 0 and named.stdout == plain.stdout, named.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and sorted(p.name for p in tmp_path.iterdir()) == [fifo.name]


def test_export_stacks_into_a_shells_process_substitution_writes_into_its_pipe(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`-o >(gzip > x.gz)` hands over /dev/fd/63, a link to the shell's pipe: refused as a symbolic link."""
    import typer

    from npuprof.cli.export_stacks import export_stacks

    trace = Path(__file__).parent / "fixtures" / "ascend-real" / "trace_view.json"
    monkeypatch.setattr(sys, "argv", ["npuprof", "export-stacks", str(trace)])
    export_stacks(str(trace), "self_cpu_time_total", "-", None, 0.1, False, None)
    plain = capsys.readouterr().out
    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "rb") as pipe:
        try:
            export_stacks(str(trace), "self_cpu_time_total", f"/dev/fd/{write_end}", None, 0.1, False, None)
        except typer.Exit as exc:
            raise AssertionError(f"exit {exc.exit_code}: {capsys.readouterr().err}") from None
        finally:
            os.close(write_end)
        assert plain and pipe.read() == plain.encode()


def test_export_stacks_into_a_pipe_whose_reader_stopped_ends_as_sigpipe_would(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`-o >(head -1)` whose reader had read enough said "cannot write /dev/fd/63: Broken pipe" and exited
    1, where `| head -1` exits 141 quietly: both end as SIGPIPE would now."""
    import signal

    import typer

    from npuprof.cli.export_stacks import export_stacks

    trace = Path(__file__).parent / "fixtures" / "ascend-real" / "trace_view.json"
    monkeypatch.setattr(sys, "argv", ["npuprof", "export-stacks", str(trace)])
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone
    try:
        with pytest.raises(typer.Exit) as ended:
            export_stacks(str(trace), "self_cpu_time_total", f"/dev/fd/{write_end}", None, 0.1, False, None)
    finally:
        os.close(write_end)
    assert ended.value.exit_code == 128 + signal.SIGPIPE
    assert "Broken pipe" not in capsys.readouterr().err


@pytest.mark.parametrize("command", [["analyse"], ["status"], ["trigger"], ["export-stacks"]])
def test_a_path_too_long_to_look_up_is_one_line(tmp_path: Path, command: list[str]) -> None:
    result = npuprof(*command, str(tmp_path / ("x" * 300)), timeout=60)
    assert result.returncode == 1, result.stderr  # the path cannot be looked up: not a bad flag (2)
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "File name too long" in result.stderr and result.stdout == ""


def test_digits_that_are_not_ascii_in_the_environment_change_nothing(tmp_path: Path) -> None:
    """ "²".isdigit() is True and int("²") fails: COLUMNS=² made the run's summary raise after the job (exit
    1 for a job that exited 0); RANK=² turned profiling off in the job."""
    from npuprof.agent.ranks import rank_from_env

    assert rank_from_env({"RANK": "²"}) is None and rank_from_env({"RANK": "3"}) == 3
    job = [sys.executable, "-c", "raise SystemExit(5)"]
    result = npuprof("run", "-o", str(tmp_path / "out"), "--", *job, env=clean_env(COLUMNS="²"), timeout=60)
    assert result.returncode == 5 and "Traceback" not in result.stderr, result.stderr


def test_the_run_summary_looks_only_at_the_output_dir_itself(tmp_path: Path) -> None:
    """`-o /` (or `-o .` in a home directory) walked the whole tree for the run's captures at the end:
    a line for each linked directory (4,011 under /) and seconds of walking. A run writes its captures
    right into -o: nothing below its first level is looked at, nothing linked is named."""
    out = tmp_path / "out"
    (out / "a" / "b").mkdir(parents=True)
    (out / "linked").symlink_to(tmp_path)
    (out / "a" / "b" / "elsewhere").symlink_to(tmp_path)
    result = npuprof("run", "-o", str(out), "--", sys.executable, "-c", "print(1)", timeout=60)
    assert result.returncode == 0, result.stderr
    assert "skipped" not in result.stderr and "symbolic link" not in result.stderr, result.stderr


def test_a_job_that_closes_its_stdout_and_stderr_is_parsed_before_npuprof_ends(
    out: Path, tmp_path: Path
) -> None:
    """The post-processor's lock, opened as descriptor 1 or 2 in a job that closed both, was replaced by
    its /dev/null there: npuprof stopped waiting, and the summary said a post-processor had stopped."""
    script = tmp_path / "closes.py"
    script.write_text(
        "import os, torch\n"
        "os.close(1); os.close(2)\n"
        "m = torch.nn.Linear(8, 8); opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(8):\n"
        "    m(torch.randn(4, 8)).sum().backward(); opt.step()\n"
        "os._exit(3)\n"
    )
    result = npuprof("run", "-o", str(out), *sched(1, 1, 2), "--", sys.executable, str(script), timeout=120)
    assert result.returncode == 3, result.stderr
    (d,) = rank_dirs(out)
    assert (d / "ASCEND_PROFILER_OUTPUT" / "analyse.done").exists(), result.stderr
    assert "not parsed when npuprof ended" not in result.stderr


def test_no_reason_is_made_up_when_the_log_could_not_be_written(out: Path, tmp_path: Path) -> None:
    """With npuprof.log unwritable (a full disk; here a directory of that name), the summary said "no
    process of the job imported torch.optim" of a job that stepped: the reason is not known, it says so."""
    (out / "npuprof.log").mkdir(parents=True)
    result = npuprof("run", "-o", str(out), "--no-analyse", *stepping_job(out.parent, 3))  # plain Python
    assert result.returncode == 0, result.stderr
    said = " ".join(result.stderr.split())
    assert "does not hold this run's lines" in said and "the reason is not known" in said, said
    assert "no process of the job" not in said  # (with --step-on: "... defined train_step in its __main__")


def test_a_disk_that_fills_during_analyse_is_named_and_leaves_no_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk filling while `npuprof analyse` writes a rank's tables: the reason was the bare
    "OSError: [Errno 28] No space left on device"; now it says the disk is full and what to do, and
    the tables written before it are removed (the set looked parsed to Ascend's tools) and the rank is not
    marked parsed (no analyse.done), so the next analyse parses it."""
    import errno

    from npuprof.analysis import parse

    rank_dir = write_rank_dir(tmp_path, cpu_trace())
    calls = {"n": 0}

    def full_disk(raw: Path, out_dir: Path, *args: object, **kwargs: object) -> object:
        calls["n"] += 1  # two tables whole, the third cut by the full disk (as seen on a tmpfs)
        (out_dir / "trace_view.json").write_text("[]")
        (out_dir / "step_trace_time.csv").write_text("Step\n")
        (out_dir / ".kernel_details.csv.1.tmp").write_text("Name")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(out_dir / ".kernel_details.csv.1.tmp"))

    monkeypatch.setattr(parse, "write_outputs", full_disk)
    outcome = parse.parse_rank_dir(rank_dir, workers=1)
    assert calls["n"] == 1
    assert outcome.status == "failed", outcome
    assert outcome.reason.startswith("the disk is full (No space left on device"), outcome.reason
    assert "npuprof analyse it again" in outcome.reason
    assert not (rank_dir / "analyse.done").exists()
    parsed = rank_dir / "ASCEND_PROFILER_OUTPUT"  # no set short of some tables looks parsed
    assert not parsed.exists() or not any(parsed.iterdir()), list(parsed.iterdir())
    # any other OS error: its words and its file, not a class name
    other = parse.failure_reason(FileExistsError(errno.EEXIST, "File exists", "/x/kernel_details.csv"))
    assert other == "File exists: /x/kernel_details.csv"
    # a place it may not write (read-only, another user's): where the tables can go instead
    denied = parse.failure_reason(PermissionError(errno.EACCES, "Permission denied", "/x/kernel_details.csv"))
    assert denied.startswith("Permission denied: /x/kernel_details.csv; its tables cannot be written there")
    assert "npuprof analyse TRACE" in denied


def test_a_failed_re_parse_keeps_the_earlier_complete_tables_as_they_were(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """helper-216: `npuprof analyse --force` on a full disk (a tmpfs: the new trace_view.json written, a CSV
    cut) or of a trace damaged since its first parse deleted the good tables of that parse with its own
    (and analyse.done before it began): the rank then had nothing left. The earlier complete set is put
    back as it was (the same files, analyse.done too) and the reason says so; a bare trace's the same; where
    hard links fail, they are moved aside and back (helper-256: they were deleted)."""
    import errno

    from npuprof.analysis import parse, report

    rank_dir = write_rank_dir(tmp_path, cpu_trace())
    assert parse.parse_rank_dir(rank_dir).status == "parsed"
    tables = rank_dir / "ASCEND_PROFILER_OUTPUT"

    def stamps(folder: Path) -> dict[str, tuple[int, int, bytes]]:
        return {
            p.name: (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(folder.iterdir())
        }

    earlier = stamps(tables)
    assert "analyse.done" in earlier and "kernel_details.csv" in earlier
    real_csv = parse.write_csv
    calls = {"n": 0}

    def full_disk(path: Path, *args: object, **kwargs: object) -> None:
        calls["n"] += 1
        if calls["n"] == 2:  # step_trace_time.csv written, kernel_details.csv cut by the full disk
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_csv(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(parse, "write_csv", full_disk)
    outcome = parse.parse_rank_dir(rank_dir, force=True)
    assert calls["n"] == 2
    assert outcome.status == "failed" and outcome.no_space and outcome.kept_earlier, outcome
    assert outcome.reason.startswith("the disk is full"), outcome.reason
    assert outcome.reason.endswith("; the tables of its earlier parse are kept as they were"), outcome.reason
    assert stamps(tables) == earlier  # no hidden link, no temporary file left either
    # a trace damaged since: the same
    monkeypatch.setattr(parse, "write_csv", real_csv)
    trace = rank_dir / "host.1.pt.trace.json"
    text = trace.read_bytes()
    trace.write_bytes(text[: len(text) // 2] + b"@@@{{{" + text[len(text) // 2 + 6 :])
    outcome = parse.parse_rank_dir(rank_dir, force=True)
    assert not outcome.ok and outcome.kept_earlier, outcome
    assert "kept as they were" in outcome.reason and stamps(tables) == earlier
    # a bare trace's tables
    bare = tmp_path / "bare.json"
    bare.write_bytes(text)
    assert report._parse_bare(bare, force=False, workers=1)[0].status == "parsed"
    bare_tables = tmp_path / f"bare.json{report.BARE_SUFFIX}"
    bare_earlier = stamps(bare_tables)
    calls["n"] = 0
    monkeypatch.setattr(parse, "write_csv", full_disk)
    outcome, out_dir = report._parse_bare(bare, force=True, workers=1)
    assert out_dir == bare_tables and outcome.status == "failed" and outcome.kept_earlier, outcome
    assert "kept as they were" in outcome.reason and stamps(bare_tables) == bare_earlier

    # no hard links there (helper-256: a file system without them, a tmpfs out of inodes): the earlier set
    # and a file of the user's are kept too (they were deleted)
    def no_links(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(parse, "write_csv", real_csv)
    rank_dir = write_rank_dir(tmp_path / "c", cpu_trace())
    assert parse.parse_rank_dir(rank_dir).status == "parsed"
    tables = rank_dir / "ASCEND_PROFILER_OUTPUT"
    (tables / "notes.csv").write_text("mine\n")
    earlier = stamps(tables)
    calls["n"] = 0
    monkeypatch.setattr(parse, "write_csv", full_disk)
    monkeypatch.setattr(parse.os, "link", no_links)
    outcome = parse.parse_rank_dir(rank_dir, force=True)
    assert calls["n"] == 2
    assert outcome.status == "failed" and outcome.kept_earlier, outcome
    assert outcome.reason.endswith("; the tables of its earlier parse are kept as they were"), outcome.reason
    assert stamps(tables) == earlier
    # a parse killed while it moved the set aside (analyse.done and one table moved, the rest in place):
    # the next parse, failing too, keeps the whole set
    dead = 2**22 + 7  # above any pid_max: no process has it
    tag = f"{dead}-{'0' * 12}"
    os.rename(tables / "analyse.done", tables / f".analyse.done.{tag}{parse.MOVING}")
    os.rename(tables / "kernel_details.csv", tables / f".kernel_details.csv.{tag}.old")
    calls["n"] = 0
    outcome = parse.parse_rank_dir(rank_dir, force=True)
    assert outcome.status == "failed" and outcome.kept_earlier, outcome
    assert stamps(tables) == earlier
    # a parse that succeeds there replaces the set: nothing aside is left, the user's file stays
    monkeypatch.setattr(parse, "write_csv", real_csv)
    assert parse.parse_rank_dir(rank_dir, force=True).status == "parsed"
    now = stamps(tables)
    assert set(now) == set(earlier) and now["notes.csv"] == earlier["notes.csv"], sorted(now)
    assert now["kernel_details.csv"][0] != earlier["kernel_details.csv"][0]  # written again


def test_a_re_parse_that_cannot_write_analyse_done_keeps_the_earlier_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """helper-216: the disk full when the re-parse's analyse.done was written (every table written, the
    earlier set's links already dropped): neither set was left complete. The earlier one is put back."""
    import errno

    from npuprof.analysis import parse

    rank_dir = write_rank_dir(tmp_path, cpu_trace())
    assert parse.parse_rank_dir(rank_dir).status == "parsed"
    tables = rank_dir / "ASCEND_PROFILER_OUTPUT"
    earlier = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in tables.iterdir()}
    real = parse.write_text

    def full_at_the_end(path: Path, *args: object, **kwargs: object) -> None:
        if Path(path).name == "analyse.done":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(parse, "write_text", full_at_the_end)
    outcome = parse.parse_rank_dir(rank_dir, force=True)
    assert outcome.status == "failed" and outcome.kept_earlier, outcome
    assert {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in tables.iterdir()} == earlier


def test_a_failed_parse_names_the_table_not_its_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """helper-216: a write that failed on its temporary file (a full disk or a quota when it is made, a
    rename refused) named that file, ``.step_trace_time.csv.123-0a1b2c3d4e5f.tmp``, which is never there;
    the reason names the table (a private temporary file of tempfile's: its folder)."""
    import errno

    from npuprof.analysis import parse
    from npuprof.results import atomic

    rank_dir = write_rank_dir(tmp_path, cpu_trace())
    tables = rank_dir / "ASCEND_PROFILER_OUTPUT"

    def quota(path: Path, *_args: object, **_kwargs: object) -> None:
        raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT), str(atomic.temp_name(path)))

    monkeypatch.setattr(parse, "write_csv", quota)
    outcome = parse.parse_rank_dir(rank_dir)
    assert outcome.status == "failed" and outcome.no_space, outcome
    assert f"{os.strerror(errno.EDQUOT)}: {tables / 'step_trace_time.csv'})" in outcome.reason, outcome.reason
    assert ".tmp" not in outcome.reason, outcome.reason
    spooled = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tables / "tmpe9yl15i2"))
    assert f"{os.strerror(errno.ENOSPC)}: {tables}/)" in parse.failure_reason(spooled)
    renamed = PermissionError(
        errno.EACCES, "Permission denied", str(tables / ".op_statistic.csv.7-00aa11bb22cc.tmp")
    )
    assert parse.failure_reason(renamed).startswith(f"Permission denied: {tables / 'op_statistic.csv'};")
    assert parse.failure_reason(OSError(errno.EIO, "Input/output error", "/x/.mine.tmp")).endswith(
        "/x/.mine.tmp"
    )


def test_a_symbolic_link_above_the_rank_dir_is_followed_and_one_at_its_tables_is_not(tmp_path: Path) -> None:
    """A home or scratch directory that is a link (`-o` already takes one): analyse refused every rank
    dir under it ("passes through the symbolic link"), even parsed ones. A link above is followed now, as
    the kernel would; ASCEND_PROFILER_OUTPUT itself a link (writes would land where it points) is not."""
    real = tmp_path / "real"
    rank_dir = write_rank_dir(real, cpu_trace())
    (tmp_path / "home").symlink_to(real)
    via = tmp_path / "home" / rank_dir.name
    result = npuprof("analyse", str(via), "--format", "json", env=clean_env())
    assert result.returncode == 0, result.stderr
    (rank,) = json.loads(result.stdout)["ranks"]
    assert [s["step"] for s in rank["steps"]] == [7] and (rank_dir / "ASCEND_PROFILER_OUTPUT").is_dir()
    stacks = npuprof("export-stacks", str(via), "-o", str(tmp_path / "home" / "s.folded"), env=clean_env())
    assert stacks.returncode == 0 and (real / "s.folded").stat().st_size > 0, stacks.stderr

    planted = write_rank_dir(tmp_path / "planted", cpu_trace())
    (tmp_path / "elsewhere").mkdir()
    (planted / "ASCEND_PROFILER_OUTPUT").symlink_to(tmp_path / "elsewhere")
    refused = npuprof("analyse", str(planted), env=clean_env())
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert "ASCEND_PROFILER_OUTPUT' is a symbolic link" in refused.stderr, refused.stderr
    assert list((tmp_path / "elsewhere").iterdir()) == []


@pytest.mark.parametrize("odd", ["back\\slash", "tab\tdir", 'double"quote'])
def test_an_output_path_torch_cannot_write_to_is_refused_before_the_job(tmp_path: Path, odd: str) -> None:
    """helper-90: run from a directory whose name holds a backslash (torch's trace writer turns it into
    "/" in an absolute path) or a tab (written raw into the trace's JSON), every capture was lost and
    blamed on a full disk. The resolved output path is checked, not only -o's text."""
    where = tmp_path / odd
    where.mkdir()
    marker = tmp_path / "ran"
    done = subprocess.run(
        [*NPUPROF, "run", "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')"],
        cwd=where, env=clean_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert "torch cannot write its traces there; give -o a directory without it" in line
    assert not marker.exists()


def test_an_output_dir_replaced_between_two_captures_is_said_beside_the_one_left(tmp_path: Path) -> None:
    """helper-114: --repeat 2, the output dir removed and made again after the first capture: the summary
    listed the second capture and said nothing of the first, lost with the directory."""
    out = tmp_path / "out"
    script = tmp_path / "rm.py"
    script.write_text(
        "import os, shutil, sys, torch\n"
        "m = torch.nn.Linear(8, 8); opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for i in range(12):\n"
        "    opt.zero_grad(); m(torch.randn(4, 8)).sum().backward(); opt.step()\n"
        "    if i == 5:  # moved aside whole (a removal races the post-processor's writes in it)\n"
        "        os.rename(sys.argv[1], sys.argv[1] + '.old'); os.makedirs(sys.argv[1])\n"
        "import gc; gc.freeze()\n"  # skip the exit-time collection over torch's objects
    )
    flags = [
        "--skip-first",
        "1",
        "--wait",
        "2",
        "--warmup",
        "0",
        "--active",
        "2",
        "--repeat",
        "2",
        "--no-analyse",
    ]
    done = subprocess.run(
        [*NPUPROF, "run", "-o", str(out), *flags, "--", sys.executable, str(script), str(out)],
        env=clean_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stderr.split())
    assert "npuprof: 1 capture(s) in" in said, said
    assert f"the output directory {out} was replaced during the run" in said, said


@pytest.mark.parametrize("removed", ["rank-dir", "output-dir-made-again", "output-dir-after-the-capture"])
def test_a_rank_dir_removed_during_its_capture_is_said_so_not_blamed_on_the_disk(
    tmp_path: Path, removed: str
) -> None:
    """helper-90: the rank dir removed while its capture ran read "torch wrote no trace ... (is the disk
    full?)", and the run's summary blamed the schedule (helper-94). helper-110: the whole output dir
    removed and made again (its log with it) made the summary say "no process of the job imported
    torch.optim", the agent's lines since (12 steps counted, the trace lost) notwithstanding; helper-113:
    removed after its capture was written, "npuprof's log holds no reason". The launcher knows the
    directory it started with: one made again is said so."""
    out = tmp_path / "out"
    script = tmp_path / "rm.py"
    remove = (
        "        for rank_dir in glob.glob(sys.argv[1] + '/*_ascend_pt'):\n"
        "            shutil.rmtree(rank_dir)\n"
        if removed == "rank-dir"
        else "        os.rename(sys.argv[1], sys.argv[1] + '.old'); os.makedirs(sys.argv[1])\n"
    )
    script.write_text(
        "import glob, os, shutil, sys, torch\n"
        "m = torch.nn.Linear(8, 8); opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for i in range(12):\n"
        "    opt.zero_grad(); m(torch.randn(4, 8)).sum().backward(); opt.step()\n"
        f"    if i == {10 if removed == 'output-dir-after-the-capture' else 7}:\n"
        + remove
        + "print('done')\n"
        + "import gc; gc.freeze()\n"  # skip the exit-time collection over torch's objects
    )
    done = subprocess.run(
        [*NPUPROF, "run", "-o", str(out), "--", sys.executable, str(script), str(out)],
        env=clean_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout == "done\n", done.stderr
    assert "is the disk full" not in done.stderr
    said = " ".join(done.stderr.split())  # the note is wrapped at the terminal's width
    if removed != "output-dir-after-the-capture":
        assert "is gone (removed during the capture?)" in done.stderr
    if removed == "rank-dir":  # the summary names that loss, not the schedule (helper-94)
        assert "no capture was written (exit code 0): the trace of steps 6-8 was not written" in said
    else:
        assert (
            f"no capture was written (exit code 0): the output directory {out} was replaced during the run "
            "(removed and made again, or mounted over)"
        ) in said, said


def _post_processors_of(out: Path) -> list[int]:
    """The live post-processors whose spool lies in ``out`` (their command line names it)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                args = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
                ours = b"npuprof.results.postprocess" in args and any(str(out).encode() in a for a in args)
                if ours and Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(name))
    return found


def test_the_launcher_waits_for_its_post_processor_when_the_script_removed_its_lock_files(
    tmp_path: Path,
) -> None:
    """helper-110: the script removed the output dir (the post-processors' lock files with it); on a busy
    machine the post-processor, at idle priority, was still at work when the job ended, and `npuprof run`
    returned without it, nothing telling it to wait. The launcher now waits for the post-processors it
    started by pid. Here the script removes only the locks' folder, so that the capture it had handed over
    (steps 3-4) is still being parsed when the job ends (it ends by os._exit a few ms after the hand-over:
    the parse of a capture with stacks and shapes takes a few tenths of a second)."""
    out = tmp_path / "out"
    script = tmp_path / "train.py"
    script.write_text(
        "import os, shutil, sys, torch\n"
        "model = torch.nn.Linear(64, 64); opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for _ in range(12):\n"
        "    opt.zero_grad(); model(torch.randn(32, 64)).sum().backward(); opt.step()\n"
        "shutil.rmtree(os.path.join(sys.argv[1], '.npuprof_pending'))\n"
        "os._exit(0)\n"
    )
    flags = [*sched(2, 0, 2), "--with-stack", "--record-shapes"]
    result = subprocess.run(
        [*NPUPROF, "run", "-o", str(out), *flags, "--", sys.executable, str(script), str(out)],
        env=clean_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    left = _post_processors_of(out)
    assert result.returncode == 0, result.stderr
    assert left == [], f"post-processors {left} still at work when npuprof run returned: {result.stderr}"
    (rank_dir,) = rank_dirs(out)
    assert (rank_dir / "ASCEND_PROFILER_OUTPUT" / "analyse.done").is_file()
    assert "1 capture(s) in" in result.stderr and "yes" in result.stderr, result.stderr  # parsed: yes


def test_a_training_process_that_outlives_the_job_is_not_waited_for(tmp_path: Path) -> None:
    """helper-116: the job started a training process in a session of its own that went on after the job
    had ended; `npuprof run` said "waiting for 1 background post-processing job(s) (gzip / analyse)" and
    waited until that process ended (its post-processor lives as long as its training), with nothing to
    parse. The launcher waits for post-processors, not for trainings that outlive the job."""
    out, marker, child_pid = tmp_path / "out", tmp_path / "captured", tmp_path / "child.pid"
    child = tmp_path / "child.py"
    child.write_text(
        "import os, sys, time, torch\n"
        "open(sys.argv[2], 'w').write(str(os.getpid()))\n"
        "model = torch.nn.Linear(8, 8); opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for step in range(6000):\n"
        "    opt.zero_grad(); model(torch.randn(4, 8)).sum().backward(); opt.step()\n"
        "    if step == 6:\n"
        "        open(sys.argv[1], 'w').close()\n"
        "    time.sleep(0.1)\n"
    )
    parent = tmp_path / "parent.py"
    parent.write_text(
        "import os, subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, sys.argv[1], sys.argv[2], sys.argv[3]], start_new_session=True,\n"
        "                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # not the test's pipes\n"
        "while not os.path.exists(sys.argv[2]):\n"
        "    time.sleep(0.05)\n"
    )
    # Timed from the job's end (the child's marker, which the parent waits for), not from the run's start: a
    # leaked-pipe run of the same size took 45 s on a host at 4 times its load (helper-196). The child trains
    # 600 s or more: a run that waits for it times out.
    try:
        result = subprocess.run(
            [*NPUPROF, "run", "-o", str(out), *sched(1, 0, 2), "--",
             sys.executable, str(parent), str(child), str(marker), str(child_pid)],
            env=clean_env(), capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        took = time.time() - marker.stat().st_mtime
        still_trains = Path(f"/proc/{child_pid.read_text()}").exists()
    finally:
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(child_pid.read_text()), signal.SIGKILL)
    assert result.returncode == 0, result.stderr
    assert still_trains and took < 40, (took, result.stderr)
    assert "waiting for" not in result.stderr, result.stderr
    assert "still run" in " ".join(result.stderr.split()), result.stderr  # the summary names it


def test_the_pid_in_a_lock_is_read_through_its_descriptor_once_its_folder_is_gone(tmp_path: Path) -> None:
    """helper-116: a post-processor stopped (SIGSTOP) while the script removed the output dir: the wait
    went on through the lock it had open, but read the holder's pid by name in the removed folder, found
    none, and never said the post-processor was stopped (a silent wait until `kill -CONT`)."""
    from npuprof.results import postprocess

    pending = tmp_path / ".npuprof_pending"
    pending.mkdir()
    name = f"run1.{os.uname().nodename}.1.0a0b0c0d.lock"
    (pending / name).write_text("4242\n")
    dir_fd = os.open(pending, os.O_RDONLY | os.O_DIRECTORY)
    fd = os.open(pending / name, os.O_RDONLY)
    try:
        (pending / name).unlink()
        pending.rmdir()
        assert postprocess._holder_of_lock(dir_fd, name) is None  # by name: gone
        assert postprocess._holder_of_lock(dir_fd, name, fd) == 4242
    finally:
        os.close(fd)
        os.close(dir_fd)
