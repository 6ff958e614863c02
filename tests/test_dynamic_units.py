"""Dynamic capture, in-process (no torch): the rotating logs, a request read from profiler_config.json, the
plan driven through the real CaptureController with a recording backend, the file's meaning in --config,
and who may write a config file. The real-process tests are in test_dynamic_run.py."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_controller import Backend, Sink

from npuprof import config as c
from npuprof.agent.controller import NEVER, CaptureController
from npuprof.agent.disk_guard import DiskGuard
from npuprof.agent.dynamic_files import CONFIG_NAME, prepare
from npuprof.agent.dynamic_log import append
from npuprof.agent.dynamic_plan import DynamicPlan
from npuprof.agent.dynamic_request import parse_request
from npuprof.agent.log import AgentLog
from npuprof.agent.schedule import SchedulePlan
from npuprof.cli import run_flags
from npuprof.file_trust import UntrustedPathError, check_directory
from npuprof.results.layout import process_start_time

LIMIT = 200 * 1024  # the seed's rotation size for both logs


def test_a_log_rotates_at_200_kb_into_one_backup(tmp_path: Path) -> None:
    path = str(tmp_path / "dp_host_1_rank_0.log")
    lines = [f"line {i:06d} " + "x" * 90 + "\n" for i in range(5000)]  # 5000 x 103 bytes = 503 KB
    for line in lines:
        assert append(path, line)
    main, backup = Path(path).read_text(), Path(path + ".1").read_text()
    assert len(main.encode()) <= LIMIT and len(backup.encode()) <= LIMIT
    assert main.endswith(lines[-1])  # the newest line is in the log itself
    assert len(backup.encode()) + len(lines[0]) > LIMIT  # rotated only when the next line did not fit
    kept = backup.splitlines(keepends=True) + main.splitlines(keepends=True)
    assert kept == lines[-len(kept) :]  # in order, nothing lost between the two files
    assert len(kept) < len(lines)  # the oldest lines were dropped
    assert sorted(os.listdir(tmp_path)) == ["dp_host_1_rank_0.log", "dp_host_1_rank_0.log.1"]


def test_a_log_never_follows_a_link(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("")
    (tmp_path / "dp.log").symlink_to(target)
    assert not append(str(tmp_path / "dp.log"), "x\n")
    assert target.read_text() == ""


def _request(document: object, base: c.ProfileConfig | None = None) -> tuple[object, list[tuple[str, str]]]:
    heard: list[tuple[str, str]] = []
    raw = document if isinstance(document, bytes) else json.dumps(document).encode()
    base = base or c.ProfileConfig(output="/run/out", dynamic="/cfg")
    request = parse_request(raw, "d", base, lambda level, message: heard.append((level, message)))
    return request, heard


def test_broken_json_is_one_error_with_the_parsers_message() -> None:
    request, heard = _request(b'{"start_step": 5,')
    assert request is None
    assert [level for level, _ in heard] == ["ERROR"]
    assert "not valid JSON" in heard[0][1] and "Expecting" in heard[0][1]  # json's own words


def test_bad_values_fall_back_to_defaults_with_a_warning_naming_field_and_value() -> None:
    request, heard = _request(
        {
            "start_step": 7,
            "active": 0,
            "record_shapes": "yes",
            "with_stak": True,
            "sys_newfeature": 1,
            "experimental_config": {"profiler_level": "Level9"},
        }
    )
    assert request is not None
    assert (request.start_step, request.active) == (7, 1)  # torch_npu's default
    assert request.cfg.record_shapes is False and request.cfg.level == "Level0"
    text = "\n".join(message for _, message in heard)
    assert all(level == "WARNING" for level, _ in heard), heard
    for field, value in (("active", "0"), ("record_shapes", '"yes"')):
        assert any(field in m and value in m for _, m in heard), (field, text)
    assert "Level9" in text
    assert "with_stak (did you mean with_stack?)" in text
    newer = [m for _, m in heard if "sys_newfeature" in m]
    assert len(newer) == 1 and "not known to npuprof" in newer[0]


def test_metadata_over_torch_npus_limits_is_cut_not_the_request_refused() -> None:
    """helper-190: one entry over 4096 characters refused the whole request (no capture), where
    docs/formats.md says an entry of a dynamic request is cut, and one past 50 KiB in all left out."""
    entries = {"long": "x" * 5000, "nested": {"a": ["y" * 5000]}, "ok": "z"}
    entries |= {f"fill{i}": "w" * 4000 for i in range(13)}  # 10 fit in 50 KiB with the three above
    request, heard = _request({"start_step": -1, "active": 2, "metadata": entries})
    assert request is not None and request.active == 2, heard
    assert all(level == "WARNING" for level, _ in heard), heard
    metadata = request.cfg.metadata
    assert metadata["long"] == "x" * 4096 and metadata["ok"] == "z"
    assert metadata["nested"] == json.dumps({"a": ["y" * 5000]})[:4096]
    assert "fill9" in metadata and not {"fill10", "fill11", "fill12"} & metadata.keys()
    said = " | ".join(message for _, message in heard)
    assert "metadata 'long' cut from 5000 to 4096 characters" in said, said
    assert "metadata 'fill10' left out: the entries reach 50 KiB in all" in said, said
    request.cfg.validate()


def test_a_start_step_that_is_no_step_makes_no_request_and_cancels_nothing(tmp_path: Path) -> None:
    """helper-124: start_step "250" (a string) fell back to its default, 0, which cancels: the capture in
    flight was cut and none at step 250 followed. Such content is not acted on at all now."""
    for bad, shown in (("250", '"250"'), (-2, "-2"), (2.5, "2.5"), (True, "True")):
        request, heard = _request({"start_step": bad, "active": 2})
        assert request is None, bad
        assert heard == [
            (
                "ERROR",
                f"profiler_config.json: start_step: must be an integer >= -1, got {shown}; this content is "
                "not acted on",
            )
        ], heard
    job = Job(tmp_path)
    job.steps(2)
    job.write(start_step=-1, active=5)
    job.steps(2)  # recording
    job.write(start_step="250", active=2)
    job.steps(8)
    assert job.captures() == [(3, 7)], job.captures()  # whole, not cancelled
    assert "start_step: must be an integer" in job.log()


def test_is_rank_selects_ranks_and_turns_parsing_off_and_prof_dir_is_under_the_run_output() -> None:
    request, heard = _request(
        {"start_step": 7, "active": 2, "is_rank": True, "rank_list": [1], "analyse": True}
    )
    assert request is not None and request.cfg.ranks == [1] and request.cfg.analyse is False
    assert any("is_rank" in m for _, m in heard)
    request, _ = _request({"prof_dir": "./"})
    assert request is not None and request.cfg.output == "/run/out"
    request, _ = _request({"prof_dir": "sub/dir"})
    assert request is not None and request.cfg.output == "/run/out/sub/dir"


# ---- the plan, driven by the real controller ------------------------------------------------------------


class Job:
    """A controller with a DynamicPlan (no watcher thread: the test polls), a recording backend and sink."""

    def __init__(
        self, tmp: Path, rank: int | None = 0, poll: float | None = 0.1, space: object = None
    ) -> None:
        self.dir = tmp / "cfg"
        directory, baseline, _ = prepare(str(self.dir))
        self.dir = directory
        self.cfg = c.ProfileConfig(output=str(tmp / "out"), dynamic=str(directory), poll_interval=poll)
        self.cfg.schedule = c.Schedule(off=True)
        self.plan = DynamicPlan(self.cfg, {"dynamic_baseline": baseline}, AgentLog(None, "test"), watch=False)
        self.backend, self.sink = Backend(), Sink()
        self.controller = CaptureController(
            self.cfg,
            self.plan,
            backend_factory=lambda: self.backend,
            sink_factory=lambda b: self.sink,
            log=AgentLog(None, "test"),
            rank_fn=lambda: rank,
            space=space,
        )
        self.controller.arm()
        self.plan.first_look()

    def write(self, **fields: object) -> None:
        document = {**c.template_json(), **fields}
        path = self.dir / CONFIG_NAME
        tmp = path.with_name(".tmp")
        tmp.write_text(json.dumps(document))
        os.replace(tmp, path)
        self.plan.poll_once()

    def steps(self, n: int) -> None:
        for _ in range(n):
            self.controller.on_boundary()

    def captures(self) -> list[tuple[int, int]]:
        """(first, last) step of each capture the sink saw end."""
        begins = [e[1] for e in self.sink.events if e[0] == "begin"]
        ends = [e[1] for e in self.sink.events if e[0] == "finish"]
        return list(zip(begins, ends, strict=False))

    def log(self, poll: bool = True) -> str:
        """The action log; after one more poll by default (the watcher writes what the steps did then)."""
        if poll:
            self.plan.poll_once()
        return "".join(p.read_text() for p in sorted((self.dir / "log").glob("dp_*.log")))


def test_a_change_captures_from_the_next_step_and_outside_captures_nothing_is_asked(tmp_path: Path) -> None:
    job = Job(tmp_path)
    job.steps(5)
    assert job.controller.next_check == NEVER  # idle: one increment and one comparison per step
    job.write(start_step=-1, active=2, record_shapes=True)
    assert job.controller.next_check == 0  # the watcher only lowered next_check
    job.steps(4)
    assert job.captures() == [(6, 7)]
    assert job.backend.configs[-1].record_shapes is True
    assert job.backend.configs[-1].schedule == c.Schedule(skip_first=6, wait=0, warmup=0, active=2, repeat=1)
    assert job.controller.next_check == NEVER
    text = job.log()
    assert "capture started at step 6" in text and "capture 1 of steps 6-7 complete" in text


def test_an_edit_during_a_capture_runs_after_it_and_the_last_edit_wins(tmp_path: Path) -> None:
    job = Job(tmp_path)
    job.steps(3)
    job.write(start_step=-1, active=4)
    job.steps(1)  # the capture begins at step 4
    job.write(start_step=-1, active=1, with_stack=True)  # queued ...
    job.write(start_step=-1, active=2, with_flops=True)  # ... and replaced: the last one runs
    job.steps(10)
    assert job.captures() == [(4, 7), (9, 10)]  # a new capture begins two steps after the last one's end
    assert job.backend.configs[-1].with_flops and not job.backend.configs[-1].with_stack
    assert "waits for its end" in job.log()


def _elsewhere_nearly_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Job, Path]:
    """A job whose -o has 3.8 GiB free and whose tmp_path/elsewhere 400 KiB, below --min-free-space 1MiB."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    real_statvfs = os.statvfs
    block = 4096

    def statvfs(path: str) -> os.statvfs_result:
        real = real_statvfs(path)  # a path not made yet raises as it would
        free = 100 if Path(path).is_relative_to(elsewhere) else 10**6
        return os.statvfs_result((block, block, 10**6, free, free, *real[5:]))

    monkeypatch.setattr(os, "statvfs", statvfs)
    space = DiskGuard(str(tmp_path / "out"), "1MiB", AgentLog(None, "test"), interval_s=3600)
    return Job(tmp_path, space=space), elsewhere


def test_the_output_stays_watched_however_many_prof_dirs_came_after_it(tmp_path: Path) -> None:
    """Requests into 12 prof_dirs, one after another: the guard measures 8 directories at most, and lets
    the oldest prof_dirs go, never -o (its captures would go unguarded until the next measurement)."""
    out = tmp_path / "out"
    out.mkdir()
    space = DiskGuard(str(out), "1MiB", AgentLog(None, "test"), interval_s=3600)
    space.check()
    prof_dirs = [str(tmp_path / f"prof{i}") for i in range(12)]
    for prof_dir in prof_dirs:
        space.watch(prof_dir)
    assert space.measured_at(str(out)) is not None
    assert [d for d in prof_dirs if space.measured_at(d) is not None] == prof_dirs[-7:]


def test_a_prof_dir_on_a_filesystem_below_min_free_space_is_not_captured_into(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The free space watched was -o's: a request's prof_dir on a nearly full filesystem was filled."""
    job, elsewhere = _elsewhere_nearly_full(tmp_path, monkeypatch)
    job.steps(2)
    job.write(start_step=-1, active=2, prof_dir=str(elsewhere / "prof"))
    job.steps(4)
    assert job.captures() == []
    assert job.sink.events == [("skipped", 3)]
    assert job.sink.skipped_into == [str(elsewhere / "prof")]  # its record goes where it was to write
    assert f"only 400.0 KiB free at {elsewhere / 'prof'}" in job.log()
    job.write(start_step=-1, active=2, prof_dir="./", trigger_id="back-to-o")
    job.steps(4)
    assert job.captures() == [(7, 8)]


def test_a_capture_in_flight_is_not_stopped_for_the_room_of_the_next_requests_prof_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job, elsewhere = _elsewhere_nearly_full(tmp_path, monkeypatch)
    job.steps(2)
    job.write(start_step=-1, active=4)  # into -o: steps 3-6
    job.steps(2)  # in flight
    job.write(start_step=-1, active=2, prof_dir=str(elsewhere / "prof"), trigger_id="next")  # waits for it
    job.steps(8)
    assert job.sink.events[:2] == [("begin", 3, False), ("finish", 6, "complete")]
    assert [event[0] for event in job.sink.events[2:]] == ["skipped"]


def test_an_absolute_start_step_and_one_already_passed(tmp_path: Path) -> None:
    job = Job(tmp_path)
    job.steps(20)
    job.write(start_step=10, active=1)
    assert "start_step 10 has passed (the job is at step 20): not effective" in job.log()
    job.write(start_step=30, active=2, trigger_id="x1")
    job.steps(15)
    assert job.captures() == [(30, 31)]


def test_a_start_step_the_job_is_in_is_said_begun_not_passed(tmp_path: Path) -> None:
    """helper-326: `npuprof trigger --start-step 400` read while the job ran step 400 was logged (and shown
    by status) as "start_step 400 has passed (the job is at step 400)", a step the reader takes for not
    passed yet. Its window would open at the boundary before step 400, which the job has crossed."""
    job = Job(tmp_path)
    job.steps(20)  # boundaries 0..19 crossed: the job runs step 20
    job.write(start_step=20, active=1)
    assert "start_step 20 has already begun (the job is in step 20): not effective" in job.log()
    assert "has passed" not in job.log()
    job.steps(5)
    assert job.captures() == []


def test_a_process_without_a_rank_not_selected_says_it_counts_as_rank_0(tmp_path: Path) -> None:
    """helper-298: a process without a rank (a plain script) sent a request for rank 1 logged "rank None is
    not selected"; it says that it counts as rank 0, as --ranks takes it (README)."""
    job = Job(tmp_path, rank=None)
    job.steps(2)
    job.write(start_step=-1, active=1, is_rank=True, rank_list=[1])
    job.steps(5)
    assert job.captures() == []
    said = job.log()
    assert "rank None" not in said, said
    line = "rank 0 is not selected (a process without a rank counts as rank 0; capture 1 step(s)"
    assert line in said, said


def test_an_unselected_rank_does_nothing_and_start_step_0_cancels_a_planned_capture(tmp_path: Path) -> None:
    job = Job(tmp_path, rank=0)
    job.steps(2)
    job.write(start_step=-1, active=1, is_rank=True, rank_list=[1])
    job.steps(5)
    assert job.captures() == [] and job.backend.configs == []
    assert "rank 0 is not selected" in job.log()
    job.write(start_step=20, active=1)
    job.steps(3)
    job.write(start_step=0)
    job.steps(30)
    assert job.captures() == []
    assert "cancelled (start_step 0)" in job.log()


def test_a_planned_capture_replaced_by_a_request_for_other_ranks_is_said_dropped(tmp_path: Path) -> None:
    """helper-190: steps 30-31 planned on every rank, then a trigger for rank 1 only: rank 0 dropped the
    planned window without a word, and status showed it "planned: steps 30-31" long after step 31 (the
    run's end: "planned, but the job ended before its first step")."""
    from npuprof.cli.status import _processes
    from npuprof.reports.run_summary import planned_not_reached

    job = Job(tmp_path, rank=0)
    job.steps(5)
    job.write(start_step=30, active=2, trigger_id="a")
    job.steps(2)
    job.write(start_step=-1, active=2, is_rank=True, rank_list=[1], trigger_id="b")
    job.steps(3)
    assert job.captures() == []
    text = job.log()
    assert "the capture planned from step 30 is cancelled: replaced by a later change (capture 2" in text
    (process,) = _processes(job.dir / "log")
    assert process["planned"] is None, process
    said = planned_not_reached(job.dir)
    assert said.startswith("the capture planned from step 30 is cancelled: replaced"), said
    assert "--cancel" not in said


def test_a_cancel_ends_the_capture_in_flight_and_saves_what_it_recorded(tmp_path: Path) -> None:
    """--active 1000000 asked by mistake held every step's events until the job's end: a cancel now ends
    it with the step it arrives at; a request that is no cancel still waits for the capture's end."""
    job = Job(tmp_path)
    job.steps(2)
    job.write(start_step=-1, active=1_000_000)
    job.steps(5)  # recording steps 3-6
    job.write(start_step=-1, active=2)  # waits for the end of the capture in flight
    job.steps(2)
    assert job.captures() == []
    job.write(start_step=0)
    job.steps(3)
    ((first, last),) = job.captures()
    assert first == 3 and 7 <= last <= 10, job.captures()
    log = job.log()
    assert "the capture in flight ends with step" in log and "cancelled" in log
    job.steps(10)
    assert len(job.captures()) == 1  # the request that waited was replaced by the cancel
    job.write(start_step=-1, active=1_000, warmup=3)
    job.steps(2)  # in its warm-up: nothing recorded yet, so nothing is saved
    job.write(start_step=0)
    job.steps(10)
    assert len(job.captures()) == 1, job.captures()
    assert "cancelled during its warm-up" in job.log()
    # read at the boundary into the first recorded step (which has not begun): nothing saved either
    job.write(start_step=-1, active=5, warmup=3)
    first = job.controller.step + 1
    while job.controller.step < first + 2:  # the warm-up's steps, up to the one before recording
        job.steps(1)
    job.write(start_step=0)
    job.steps(10)
    assert len(job.captures()) == 1, job.captures()


def test_the_poll_interval_is_2_s_then_step_10_to_11_at_least_1_s(tmp_path: Path) -> None:
    job = Job(tmp_path, poll=None)
    assert job.plan.interval() == 2.0
    job.steps(12)
    assert job.plan.interval() == 1.0  # these steps take microseconds: the floor
    assert job.controller.next_check == NEVER  # measured: the plan never asks again
    fixed = Job(tmp_path / "fixed", poll=0.5)
    fixed.steps(12)
    assert fixed.plan.interval() == 0.5


def test_half_written_content_is_never_acted_on_and_broken_content_is_reported_once(tmp_path: Path) -> None:
    job = Job(tmp_path)
    job.steps(2)
    (job.dir / CONFIG_NAME).write_text('{"start_step": -1, "act')  # an editor half-way through
    job.plan.poll_once()
    assert job.log(poll=False).count("not valid JSON") == 0  # maybe half-written: looked at once more
    job.plan.poll_once()
    job.plan.poll_once()
    assert job.log(poll=False).count("not valid JSON") == 1  # unchanged: it is broken, said once
    job.steps(5)
    assert job.captures() == []


# ---- the file's meaning in --config, and trust -----------------------------------------------------------


def test_config_files_start_step_0_means_no_capture_and_newer_keys_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "profiler_config.json"
    path.write_text(json.dumps({**c.template_json(), "async_mode": False, "newer_thing": 3}))
    heard: list[str] = []
    cfg = c.load_config_file(path, warn=heard.append).validate()
    assert SchedulePlan(cfg.schedule).next_busy_step(-1) is None  # the seed's template captures nothing
    assert any("newer_thing" in line and "not known" in line for line in heard)
    cfg = run_flags.build_config(path, {"active": 2}, environ={})
    assert SchedulePlan(cfg.schedule).next_busy_step(-1) == 5  # a schedule flag: warm-up at 5, then 6-7
    path.write_text(json.dumps({"start_stpe": 4}))
    with pytest.raises(c.ConfigError, match=r"start_stpe \(did you mean start_step\?\)"):
        c.load_config_file(path, warn=heard.append)


def test_config_files_and_directories_others_could_write_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "profiler_config.json"
    path.write_text("{}")
    path.chmod(0o664)
    with pytest.raises(c.ConfigError, match="writable by others"):
        c.load_config_file(path)
    path.chmod(0o644)
    assert c.load_config_file(path) == c.ProfileConfig()
    link = tmp_path / "link.json"
    link.symlink_to(path)
    with pytest.raises(c.ConfigError, match="symbolic link"):
        c.load_config_file(link)
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    with pytest.raises(UntrustedPathError, match="writable by others"):
        check_directory(str(shared), "--dynamic")
    with pytest.raises(ValueError, match="writable by others"):
        prepare(str(shared))


def test_dynamic_excludes_the_schedule_flags_and_prof_config_path_stands_for_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(c.ConfigError, match=r"--dynamic: excludes --active, --ranks"):
        run_flags.build_config(None, {"dynamic": "d", "active": 3, "ranks": "0"}, environ={})
    with pytest.raises(c.ConfigError, match=r"excludes --config"):
        run_flags.build_config(tmp_path / "x.json", {"dynamic": "d"}, environ={})
    cfg = run_flags.build_config(None, {}, environ={"PROF_CONFIG_PATH": "cfgdir"})
    assert cfg.dynamic == "cfgdir" and cfg.schedule.off
    assert "PROF_CONFIG_PATH=cfgdir is taken as --dynamic cfgdir" in capsys.readouterr().err
    with pytest.raises(
        c.ConfigError, match=r"PROF_CONFIG_PATH \(taken as --dynamic\).*unset PROF_CONFIG_PATH"
    ):
        run_flags.build_config(None, {"skip_first": 2}, environ={"PROF_CONFIG_PATH": "cfgdir"})
    # a time window too: the line named --dynamic, which was not given, and not the variable (helper-211)
    for window in ({"delay": 1.0}, {"duration": 2.0}):
        flag = "--" + next(iter(window))
        with pytest.raises(
            c.ConfigError,
            match=rf"^PROF_CONFIG_PATH \(taken as --dynamic\): excludes {flag} .*unset PROF_CONFIG_PATH$",
        ):
            run_flags.build_config(None, window, environ={"PROF_CONFIG_PATH": "cfgdir"})
        with pytest.raises(c.ConfigError, match=rf"^--dynamic: excludes {flag} .*; drop it$"):
            run_flags.build_config(None, {**window, "dynamic": "d"}, environ={})
    with pytest.raises(c.ConfigError, match="--poll-interval"):
        run_flags.build_config(None, {"poll_interval": 0.01, "dynamic": "d"}, environ={})
    # the help's default, "auto", is a value the flag takes
    auto = run_flags.build_config(None, {"poll_interval": "auto", "dynamic": "d"}, environ={})
    assert auto.poll_interval is None
    half = run_flags.build_config(None, {"poll_interval": "0.5", "dynamic": "d"}, environ={})
    assert half.poll_interval == 0.5
    with pytest.raises(
        c.ConfigError, match=r"--poll-interval: must be a number of seconds or auto, got 'soon'"
    ):
        run_flags.build_config(None, {"poll_interval": "soon", "dynamic": "d"}, environ={})


def test_a_request_the_job_never_read_is_named_at_the_end(tmp_path: Path) -> None:
    """`npuprof trigger` a moment before the job ended: the run's end says the request went unread (with
    its time and trigger id), not "no capture was asked"."""
    from npuprof.reports.run_summary import unread_request, why_no_capture

    (tmp_path / "log").mkdir()
    log = tmp_path / "log" / "dp_vm_1_rank_-1.log"
    log.write_text(
        "2026-12-02 07:25:40,469 [INFO] [1] npuprof.dynamic: [step 0] watching it every 60 s\n"
        "2026-12-02 07:25:51,440 [INFO] [1] npuprof.dynamic: [step 100] the process ends\n"
    )
    request = {"start_step": -1, "active": 2, "trigger_id": "20261202-072544-fb9acb"}
    config = tmp_path / CONFIG_NAME
    config.write_text(json.dumps(request))
    cfg = c.ProfileConfig(dynamic=str(tmp_path))
    why = why_no_capture(cfg, 0, ["[INFO] [agent pid=1] agent ready in x.py (rank None)"])
    assert "a capture was asked in" in why and "(trigger 20261202-072544-fb9acb)" in why, why
    assert "before any of its processes read the file" in why

    read_at = config.stat().st_mtime + 2
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(read_at))
    with log.open("a") as handle:
        handle.write(f"{stamp},000 [INFO] [1] npuprof.dynamic: [step 50] loaded: 2 step(s) from step 51\n")
    # read after it changed, but a line naming no trigger read another request: by its id it is unread
    assert "(trigger 20261202-072544-fb9acb)" in unread_request(tmp_path)
    with log.open("a") as handle:
        handle.write(
            "2020-01-01 00:00:00,000 [INFO] [1] npuprof.dynamic: [step 50] loaded: 2 step(s) from step 51 "
            "(trigger 20261202-072544-fb9acb)\n"
        )  # its id read, whatever that process's clock says
    assert unread_request(tmp_path) == ""  # read: another reason applies
    # written by hand (no trigger id): told by time, read by the line after its change
    config.write_text(json.dumps({"start_step": -1, "active": 2}))
    os.utime(config, (read_at - 1, read_at - 1))
    assert unread_request(tmp_path) == ""
    os.utime(config, (read_at + 30, read_at + 30))
    assert "before any of its processes read the file" in unread_request(tmp_path)
    config.write_text(json.dumps({**request, "start_step": 0}))
    os.utime(config, (read_at + 60, read_at + 60))
    assert unread_request(tmp_path) == ""  # start_step 0 asks for nothing


def test_a_capture_planned_beyond_the_jobs_end_is_named_at_the_end(tmp_path: Path) -> None:
    """`npuprof trigger --start-step 100000` on a 100-step job: the end said "no capture was asked"."""
    from npuprof.reports.run_summary import why_no_capture

    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "dp_vm_1_rank_-1.log").write_text(
        "2026-12-02 07:25:40,469 [INFO] [1] npuprof.dynamic: [step 0] watching it every 1 s\n"
        "2026-12-02 07:25:44,001 [INFO] [1] npuprof.dynamic: [step 40] loaded: capture 3 step(s) from step "
        "100000 on every rank into out\n"
        "2026-12-02 07:25:44,002 [INFO] [1] npuprof.dynamic: [step 41] capture planned: steps 100000-100002 "
        "(capture 3 step(s) from step 100000 on every rank into out)\n"
        "2026-12-02 07:25:51,440 [INFO] [1] npuprof.dynamic: [step 100] the process ends\n"
    )
    config = tmp_path / CONFIG_NAME
    config.write_text(json.dumps({"start_step": 100000, "active": 3}))
    os.utime(config, (time.time() - 10**8, time.time() - 10**8))  # read by the job (the log is later)
    cfg = c.ProfileConfig(dynamic=str(tmp_path))
    why = why_no_capture(cfg, 0, ["[INFO] [agent pid=1] agent ready in x.py (rank None)"])
    assert why.startswith(
        "a capture of steps 100000-100002 was planned, but the job ended at step 100, before its first step"
    ), why


def test_a_request_for_other_ranks_only_is_named_at_the_end(tmp_path: Path) -> None:
    """helper-378: `npuprof trigger DIR --ranks 1` on a job of one process (rank 0 as it has none): status
    said "not for this process's rank", and the run's end "no capture was asked in DIR/profiler_config.json"
    (the request asked one, for other ranks)."""
    from npuprof.reports.run_summary import why_no_capture

    (tmp_path / "log").mkdir()
    trigger = "20261208-002332-398951-a55a2f"
    request = f"capture 3 step(s) from the next step on ranks 1 into out (trigger {trigger})"
    (tmp_path / "log" / "dp_vm_1_rank_-1.log").write_text(
        "2026-12-08 00:23:30,370 +0000 [INFO] [1] npuprof.dynamic: [step 0] watching it every 2 s\n"
        f"2026-12-08 00:23:33,411 +0000 [INFO] [1] npuprof.dynamic: [step 122] loaded: {request}\n"
        "2026-12-08 00:23:33,432 +0000 [INFO] [1] npuprof.dynamic: [step 124] rank 0 is not selected (a "
        f"process without a rank counts as rank 0; {request}): no capture here\n"
        "2026-12-08 00:23:35,251 +0000 [INFO] [1] npuprof.dynamic: [step 201] the process ends\n"
    )
    config = tmp_path / CONFIG_NAME
    config.write_text(
        json.dumps({"start_step": -1, "active": 3, "is_rank": True, "rank_list": [1], "trigger_id": trigger})
    )
    os.utime(config, (time.time() - 10**8, time.time() - 10**8))  # read by the job (the log is later)
    cfg = c.ProfileConfig(dynamic=str(tmp_path))
    why = why_no_capture(cfg, 3, ["[INFO] [agent pid=1] agent ready in x.py (rank 0)"])
    assert "no capture was asked" not in why, why
    assert why.startswith(
        "the job failed (exit code 3) and the request selects none of the job's processes: rank 0 is not "
        "selected (a process without a rank counts as rank 0; capture 3 step(s) from the next step on ranks 1"
    ), why
    # a process the request selects says what became of it, whichever log is read last
    for name in ("dp_vm_0_rank_1.log", "dp_vm_9_rank_1.log"):
        (tmp_path / "log" / name).write_text(
            "2026-12-08 00:23:33,432 +0000 [INFO] [2] npuprof.dynamic: [step 40] capture planned: steps "
            f"100000-100002 ({request})\n"
            "2026-12-08 00:23:35,251 +0000 [INFO] [2] npuprof.dynamic: [step 100] the process ends\n"
        )
        said = why_no_capture(cfg, 0, ["[INFO] [agent pid=1] agent ready in x.py (rank 0)"])
        assert said.startswith(
            "a capture of steps 100000-100002 was planned, but the job ended at step 100"
        ), said
        (tmp_path / "log" / name).unlink()


def test_a_process_started_late_takes_a_request_of_the_run_that_no_process_read(tmp_path: Path) -> None:
    """helper-124: `npuprof run --dynamic DIR -- bash -c "sleep 8; python train.py"` triggered at 1.5 s: the
    only Python process began 7 s after the change and dropped it as made before it began; the summary then
    said no process read the file. A request given after the run began that no process has read is the
    late process's; one another process read stays theirs."""
    cfg_dir, baseline, _ = prepare(str(tmp_path / "cfg"))
    cfg = c.ProfileConfig(output=str(tmp_path / "out"), dynamic=str(cfg_dir), poll_interval=0.1)
    began = process_start_time()
    assert began is not None
    changed = began - 30  # 30 s before this process began, 10 s after the run did
    run_start = int((changed - 10) * 1e9)
    config = cfg_dir / CONFIG_NAME
    request = {**c.template_json(), "start_step": -1, "active": 2, "trigger_id": "t-late"}
    config.write_text(json.dumps(request))
    os.utime(config, (changed, changed))
    run = {"dynamic_baseline": baseline, "start_ns": run_start}
    late = DynamicPlan(cfg, run, AgentLog(None, "test"), watch=False)
    late.first_look()
    assert len(late._inbox) == 1, "a request no process read was dropped"
    # another process of the run read it (its log names the trigger): not this one's
    (cfg_dir / "log" / "dp_other.log").write_text(
        "2026-12-05 02:00:00,000 [INFO] [pid 7] loaded: start_step -1 active 2 (trigger t-late)\n"
    )
    other = DynamicPlan(cfg, run, AgentLog(None, "test"), watch=False)
    other.first_look()
    assert not other._inbox, "a request another process read was taken again"
    assert (
        "changed before this process began"
        in (cfg_dir / "log")
        .joinpath(next(p.name for p in (cfg_dir / "log").glob("dp_*.log") if p.name != "dp_other.log"))
        .read_text()
    )
    # a request of before the run began stays no request
    before = (run_start / 1e9) - 60
    os.utime(config, (before, before))
    (cfg_dir / "log" / "dp_other.log").unlink()
    older = DynamicPlan(cfg, run, AgentLog(None, "test"), watch=False)
    older.first_look()
    assert not older._inbox


def test_a_process_started_after_a_request_does_not_act_on_it(tmp_path: Path) -> None:
    """A trigger the running processes acted on was taken again by each process started later in the
    run (an evaluation subprocess, a restarted worker): one trigger, three captures."""
    job = Job(tmp_path)
    job.steps(2)
    job.write(start_step=-1, active=2)
    job.steps(5)
    assert job.captures() == [(3, 4)]
    # a process of the same run starting now: the file changed an hour before it began
    old = time.time() - 3600
    os.utime(job.dir / CONFIG_NAME, (old, old))
    late = DynamicPlan(job.cfg, {"dynamic_baseline": job.plan.baseline}, AgentLog(None, "test"), watch=False)
    late._pid = os.getpid()
    late.first_look()
    assert not late._inbox, "the old request was taken as new"
    assert "changed before this process began" in job.log(poll=False)
    # a change made while it runs is a request for it
    (job.dir / CONFIG_NAME).write_text(json.dumps({**c.template_json(), "start_step": -1, "active": 1}))
    late.poll_once()
    assert len(late._inbox) == 1
    # the same old content, for a process that began before it was written: a request
    os.utime(job.dir / CONFIG_NAME, (time.time(), time.time()))
    early = DynamicPlan(job.cfg, {"dynamic_baseline": job.plan.baseline}, AgentLog(None, "test"), watch=False)
    early._pid = os.getpid()
    early.first_look()
    assert len(early._inbox) == 1


def test_a_process_that_replaced_itself_does_not_take_again_a_request_it_took(tmp_path: Path) -> None:
    """A script that restarts itself with os.execv keeps its pid, its start time and its logs: the new
    image's first look took the trigger its old image had captured (changed after the process began) and
    captured it again, one trigger making two captures (helper-158). A request of after the old image
    ended is still the new one's."""
    cfg_dir, baseline, _ = prepare(str(tmp_path / "cfg"))
    cfg = c.ProfileConfig(output=str(tmp_path / "out"), dynamic=str(cfg_dir), poll_interval=0.1)
    config = cfg_dir / CONFIG_NAME
    config.write_text(json.dumps({**c.template_json(), "start_step": -1, "active": 2, "trigger_id": "t-1"}))
    run = {"dynamic_baseline": baseline, "start_ns": time.time_ns() - 10**9}
    old = DynamicPlan(cfg, run, AgentLog(None, "test"), watch=False)
    old.first_look()
    assert len(old._inbox) == 1  # the old image's request
    old._pid = os.getpid()
    old.at_exit()  # the exec's finalise: "the process ends"
    new = DynamicPlan(cfg, run, AgentLog(None, "test"), watch=False)
    new.first_look()
    assert not new._inbox, "the request the old image took was taken again"
    assert "before it replaced itself (os.exec*)" in "".join(
        p.read_text() for p in (cfg_dir / "log").glob("dp_*")
    )
    config.write_text(json.dumps({**c.template_json(), "start_step": -1, "active": 2, "trigger_id": "t-2"}))
    newer = DynamicPlan(cfg, run, AgentLog(None, "test"), watch=False)
    newer.first_look()
    assert len(newer._inbox) == 1


_ATTEMPT_THAT_CRASHES = """
import json, os, sys
from npuprof import config as c
from npuprof.agent.dynamic_plan import DynamicPlan
from npuprof.agent.log import AgentLog
cfg = c.ProfileConfig(output=sys.argv[1] + "/out", dynamic=sys.argv[1] + "/cfg", poll_interval=0.1)
plan = DynamicPlan(cfg, json.loads(sys.argv[2]), AgentLog(None, "test"), watch=False)
plan.first_look()
print("took", len(plan._inbox), flush=True)
os._exit(137)  # its capture crashed it (out of memory): no last line
"""


@pytest.mark.parametrize(
    ("trigger", "attempt", "elsewhere", "taken_again"),
    [
        ("t-oom", "0", False, False),
        ("", "0", False, False),
        ("t-oom", None, False, True),
        ("t-oom", "0", True, True),
    ],
    ids=["trigger", "by-hand", "log-naming-no-attempt", "another-nodes-attempt"],
)
def test_a_worker_torchrun_restarted_does_not_take_a_request_an_earlier_attempt_read(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    trigger: str,
    attempt: str | None,
    elsewhere: bool,
    taken_again: bool,
) -> None:
    """A worker torchrun restarted that starts within 5 s of a request (the slack for a file server's clock)
    took it as its own though its crashed attempt had read it: a capture that crashed the job (out of
    memory) crashed each restart. A later process of the same attempt, a rank started late, still takes a
    request made just before it; a log that names no attempt (an older npuprof's, or a process outside
    torchrun) is read as before, and so is another node's (torchrun counts each node's attempts apart)."""
    from conftest import clean_env

    monkeypatch.delenv("TORCHELASTIC_RESTART_COUNT", raising=False)
    cfg_dir, baseline, _ = prepare(str(tmp_path / "cfg"))
    cfg = c.ProfileConfig(output=str(tmp_path / "out"), dynamic=str(cfg_dir), poll_interval=0.1)
    run = {"dynamic_baseline": baseline, "start_ns": time.time_ns() - 60 * 10**9}
    config = cfg_dir / CONFIG_NAME
    request = {**c.template_json(), "start_step": -1, "active": 2}
    config.write_text(json.dumps({**request, "trigger_id": trigger} if trigger else request))
    env = clean_env(RANK="0", **({"TORCHELASTIC_RESTART_COUNT": attempt} if attempt is not None else {}))
    crashed = subprocess.run(
        [sys.executable, "-c", _ATTEMPT_THAT_CRASHES, str(tmp_path), json.dumps(run)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (crashed.returncode, crashed.stdout) == (137, "took 1\n"), crashed.stderr
    if elsewhere:  # DIR shared by the nodes of the job: the crashed process was of node-b
        for log in (cfg_dir / "log").glob("*dp_*"):
            log.rename(log.with_name(log.name.replace(f"_{os.uname().nodename}_", "_node-b_")))
    # the restart, starting now: the file changed less than a second ago
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
    monkeypatch.setenv("RANK", "0")
    restarted = DynamicPlan(cfg, run, AgentLog(None, "test"), watch=False)
    restarted.first_look()
    logs = "".join(p.read_text() for p in sorted((cfg_dir / "log").glob("dp_*.log")))
    if taken_again:
        assert len(restarted._inbox) == 1
        return
    assert not restarted._inbox, f"the request the crashed attempt read was taken again:\n{logs}"
    assert "an earlier attempt of this job (before torchrun restarted it) read the file" in logs
    # a request of after the crash is the restart's; a rank of its attempt started late takes it too
    config.write_text(json.dumps({**request, "trigger_id": "t-2"} if trigger else {**request, "active": 3}))
    later = time.time() + 2  # one by hand is told by time (to the second): written 2 s after the crash
    os.utime(config, (later, later))
    restarted.poll_once()
    assert len(restarted._inbox) == 1
    late = DynamicPlan(cfg, run, AgentLog(None, "test"), watch=False)
    late.first_look()
    assert len(late._inbox) == 1, "a request a process of this attempt read was not taken by a late rank"


_A_WORKER = """
import json, os, sys
from npuprof import config as c
from npuprof.agent.dynamic_plan import DynamicPlan
from npuprof.agent.log import AgentLog
cfg = c.ProfileConfig(output=sys.argv[1] + "/out", dynamic=sys.argv[1] + "/cfg", poll_interval=0.1)
plan = DynamicPlan(cfg, json.loads(sys.argv[2]), AgentLog(None, "test"), watch=False)
plan.training_started()
plan.first_look()
print("took", len(plan._inbox), flush=True)
if sys.argv[3] == "running":
    sys.stdin.read()  # trains on until the test closes its stdin
if sys.argv[3] == "stopped":
    plan.at_exit("SIGTERM")  # torchrun stopped it to restart its node's workers: its last lines
    os._exit(143)
os._exit(137)  # killed (its capture ran out of memory): no last line
"""


@pytest.mark.parametrize(
    ("ended", "elsewhere", "taken_again"),
    [("stopped", False, False), ("killed", False, False), ("stopped", True, True)],
    ids=["stopped-by-torchrun", "killed", "another-hosts-process"],
)
def test_a_worker_restarted_with_its_nodes_count_unchanged_does_not_take_a_request_its_node_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ended: str, elsewhere: bool, taken_again: bool
) -> None:
    """torchrun counts restarts per node: when another node's worker fails, a node whose workers did not
    restarts them with its count unchanged (a real 2-node job on one host: node A's worker died in its
    capture; node B's, stopped by SIGTERM, came back 1.1 s later as attempt 0 again and captured the request
    a second time). A process of this host that read the request and ended before this one began makes this
    one a restart whatever its count; a rank of the same attempt started late (the others running) still
    takes a request made just before it; another host's processes are not judged from here."""
    from conftest import clean_env

    monkeypatch.delenv("TORCHELASTIC_RESTART_COUNT", raising=False)
    cfg_dir, baseline, _ = prepare(str(tmp_path / "cfg"))
    run = {"dynamic_baseline": baseline, "start_ns": time.time_ns() - 60 * 10**9}
    config = cfg_dir / CONFIG_NAME
    request = {**c.template_json(), "start_step": -1, "active": 2}
    env = clean_env(RANK="1", TORCHELASTIC_RESTART_COUNT="0")  # node B's count, before and after

    def worker(how: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-c", _A_WORKER, str(tmp_path), json.dumps(run), how],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def took(how: str) -> str:
        out, err = worker(how).communicate(timeout=120)
        assert out.startswith("took "), err
        return out.strip()

    config.write_text(json.dumps({**request, "trigger_id": "t-oom"}))
    assert took(ended) == "took 1"
    if elsewhere:  # DIR shared by the nodes of the job: the process that ended was of node-a
        for log in (cfg_dir / "log").glob("*dp_*"):
            log.rename(log.with_name(log.name.replace(f"_{os.uname().nodename}_", "_node-a_")))
    os.utime(config)  # the restart begins within 5 s of the request (a file server's clock behind allowed)
    restart = took("killed")
    logs = "".join(p.read_text() for p in sorted((cfg_dir / "log").glob("dp_*.log")))
    if taken_again:
        assert restart == "took 1", logs
        return
    assert restart == "took 0", f"the request a process of this node read was taken again:\n{logs}"
    assert (
        "a process of this host that ended before this one began (an earlier attempt of the job, its workers "
        "restarted, or an earlier process of a job run in phases) read the file as it is"
    ) in logs
    # a rank of the same attempt started late: the rank that read the request just before it still runs
    config.write_text(json.dumps({**request, "trigger_id": "t-2"}))
    running = worker("running")
    try:
        assert running.stdout is not None and running.stdout.readline() == "took 1\n"
        os.utime(config)  # (however long the first took to start)
        assert took("killed") == "took 1", "a late rank of the running attempt did not take its request"
    finally:
        running.communicate(timeout=120)


def test_status_says_the_warm_up_of_the_request() -> None:
    from npuprof.cli.status import _config_line

    line = _config_line({"start_step": -1, "active": 3, "warmup": 2, "is_rank": True, "rank_list": [0]})
    assert line == "3 step(s) after 2 warm-up step(s) from the next step on ranks 0"
    # torch_npu's start_step is where the warm-up begins: steps 60-61 warm up, 62-64 are recorded
    line = _config_line({"start_step": 60, "active": 3, "warmup": 2})
    assert line == "3 step(s) from step 62 (after 2 warm-up step(s) from step 60) on every rank"
    assert _config_line({"start_step": 7, "active": 1, "warmup": 0}) == "1 step(s) from step 7 on every rank"


def test_status_says_a_request_with_is_rank_and_no_rank_list_captures_on_no_rank() -> None:
    """A request with "is_rank": true and no rank_list, or an empty one: the job captures on no rank
    ("none (empty rank_list)" in its log); status said "on ranks None" and "on ranks " (helper-156)."""
    from npuprof.cli.status import _config_line

    for listed in ({}, {"rank_list": []}):
        line = _config_line({"start_step": 7, "is_rank": True, **listed})
        assert line == "1 step(s) from step 7 on no rank (is_rank true, rank_list empty)", line
    line = _config_line({"start_step": 7, "is_rank": True, "rank_list": [3, 1, 2, 2]})
    assert line.endswith("on ranks 1-3"), line


def test_the_logs_are_written_again_when_log_was_removed_while_the_job_runs(tmp_path: Path) -> None:
    """The dynamic directory removed and made again while the job runs: log/ was never made again, and
    status said "no log/ directory" of a job still capturing."""
    import shutil

    from npuprof.agent.dynamic_log import DynamicLogs

    directory = tmp_path / "cfg"
    (directory / "log").mkdir(parents=True)
    logs = DynamicLogs(directory, lambda: 0)
    logs.action("INFO", "first", 1)
    shutil.rmtree(directory)
    directory.mkdir()
    logs.action("INFO", "second", 2)
    assert logs.lost == 0
    (written,) = (directory / "log").glob("dp_*.log")
    assert "second" in written.read_text()
    assert (directory / "log").stat().st_mode & 0o777 == 0o750


@pytest.mark.parametrize("linked", ["directory", "log"])
def test_the_logs_are_not_written_through_a_link_put_in_place_of_the_directory(
    tmp_path: Path, linked: str
) -> None:
    """helper-119: the dynamic directory (or its log/) replaced by a symbolic link while the job ran: the
    watcher refused to read through it, but the logs were written where it pointed."""
    from npuprof.agent.dynamic_log import DynamicLogs

    directory = tmp_path / "cfg"
    (directory / "log").mkdir(parents=True)
    logs = DynamicLogs(directory, lambda: 0)
    logs.action("INFO", "first", 1)
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "log").mkdir(parents=True)
    if linked == "directory":
        directory.rename(tmp_path / "moved")
        directory.symlink_to(elsewhere)
    else:
        (directory / "log").rename(directory / "old-log")
        (directory / "log").symlink_to(elsewhere / "log")
    logs.action("INFO", "second", 2)
    logs.monitor("INFO", "third")
    assert logs.lost == 2
    assert list((elsewhere / "log").iterdir()) == []


def test_a_cancelled_planned_capture_is_said_so_at_the_end_and_in_status(tmp_path: Path) -> None:
    from npuprof.cli.status import _processes
    from npuprof.reports.run_summary import why_no_capture

    (tmp_path / "log").mkdir()
    (tmp_path / "log" / f"dp_vm_{os.getpid()}_rank_-1.log").write_text(
        "2026-12-02 07:25:40,469 [INFO] [1] npuprof.dynamic: [step 0] watching it every 1 s\n"
        "2026-12-02 07:25:44,002 [INFO] [1] npuprof.dynamic: [step 3] capture planned: steps 35-36 (x)\n"
        "2026-12-02 07:25:45,002 [INFO] [1] npuprof.dynamic: [step 20] the capture planned from step 35 is "
        "cancelled (start_step 0)\n"
        "2026-12-02 07:25:51,440 [INFO] [1] npuprof.dynamic: [step 45] the process ends\n"
    )
    (tmp_path / CONFIG_NAME).write_text(json.dumps({"start_step": 0}))
    cfg = c.ProfileConfig(dynamic=str(tmp_path))
    why = why_no_capture(cfg, 0, ["[INFO] [agent pid=1] agent ready in x.py (rank None)"])
    assert why.startswith("the capture planned from step 35 is cancelled (start_step 0)"), why
    (process,) = _processes(tmp_path / "log")
    assert process["planned"] is None and process["state"] == "ended"


def test_a_prof_dir_inside_a_capture_directory_is_not_taken(tmp_path: Path) -> None:
    """A capture written inside another capture's *_ascend_pt dir is found by no reader (the run's
    summary, its record, analyse): the request falls back to the run's output, trigger refuses it."""
    base = c.ProfileConfig(output=str(tmp_path / "out"), dynamic="/cfg")
    request, heard = _request({"prof_dir": "host_1_20260101000000000_ascend_pt/sub"}, base)
    assert request is not None and request.cfg.output == str(tmp_path / "out")
    assert any("inside a capture's directory" in m for _, m in heard), heard
    import typer

    from npuprof.cli.trigger import trigger_command

    with pytest.raises(typer.Exit) as exit_code:
        trigger_command(
            directory=str(tmp_path), start_step=None, active=1, warmup=0, cancel=False,
            output=str(tmp_path / "out" / "host_1_20260101000000000_ascend_pt"),
        )  # fmt: skip
    assert exit_code.value.exit_code == 2


def test_status_keeps_the_newest_step_of_lines_written_out_of_order(tmp_path: Path) -> None:
    """An event queued behind a later heartbeat reaches the log after it: status showed the event's older
    step and time as the process's last."""
    from npuprof.cli.status import _processes

    (tmp_path / "dp_vm_1_rank_0.log").write_text(
        "2026-12-02 07:25:40,100 [INFO] [1] npuprof.dynamic: [step 0] watching it every 1 s\n"
        "2026-12-02 07:25:42,137 [INFO] [1] npuprof.dynamic: [step 80] at step 80\n"
        "2026-12-02 07:25:40,423 [INFO] [1] npuprof.dynamic: [step 11] poll interval now 1.000 s\n"
    )
    (process,) = _processes(tmp_path)
    assert (process["last_step"], process["last_seen"]) == (80, "2026-12-02 07:25:42,137")


def test_status_says_a_process_that_replaced_itself_runs(tmp_path: Path) -> None:
    """A script that restarts itself with os.execv keeps its pid, so its new image writes on in the same
    log after the old image's "the process ends": status called the training process "ended" and
    npuprof trigger said no process watched the directory, while the new image took the request; its steps
    done stayed the old image's last, the new one counting from 0 again (helper-158)."""
    from npuprof.cli.status import _processes

    (tmp_path / f"dp_{os.uname().nodename}_{os.getpid()}_rank_-1.log").write_text(  # this process: it runs
        "2026-12-02 07:25:40,100 [INFO] [1] npuprof.dynamic: [step 1] watching /d/f.json every 2 s\n"
        "2026-12-02 07:25:42,100 [INFO] [1] npuprof.dynamic: [step 12] the process ends\n"
        "2026-12-02 07:25:44,100 [INFO] [1] npuprof.dynamic: [step 0] watching /d/f.json every 2 s\n"
        "2026-12-02 07:25:46,100 [INFO] [1] npuprof.dynamic: [step 7] at step 7\n"
    )
    (process,) = _processes(tmp_path)
    assert process["state"] == "running"
    assert process["last_step"] == 7  # the new image's steps, counted from 0 again: not the old one's 12


def test_status_reads_a_process_given_a_dead_ones_pid_from_its_own_lines(tmp_path: Path) -> None:
    """helper-370: a job killed during a capture, restarted in a new container (pids from 1 again) with the
    same host name: its rank 0 got the dead rank 0's pid and appended to its log. Status showed the running
    process at the dead one's step 5000, "capturing from step 15" into the dead one's directory and planned
    15-214; the start in ticks of each "watching" line tells the two apart (an os.exec* keeps it)."""
    from npuprof.cli.status import _processes
    from npuprof.proc_stat import start_ticks

    host, pid = os.uname().nodename, os.getpid()
    ticks = start_ticks(pid)
    assert ticks is not None and ticks > 1

    def line(moment: str, step: int, message: str) -> str:
        return f"2026-12-02 {moment},100 +0000 [INFO] [{pid}] npuprof.dynamic: [step {step}] {message}\n"

    def watching(started: int) -> str:
        where = f"host {host}, pid {pid}, rank 0"
        return f"watching /d/profiler_config.json every 2 s; {where}, started at tick {started}"

    request = "capture 200 step(s) from the next step on every rank into /o (trigger a)"
    dead = [  # killed (no end line) while it captured
        line("07:00:00", 0, watching(1)),
        line("07:05:00", 14, f"loaded: {request}"),
        line("07:05:00", 15, f"capture planned: steps 15-214 ({request})"),
        line("07:05:00", 15, "capture started at step 15 into /o/dead_ascend_pt"),
        line("08:00:00", 5000, "at step 5000, started at tick 1"),
    ]
    alive = [line("09:00:00", 0, watching(ticks)), line("09:01:00", 3, f"at step 3, started at tick {ticks}")]
    (tmp_path / f"dp_{host}_{pid}_rank_0.log").write_text("".join(dead + alive))
    monitor = "2026-12-02 {},100 +0000 [INFO] [{}] npuprof.dynamic: load json success: x\n"
    (tmp_path / f"monitor_dp_{host}_{pid}_rank_0.log").write_text(monitor.format("07:05:00", pid))
    (process,) = _processes(tmp_path)
    assert process["state"] == "running", process
    assert process["last_step"] == 3, process
    assert process["capturing"] is None and process["planned"] is None, process
    assert process["loads"] == 0 and process["first_seen"].startswith("2026-12-02 09:00:00"), process
    # the same process after an os.exec* (its start kept): one process, its capture before the exec its own
    exec_ = [
        line("07:00:00", 0, watching(ticks)),
        line("07:00:09", 5, "capture 1 of steps 3-4 complete in /o/before_ascend_pt"),
        line("07:00:10", 6, "the process ends"),
        line("07:00:11", 0, watching(ticks)),
    ]
    (tmp_path / f"dp_{host}_{pid}_rank_0.log").write_text("".join(exec_))
    (process,) = _processes(tmp_path)
    assert process["state"] == "running" and process["capture_count"] == 1, process
    assert process["loads"] == 1, process


def test_status_drops_the_plan_a_finished_capture_carried_out(tmp_path: Path) -> None:
    from npuprof.cli.status import _processes

    (tmp_path / "dp_vm_1_rank_0.log").write_text(
        "2026-12-02 07:25:40,100 [INFO] [1] npuprof.dynamic: [step 10] capture planned: steps 11-12 (x)\n"
        "2026-12-02 07:25:41,100 [INFO] [1] npuprof.dynamic: [step 11] capture started at step 11 into /o/d\n"
        "2026-12-02 07:25:42,100 [INFO] [1] npuprof.dynamic: [step 13] capture of steps 11-12 complete in o\n"
    )
    (process,) = _processes(tmp_path)
    assert process["planned"] is None and process["capturing"] is None and len(process["captures"]) == 1


@pytest.mark.parametrize(
    "where", ["/o/d", "/data/run (2)/vm_1_20261202072541100_ascend_pt"], ids=["dir", "parenthesis-in-dir"]
)
def test_status_says_a_capture_cut_short(tmp_path: Path, where: str) -> None:
    """helper-223: a job stopped by Ctrl-C during a capture of 50 steps: the run's summary marked it
    "complete*" (the process died before the capture's last step; step 85 partial), npuprof status showed
    "steps 53-85 complete in DIR", its log line's note dropped, in the table and in the JSON. A prof_dir
    with " (" in its name ("run (2)", a copy's) had the JSON's directory cut there ("/data/run"), the rest
    of it read as the note's start."""
    from npuprof.cli.status import _processes, render

    note = (
        "the process died of an uncaught KeyboardInterrupt before the capture's last step; step 85 is partial"
    )
    (tmp_path / "dp_vm_1_rank_0.log").write_text(
        "2026-12-02 07:25:41,100 [INFO] [1] npuprof.dynamic: [step 53] capture started at step 53 into "
        f"{where}\n"
        f"2026-12-02 07:25:42,100 [INFO] [1] npuprof.dynamic: [step 85] capture 1 of steps 53-85 complete in"
        f" {where} ({note})\n"
    )
    (process,) = _processes(tmp_path)
    assert process["captures"] == [{"steps": "53-85", "status": "complete", "directory": where, "note": note}]
    report = {"config": {"file": "cfg/profiler_config.json", "content": None}, "processes": [process]}
    assert f"steps 53-85 complete in {where} ({note})" in " ".join(render(report).split())


def test_status_says_a_one_step_capture_and_plan_as_one_step(tmp_path: Path) -> None:
    """A capture of one step read "steps 275-275 complete in D" in status, its plan "planned: steps
    280-280": "step 275", "step 280". The log lines keep "A-B" (an older npuprof status reads them)."""
    from npuprof.cli.status import _processes, render

    lines = {
        273: "capture started at step 275 into o",
        276: "capture 1 of steps 275-275 complete in o",
        277: "capture planned: steps 280-280 (capture 1 step(s) from step 280 on every rank into o)",
    }
    (tmp_path / "dp_vm_1_rank_0.log").write_text(
        "".join(
            f"2026-12-02 07:25:4{i},100 [INFO] [1] npuprof.dynamic: [step {step}] {message}\n"
            for i, (step, message) in enumerate(lines.items())
        )
    )
    (process,) = _processes(tmp_path)
    assert process["captures"][0]["steps"] == "275-275" and process["planned"] == "280-280", process
    report = {"config": {"file": "cfg/profiler_config.json", "content": None}, "processes": [process]}
    shown = " ".join(render(report).split())
    assert "planned: step 280" in shown and "steps 280" not in shown, shown
    process["planned"] = None  # the plan carried out: the last capture is shown
    shown = " ".join(render(report).split())
    assert "step 275 complete in o" in shown and "steps 275" not in shown, shown


def test_status_counts_captures_whose_lines_rotated_out_of_the_logs(tmp_path: Path) -> None:
    """helper-124: 32 captures read as 18 once the oldest lines had rotated out (the heartbeat alone writes
    ~124 KB a day): each end line now carries the process's count so far."""
    from npuprof.cli.status import _processes, render

    (tmp_path / "dp_vm_1_rank_0.log").write_text(
        "2026-12-02 07:25:42,100 [INFO] [1] npuprof.dynamic: [step 313] capture 31 of steps 311-312 complete"
        " in o/a\n"
        "2026-12-02 07:25:43,100 [INFO] [1] npuprof.dynamic: [step 323] capture 32 of steps 321-322 complete"
        " in o/b\n"
    )
    (tmp_path / "dp_vm_2_rank_1.log").write_text(  # an older npuprof's lines: counted one by one
        "2026-12-02 07:25:42,100 [INFO] [2] npuprof.dynamic: [step 13] capture of steps 11-12 complete in o\n"
    )
    first, second = _processes(tmp_path)
    assert (first["capture_count"], len(first["captures"])) == (32, 2)
    assert first["captures"][-1] == {"steps": "321-322", "status": "complete", "directory": "o/b"}
    assert (second["capture_count"], len(second["captures"])) == (1, 1)
    # a process that learnt its rank mid-run: a row per rank, each with its own captures (helper-127)
    (tmp_path / "dp_vm_3_rank_-1.log").write_text(
        "2026-12-02 07:25:42,100 [INFO] [3] npuprof.dynamic: [step 13] capture 3 of steps 11-12 complete in o"
    )
    (tmp_path / "dp_vm_3_rank_0.log").write_text(
        "2026-12-02 07:26:42,100 [INFO] [3] npuprof.dynamic: [step 23] capture 4 of steps 21-22 complete in p"
    )
    late = {p["rank"]: p["capture_count"] for p in _processes(tmp_path) if p["pid"] == 3}
    assert late == {None: 3, 0: 1}, late  # the two whose lines rotated out were the first rank's
    # the later row's log rotated, the first row made none (helper-128): 0 and 40, not 38 and 2
    (tmp_path / "dp_vm_3_rank_-1.log").write_text(
        "2026-12-02 07:25:42,100 [INFO] [3] npuprof.dynamic: [step 13] capture planned: steps 14-15 (x)\n"
    )
    (tmp_path / "dp_vm_3_rank_0.log").write_text(
        "2026-12-02 07:26:42,100 [INFO] [3] npuprof.dynamic: [step 23] capture 39 of steps 21-22 complete"
        " in p\n"
        "2026-12-02 07:26:43,100 [INFO] [3] npuprof.dynamic: [step 33] capture 40 of steps 31-32 complete"
        " in q\n"
    )
    late = {p["rank"]: p["capture_count"] for p in _processes(tmp_path) if p["pid"] == 3}
    assert late == {None: 0, 0: 40}, late
    assert all("_highest_count" not in p for p in _processes(tmp_path))
    report = {"config": {"file": "cfg/profiler_config.json", "content": None}, "processes": [first, second]}
    row = next(line for line in render(report).splitlines() if line.startswith("0 "))
    assert row.split()[6] == "32", row


def test_status_says_a_request_that_did_not_capture_and_the_last_warning(tmp_path: Path) -> None:
    """A capture skipped (its directory read-only) read "planned: steps 75-76" after the job had ended, and
    no warning's text was shown (helper-84); a window already passed was shown as nothing."""
    from npuprof.cli.status import _processes, render

    (tmp_path / "dp_vm_1_rank_-1.log").write_text(
        "2026-12-02 07:25:40,100 [WARNING] [1] npuprof.dynamic: [step 45] start_step 5 has passed (the job "
        "is at step 45): not effective\n"
        "2026-12-02 07:25:41,100 [INFO] [1] npuprof.dynamic: [step 75] capture planned: steps 75-76 (x)\n"
        "2026-12-02 07:25:41,200 [WARNING] [1] npuprof.dynamic: [step 75] capture at step 75 skipped: "
        "[Errno 30] Read-only file system: '/ro/d'\n"
        "2026-12-02 07:25:45,100 [INFO] [1] npuprof.dynamic: [step 130] the process ends\n"
    )
    (process,) = _processes(tmp_path)
    assert process["planned"] is None and process["warnings"] == 2
    why = "skipped: [Errno 30] Read-only file system: '/ro/d'"
    assert process["not_captured"] == {"step": 75, "why": why}
    text = render({"config": {"file": "cfg/profiler_config.json", "start_step": 0}, "processes": [process]})
    assert "request at step 75 skipped: [Errno 30] Read-only file system: '/ro/d'" in text, text
    assert "planned" not in text, text
    assert "pid 1: last warning (2 in all): 2026-12-02 07:25:41,200 capture at step 75 skipped" in text, text

    (tmp_path / "dp_vm_1_rank_-1.log").write_text(
        "2026-12-02 07:25:40,100 [WARNING] [1] npuprof.dynamic: [step 45] start_step 5 has passed (the job "
        "is at step 45): not effective\n"
    )
    (process,) = _processes(tmp_path)
    text = render({"config": {"file": "cfg/profiler_config.json", "start_step": 0}, "processes": [process]})
    assert "request at step 45 not effective: start_step 5 has passed (the job is at step 45)" in text, text


def test_a_request_sent_before_the_job_started_is_said_so_not_unread(tmp_path: Path) -> None:
    """A trigger sent to a directory no job watched, then a job started on it: the job takes the file as no
    request (its log names the trigger), and the run's summary said "the job ended before any of its
    processes read the file (... --poll-interval)", which blamed the poll (helper-84)."""
    from npuprof.agent import dynamic_log
    from npuprof.agent.dynamic_files import held_request
    from npuprof.reports.run_summary import before_start

    request = {"start_step": -1, "active": 2, "trigger_id": "20261203-165158-fd3197"}
    (tmp_path / "profiler_config.json").write_text(json.dumps(request))
    assert held_request(json.dumps(request).encode()) == " (trigger 20261203-165158-fd3197)"
    assert held_request(json.dumps({**request, "start_step": 0}).encode()) == ""  # no request held
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "dp_vm_7_rank_-1.log").write_text(
        "2026-12-03 16:52:01,682 [INFO] [7] npuprof.dynamic: [step 0] the file as the job started is not a "
        "request (trigger 20261203-165158-fd3197): edit it, or run npuprof trigger, to capture\n"
    )
    assert dynamic_log.unread_request(tmp_path) is None  # it was read
    said = before_start(tmp_path)
    assert said.startswith(f"the capture asked in {tmp_path / 'profiler_config.json'} at ") and said.endswith(
        "(trigger 20261203-165158-fd3197) was there before the job started, and a job takes the file it "
        "starts with as no request: run npuprof trigger once the job runs"
    ), said
    request["trigger_id"] = "20261203-170000-aaaaaa"  # a new request since: not the one the job passed
    (tmp_path / "profiler_config.json").write_text(json.dumps(request))
    assert before_start(tmp_path) == ""


def test_trigger_refuses_an_output_that_is_a_link_as_run_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`npuprof trigger -o /proc/self` was written into the request (run -o refuses a link): the job could
    only skip that capture (helper-84)."""
    import typer

    from npuprof.cli.trigger import trigger_command

    (tmp_path / "link").symlink_to(tmp_path)
    with pytest.raises(typer.Exit) as exit_code:
        trigger_command(
            directory=str(tmp_path), start_step=None, active=1, warmup=0, cancel=False,
            output=str(tmp_path / "link"),
        )  # fmt: skip
    assert exit_code.value.exit_code == 2
    said = capsys.readouterr().err
    assert said.startswith(f"npuprof trigger: error: -o '{tmp_path / 'link'}' is a symbolic link"), said
    assert not (tmp_path / "profiler_config.json").exists()


@pytest.mark.parametrize("points_to", ["elsewhere.json", "profiler_config.json"])  # a file; a loop
def test_trigger_refuses_a_config_file_that_is_a_link_and_leaves_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], points_to: str
) -> None:
    """helper-256: the job refuses a profiler_config.json that is a symbolic link (a FIFO, a directory: not
    a regular file), and trigger refused those, but renamed its file over a link: the user's link was lost
    without a word. It is refused, and left as it was."""
    import typer

    from npuprof.cli.trigger import trigger_command

    (tmp_path / "log").mkdir()
    (tmp_path / "elsewhere.json").write_text("{}")
    link = tmp_path / CONFIG_NAME
    link.symlink_to(points_to)
    with pytest.raises(typer.Exit) as exit_code:
        trigger_command(directory=str(tmp_path), start_step=None, active=1, warmup=0, cancel=False)
    assert exit_code.value.exit_code == 2
    said = capsys.readouterr().err
    assert said == (
        f"npuprof trigger: error: {link} is a symbolic link, which the job refuses to read; npuprof does not "
        "replace it: remove it, then trigger again\n"
    ), said
    assert link.is_symlink() and os.readlink(link) == points_to
    assert (tmp_path / "elsewhere.json").read_text() == "{}"


def test_trigger_refuses_a_request_larger_than_a_job_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`npuprof trigger --ranks 0-80000` wrote a 1.1 MiB file and said the capture was on its way; every
    process rejects a file over 1 MiB as no profiler_config.json (helper-152)."""
    import typer

    from npuprof.cli.trigger import trigger_command

    (tmp_path / "log").mkdir()
    with pytest.raises(typer.Exit) as exit_code:
        trigger_command(
            directory=str(tmp_path), start_step=None, active=1, warmup=0, cancel=False, ranks="0-80000"
        )
    assert exit_code.value.exit_code == 2
    said = capsys.readouterr()
    assert said.err == (
        "npuprof trigger: error: --ranks: 80001 ranks make the request 1.1 MiB, over the 1 MiB a job reads; "
        "use all, or fewer ranks\n"
    ), said
    assert not said.out and not (tmp_path / CONFIG_NAME).exists()
    trigger_command(  # as many ranks as fit: written, and read by the job as written
        directory=str(tmp_path), start_step=None, active=1, warmup=0, cancel=False, ranks="0-60000"
    )
    raw = (tmp_path / CONFIG_NAME).read_bytes()
    heard: list[tuple[str, str]] = []
    request = parse_request(raw, "d", c.ProfileConfig(), lambda level, line: heard.append((level, line)))
    assert request is not None and request.cfg.ranks == list(range(60001)), heard


def test_a_trigger_says_it_replaces_a_cancel_some_running_ranks_had_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """helper-190: `npuprof trigger --cancel`, then at once another trigger: rank 0 had read the cancel, rank
    1 not (its poll came after the second write), so rank 1's capture of 200 steps went on to its end and
    the new request waited for it; neither trigger said a word."""
    from npuprof.cli.trigger import trigger_command

    job = Job(tmp_path, rank=0)
    job.steps(2)
    job.write(start_step=-1, active=200)
    job.steps(3)
    # rank 1, another running process (pid 1 exists), had read the request of 200 steps only
    (job.dir / "log" / f"dp_{os.uname().nodename}_1_rank_1.log").write_text(
        "2026-12-02 07:25:40,469 [INFO] [1] npuprof.dynamic: [step 0] watching it every 1 s\n"
    )
    trigger = {"directory": str(job.dir), "start_step": None, "active": 1, "warmup": 0, "ranks": None}
    trigger_command(**trigger, cancel=True)
    cancel_id = json.loads((job.dir / CONFIG_NAME).read_text())["trigger_id"]
    job.plan.poll_once()  # rank 0 reads the cancel
    job.steps(2)
    assert job.captures() == [(3, 6)]
    assert f"(start_step 0: no capture (trigger {cancel_id}))" in job.log()
    capsys.readouterr()
    trigger_command(**trigger, cancel=False)
    said = " ".join(capsys.readouterr().err.split())
    assert (
        f"this replaces the cancel {cancel_id}, which 1 of the 2 running processes had not picked up yet "
        "(rank 1): the last change wins, they never act on it: a capture in flight there goes on"
    ) in said, said
    second_id = json.loads((job.dir / CONFIG_NAME).read_text())["trigger_id"]
    trigger_command(**trigger, cancel=False)  # read by no process: said as before
    said = " ".join(capsys.readouterr().err.split())
    assert f"this replaces request {second_id}, which no process had picked up yet" in said, said
    assert "running processes" not in said, said
    third_id = json.loads((job.dir / CONFIG_NAME).read_text())["trigger_id"]
    job.plan.poll_once()  # read by rank 0 only
    trigger_command(**trigger, cancel=False)
    said = " ".join(capsys.readouterr().err.split())
    assert f"this replaces request {third_id}, which 1 of the 2 running processes had not" in said, said


def test_a_triggers_notes_name_only_the_processes_its_request_was_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """helper-370: `npuprof trigger --start-step 10 --ranks 1` said --start-step 10 "has passed in 1 of the 2
    running processes" of rank 0, at step 20, which it does not ask; and a trigger after `--cancel --ranks
    1` that rank 1 had read said rank 0 had not: "they never act on it: a capture in flight there goes on"
    (it was never rank 0's to act on)."""
    from npuprof.cli.trigger import trigger_command

    job = Job(tmp_path, rank=0)
    job.steps(20)
    job.log()  # (its poll logs the step: the job is at step 20 by its log)
    rank1 = job.dir / "log" / f"dp_{os.uname().nodename}_1_rank_1.log"  # another running process: pid 1
    rank1.write_text("2026-12-02 07:25:40,469 [INFO] [1] npuprof.dynamic: [step 5] watching it every 1 s\n")
    trigger = {"directory": str(job.dir), "active": 1, "warmup": 0, "ranks": "1"}
    trigger_command(**trigger, start_step=10, cancel=False)
    said = " ".join(capsys.readouterr().err.split())
    assert "has passed" not in said, said
    trigger_command(**trigger, start_step=None, cancel=True)
    cancel_id = json.loads((job.dir / CONFIG_NAME).read_text())["trigger_id"]
    with rank1.open("a") as log:  # read by rank 1; rank 0 (this process) has not polled since
        log.write(
            f"2026-12-02 07:25:41,469 [INFO] [1] npuprof.dynamic: [step 6] loaded: x (trigger {cancel_id})\n"
        )
    capsys.readouterr()
    trigger_command(**{**trigger, "ranks": None}, start_step=None, cancel=False)
    said = " ".join(capsys.readouterr().err.split())
    assert "had not picked up yet" not in said, said
    # a request for every rank is still told of a running process that has not read it
    job.plan.poll_once()  # rank 0 reads it; rank 1 not
    trigger_command(**{**trigger, "ranks": None}, start_step=None, cancel=False)
    said = " ".join(capsys.readouterr().err.split())
    assert "which 1 of the 2 running processes had not picked up yet (rank 1)" in said, said


def test_a_triggers_request_edited_by_hand_is_a_new_request_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """helper-286: profiler_config.json written by `npuprof trigger`, then edited by hand (its trigger_id
    kept): the job named the edit by that trigger, and status and trigger took it as read by that
    trigger's lines. The edit is now a request written by hand: unread until a process loads it (by time),
    captured, and not named by the earlier trigger."""
    from npuprof.agent import dynamic_log
    from npuprof.cli.status import _config_summary, _window_line
    from npuprof.cli.trigger import _request_not_picked_up, trigger_command

    job = Job(tmp_path, rank=0)
    job.steps(2)
    trigger_command(directory=str(job.dir), start_step=None, active=1, warmup=0, ranks=None, cancel=False)
    path = job.dir / CONFIG_NAME
    sent = json.loads(path.read_text())
    unread = dynamic_log.unread_request(job.dir)
    assert unread is not None and unread.trigger_id == sent["trigger_id"]  # the trigger's file: its id
    job.plan.poll_once()
    job.steps(3)
    assert job.captures() == [(3, 3)] and dynamic_log.unread_request(job.dir) is None
    path.write_text(json.dumps({**sent, "active": 2}, indent=2))  # the id kept
    edited_at = time.time() + 5  # seconds after the job read the trigger's file
    os.utime(path, (edited_at, edited_at))
    unread = dynamic_log.unread_request(job.dir)
    assert unread is not None and unread.trigger_id == "", unread
    assert (
        _request_not_picked_up(job.dir)
        == f"written at {time.strftime('%H:%M:%S', time.localtime(edited_at))}"
    )
    config = _config_summary(job.dir)
    assert "trigger_id" not in config and config["edited_since_trigger"] == sent["trigger_id"], config
    assert _window_line(config).endswith(f"on every rank, edited by hand since trigger {sent['trigger_id']}")
    job.plan.poll_once()
    job.steps(4)
    assert job.captures() == [(3, 3), (6, 7)]
    loaded = [line for line in job.log().splitlines() if "loaded: " in line]
    assert len(loaded) == 2 and f"(trigger {sent['trigger_id']})" in loaded[0], loaded
    assert "(trigger " not in loaded[1], loaded


def test_a_cancel_followed_within_one_step_by_a_trigger_still_ends_the_capture_in_flight(
    tmp_path: Path,
) -> None:
    """helper-194: the watcher loaded the cancel (its "loaded" line names its id, so npuprof trigger takes it
    as read here) and then the next trigger before the training thread's next step: only the newest was
    taken, and the capture of 200 steps went on to its end, the new request waiting behind it."""
    job = Job(tmp_path, rank=0)
    job.steps(2)
    job.write(start_step=-1, active=200, trigger_id="a")
    job.steps(3)
    job.write(start_step=0, trigger_id="c")  # loaded by the watcher ...
    job.write(start_step=-1, active=2, trigger_id="b")  # ... and this one too, within the same step
    job.steps(5)
    assert job.captures() == [(3, 6), (8, 9)], job.captures()
    assert (
        "the capture in flight ends with step 6, cancelled (start_step 0: no capture (trigger c))"
        in job.log()
    )


def test_a_request_for_many_ranks_is_told_by_their_ranges(tmp_path: Path) -> None:
    """A request for ranks 0-60000 was told with every rank number: each line of it 350 KB in the dynamic
    logs, which rotate at 200 KB, so that every line pushed the process's history out of them (and one
    such line on the terminal, in trigger's and status's words) (helper-152)."""
    from npuprof.cli.status import _config_line, _config_summary

    job = Job(tmp_path)
    job.steps(2)
    job.write(start_step=-1, active=1, is_rank=True, rank_list=[*range(60001), 60005, 60007, 60006, 9])
    job.steps(3)
    assert job.captures() == [(3, 3)]
    text = job.log()
    assert "watching " in text, text[:300]  # the first line is still there: no rotation
    assert "on ranks 0-60000,60005-60007 into" in text, text[-600:]
    assert max(map(len, text.splitlines())) < 400
    assert _config_line(_config_summary(job.dir)).startswith(
        "1 step(s) from the next step on ranks 0-60000,60005-60007"
    )
    assert c.ranks_text([5, 3, 4, 9, 1]) == "1,3-5,9" and c.ranks_text([0]) == "0"


@pytest.mark.parametrize(
    "ranks",
    [
        {"is_rank": True, "rank_list": [0, "1"]},
        {"is_rank": "yes", "rank_list": [0]},
        {"is_rank": True, "rank_list": [-1]},
    ],
)
def test_a_request_whose_ranks_are_mistyped_captures_on_no_rank(tmp_path: Path, ranks: dict) -> None:
    """A bad rank_list or is_rank kept its default, every rank: a request meant for two ranks of a job of
    thousands captured on all of them (helper-152). The content is now no request, as a bad start_step."""
    from npuprof.cli.status import _config_line, _config_summary

    job = Job(tmp_path, rank=5)
    job.steps(2)
    job.write(start_step=-1, active=1, **ranks)
    job.steps(3)
    assert job.captures() == []
    text = job.log()
    assert (
        "[ERROR]" in text
        and "(a request for some ranks is not widened to every rank); this content is not acted on" in text
    ), text
    assert _config_line(_config_summary(job.dir)).endswith("the job does not act on it")


def test_a_request_queued_behind_a_capture_when_the_process_ends_is_said_not_to_have_run(
    tmp_path: Path,
) -> None:
    """A trigger queued while a long capture records, then the job ends: nothing said that it never ran
    (helper-84); the log now does, and status shows it."""
    from npuprof.cli.status import _processes

    job = Job(tmp_path)
    job.steps(3)
    job.write(start_step=-1, active=50)
    job.steps(2)  # recording
    job.write(start_step=-1, active=2, with_stack=True)  # waits for the end of the 50 steps
    job.plan.at_exit()
    text = job.log(poll=False)
    assert "never began, the process ending first: not effective" in text, text
    (process,) = _processes(job.dir / "log")
    assert process["not_captured"]["why"].startswith(
        "not effective: the request waiting for the capture in flight"
    )


def test_a_request_for_other_ranks_read_during_a_capture_is_not_said_to_wait_or_to_have_been_missed(
    tmp_path: Path,
) -> None:
    """helper-370: a trigger for rank 1 read by rank 0 while its capture recorded was queued there ("the new
    request waits for its end"); when the job ended first, rank 0 logged a WARNING that it "never began,
    the process ending first" (npuprof status showed it in place of rank 0's capture, and the next trigger
    would name rank 0 as a process where it "never runs"): it was never rank 0's to run."""
    from npuprof.cli.status import _processes

    job = Job(tmp_path, rank=0)
    job.steps(3)
    job.write(start_step=-1, active=50)
    job.steps(2)  # recording
    job.write(start_step=-1, active=2, is_rank=True, rank_list=[1], trigger_id="for-rank-1")
    job.steps(1)
    job.plan.at_exit()
    text = job.log(poll=False)
    assert "rank 0 is not selected" in text, text
    assert "waits for its end" not in text and "never began" not in text and "never ran" not in text, text
    (process,) = _processes(job.dir / "log")
    assert "not for this process's rank" in process["not_captured"]["why"], process["not_captured"]
    assert process["warnings"] == 0, process


def test_a_cancel_for_other_ranks_leaves_this_ranks_capture_in_flight(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """helper-370: `npuprof trigger DIR --cancel --ranks 1` (start_step 0, rank_list [1]) ended rank 0's
    capture of steps 4-53 at step 7: what rank 0 was asked to record was cut short by a cancel for rank 1."""
    from npuprof.cli.trigger import trigger_command

    job = Job(tmp_path, rank=0)
    job.steps(3)
    job.write(start_step=-1, active=50)
    job.steps(3)  # recording steps 4, 5, 6
    trigger_command(directory=str(job.dir), start_step=None, active=1, warmup=0, ranks="1", cancel=True)
    said = " ".join(capsys.readouterr().out.split())
    assert "one recording on ranks 1 ends at the next step" in said, said
    job.plan.poll_once()
    job.steps(60)
    assert job.captures() == [(4, 53)]
    text = job.log()
    assert "rank 0 is not selected" in text and "cancelled" not in text, text


def test_a_request_for_other_ranks_loaded_as_the_process_ends_is_not_said_missed(tmp_path: Path) -> None:
    """helper-370: a trigger for rank 1 loaded by rank 0 after its last step boundary (a rank blocked in a
    collective, then stopped) was logged there as a WARNING "never began, the process ending first", which
    npuprof status showed as rank 0's: it was never rank 0's to run."""
    from npuprof.cli.status import _processes

    job = Job(tmp_path, rank=0)
    job.steps(3)
    job.write(start_step=-1, active=2, is_rank=True, rank_list=[1])  # loaded; no step boundary comes
    job.plan.at_exit()
    text = job.log(poll=False)
    assert "never began" not in text and "rank 0 is not selected" in text, text
    (process,) = _processes(job.dir / "log")
    assert process["warnings"] == 0, process
    assert "not for this process's rank" in process["not_captured"]["why"], process["not_captured"]


def test_status_reads_the_request_as_the_job_does(tmp_path: Path) -> None:
    """`"active": "two"` was shown as "two step(s) from the next step"; a FIFO in place of the file as
    "missing or empty" (helper-84). The window is the one the job acts on (a bad value: its default, said),
    and what cannot be read is named."""
    from npuprof.cli.status import _config_line, _config_summary

    path = tmp_path / CONFIG_NAME
    path.write_text(json.dumps({"start_step": -1, "active": "two", "trigger_id": "t1"}))
    line = _config_line(_config_summary(tmp_path))
    assert line.startswith("1 step(s) from the next step on every rank, trigger t1 ("), line
    assert 'active: must be an integer >= 1, got "two"; its default (1) is used' in line, line
    path.write_text("[]")
    assert _config_line(_config_summary(tmp_path)) == "must hold a JSON object, not list: the job ignores it"
    path.write_text("")
    assert _config_line(_config_summary(tmp_path)) == "empty"
    path.unlink()
    assert _config_line(_config_summary(tmp_path)) == "missing"
    os.mkfifo(path)
    assert _config_line(_config_summary(tmp_path)).startswith("not readable as the job reads it ("), path


@pytest.mark.parametrize("given", [[], "", 0])
def test_an_experimental_config_that_is_no_object_is_named(given: object) -> None:
    """`"experimental_config": []` was taken for none, silently (helper-84): a falsy value of the wrong type
    is named like any other; null stays none (as torch_npu's template may have it)."""
    request, heard = _request({"start_step": -1, "active": 2, "experimental_config": given})
    assert request is not None
    said = f"profiler_config.json: experimental_config: must be an object, got {json.dumps(given)}"
    assert ("WARNING", f"{said}; its default is used") in heard, heard
    request, heard = _request({"start_step": -1, "active": 2, "experimental_config": None})
    assert request is not None and heard == [], heard


def test_a_request_too_late_or_never_reached_is_said_by_the_summary_and_status(tmp_path: Path) -> None:
    """A trigger whose start_step had passed: the run's summary said "no capture was asked"; a capture
    planned from step 10000 in a job that ended at step 250: status still said "planned" (helper-86)."""
    from npuprof.cli.status import _processes
    from npuprof.reports.run_summary import why_no_capture

    (tmp_path / "log").mkdir()
    log = tmp_path / "log" / f"dp_vm_{os.getpid()}_rank_-1.log"
    log.write_text(
        "2026-12-02 07:25:40,469 [INFO] [1] npuprof.dynamic: [step 0] watching it every 1 s\n"
        "2026-12-02 07:25:43,902 [INFO] [1] npuprof.dynamic: [step 116] loaded: capture 2 step(s) from "
        "step 3 on every rank into /o (trigger t9)\n"
        "2026-12-02 07:25:44,002 [WARNING] [1] npuprof.dynamic: [step 117] start_step 3 has passed (the job "
        "is at step 117): not effective\n"
        "2026-12-02 07:25:51,440 [INFO] [1] npuprof.dynamic: [step 200] the process ends\n"
    )
    (tmp_path / CONFIG_NAME).write_text(json.dumps({"start_step": 3, "active": 2, "trigger_id": "t9"}))
    cfg = c.ProfileConfig(dynamic=str(tmp_path))
    why = why_no_capture(cfg, 0, ["[INFO] [agent pid=1] agent ready in x.py (rank None)"])
    assert why.startswith(
        "the request was not acted on: start_step 3 has passed (the job is at step 117): not effective"
    ), why

    log.write_text(
        "2026-12-02 07:25:40,469 [INFO] [1] npuprof.dynamic: [step 0] watching it every 1 s\n"
        "2026-12-02 07:25:44,002 [INFO] [1] npuprof.dynamic: [step 20] capture planned: steps 10000-10002\n"
        "2026-12-02 07:25:51,440 [INFO] [1] npuprof.dynamic: [step 250] the process ends\n"
    )
    (process,) = _processes(tmp_path / "log")
    assert process["planned"] is None and process["state"] == "ended", process
    assert process["not_captured"]["why"] == (
        "never reached: steps 10000-10002 planned, the process ended at step 250"
    ), process


@pytest.mark.parametrize("name", ['dq"x', "back\\slash", "tab\tdir"])
def test_a_prof_dir_torch_cannot_write_to_falls_back_to_the_runs_output(tmp_path: Path, name: str) -> None:
    """helper-96: `npuprof run -o` refuses such paths, a request's prof_dir took them and lost its capture
    (a trace read as "truncated", or "torch wrote no trace ... (is the disk full?)")."""
    base = c.ProfileConfig(output=str(tmp_path / "out"), dynamic="/cfg")
    request, heard = _request({"prof_dir": name}, base)
    assert request is not None and request.cfg.output == str(tmp_path / "out")
    assert any("where torch cannot write its traces" in m for _, m in heard), heard


def test_the_measured_poll_interval_is_at_most_5_s(tmp_path: Path) -> None:
    """helper-124: a 20 s evaluation between steps 10 and 11 made every later poll 20 s apart (a trigger
    waited 14 s, npuprof status lagged 20 s): torch_npu's rule, with no ceiling."""
    cfg_dir, baseline, _ = prepare(str(tmp_path / "cfg"))
    cfg = c.ProfileConfig(output=str(tmp_path / "out"), dynamic=str(cfg_dir))
    for took, expected in ((20.0, 5.0), (0.2, 1.0), (2.5, 2.5)):
        plan = DynamicPlan(cfg, {"dynamic_baseline": baseline}, AgentLog(None, "test"), watch=False)
        plan._measure(10)
        assert plan._step10 is not None
        plan._step10 -= took  # step 10 began that long before step 11 now
        plan._measure(11)
        assert plan.interval() == pytest.approx(expected, abs=0.05), (took, plan.interval())


def test_status_and_trigger_on_a_runs_output_name_the_directory_they_take(tmp_path: Path) -> None:
    """helper-130: `npuprof status RESULT` (or trigger) on the output of `npuprof run` (-o) said only "no log/
    directory; is it the directory of npuprof run --dynamic?". It names what to run instead: the watched
    directory its run recorded, or npuprof analyse for a run without --dynamic."""
    from conftest import clean_env, npuprof

    env = clean_env(PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    watched = tmp_path / "cfg"
    for name, dynamic in (("dyn_out", str(watched)), ("plain_out", None)):
        out = tmp_path / name
        (out / "w_7_20260101000000000_ascend_pt").mkdir(parents=True)
        record = {"run_id": "r1", "config": {"output": str(out), "dynamic": dynamic}, "captures": []}
        (out / "npuprof_run.json").write_text(json.dumps(record))
        for command in (["status", str(out)], ["trigger", str(out), "--active", "1"]):
            result = npuprof(*command, env=env)
            assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
            assert f"{out} is the output of npuprof run" in result.stderr, result.stderr
            if dynamic:
                assert f"npuprof {command[0]} {watched}" in result.stderr, result.stderr
            else:
                assert f"npuprof analyse {out}" in result.stderr, result.stderr
            assert not (out / CONFIG_NAME).exists() and not (out / "log").exists()


def test_status_and_trigger_on_a_run_that_wrote_no_capture_say_what_its_end_said(tmp_path: Path) -> None:
    """`npuprof status OUT` (or trigger) on the output of a run that wrote no capture sent the user to
    `npuprof analyse OUT ... reads its captures`, which then finds none. It says what the run's end said."""
    from npuprof.reports.inputs import run_output_hint

    why = "no capture: the job ran no optimizer step"
    record = {
        "run_id": "r1",
        "command": ["python", "my train.py"],
        "start": "2026-12-06T20:00:00+0000",
        "end": "2026-12-06T20:01:00+0000",
        "config": {"output": str(tmp_path), "dynamic": None},
        "no_capture": why,
    }
    (tmp_path / "npuprof_run.json").write_text(json.dumps(record))
    for command in ("status", "trigger"):
        assert run_output_hint(tmp_path, command) == (
            f"{tmp_path} is the output of npuprof run -- python 'my train.py', whose end said: {why}; "
            f"it ran without --dynamic: nothing to {command}"
        )


def test_status_on_a_watched_dir_that_is_also_the_output_is_not_told_to_status_itself(tmp_path: Path) -> None:
    """helper-131: `npuprof run -o same --dynamic same`, its log/ removed since: `npuprof status same` said
    "same is the output of npuprof run --dynamic /…/same, not the directory it watches: npuprof status
    /…/same", the very directory, and again when followed. It is the directory it watches: the line says
    only that it has no log/."""
    from conftest import clean_env, npuprof

    env = clean_env(PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    same = tmp_path / "same"
    same.mkdir()
    record = {"run_id": "r1", "config": {"output": str(same), "dynamic": str(same)}, "captures": []}
    (same / "npuprof_run.json").write_text(json.dumps(record))
    result = npuprof("status", str(same), env=env)
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert "not the directory it watches" not in result.stderr, result.stderr
    assert "no log/ directory" in result.stderr, result.stderr


def test_status_and_info_that_cannot_be_written_to_stdout_are_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """helper-159: `npuprof status DIR --format json > /dev/full` (and `npuprof info`) exited 0 with nothing
    written: a script reading the JSON got nothing and no word; analyse and export-stacks say so, exit 1."""
    import typer

    from npuprof.cli.info import info
    from npuprof.cli.main import GuardedStream
    from npuprof.cli.status import status_command

    (tmp_path / "log").mkdir()
    for command, call in (
        ("npuprof status", lambda: status_command(str(tmp_path), "json")),
        ("npuprof info", lambda: info("json")),
    ):
        full = open("/dev/full", "w")  # noqa: SIM115 - its close fails too, on what is left in its buffer
        monkeypatch.setattr(sys, "stdout", GuardedStream(full))
        with pytest.raises(typer.Exit) as ended:
            call()
        with contextlib.suppress(OSError):
            full.close()
        assert ended.value.exit_code == 1
        assert f"{command}: cannot write" in capsys.readouterr().err


def test_status_says_a_request_no_process_has_read_yet(tmp_path: Path) -> None:
    """helper-174: right after `npuprof trigger`, status showed "-" for every process until the next poll,
    as if nothing had been asked. It now says the request is not read yet; once a process's log names its
    trigger id, nothing is said; with every process ended, that it was not read."""
    from npuprof.cli.status import _processes, _unread, render

    (tmp_path / "log").mkdir()
    log = tmp_path / "log" / f"dp_{os.uname().nodename}_{os.getpid()}_rank_0.log"
    now = time.strftime("%Y-%m-%d %H:%M:%S")
    log.write_text(f"{now},000 [INFO] [1] npuprof.dynamic: [step 3] watching it\n")
    (tmp_path / CONFIG_NAME).write_text(json.dumps({"start_step": -1, "active": 2, "trigger_id": "t7"}))

    def said() -> str:
        report = {"config": {"file": "cfg", "problem": "-"}, "processes": _processes(tmp_path / "log")}
        if (unread := _unread(tmp_path)) is not None:
            report["unread_request"] = unread
        return render(report)

    assert " (trigger t7) is not read yet: each process reads the file at its poll interval" in said()
    with log.open("a") as handle:
        handle.write(f"{now},000 [INFO] [1] npuprof.dynamic: [step 4] the process ends\n")
    assert " (trigger t7) was not read: no process of the job runs" in said()
    with log.open("a") as handle:
        handle.write(
            "2020-01-01 00:00:00,000 [INFO] [1] npuprof.dynamic: [step 4] loaded: 2 step(s) (trigger t7)\n"
        )
    assert "t7" not in said()


@contextlib.contextmanager
def _time_zone(tz: str) -> Iterator[None]:
    """This process's local time in ``tz`` (a POSIX TZ: no tzdata needed) for the block."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = tz
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = before
        time.tzset()


@pytest.mark.parametrize(("job_zone", "status_zone"), [("KIR-14", "SST+11"), ("SST+11", "KIR-14")])
def test_a_hand_written_requests_read_or_not_is_right_across_time_zones(
    tmp_path: Path, job_zone: str, status_zone: str
) -> None:
    """helper-256: a request written by hand (no trigger id) is read when a process's "loaded:" line comes
    after the file's change; status compared the line's local time, taken in its own time zone, with the
    file's mtime: a job at UTC+14 and status at UTC-11 (or the reverse) were 25 hours apart, a request
    not read said read and one read said "not read yet"."""
    from npuprof.agent.dynamic_log import format_line
    from npuprof.cli.status import _unread

    (tmp_path / "log").mkdir()
    log = tmp_path / "log" / f"dp_{os.uname().nodename}_{os.getpid()}_rank_0.log"
    config = tmp_path / CONFIG_NAME
    config.write_text(json.dumps({"start_step": -1, "active": 2}))
    now = time.time()

    def loaded_at(ago: float) -> None:
        with _time_zone(job_zone):
            line = format_line("INFO", "loaded: 2 step(s) from the next step", step=4, when=now - ago)
        log.write_text(line)

    os.utime(config, (now - 60, now - 60))
    loaded_at(600)  # an earlier request's line: this one is not read
    with _time_zone(status_zone):
        unread = _unread(tmp_path)
    assert unread is not None and unread["trigger_id"] is None, unread
    os.utime(config, (now - 600, now - 600))
    loaded_at(60)  # read a minute ago
    with _time_zone(status_zone):
        assert _unread(tmp_path) is None


_SIGTERM_WHILE_BLOCKED_BETWEEN_CAPTURES = """\
import ctypes, os, signal, sys, time
from npuprof.agent import signals

class Log:
    def __getattr__(self, name):
        return lambda *args: print(name, *args, file=sys.stderr, flush=True)

def said(what):
    def write():
        with open(sys.argv[1], "a") as f:
            f.write(what + " " + repr(time.monotonic()) + "\\n")
    return write

guard = signals.SigtermGuard(said("handler"), Log(), on_term_unhandled=said("unhandled"))
assert guard.install_for_session()
mutex = ctypes.create_string_buffer(64)  # zeroed: PTHREAD_MUTEX_INITIALIZER
libc = ctypes.CDLL(None)  # (the GIL released, as in a collective)
libc.pthread_mutex_lock(mutex)
said("blocked")()
os.kill(os.getppid(), signal.SIGUSR1)  # the test sends SIGTERM now
libc.pthread_mutex_lock(mutex)  # locked twice: blocked in C for ever, no Python handler runs
print("lived on", file=sys.stderr)
"""


def test_a_sigterm_between_captures_while_the_main_thread_is_blocked_is_said_and_not_waited_for(
    tmp_path: Path,
) -> None:
    """helper-256: --dynamic keeps npuprof's SIGTERM handler between captures, so that the SIGTERM is
    logged (status said "gone (no end line: killed?)"). A main thread blocked outside Python (a collective
    whose peer never comes) never runs it: with nothing recording, the watcher does not give it the
    capture's second (5 s in one rank of several) but says the SIGTERM itself at once, and the process
    dies of it, as without npuprof."""
    import signal as signal_module
    import subprocess

    from conftest import clean_env, wait_until_blocked_in_a_futex

    said = tmp_path / "said"
    script = tmp_path / "blocked.py"
    script.write_text(_SIGTERM_WHILE_BLOCKED_BETWEEN_CAPTURES)
    ready = []
    previous = signal_module.signal(signal_module.SIGUSR1, lambda *_: ready.append(1))
    try:
        proc = subprocess.Popen(
            [sys.executable, str(script), str(said)], env=clean_env(), stderr=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 60
        while not ready and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.01)
        wait_until_blocked_in_a_futex(proc.pid)  # in the second pthread_mutex_lock
        sent = time.monotonic()
        proc.send_signal(signal_module.SIGTERM)
        _, err = proc.communicate(timeout=60)
        died = time.monotonic()
    finally:
        signal_module.signal(signal_module.SIGUSR1, previous)
    assert proc.returncode == -signal_module.SIGTERM, err
    lines = said.read_text().split()
    assert lines[0::2] == ["blocked", "unhandled"], lines  # the watcher said it; the handler never ran
    assert float(lines[3]) - sent < signals_grace() and died - sent < 5, (lines, sent, died)
    assert "lived on" not in err and "blocked outside Python" not in err, err


def test_the_sigterm_guard_kept_between_captures_is_looked_after_at_a_step_boundary_the_watcher_asks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """helper-256: --dynamic keeps npuprof's SIGTERM handler between captures, where no recorded step looks
    after it. A SIGCHLD handler the script sets after training began (a DataLoader's first iterator) ran
    unwrapped inside it: a group SIGTERM ends the workers within microseconds, and that handler raising
    "DataLoader worker ... is killed" at the handler's first instruction made the job die of it, not of
    SIGTERM (helper-105). A script that took the wakeup fd (asyncio) left no watcher: blocked in C++, the
    job would ignore SIGTERM (helper-114). The dynamic watcher asks for one step boundary when it sees the
    first, and every UPKEEP_S for the second (only the main thread can see it), where the guard wraps the
    one and gives SIGTERM its default action back for the other; no other step is asked for."""
    import signal as signal_module

    from npuprof.agent import dynamic_plan
    from npuprof.agent.child_signal import ChildSignalWrap
    from npuprof.agent.signals import SigtermGuard

    job = Job(tmp_path)
    guard = SigtermGuard(lambda: None, AgentLog(None, "test"))
    before = signal_module.getsignal(signal_module.SIGCHLD)
    theirs = os.pipe()
    assert guard.install_for_session()
    try:
        job.plan.keep_up(guard.child_signal_unwrapped, guard.check_pipe)
        job.plan.poll_once()
        job.steps(20)  # the poll interval measured (and the first look's upkeep done): nothing is asked now
        assert job.controller.next_check > 10**9

        def workers_check(signum: int, frame: object) -> None:
            raise RuntimeError("DataLoader worker (pid 1) is killed by signal: Terminated.")

        signal_module.signal(signal_module.SIGCHLD, workers_check)
        job.steps(3)
        assert signal_module.getsignal(signal_module.SIGCHLD) is workers_check  # no step wraps it by itself
        job.plan.poll_once()
        assert job.controller.next_check == 0  # one decision asked
        job.steps(1)
        wrapped = signal_module.getsignal(signal_module.SIGCHLD)
        assert isinstance(wrapped, ChildSignalWrap) and wrapped.handler is workers_check
        job.plan.poll_once()
        assert job.controller.next_check > 10**9  # nothing new, and UPKEEP_S not passed: none asked
        # the script takes the wakeup fd (asyncio's add_signal_handler)
        os.set_blocking(theirs[1], False)
        signal_module.set_wakeup_fd(theirs[1])
        job.steps(3)
        assert signal_module.getsignal(signal_module.SIGTERM) == guard._handle
        monkeypatch.setattr(dynamic_plan, "UPKEEP_S", 0.0)
        job.plan.poll_once()
        job.steps(1)
        assert signal_module.getsignal(signal_module.SIGTERM) == signal_module.SIG_DFL
        assert signal_module.set_wakeup_fd(-1) == theirs[1]  # theirs left as it is
    finally:
        guard.uninstall()
        signal_module.set_wakeup_fd(-1)
        signal_module.signal(signal_module.SIGCHLD, before)
        signal_module.signal(signal_module.SIGTERM, signal_module.SIG_DFL)
        for fd in theirs:
            os.close(fd)


def signals_grace() -> float:
    """The time a handler is given when a capture records (agent/signals.py): not waited here."""
    from npuprof.agent.signals import HANDLER_GRACE_S

    return HANDLER_GRACE_S


def test_status_tells_a_live_writer_from_a_pid_given_again_by_its_start_whatever_the_clock_did(
    tmp_path: Path,
) -> None:
    """helper-256: status told a process's pid given again to a later process by the wall clock (its logs'
    modification time against /proc's boot time, which moves with the clock): a clock set forward an hour
    after a live process last logged (stalled, or between heartbeats) made it "gone (no end line:
    killed?)". Its first line gives its start in ticks after boot, which no clock moves: running; and a
    pid now held by another process than the one that logged is gone, however recent its log."""
    from npuprof.agent.dynamic_log import STARTED_AT, WATCHING, format_line
    from npuprof.cli.status import _processes
    from npuprof.proc_stat import start_ticks

    ticks = start_ticks(os.getpid())
    began = process_start_time()
    assert ticks is not None and began is not None
    (tmp_path / "log").mkdir()
    log = tmp_path / "log" / f"dp_{os.uname().nodename}_{os.getpid()}_rank_0.log"

    def state(logged_ticks: int, written: float) -> str:
        start = STARTED_AT.format(ticks=logged_ticks)
        line = f"{WATCHING}cfg every 2 s; host h, pid {os.getpid()}, rank 0, {start}"
        log.write_text(format_line("INFO", line, step=3, when=written))
        os.utime(log, (written, written))
        (process,) = _processes(tmp_path / "log")
        return process["state"]

    assert state(ticks, began - 3600) == "running"  # written before the clock went an hour forward
    assert state(ticks - 100, time.time()).startswith("gone"), "a later process holds the writer's pid"


def test_status_takes_no_fifo_or_folder_named_as_a_log_for_a_process(tmp_path: Path) -> None:
    """helper-256: a FIFO or a folder in log/ named as a process's log (dp_HOST_1_rank_0.log) was shown as a
    process, "running" when its pid ran (pid 1 always does), and npuprof trigger counted it among the
    running processes that had not read its request."""
    from npuprof.cli.status import _processes

    logs = tmp_path / "log"
    logs.mkdir()
    host = os.uname().nodename
    os.mkfifo(logs / f"dp_{host}_1_rank_0.log")
    (logs / f"dp_{host}_{os.getpid()}_rank_1.log").mkdir()
    (logs / f"monitor_dp_{host}_{os.getppid()}_rank_2.log").mkdir()
    assert _processes(logs) == []


def test_a_config_file_replaced_by_a_link_while_the_job_runs_is_said_to_be_one(tmp_path: Path) -> None:
    """helper-256: the file made a symbolic link while the job runs (to a file of the same content, or a
    loop) was logged "is not read: Too many levels of symbolic links" (O_NOFOLLOW's error): a link to a
    real file read as a loop. It is named a link; a FIFO or a folder put there is no regular file."""
    job = Job(tmp_path)
    job.steps(3)
    path = job.dir / CONFIG_NAME
    real = tmp_path / "shared.json"
    real.write_text(json.dumps({**c.template_json(), "start_step": -1}))
    os.unlink(path)
    path.symlink_to(real)
    job.steps(2)
    said = job.log()
    assert f"{path} is not read: it is a symbolic link (links are not followed)" in said, said
    assert "Too many levels" not in said
    os.unlink(path)
    os.mkfifo(path)
    assert f"{path} is not read: not a regular file" in job.log()
    assert job.captures() == []


@pytest.mark.parametrize(
    ("written_by", "why"),
    [
        # an older agent's line
        ("helper-248", "not for this process's rank (it asks for ranks 1,3-4)"),
        # today's (helper-298), the same line to an older reader: NOT_SELECTED_RE's rank and request
        ("helper-298", "not for this process's rank (a process without a rank counts as rank 0; it asks for "
         "ranks 1,3-4)"),
    ],
)  # fmt: skip
def test_status_says_a_request_for_other_ranks_captured_nothing_here(
    tmp_path: Path, written_by: str, why: str
) -> None:
    """helper-248: `npuprof trigger DIR --ranks 1` to a job of one process (no rank): its log said "rank
    None is not selected (...): no capture here", and status showed "-", as if no request had come."""
    from npuprof.agent.dynamic_log import NOT_SELECTED, NOT_SELECTED_RE, not_selected
    from npuprof.cli.status import _processes, render

    (tmp_path / "log").mkdir()
    log = tmp_path / "log" / f"dp_{os.uname().nodename}_{os.getpid()}_rank_-1.log"
    line = f"{time.strftime('%Y-%m-%d %H:%M:%S')},000 [INFO] [1] npuprof.dynamic: [step {{}}] {{}}\n"
    request = "capture 2 step(s) from the next step on ranks 1,3-4 into /out (trigger t8)"
    old = NOT_SELECTED.format(rank=None, request=request)
    written = old if written_by == "helper-248" else not_selected(None, request)
    if written_by == "helper-298":
        assert "None" not in written and NOT_SELECTED_RE.match(written)["request"].endswith(request)
    log.write_text(
        line.format(3, "watching it") + line.format(59, f"loaded: {request}") + line.format(61, written)
    )
    (process,) = _processes(tmp_path / "log")
    assert process["not_captured"] == {"step": 61, "why": why}
    text = render({"config": {"file": "cfg", "problem": "-"}, "processes": [process]})
    assert f"request at step 61 {why}" in text, text


def test_status_shows_what_it_quotes_of_a_hand_edited_file_on_one_line(tmp_path: Path) -> None:
    """helper-190: a trigger_id edited by hand with a newline and an escape sequence reached the terminal
    as it is: status's first line broke in two and recoloured the rest."""
    from npuprof.cli.status import _config_summary, render

    (tmp_path / CONFIG_NAME).write_text(json.dumps({"start_step": -1, "trigger_id": "x\nfake\x1b[31mred"}))
    text = render({"config": _config_summary(tmp_path), "processes": []})
    assert "\x1b" not in text and "trigger x\\x0afake\\x1b[31mred" in text, text
    assert len(text.splitlines()) == 2, text  # the file's line, and "no process has logged yet"


def test_a_request_whose_trigger_id_no_line_names_is_read_when_the_job_reads_it(tmp_path: Path) -> None:
    """helper-190: a trigger_id of 100 characters (edited by hand) was captured, but the watcher's lines do
    not name such an id, and status and trigger looked for it: "not read yet" for ever."""
    from npuprof.agent import dynamic_log

    job = Job(tmp_path)
    job.steps(3)
    job.write(start_step=-1, active=1, trigger_id="y" * 100)
    job.steps(3)
    assert job.captures() == [(4, 4)]
    assert dynamic_log.unread_request(job.dir) is None


def test_the_action_log_is_in_time_order_when_an_event_waits_behind_a_heartbeat(tmp_path: Path) -> None:
    """helper-224: "poll interval now ..." stamped 10:46:33 (a step's event, written by the watcher at its
    next poll) came after the watcher's own lines stamped 10:46:34 of that poll: the events wait for no
    line of the watcher's now."""
    from npuprof.agent.dynamic_log import parse_line

    job = Job(tmp_path)
    job.steps(3)
    job.plan._event("INFO", "an event of the training thread", 3)  # as _measure queues its line
    job.plan._last_beat = -1e9  # the heartbeat is due at this poll
    when = job.plan._events[-1][0]
    while time.time() < when + 0.01:  # the poll's own lines are stamped later than the event
        time.sleep(0.005)
    job.write(start_step=-1, active=1)  # a poll: its "loaded" lines, the heartbeat, then the events
    stamps = [f["time"] for f in map(parse_line, job.log(poll=False).splitlines()) if f is not None]
    assert stamps == sorted(stamps), job.log(poll=False)


def test_two_triggers_at_the_same_moment_the_second_says_it_replaces_the_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """helper-224: two `npuprof trigger` on one DIR at once each looked for a request not picked up yet,
    found none, and wrote: one request silently won. The look is made slow here to open that window."""
    import threading

    from npuprof.cli import trigger as trigger_module

    job = Job(tmp_path, rank=0)
    job.steps(2)
    looked = trigger_module._request_not_picked_up

    def slow_look(directory: Path) -> str:
        said = looked(directory)
        time.sleep(0.3)
        return said

    monkeypatch.setattr(trigger_module, "_request_not_picked_up", slow_look)
    trigger = {"directory": str(job.dir), "start_step": None, "warmup": 0, "ranks": None, "cancel": False}
    threads = [
        threading.Thread(target=trigger_module.trigger_command, kwargs={**trigger, "active": n})
        for n in (1, 2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    said = " ".join(capsys.readouterr().err.split())
    assert said.count("which no process had picked up yet (the last change wins)") == 1, said


@pytest.mark.parametrize("planned", [False, True])
def test_status_finds_the_capture_a_killed_process_began_before_its_watcher_logged_it(
    tmp_path: Path, planned: bool
) -> None:
    """helper-224: a rank killed (kill -9) about 1 s into a capture: "capture planned" and "capture started"
    are written by the watcher at its next poll, so the log held only "loaded" (seen: kill -9 as the rank
    dir appeared), and status said "-" while the run's summary listed the capture incomplete; with "capture
    planned" logged, status said the capture was never reached. Its rank dir tells it."""
    from npuprof.cli.status import _processes, render
    from npuprof.job_processes import pid_alive

    pid = 4194000  # beyond this host's pids: gone
    assert not pid_alive(pid)
    host, out = os.uname().nodename, tmp_path / "out"
    logs = tmp_path / "cfg" / "log"
    logs.mkdir(parents=True)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time() - 2)) + ",000"
    request = f"capture 2 step(s) from the next step on every rank into {out} (trigger t1)"
    (logs / f"dp_{host}_{pid}_rank_0.log").write_text(
        f"{stamp} [INFO] [{pid}] npuprof.dynamic: [step 0] watching it every 2 s\n"
        f"{stamp} [INFO] [{pid}] npuprof.dynamic: [step 50] loaded: {request}\n"
        + (
            f"{stamp} [INFO] [{pid}] npuprof.dynamic: [step 50] capture planned: steps 52-53 ({request})\n"
            * planned
        )
    )
    rank_dir = out / f"{host}_{pid}_20261206104633123_ascend_pt"
    rank_dir.mkdir(parents=True)
    record = {"status": "capturing", "pid": pid, "steps": [52], "updated_ns": time.time_ns()}
    (rank_dir / "npuprof_capture.json").write_text(json.dumps(record))
    (process,) = _processes(logs)
    assert process["capturing"] == {"from_step": 52, "directory": str(rank_dir)}, process
    assert process["not_captured"] is None and process["planned"] is None, process
    table = render({"config": {"file": "f", "start_step": 0}, "processes": [process]})
    assert f"capture from step 52 never finished (the process died): {rank_dir}" in table, table
    # a process that reused the pid later, or a record of another process: not its capture
    record["updated_ns"] = time.time_ns() - 3600 * 10**9
    (rank_dir / "npuprof_capture.json").write_text(json.dumps(record))
    (process,) = _processes(logs)
    assert process["capturing"] is None, process


def test_a_request_read_while_the_training_thread_was_blocked_and_then_replaced_is_told_by_status(
    tmp_path: Path,
) -> None:
    """helper-224: two triggers read by the watcher while the training thread was blocked (a long step):
    the first never ran, and only the action log said so (at INFO, naming the second): status showed the
    second's capture and nothing else."""
    from npuprof.cli.status import _processes, render

    job = Job(tmp_path, rank=0)
    job.steps(2)
    job.write(start_step=-1, active=1, trigger_id="first")  # read; the training thread takes no step
    job.write(start_step=-1, active=2, trigger_id="second")
    job.steps(4)
    assert job.captures() == [(3, 4)]
    job.log()
    (process,) = _processes(job.dir / "log")
    table = render({"config": {"file": "f", "start_step": 0}, "processes": [process]})
    assert (
        "last warning (1 in all)" in table and "(trigger first)) never ran: replaced by a later" in table
    ), table


def test_a_trigger_says_when_its_start_step_has_passed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """helper-224: `npuprof trigger --start-step 5` with the job at step 861: written, and only the job's
    log said it was not effective."""
    from npuprof.cli.trigger import trigger_command

    job = Job(tmp_path, rank=0)
    job.steps(20)
    job.log()  # the watcher's heartbeat: at step 20
    trigger = {"directory": str(job.dir), "active": 1, "warmup": 0, "ranks": None, "cancel": False}
    trigger_command(**trigger, start_step=5)
    said = " ".join(capsys.readouterr().err.split())
    assert "--start-step 5 has passed in every running process (their logs are at step 20 or later)" in said
    trigger_command(**trigger, start_step=500)
    assert "has passed" not in capsys.readouterr().err


def test_a_trigger_says_it_replaces_a_request_taken_and_not_begun(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A second `npuprof trigger` after every process had taken the first (its window planned for a later
    step, or waiting for the capture in flight) and before its capture began: the first never ran, and only
    each process's log said so; the trigger said nothing. A request only loaded is not told (its capture may
    have begun: the log says so at the watcher's next poll), nor one a cancel replaces."""
    from npuprof.cli.trigger import trigger_command

    job = Job(tmp_path, rank=0)
    job.steps(2)
    trigger = {"directory": str(job.dir), "active": 1, "warmup": 0, "ranks": None, "cancel": False}
    trigger_command(**trigger, start_step=500)
    first = json.loads((job.dir / CONFIG_NAME).read_text())["trigger_id"]
    job.plan.poll_once()  # loaded
    job.steps(1)  # planned: steps 500-500 (the log line's span)
    job.log()
    capsys.readouterr()
    trigger_command(**trigger, start_step=None)
    said = " ".join(capsys.readouterr().err.split())
    assert (
        f"this replaces request {first}, which 1 of the 1 running processes had taken and not begun (rank 0: "
        "planned: step 500): the last change wins, it never runs there"
    ) in said, said
    second = json.loads((job.dir / CONFIG_NAME).read_text())["trigger_id"]
    job.plan.poll_once()  # loaded: its capture may have begun since (the log says so at the next poll)
    trigger_command(**{**trigger, "active": 3}, start_step=None)
    assert second not in capsys.readouterr().err
    job.plan.poll_once()
    job.steps(1)  # its capture begins
    trigger_command(**trigger, start_step=None)
    third = json.loads((job.dir / CONFIG_NAME).read_text())["trigger_id"]
    job.plan.poll_once()
    job.steps(1)  # the third waits for the capture in flight
    job.log()
    trigger_command(**trigger, start_step=None)
    said = " ".join(capsys.readouterr().err.split())
    assert f"this replaces request {third}, which 1 of the 1 running processes had taken" in said, said
    assert "and not begun (rank 0: waiting for the capture in flight)" in said, said
    job.steps(5)
    job.log()
    trigger_command(**trigger, start_step=500)
    job.plan.poll_once()
    job.steps(1)  # planned: steps 500-500 (the log line's span)
    job.log()
    trigger_command(**{**trigger, "cancel": True}, start_step=None)  # what a cancel is for: no note
    assert "taken and not begun" not in capsys.readouterr().err
    trigger_command(**trigger, start_step=None)
    last = json.loads((job.dir / CONFIG_NAME).read_text())["trigger_id"]
    job.plan.poll_once()
    job.steps(3)  # its capture begins (and ends): nothing to say of it
    job.log()
    assert job.captures() == [(4, 6), (8, 8), (12, 12)]  # the third never ran
    trigger_command(**trigger, start_step=None)
    said = capsys.readouterr().err
    assert last not in said and "taken and not begun" not in said, said


def test_a_template_the_disk_cut_short_is_not_left_as_the_request_file(tmp_path: Path) -> None:
    """--dynamic DIR on a full disk: the run fails to start with the disk's error, and leaves no empty
    profiler_config.json behind, which no later run replaces (an existing file is never overwritten)."""
    import contextlib

    from conftest import small_tmpfs

    with small_tmpfs(tmp_path / "tmpfs", "64k") as mount:
        with contextlib.suppress(OSError), open(mount / "filler", "wb") as handle:
            for _ in range(64):
                handle.write(b"\0" * 4096)
                handle.flush()
        assert os.statvfs(mount).f_bavail == 0
        with pytest.raises(OSError, match="No space left"):
            prepare(str(mount / "cfg"))
        assert not (mount / "cfg" / CONFIG_NAME).exists()


def test_a_dynamic_folder_on_a_read_only_file_system_is_said_so(tmp_path: Path) -> None:
    """A --dynamic folder mounted read-only where the job runs (a shared folder, rw on the login node): run
    said to use `npuprof trigger` and `npuprof status` there, which had nothing to write or to read (the
    watchers' warning went to npuprof.log alone), and status said "no process has logged yet" as if the job
    had not begun training."""
    import subprocess

    from conftest import small_tmpfs

    from npuprof import runner
    from npuprof.cli import status

    with small_tmpfs(tmp_path / "tmpfs", "1m") as mount:
        prepare(str(mount / "cfg"))
        os.chmod(mount, 0o750)
        writable = runner._prepare_dynamic(c.ProfileConfig(dynamic=str(mount / "cfg")))[1]
        assert "edit it, or run `npuprof trigger" in writable and "says what each rank did" in writable
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        line = runner._prepare_dynamic(c.ProfileConfig(dynamic=str(mount / "cfg")))[1]
        assert "it cannot be changed from here (a read-only file system)" in line, line
        assert "npuprof trigger" not in line and "says what each rank did" not in line, line
        assert (
            f"warning: its processes cannot log what they do in {mount / 'cfg' / 'log'} (a read-only file "
            "system), so npuprof status will show nothing; captures still work"
        ) in line, line
        unwritable = status._logs_unwritable(mount / "cfg" / "log")
        assert (
            unwritable == f"{mount / 'cfg' / 'log'} is on a read-only file system: no process can log there"
        )
        report = {"config": {"file": "f", "start_step": 0}, "processes": [], "logs_unwritable": unwritable}
        assert unwritable in status.render(report)


def test_status_json_gives_a_process_without_a_rank_as_null(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`npuprof status --format json` gave a process without a rank as -1 (torch_npu's name for it in the
    log's file name), `npuprof analyse --format json` as null: a JSON reader took -1 for a rank. Both are
    null now; the table still shows "-", and the lines name such a process by its pid."""
    from npuprof.cli.status import status_command

    logs = tmp_path / "log"
    logs.mkdir()
    error = "2026-12-02 07:25:41,100 [ERROR] [1] npuprof.dynamic: [step 2] load json failed: x\n"
    (logs / "dp_vm_4242_rank_-1.log").write_text(error)
    (logs / "dp_vm_4343_rank_1.log").write_text(error)
    status_command(str(tmp_path), "json")
    processes = json.loads(capsys.readouterr().out)["processes"]
    assert [(p["pid"], p["rank"]) for p in processes] == [(4343, 1), (4242, None)], processes
    status_command(str(tmp_path), "table")
    table = capsys.readouterr().out
    assert "pid 4242: last error" in table and "rank 1: last error" in table, table
    rows = [line.split() for line in table.splitlines() if line.split()[1:3] == ["vm", "4242"]]
    assert [row[0] for row in rows] == ["-"], table


@pytest.mark.parametrize(
    ("hosts", "said"),
    [
        ((), "on the job's node it may exist; if not, the job makes it there when the capture begins"),
        (("node7",), "on the job's node (node7) it may exist; if not, the job makes it there"),
        ((os.uname().nodename,), "the job (on this machine) makes it when the capture begins"),
    ],
)
def test_trigger_says_an_output_missing_here_is_made_by_the_job_or_may_be_on_its_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], hosts: tuple[str, ...], said: str
) -> None:
    """helper-298: `npuprof trigger DIR -o /data/prfo` (a typo, or a directory of the job's node) was
    written without a word. It is still written (it may exist where the job runs), with one note."""
    from npuprof.cli.trigger import trigger_command

    (tmp_path / "log").mkdir()
    line = f"{time.strftime('%Y-%m-%d %H:%M:%S')},000 [INFO] [7] npuprof.dynamic: [step 3] watching it\n"
    for host in hosts:
        (tmp_path / "log" / f"dp_{host}_7_rank_0.log").write_text(line)
    missing = tmp_path / "not" / "here"
    trigger_command(
        directory=str(tmp_path), start_step=None, active=1, warmup=0, cancel=False, output=str(missing)
    )
    assert json.loads((tmp_path / "profiler_config.json").read_text())["prof_dir"] == str(missing)
    (note,) = [x for x in capsys.readouterr().err.splitlines() if " does not exist" in x]
    assert note.startswith(f"npuprof trigger: note: -o {missing} does not exist on this machine: "), note
    assert said in note and note.endswith("check the path if you meant a directory that exists"), note
    missing.mkdir(parents=True)
    trigger_command(
        directory=str(tmp_path), start_step=None, active=1, warmup=0, cancel=False, output=str(missing)
    )
    assert " does not exist" not in capsys.readouterr().err


def test_a_request_is_logged_loaded_before_the_plan_a_step_made_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watcher hands a request to the training thread before it logs it: a step boundary in between
    planned it, and the log read "[step 958] capture planned" before "[step 957] loaded"."""
    from npuprof.agent.dynamic_log import parse_line

    job = Job(tmp_path)
    job.steps(3)
    replan = job.controller.replan

    def replan_then_a_step() -> None:
        replan()
        job.steps(1)  # the training thread reaches its boundary before the watcher writes a line

    monkeypatch.setattr(job.controller, "replan", replan_then_a_step)
    job.write(start_step=10, active=2)
    lines = [fields for line in job.log().splitlines() if (fields := parse_line(line)) is not None]
    said = [(int(f["step"]), f["message"].split(":")[0]) for f in lines if f["step"] is not None]
    loaded = said.index((3, "loaded"))
    assert said[loaded + 1] == (4, "capture planned"), said


def test_a_stalled_process_writes_no_heartbeat_so_status_can_call_it_silent(tmp_path: Path) -> None:
    """The heartbeat ("at step N") is written when the job moved since the last one: a process stalled at a
    step (a hung collective) stops writing, and `npuprof status` calls a process of another host silent by
    its log's age alone (helper-373: the check of the step taken out, a stalled process logged "at step 3"
    every minute and never looked silent)."""
    job = Job(tmp_path)
    job.steps(3)
    job.plan._last_beat = -1e9  # the heartbeat is due at this poll
    assert job.log().count("at step 3") == 1
    job.plan._last_beat = -1e9  # a minute later, the job still at step 3
    assert job.log().count("at step 3") == 1
    job.steps(1)
    job.plan._last_beat = -1e9
    assert job.log().count("at step 4") == 1
