"""Dynamic capture in real processes: `npuprof run --dynamic DIR` around a live CPU training job, driven
from this process (another "terminal") through `npuprof trigger` and edits of DIR/profiler_config.json.

Two live jobs are shared by the tests of this module: a 2-rank torchrun (gloo) job that gets broken JSON,
bad values, a capture of steps N..N+1 on rank 1 only, then a long capture with an edit made during it; and
a single process killed with SIGKILL mid-capture, then a new job on the same directory."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from _forked_cli import npuprof  # report commands forked from a process that imported them: see its doc
from _standin_jobs import STEP_ON, stepping_job
from conftest import SCRIPTS, capture_record, clean_env, profiler_steps, rank_dirs

from npuprof.agent.dynamic_log import FILE_NAME
from npuprof.config import template_json

SCRIPT = str(SCRIPTS / "dynamic_trainer.py")
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
POLL_S = 0.2
STEP_SLEEP_S = 0.03
CONFIG = "profiler_config.json"


class LiveJob:
    """`npuprof run ... -- COMMAND` in the background; its output is collected as it comes."""

    def __init__(self, args: list[str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "npuprof", *args],
            cwd=cwd,
            env=clean_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.out: list[str] = []
        self.err: list[str] = []
        self.readers = [
            threading.Thread(target=lambda s=stream, k=sink: k.extend(iter(s.readline, "")), daemon=True)
            for stream, sink in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))
        ]
        for reader in self.readers:
            reader.start()

    def step(self, rank: int = 0) -> int:
        """The last step this rank printed (``rank R step S``)."""
        pattern = re.compile(rf"rank {rank} step (\d+)\s*$")  # (torchrun may prefix the lines)
        steps = [int(m[1]) for line in list(self.out) if (m := pattern.search(line))]
        return max(steps, default=0)

    def wait_for(self, what: str, check: Callable[[], object], timeout: float = 90) -> object:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = check()
            if value:
                return value
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.kill()
        raise AssertionError(
            f"{what}: not seen in time\nstdout:\n{''.join(self.out)[-2000:]}\n"
            f"stderr:\n{''.join(self.err)[-3000:]}"
        )

    def finish(self, stop: Path, timeout: float = 120) -> int:
        stop.touch()
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        # its last lines (the run's summary) may still be in the pipes when it has ended: read them all (a
        # loaded host once missed the whole summary)
        for reader in self.readers:
            reader.join(timeout=30)
        return code

    def kill(self) -> None:
        """The launcher; the job follows it (it gets SIGTERM when the launcher dies)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass


def logs(cfg: Path, rank: int | None = None, prefix: str = "dp_", pid: int | None = None) -> str:
    """The action (or monitor) logs of one rank (or all), older lines first."""
    text = []
    for path in sorted((cfg / "log").glob(f"{prefix}*")):
        match = FILE_NAME.match(path.name)
        if match is None or (prefix == "dp_" and match["monitor"]):
            continue
        if (rank is not None and int(match["rank"]) != rank) or (
            pid is not None and int(match["pid"]) != pid
        ):
            continue
        text.insert(0 if match["backup"] else len(text), path.read_text())
    return "".join(text)


def write_config(cfg: Path, **fields: object) -> None:
    """An edit as an editor that saves atomically makes it."""
    content = fields.pop("_raw", None)
    data = content if isinstance(content, str) else json.dumps({**template_json(), **fields})
    tmp = cfg / ".edit.tmp"
    tmp.write_text(data)
    os.replace(tmp, cfg / CONFIG)


def captures_by_rank(out: Path) -> dict[int, list[list[int]]]:
    result: dict[int, list[list[int]]] = {}
    for d in rank_dirs(out):
        record = capture_record(d)
        result.setdefault(record["rank"], []).append(record["steps"])
    return {rank: sorted(steps) for rank, steps in result.items()}


# ---- the 2-rank job ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def torchrun_job(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("dynamic_torchrun")
    cfg, out, stop = root / "cfg", root / "out", root / "stop"
    job = LiveJob(
        ["run", "-o", str(out), "--no-gzip", "--dynamic", str(cfg), "--poll-interval", str(POLL_S), "--",
         *TORCHRUN, SCRIPT, "--stop", str(stop), "--sleep", str(STEP_SLEEP_S)],
        root,
    )  # fmt: skip
    facts: dict = {"cfg": cfg, "out": out}
    for rank in (0, 1):
        job.wait_for(f"rank {rank}'s watcher", lambda r=rank: "is not a request" in logs(cfg, r))
    # broken JSON, then bad values: logged, never acted on
    write_config(cfg, _raw='{"start_step": 5, "active":')
    for rank in (0, 1):
        job.wait_for(
            f"rank {rank}: the broken file reported", lambda r=rank: "not valid JSON" in logs(cfg, r)
        )
    write_config(cfg, start_step="soon", active=-2, record_shapes="yes", with_stak=True, newer_key=1)
    for rank in (0, 1):
        job.wait_for(
            f"rank {rank}: bad values reported", lambda r=rank: "did you mean with_stack" in logs(cfg, r)
        )
    # steps N..N+1 on rank 1 only, by `npuprof trigger` with an absolute step
    first = job.step(1) + 100  # ~3 s ahead: this trigger's own start-up and one poll fit in it
    trigger = npuprof("trigger", str(cfg), "--start-step", str(first), "--active", "2", "--ranks", "1")
    assert trigger.returncode == 0, trigger.stderr
    facts["first"] = first
    job.wait_for("rank 1's capture", lambda: f"of steps {first}-{first + 1} complete" in logs(cfg, 1))
    # a long capture from the next step on both ranks; an edit made during it runs after it
    trigger = npuprof("trigger", str(cfg), "--active", "40")
    assert trigger.returncode == 0, trigger.stderr
    facts["trigger_ns"] = (cfg / CONFIG).stat().st_mtime_ns  # the moment the file changed
    job.wait_for("the long capture on rank 0", lambda: logs(cfg, 0).count("capture started at step") == 1)
    job.wait_for("the long capture on rank 1", lambda: logs(cfg, 1).count("capture started at step") == 2)
    write_config(
        cfg, start_step=-1, active=1, with_stack=True, is_rank=True, rank_list=[0], trigger_id="edit"
    )
    job.wait_for("the edit's capture", lambda: logs(cfg, 0).count("complete in") == 2)
    job.wait_for("rank 1 passing the edit", lambda: "rank 1 is not selected" in logs(cfg, 1))
    facts["code"] = job.finish(stop)
    facts["stderr"] = "".join(job.err)
    return facts


@pytest.mark.torchrun
def test_a_trigger_of_steps_n_and_n_plus_1_lands_on_rank_1_only(torchrun_job: dict) -> None:
    first, out = torchrun_job["first"], torchrun_job["out"]
    assert torchrun_job["code"] == 0, torchrun_job["stderr"][-3000:]
    by_rank = captures_by_rank(out)
    assert [first, first + 1] in by_rank[1]
    assert all(first not in steps for steps in by_rank.get(0, []))
    (rank1_dir,) = [d for d in rank_dirs(out) if capture_record(d)["steps"] == [first, first + 1]]
    assert capture_record(rank1_dir)["rank"] == 1
    assert profiler_steps(rank1_dir) == [first, first + 1]  # ProfilerStep#N carries the global step


@pytest.mark.torchrun
def test_an_edit_during_a_capture_runs_after_it(torchrun_job: dict) -> None:
    out = torchrun_job["out"]
    by_rank = captures_by_rank(out)
    long0 = [s for s in by_rank[0] if len(s) == 40]
    long1 = [s for s in by_rank[1] if len(s) == 40]
    assert len(long0) == 1 and len(long1) == 1, by_rank
    (edit,) = [s for s in by_rank[0] if len(s) == 1]
    assert edit[0] > long0[0][-1]  # after the capture in flight, not instead of it
    assert not [s for s in by_rank[1] if len(s) == 1]  # rank_list [0]
    (edit_dir,) = [d for d in rank_dirs(out) if capture_record(d)["steps"] == edit]
    info = json.loads((edit_dir / "profiler_info_0.json").read_text())
    assert info["config"]["common_config"]["with_stack"] is True  # the edit's own options
    assert "waits for its end" in logs(torchrun_job["cfg"], 0)


@pytest.mark.torchrun
def test_trigger_to_capture_latency_is_within_a_poll_and_a_step(torchrun_job: dict) -> None:
    out = torchrun_job["out"]
    begins = []
    for d in rank_dirs(out):
        if len(capture_record(d)["steps"]) == 40:
            info = json.loads(next(d.glob("profiler_info_*.json")).read_text())
            begins.append(info["start_info"]["collectionTimeBegin"])
    assert len(begins) == 2
    latency = (max(begins) - torchrun_job["trigger_ns"]) / 1e9
    print(
        f"\ntrigger-to-capture latency: {latency:.3f} s (poll interval {POLL_S} s, steps ~{STEP_SLEEP_S} s)"
    )
    # the budget is one poll and one step; a loaded 2-core machine gets one more second
    assert 0 < latency <= POLL_S + 1.0 + 1.0


@pytest.mark.torchrun
def test_bad_content_is_logged_and_training_ends_normally(torchrun_job: dict) -> None:
    cfg = torchrun_job["cfg"]
    assert torchrun_job["code"] == 0
    for rank in (0, 1):
        text = logs(cfg, rank)
        assert re.search(r"\[ERROR\].*not valid JSON \(Expecting value: line 1", text), text[-2000:]
        for field, value in (("active", "-2"), ("record_shapes", '"yes"')):
            assert re.search(rf"\[WARNING\].*{field}.*{re.escape(value)}", text), field
        # a start_step that is no step: no request at all (its default, 0, would cancel)
        assert re.search(r'\[ERROR\].*start_step: must be an integer >= -1, got "soon"; this content', text)
        assert "newer_key: not known to npuprof" in text
        monitor = logs(cfg, rank, prefix="monitor_dp_")
        assert "load json failed" in monitor and "load json success" in monitor
        assert monitor.rstrip().endswith("Dynamic profiler process done")


@pytest.mark.torchrun
def test_status_reads_what_each_rank_did(torchrun_job: dict) -> None:
    result = npuprof("status", str(torchrun_job["cfg"]), "--format", "json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    processes = {p["rank"]: p for p in report["processes"]}
    by_rank = captures_by_rank(torchrun_job["out"])
    assert sorted(processes) == [0, 1]
    for rank, process in processes.items():
        assert process["state"] == "ended"
        assert len(process["captures"]) == len(by_rank[rank])
        assert process["errors"] and "not valid JSON" in process["errors"][0]
        assert process["last_step"] > torchrun_job["first"]
    table = npuprof("status", str(torchrun_job["cfg"]))
    assert table.returncode == 0 and "rank" in table.stdout and "complete in" in table.stdout


# ---- SIGKILL, then a new job on the same directory -----------------------------------------------------
def _shm() -> set[str]:
    try:
        return set(os.listdir("/dev/shm"))
    except OSError:
        return set()


def test_after_kill_9_a_new_job_with_the_same_directory_captures(tmp_path: Path) -> None:
    cfg, stop = tmp_path / "cfg", tmp_path / "stop"
    shm_before = _shm()
    args = ["--no-gzip", "--dynamic", str(cfg), "--poll-interval", str(POLL_S), "--", sys.executable, SCRIPT]
    first = LiveJob(
        ["run", "-o", str(tmp_path / "out1"), *args, "--stop", str(stop), "--sleep", "0.03"], tmp_path
    )
    first.wait_for("the first job's watcher", lambda: "is not a request" in logs(cfg))
    (name,) = [p.name for p in (cfg / "log").glob("dp_*.log")]
    job_pid = int(FILE_NAME.match(name)["pid"])  # type: ignore[index]
    assert npuprof("trigger", str(cfg), "--active", "100000").returncode == 0
    first.wait_for("a capture in flight", lambda: "capture started" in logs(cfg))
    # the whole job, then the launcher, mid-capture (the launcher first: its death sends the job SIGTERM,
    # which may end it cleanly before the SIGKILL lands)
    os.killpg(job_pid, signal.SIGKILL)
    os.kill(first.proc.pid, signal.SIGKILL)
    first.proc.wait(timeout=30)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{job_pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    # nothing but the file and the logs: no shared memory, no lock file
    assert sorted(p.name for p in cfg.iterdir()) == ["log", CONFIG]
    left = sorted(p.name for p in (cfg / "log").iterdir())
    assert left and all(FILE_NAME.match(name) for name in left), left
    new_shm = [n for n in _shm() - shm_before if "npuprof" in n.lower() or "dynamicprofile" in n.lower()]
    assert new_shm == []
    status = json.loads(npuprof("status", str(cfg), "--format", "json").stdout)
    (gone,) = status["processes"]
    assert gone["pid"] == job_pid and gone["state"].startswith("gone") and gone["capturing"] is not None
    table = npuprof("status", str(cfg)).stdout
    assert f"capture from step {gone['capturing']['from_step']} never finished (the process died)" in table

    out2 = tmp_path / "out2"
    second = LiveJob(["run", "-o", str(out2), *args, "--stop", str(stop), "--sleep", "0.03"], tmp_path)
    second.wait_for(
        "the second job's watcher",
        lambda: len(list((cfg / "log").glob("dp_*.log"))) == 2 and logs(cfg).count("is not a request") == 2,
    )
    assert npuprof("trigger", str(cfg), "--active", "2").returncode == 0
    second.wait_for("the second job's capture", lambda: "complete in" in logs(cfg))
    # a capture into a prof_dir outside -o: the run's summary, record and report still know of it; asked
    # not to be parsed, it is not said to be left unparsed by a post-processor at the end
    elsewhere = tmp_path / "elsewhere"
    asked = npuprof("trigger", str(cfg), "--active", "1", "-o", str(elsewhere), "--no-analyse")
    assert asked.returncode == 0, asked.stderr
    second.wait_for("the capture elsewhere", lambda: logs(cfg).count("complete in") == 2)
    assert second.finish(stop) == 0, "".join(second.err)[-3000:]
    (d,) = rank_dirs(out2)
    steps = capture_record(d)["steps"]
    assert len(steps) == 2 and profiler_steps(d) == steps
    (e,) = rank_dirs(elsewhere)
    record = json.loads((out2 / "npuprof_run.json").read_text())
    assert sorted(c["rank_dir"] for c in record["captures"]) == sorted([str(d), str(e)])
    said = " ".join("".join(second.err).split())  # the summary wraps long paths at 80 columns
    assert "2 capture(s)" in said and e.name in said and "(1 of the captures, outside" in said, said
    assert capture_record(e)["parse"] is False and capture_record(d)["parse"] is True
    assert "not parsed when npuprof ended" not in said, said
    report = npuprof("analyse", str(out2), "--format", "json")
    assert report.returncode == 0 and f"also captured into {elsewhere}" in report.stderr, report.stderr
    # with no capture of its own in -o, analyse of -o says where they went
    for d in rank_dirs(out2):
        shutil.rmtree(d)
    nothing = npuprof("analyse", str(out2))
    assert nothing.returncode == 1 and f"its run captured into {elsewhere}" in nothing.stderr, nothing.stderr


def _capturing_dynamic_job(tmp_path: Path, *script_args: str) -> tuple[LiveJob, Path, Path, Path]:
    """A single-process --dynamic job with a long capture in flight: (the job, cfg, stop file, -o)."""
    cfg, stop, out = tmp_path / "cfg", tmp_path / "stop", tmp_path / "out"
    job = LiveJob(
        ["run", "-o", str(out), "--no-gzip", "--dynamic", str(cfg), "--poll-interval", str(POLL_S), "--",
         sys.executable, SCRIPT, "--stop", str(stop), "--sleep", "0.03", *script_args],
        tmp_path,
    )  # fmt: skip
    job.wait_for("the watcher", lambda: "is not a request" in logs(cfg))
    assert npuprof("trigger", str(cfg), "--active", "100000").returncode == 0
    job.wait_for("a capture in flight", lambda: "capture started" in logs(cfg))
    return job, cfg, stop, out


def _ended_in_status_with_its_capture_complete(cfg: Path, out: Path) -> None:
    (d,) = rank_dirs(out)
    assert capture_record(d)["status"] == "complete"
    status = json.loads(npuprof("status", str(cfg), "--format", "json").stdout)
    (process,) = status["processes"]
    assert process["state"].startswith("ended"), process
    assert len(process["captures"]) == 1 and process["capturing"] is None, process


def test_a_job_ending_by_os_exit_during_a_capture_is_ended_in_status(tmp_path: Path) -> None:
    """os._exit skips atexit, where the watcher writes its last lines: status said "gone (no end line:
    killed?)" and "capturing" for a process that ended normally with its capture complete."""
    job, cfg, stop, out = _capturing_dynamic_job(tmp_path, "--os-exit", "5")
    assert job.finish(stop) == 5, "".join(job.err)[-3000:]
    _ended_in_status_with_its_capture_complete(cfg, out)


def test_a_job_stopped_by_sigterm_during_a_capture_is_ended_in_status(tmp_path: Path) -> None:
    """SIGTERM finalises the capture in flight, then the process dies of it: its watcher's last lines
    were never written, so status said "capturing" and "gone (killed?)" with the capture complete."""
    job, cfg, _stop, out = _capturing_dynamic_job(tmp_path)
    os.kill(job.proc.pid, signal.SIGTERM)
    assert job.proc.wait(timeout=120) == -signal.SIGTERM, "".join(job.err)[-3000:]
    _ended_in_status_with_its_capture_complete(cfg, out)


# dynamic_trainer.py's loop in plain Python (tests/_standin_jobs.py): its steps are the returns of train_step
# (--step-on), and a job that is never asked for a capture needs no torch
STEPS_UNTIL_STOPPED = """
import sys, time
from pathlib import Path

def train_step(step):
    return step + 1

step, stop = 0, Path(sys.argv[1])
while not stop.exists():
    step = train_step(step)
    print(f"rank 0 step {step}", flush=True)
    time.sleep(0.03)
"""


def test_a_job_stopped_by_sigterm_between_captures_is_said_stopped_by_it(tmp_path: Path) -> None:
    """helper-256: outside a capture npuprof had no SIGTERM handler: the process died with no end line,
    and status said "gone (no end line: killed?)". The SIGTERM a scheduler sends (here to npuprof, which
    passes it on) is logged as such, and the job still dies of it."""
    cfg, stop, out = tmp_path / "cfg", tmp_path / "stop", tmp_path / "out"
    script = tmp_path / "steps.py"
    script.write_text(STEPS_UNTIL_STOPPED)
    job = LiveJob(
        ["run", "-o", str(out), "--dynamic", str(cfg), "--poll-interval", str(POLL_S), *STEP_ON, "--",
         sys.executable, str(script), str(stop)],
        tmp_path,
    )  # fmt: skip
    job.wait_for("the watcher", lambda: "is not a request" in logs(cfg))
    job.wait_for("a few steps", lambda: job.step() >= 3)
    job.proc.send_signal(signal.SIGTERM)
    assert job.proc.wait(timeout=120) == -signal.SIGTERM, "".join(job.err)[-3000:]
    for reader in job.readers:
        reader.join(timeout=30)
    said_on_stderr = " ".join("".join(job.err).split())  # wrapped to the terminal's width, as the path falls
    assert "the job was ended by SIGTERM (exit code 143)" in said_on_stderr, said_on_stderr[-3000:]
    said = logs(cfg).splitlines()
    assert said[-2].endswith("stopped by SIGTERM: the process dies of it"), said[-3:]
    assert said[-1].endswith("the process ends"), said[-3:]
    (process,) = json.loads(npuprof("status", str(cfg), "--format", "json").stdout)["processes"]
    assert process["state"] == "ended (SIGTERM)" and process["captures"] == [], process
    assert rank_dirs(out) == []


# ---- the launcher and the two commands (no training) ---------------------------------------------------
def test_the_launcher_makes_the_template_once_and_keeps_prof_config_path_from_the_job(tmp_path: Path) -> None:
    show = [sys.executable, "-c", "import os; print('job sees', os.environ.get('PROF_CONFIG_PATH'))"]
    result = npuprof(
        "run", "-o", str(tmp_path / "out"), "--", *show, cwd=tmp_path, env=clean_env(PROF_CONFIG_PATH="cfg")
    )
    assert result.returncode == 0, result.stderr
    assert "job sees None" in result.stdout
    assert "PROF_CONFIG_PATH=cfg is taken as --dynamic cfg" in result.stderr
    assert json.loads((tmp_path / "cfg" / CONFIG).read_text()) == template_json()
    (tmp_path / "cfg" / CONFIG).write_text('{"start_step": 0, "mine": true}')
    again = npuprof("run", "-o", str(tmp_path / "out"), "--dynamic", "cfg", "--", *show, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "cfg" / CONFIG).read_text() == '{"start_step": 0, "mine": true}'  # never overwritten
    refused = npuprof(
        "run", "--active", "3", "--", *show, cwd=tmp_path, env=clean_env(PROF_CONFIG_PATH="cfg")
    )
    assert refused.returncode == 2 and "unset PROF_CONFIG_PATH" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 2  # the PROF_CONFIG_PATH line, then the error


def test_untrusted_or_linked_directories_are_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    result = npuprof("run", "--dynamic", str(shared), "--", sys.executable, "-c", "pass")
    assert (
        result.returncode == 2 and "writable by others" in result.stderr and "Traceback" not in result.stderr
    )
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    result = npuprof("run", "--dynamic", str(tmp_path / "link"), "--", sys.executable, "-c", "pass")
    assert result.returncode == 2 and "symbolic link" in result.stderr
    (tmp_path / "real" / CONFIG).write_text("{}")
    (tmp_path / "real" / CONFIG).chmod(0o666)
    result = npuprof("trigger", str(tmp_path / "real"))
    assert result.returncode == 0  # the trigger replaces the file with its own (0o640 at most)
    assert (tmp_path / "real" / CONFIG).stat().st_mode & 0o022 == 0
    linked = tmp_path / "linked"
    linked.mkdir(mode=0o750)
    (linked / CONFIG).symlink_to(tmp_path / "real" / CONFIG)
    result = npuprof("run", "--dynamic", str(linked), "--", sys.executable, "-c", "pass")
    assert (
        result.returncode == 2 and "is a symbolic link (never followed); put the file itself" in result.stderr
    )


def test_trigger_validates_like_run_and_both_commands_show_examples(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg"
    assert npuprof("trigger", str(cfg)).returncode == 2  # no job has made it
    cfg.mkdir()
    (cfg / CONFIG).write_text(json.dumps(template_json()))
    for flags, words in ((["--level", "7"], "--level"), (["--start-step", "0"], "--start-step")):
        result = npuprof("trigger", str(cfg), *flags)
        assert result.returncode == 2, (flags, result.stderr)
        assert words in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    result = npuprof(
        "trigger", str(cfg), "--start-step", "50", "--active", "3", "--ranks", "0,7", "--level", "1"
    )
    assert result.returncode == 0, result.stderr
    written = json.loads((cfg / CONFIG).read_text())
    assert (written["start_step"], written["active"], written["rank_list"]) == (50, 3, [0, 7])
    assert written["is_rank"] is True and written["experimental_config"]["profiler_level"] == "Level1"
    for command, example in (
        ("trigger", "npuprof trigger cfg --active 2 --ranks 0,7"),
        ("status", "npuprof status cfg"),
    ):
        help_text = npuprof(command, "--help", env=clean_env(COLUMNS="200")).stdout
        assert "Examples" in help_text and example in help_text


def test_the_seeds_template_as_config_captures_nothing(tmp_path: Path) -> None:
    config = tmp_path / CONFIG
    config.write_text(json.dumps({**template_json(), "warmup": 0, "async_mode": False}))
    # a plain-Python job of 12 steps (tests/_standin_jobs.py): a capture, were one asked, would import
    # torch's profiler there and be written as any other
    job = stepping_job(tmp_path, 12)
    result = npuprof("run", "--config", str(config), "-o", str(tmp_path / "out"), *job)
    assert result.returncode == 0, result.stderr
    assert rank_dirs(tmp_path / "out") == []  # before: steps 6-8 were captured
    said = " ".join(result.stderr.split())  # (the summary is wrapped to the terminal's width)
    assert "start_step is 0, which asks for no capture" in said and "async_mode is not used" in said


def test_trigger_says_when_no_process_watches_the_directory(tmp_path: Path) -> None:
    from npuprof.agent.dynamic_files import prepare

    directory, _, _ = prepare(str(tmp_path / "cfg"))
    log = directory / "log"
    log.mkdir(exist_ok=True)
    (directory / CONFIG).unlink()  # log/ alone: said nothing, as if a job read it
    early = npuprof("trigger", str(directory), "--active", "2")
    assert early.returncode == 0 and f"no process has watched {directory} yet" in early.stderr, early.stderr
    assert "reads this request when it begins" in early.stderr, early.stderr
    host = os.uname().nodename
    (log / f"dp_{host}_{os.getpid()}_rank_0.log").write_text(
        "2026-12-02 07:25:40,469 [INFO] [1] npuprof.dynamic: [step 0] watching it every 1 s\n"
        "2026-12-02 07:25:51,440 [INFO] [1] npuprof.dynamic: [step 100] the process ends\n"
    )
    ended = npuprof("trigger", str(directory), "--active", "2")
    assert ended.returncode == 0 and "no process watches" in ended.stderr, ended.stderr
    (log / f"dp_{host}_{os.getpid()}_rank_1.log").write_text(  # this process: alive, no end line
        "2026-12-02 07:25:40,469 [INFO] [1] npuprof.dynamic: [step 0] watching it every 1 s\n"
    )
    running = npuprof("trigger", str(directory), "--active", "2")
    assert running.returncode == 0 and "no process watches" not in running.stderr, running.stderr
    # the file deleted while the job runs (its watchers wait for it): trigger writes it again
    (directory / CONFIG).unlink()
    again = npuprof("trigger", str(directory), "--active", "3")
    assert again.returncode == 0, again.stderr
    assert json.loads((directory / CONFIG).read_text())["active"] == 3


def test_a_trigger_says_it_replaces_a_request_no_process_picked_up(tmp_path: Path) -> None:
    """Two triggers half a second apart: the first was never read, and nothing said so."""
    from npuprof.agent.dynamic_files import prepare

    directory, _, _ = prepare(str(tmp_path / "cfg"))
    log = directory / "log"
    log.mkdir(exist_ok=True)
    first = npuprof("trigger", str(directory), "--active", "2")
    assert first.returncode == 0 and "replaces" not in first.stderr  # the template asked for nothing
    first_id = json.loads((directory / CONFIG).read_text())["trigger_id"]
    second = npuprof("trigger", str(directory), "--active", "5")
    said = " ".join(second.stderr.split())
    assert f"this replaces request {first_id}, which no process had picked up yet" in said, said
    second_id = json.loads((directory / CONFIG).read_text())["trigger_id"]
    (log / f"dp_{os.uname().nodename}_{os.getpid()}_rank_0.log").write_text(
        "2026-12-02 07:25:41,000 [INFO] [1] npuprof.dynamic: [step 5] loaded: capture 5 step(s) from the "
        f"next step on every rank into out (trigger {second_id})\n"
    )
    third = npuprof("trigger", str(directory), "--active", "1")
    assert third.returncode == 0 and "replaces" not in third.stderr, third.stderr
    # a request written by hand (torch_npu's way: no trigger id), after the last read: told by its time
    (directory / CONFIG).write_text(json.dumps({"start_step": -1, "active": 2}))
    fourth = npuprof("trigger", str(directory), "--active", "1")
    said = " ".join(fourth.stderr.split())
    assert fourth.returncode == 0 and "this replaces request written at " in said, said


@pytest.mark.parametrize(
    "flags, said",
    [
        (["--cancel", "--active", "5"], "--cancel: excludes --active"),
        (["--cancel", "--start-step", "9"], "--cancel: excludes --start-step"),
        (["-o", "{file}"], "exists and is not a directory"),
        (["-o", "{file}/sub"], "exists and is not a directory"),
    ],
)
def test_trigger_flags_that_ask_nothing_sensible_exit_2(tmp_path: Path, flags: list[str], said: str) -> None:
    """`--cancel --active 5` was taken silently (as a cancel); `-o FILE` was written into the request,
    for every process to fail on."""
    (tmp_path / "afile").write_text("")
    args = [f.format(file=tmp_path / "afile") for f in flags]
    result = npuprof("trigger", str(tmp_path / "dyn"), *args)
    assert result.returncode == 2 and said in result.stderr, result.stderr
    assert not (tmp_path / "dyn").exists()
