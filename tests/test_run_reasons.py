"""The reason `npuprof run` gives for a run without captures, from its agents' log lines
(npuprof/reports/run_summary.py, why_no_capture); the real runs behind each reason are in
tests/test_fault_inputs.py."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from npuprof.config import ProfileConfig
from npuprof.reports.run_summary import why_no_capture

AGENT = "2026-12-02 07:00:00 [INFO] [agent pid=7] "
READY = AGENT + "agent ready in /w/train.py (rank None)"
COUNTED = AGENT + "steps are counted on the optimizer SGD (the first optimizer to step)"
# an agent's line as its process ends (npuprof/agent/entry.py): one of these, always
NO_OPTIMIZER = AGENT + "no step counted in this process: it made no optimizer"
FOUR_STEPS = AGENT + "steps counted in this process: 4"


# the log of a 2-rank torchrun job as its agents start (launcher pid 6, ranks 0 and 1 in pids 7 and 8)
TWO_RANKS_READY = (
    "2026-12-03 00:00:00 [INFO] [launcher pid=6] run r1 starts: torchrun train.py\n"
    "2026-12-03 00:00:01 [INFO] [agent pid=7] agent ready in train.py (rank 0, run r1)\n"
    "2026-12-03 00:00:01 [INFO] [agent pid=8] agent ready in train.py (rank 1, run r1)\n"
)


def test_a_job_that_never_stepped_an_optimizer_is_told_how_to_count_its_steps() -> None:
    why = why_no_capture(ProfileConfig(), 0, [READY, NO_OPTIMIZER])
    assert why.startswith("no step was counted: no optimizer's step() ran in the job"), why
    assert "--step-on MODULE:QUALNAME" in why and "--delay" in why
    # a job that ended so with an error code: failed (its own error output says why), or one that trains
    # without an optimizer and exits with a code of its own (helper-95): both told
    failed = why_no_capture(ProfileConfig(), 2, [READY, NO_OPTIMIZER])
    assert failed == (
        "the job failed (exit code 2) before any optimizer's step() ran (one step is one optimizer.step()): "
        "if it failed, its own error output says why; if it trains without an optimizer, count the returns "
        "of your own step function with --step-on MODULE:QUALNAME, or capture by time with --delay and "
        "--duration"
    ), failed
    # an optimizer stepped, too few times: the schedule is named instead
    assert "the schedule needs 9 steps" in why_no_capture(ProfileConfig(), 0, [READY, COUNTED, FOUR_STEPS])


def test_a_job_without_an_optimizer_is_told_the_step_on_of_its_own_step_function(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """helper-378: a hand-written update (`w.sub_(lr * w.grad)` in `train_step`) or an optimizer stepped
    inside a torch.compile'd `opt_step`: the end said "--step-on MODULE:QUALNAME", never the name to give."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "manual.py").write_text(
        "import torch\n\nclass Trainer:\n    def fit(self): ...\n    def _log(self): ...\n\n"
        "def train_step(x):\n    ...\n\nif __name__ == '__main__':\n    train_step(1)\n"
    )
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__main__.py").write_text(
        "def load(): ...\nasync def serve(): ...\nclass A:\n    def run(self): ...\n"
    )

    def why(command: str, code: int = 0) -> str:
        start = f"2026-12-02 07:00:00 [INFO] [launcher pid=6 run=r1] run r1 starts: {command}"
        return why_no_capture(ProfileConfig(), code, [start, READY, NO_OPTIMIZER])

    told = "(the script's train_step: --step-on __main__:train_step, if each call is one step)"
    assert f"--step-on MODULE:QUALNAME {told}, or capture by time" in why("python manual.py"), why(
        "python manual.py"
    )
    assert told in why("/venv/bin/python -u manual.py --lr 3", 2)  # failed: told as one of the two causes
    assert told in why("torchrun --nproc-per-node 2 manual.py")
    # none named for a step: the functions, the first few, for the user to pick
    assert (
        "(the script defines load, serve, A.run: --step-on __main__:NAME of the one called once a step)"
        in why("python -m pkg")
    ), why("python -m pkg")
    # a def under `if __name__ == "__main__":` binds a module-level name too
    (tmp_path / "guarded.py").write_text(
        "import torch\n\ndef build(): ...\ndef warmup_steps(): ...\n\nif __name__ == '__main__':\n"
        "    def one_step(b): ...\n"
        "    for b in range(3):\n        one_step(b)\n"
    )
    assert "(the script's one_step: --step-on __main__:one_step, if each call is one step)" in why(
        "python guarded.py"
    ), why("python guarded.py")
    for unknown in ("python missing.py", "bash run.sh", "python -c 'import torch'"):
        assert "--step-on MODULE:QUALNAME, or capture by time" in why(unknown), why(unknown)


def test_a_job_ended_by_a_signal_before_torch_is_not_sent_to_its_error_output() -> None:
    # `kill -TERM <npuprof>` during a job's set-up: the job died of the SIGTERM npuprof passed on and
    # printed nothing, yet the line sent the user to "its own error output"
    ended = why_no_capture(ProfileConfig(), 128 + signal.SIGTERM, [], died_of=signal.SIGTERM)
    assert ended.startswith(f"the job was ended by SIGTERM (exit code {128 + signal.SIGTERM}) before"), ended
    assert "error output" not in ended, ended
    failed = why_no_capture(ProfileConfig(), 3, [])  # an exit code of its own: its traceback says why
    assert failed.endswith("; its own error output says why"), failed


def _recorded_by_torchs_schedule(skip_first: int, wait: int, warmup: int, active: int) -> list[int]:
    """The steps torch.profiler.schedule records in its first cycle, from its documented semantics: skip
    ``skip_first`` steps, then wait, warm up, record."""
    first = skip_first + wait + warmup
    return list(range(first, first + active))


@pytest.mark.parametrize(
    ("flags", "step_on", "counted", "advice"),
    [
        ({}, None, 4, "--skip-first 0"),  # 4 optimizer steps: the default warm-up and 3 recorded fit
        ({}, "__main__:evaluate", 1, "--skip-first 0 --warmup 0 --active 1"),  # one call ran the whole loop
        ({}, None, 3, "--skip-first 0 --active 2"),
        ({"wait": 2, "warmup": 2, "active": 2}, None, 5, "--skip-first 1 --wait 0"),
    ],
)
def test_a_job_with_too_few_steps_is_told_the_schedule_that_fits_them(
    flags: dict[str, int], step_on: str | None, counted: int, advice: str
) -> None:
    cfg = ProfileConfig(step_on=step_on)
    for name, value in flags.items():
        setattr(cfg.schedule, name, value)
    lines = [READY, COUNTED, AGENT + f"steps counted in this process: {counted}"]
    if step_on:
        lines[1] = AGENT + f"steps counted at each return of {step_on}"
    why = why_no_capture(cfg, 0, lines)
    assert why.endswith(f": {advice} records within the steps it counted"), why
    # what the advice asks records only steps the job finished (0 to counted - 1), and at least one
    given = dict(zip(advice.split()[::2], map(int, advice.split()[1::2]), strict=True))
    own = {name: getattr(cfg.schedule, name) for name in ("skip_first", "wait", "warmup", "active")}
    schedule = own | {flag.removeprefix("--").replace("-", "_"): value for flag, value in given.items()}
    recorded = _recorded_by_torchs_schedule(**schedule)
    assert recorded and max(recorded) < counted, (advice, recorded)
    assert max(_recorded_by_torchs_schedule(**own)) >= counted  # its own did not fit: the advice is news


def test_a_delay_longer_than_the_job_is_told_how_long_the_job_ran() -> None:
    """An evaluation of 0.4 s run with --delay 2: the last line said only that the job ended before the
    window began, not how long it ran, so not which --delay would do."""
    due = "--delay: the process ended before its window began: due 2 s after the agent woke, it ended "
    other = AGENT.replace("pid=7", "pid=8")
    lines = [READY, NO_OPTIMIZER, AGENT + due + "0.4 s after", other + due + "1.3 s after"]
    why = why_no_capture(ProfileConfig(delay=2.0), 0, lines)
    assert why.startswith("the job ended before the --delay window began"), why
    assert "the process that ran longest ended 1.3 s after it: a --delay under that opens it" in why, why
    # an agent that logged no such line (an older npuprof's log) leaves the clock's start alone said
    bare = why_no_capture(ProfileConfig(delay=2.0), 0, [READY, NO_OPTIMIZER])
    assert bare == "the job ended before the --delay window began (the clock starts at `import torch`)", bare


def test_the_delay_advice_is_the_trainers_not_its_waiting_parents() -> None:
    """A parent that imported torch and waited in subprocess.run for the trainer ran longest: the advice
    named its 5.0 s, and a --delay under that (4 s) opened no window in the trainer, which ended 1.3 s after
    its clock. The process that counted steps goes first; two of them, the last of them."""
    due = "--delay: the process ended before its window began: due 9 s after the agent woke, it ended "
    parent, trainer, other = (AGENT.replace("pid=7", f"pid={pid}") for pid in (7, 8, 9))
    lines = [
        parent + "agent ready in launch.py (rank 0, run r1)",
        trainer + "agent ready in train.py (rank 0, run r1)",
        trainer + COUNTED.removeprefix(AGENT),
        trainer + "steps counted in this process: 12",
        trainer + due + "1.3 s after",
        parent + NO_OPTIMIZER.removeprefix(AGENT),
        parent + due + "5.0 s after",
    ]
    why = why_no_capture(ProfileConfig(delay=9.0), 0, lines)
    assert "the process that counted steps ended 1.3 s after it: a --delay under that opens it" in why, why
    assert "5.0" not in why, why
    # counted only at its exit (its optimizer's line lost), and a second trainer that ran longer
    lines = [line for line in lines if "optimizer SGD" not in line]
    lines += [other + "steps counted in this process: 3", other + due + "2.5 s after"]
    why = why_no_capture(ProfileConfig(delay=9.0), 0, lines)
    assert "the last of the processes that counted steps ended 2.5 s after it" in why, why
    # no process counted a step (an evaluation): the longest, as before
    why = why_no_capture(ProfileConfig(delay=9.0), 0, [line for line in lines if "steps counted" not in line])
    assert "the process that ran longest ended 5.0 s after it" in why, why


def test_a_plain_job_shorter_than_its_delay_says_how_long_it_ran(tmp_path: Path) -> None:
    """The same from a real run: a plain-Python job of --step-on steps (its agent wakes at its `def`, no torch
    needed) that sleeps 0.3 s in all, under --delay 30."""
    from conftest import npuprof

    script = tmp_path / "steps.py"
    script.write_text(
        "import time\ndef train_step():\n    time.sleep(0.1)\nfor _ in range(3):\n    train_step()\n"
    )
    flags = ["-o", str(tmp_path / "out"), "--delay", "30", "--step-on", "__main__:train_step"]
    proc = npuprof("run", *flags, "--", sys.executable, str(script))
    assert proc.returncode == 0, proc.stderr
    said = " ".join(proc.stderr.split())
    ran = float(said.split("the process that ran longest ended ", 1)[1].split(" s after it")[0])
    assert 0.3 <= ran < 30, said  # its three sleeps came after the agent woke, and it never waited 30 s


def test_a_job_that_leaves_by_os_exit_before_its_delay_says_how_long_it_ran(tmp_path: Path) -> None:
    """helper-370: the same job leaving by os._exit, as torchrun workers often do (examples/train.py): its
    agent logged nothing at that exit, and the last line said only where the clock starts, no --delay that
    fits (a 2-rank torchrun job under --delay 30 alike)."""
    from conftest import npuprof

    script = tmp_path / "steps.py"
    script.write_text(
        "import os, time\ndef train_step():\n    time.sleep(0.1)\nfor _ in range(3):\n    train_step()\n"
        "os._exit(3)\n"
    )
    flags = ["-o", str(tmp_path / "out"), "--delay", "30", "--step-on", "__main__:train_step"]
    proc = npuprof("run", *flags, "--", sys.executable, str(script))
    assert proc.returncode == 3, proc.stderr  # the job's own exit code
    said = " ".join(proc.stderr.split())
    assert "the process that ran longest ended " in said, said
    ran = float(said.split("the process that ran longest ended ", 1)[1].split(" s after it")[0])
    assert 0.3 <= ran < 30, said


def test_ranks_asked_of_a_job_that_has_none() -> None:
    cfg = ProfileConfig(ranks=[1])
    unselected = AGENT + "rank None not selected (--ranks); no capture at step 6"
    why = why_no_capture(cfg, 0, [READY, COUNTED, unselected])
    assert why == (
        "--ranks picks ranks, but the job is not distributed (no process has a rank; one without counts as "
        "rank 0: --ranks 0, or no --ranks)"
    ), why


def test_agents_of_another_run_in_the_same_log_are_not_this_runs() -> None:
    """npuprof inside torchrun with --ranks 1: each worker has its own launcher and run, one log. Rank 0's
    launcher read rank 1's agent as its own and blamed the schedule."""
    ours = "2026-12-02 07:00:00 [INFO] [agent pid=7] "
    theirs = "2026-12-02 07:00:00 [INFO] [agent pid=8] "
    lines = [
        ours + "agent ready in /w/train.py (rank 0, run aaaa11112222)",
        theirs + "agent ready in /w/train.py (rank 1, run bbbb11112222)",
        ours + "steps are counted on the optimizer SGD (the first optimizer to step)",
        theirs + "steps are counted on the optimizer SGD (the first optimizer to step)",
        ours + "rank 0 not selected (--ranks); no capture at step 5",
    ]
    why = why_no_capture(ProfileConfig(ranks=[1]), 0, lines, run_id="aaaa11112222")
    assert why == "no process of the job has a rank selected by --ranks (ranks seen: 0)", why


def test_a_worker_inside_torchrun_not_selected_is_told_so_as_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """`torchrun ... npuprof run --ranks 0 ...`: rank 1's npuprof reported a failure-like "no process of the
    job has a rank selected" where nothing was to be captured, as asked."""
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "none")  # what torchrun sets in its workers
    lines = [
        "2026-12-02 07:00:00 [INFO] [agent pid=8] agent ready in /w/train.py (rank 1, run bbbb11112222)",
        "2026-12-02 07:00:00 [INFO] [agent pid=8] rank 1 not selected (--ranks); no capture at step 5",
    ]
    why = why_no_capture(ProfileConfig(ranks=[0]), 0, lines, run_id="bbbb11112222")
    assert why == "this worker is rank 1, which --ranks 0 does not select: as asked", why
    # the job failed: that is the news, not the selection
    failed = why_no_capture(ProfileConfig(ranks=[0]), 1, lines, run_id="bbbb11112222")
    assert failed.endswith("no process of the job has a rank selected by --ranks (ranks seen: 1)"), failed


def test_a_job_that_counted_the_steps_of_a_capture_never_recorded_is_not_told_it_ended_too_soon() -> None:
    """A script that closed every descriptor (npuprof's kept log among them) then held all it may open: the
    agent's error could not be logged, and the last line said "the job ended before the schedule's first
    capture" beside "the most steps a process counted: 9" for a capture from step 3. Too few steps is said
    only of too few; else the log's silence is."""
    cfg = ProfileConfig()
    first = cfg.schedule.skip_first + cfg.schedule.wait + cfg.schedule.warmup
    at_exit = AGENT + f"steps counted in this process: {first + 4}"
    why = why_no_capture(cfg, 0, [READY, COUNTED, at_exit])
    said = f"a process counted {first + 4} steps, past the start of the schedule's first capture"
    assert why.startswith(said), why
    assert "holds no reason it recorded none" in why and "ended before" not in why
    too_few = AGENT + f"steps counted in this process: {first}"
    assert "ended before the schedule's first capture" in why_no_capture(cfg, 0, [READY, COUNTED, too_few])


def test_a_capture_that_could_not_begin_is_the_reason() -> None:
    """The agent logs why a capture was skipped (a file name too long, a directory replaced by a file):
    that is the reason, not "the job ended before the first capture"."""
    skipped = (
        AGENT.replace("[INFO]", "[WARNING]")
        + "capture at step 6 skipped: [Errno 36] File name too long: '/out/www...'; training goes on, the "
        "next window is tried"
    )
    why = why_no_capture(ProfileConfig(), 0, [READY, COUNTED, skipped])
    assert why == "capture at step 6 skipped: [Errno 36] File name too long: '/out/www...'", why


def test_the_scripts_own_profiler_that_stopped_after_the_window_began_says_what_records_after_it() -> None:
    """helper-267: a script profiling its first steps itself (a `with profile(...)` around steps 0-4) kept
    npuprof's window of steps 5-8 from opening, its warm-up at step 5 beginning before the `with` ended;
    the end said only "the training script runs its own profiler; npuprof steps aside while it runs", as
    if it ran through steps 5-8."""
    warned = AGENT.replace("[INFO]", "[WARNING]") + (
        "the training script runs its own profiler; npuprof steps aside while it runs (started at "
        "/w/train.py:4, in <module>)"
    )
    kept_out = AGENT + "no capture at step 5: the training script's own profiler runs"
    stopped = AGENT + "the training script's own profiler stopped; npuprof resumes at its next window"
    steps = AGENT + "steps counted in this process: 15"
    said = (
        "the training script runs its own profiler; npuprof steps aside while it runs (started at "
        "/w/train.py:4, in <module>)"
    )
    why = why_no_capture(ProfileConfig(), 0, [READY, warned, COUNTED, kept_out, stopped, steps])
    assert why == (
        f"{said}; it ran at step 5, where a capture was to begin, and stopped later, no capture window of "
        "the schedule coming after: a --skip-first past the steps it profiles records after it"
    ), why
    # still running at the job's end: the warning says all
    assert why_no_capture(ProfileConfig(), 0, [READY, warned, COUNTED, kept_out, steps]) == said


def test_an_output_replaced_by_a_file_is_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from npuprof.reports.run_summary import print_run_summary

    output = tmp_path / "gone"
    output.write_text("x")
    print_run_summary(output, [], 0, ProfileConfig(), output / "npuprof.log")
    err = " ".join(capsys.readouterr().err.split())
    said = f"no capture was written (exit code 0): the output directory {output} is no longer a directory"
    assert said in err, err


def test_steps_taken_on_a_thread_that_does_not_drive_are_the_reason() -> None:
    """Step 0 on the main thread, steps 1-11 in a worker: it said the job ended before the schedule's
    first capture, while twelve steps ran."""
    foreign = (
        AGENT + "step boundaries from thread Thread-1 (train) are ignored: another thread drives the "
        'profiler (one thread only: docs/architecture.md, "Step boundaries")'
    )
    why = why_no_capture(ProfileConfig(), 0, [READY, COUNTED, foreign])
    assert why.startswith("step boundaries from thread Thread-1 (train) are ignored"), why
    # and how the steps reach the thread that trains (a main thread that waits in a way not read as a wait
    # for it, after a step of its own: the line said nothing of what to change)
    assert why.endswith(
        "their steps were not counted: they move to a thread only while the thread that drives waits for "
        "it (join() it, a future's result(), an event or queue that thread sets after its loop); or take no "
        "step before training moves there"
    ), why


@pytest.mark.parametrize("ended", ["ended", "died of an uncaught ValueError (bad batch)"])
def test_a_capture_cut_short_by_its_threads_end_is_the_reason_whatever_ended_the_thread(ended: str) -> None:
    finished = (
        AGENT + f"capture finished early at step 3: the training thread {ended} before the capture's last "
        "step; step 3 is partial"
    )
    why = why_no_capture(ProfileConfig(), 0, [READY, AGENT + "steps are counted on thread trainer", finished])
    assert why.startswith("the thread npuprof recorded on ended inside the capture"), why


def test_a_capture_held_by_the_waiting_driver_is_the_reason_with_what_avoids_it() -> None:
    """A window opened at the step after a sanity step, on the main thread, which then joined the training
    thread: stderr said once that the capture was held and which --skip-first avoids it, but the run's last
    line said only that the thread's steps were ignored. It names the held capture and its fix now."""
    foreign = (
        AGENT + "step boundaries from thread train are ignored: another thread drives the profiler (one "
        'thread only: docs/architecture.md, "Step boundaries")'
    )
    held = (
        "thread train takes the steps while thread MainThread, which has npuprof's profiler open (at its "
        "step 1), waits for it: torch's profiler belongs to the thread that started it and cannot be handed "
        "over, so its window, warming up, records none of thread train's steps, and steps are not counted "
        "until it closes (a schedule that starts at step 4 or later, --skip-first N, avoids this)"
    )
    warned = AGENT.replace("[INFO]", "[WARNING]") + held
    assert why_no_capture(ProfileConfig(), 0, [READY, COUNTED, foreign, warned]) == (
        "thread train takes the steps while thread MainThread, which has npuprof's profiler open (at its "
        "step 1), waits for it; torch's profiler cannot be handed over, so none of those steps was "
        "recorded: a schedule that starts at step 4 or later, --skip-first N, avoids this"
    )
    bare = warned.removesuffix(" (a schedule that starts at step 4 or later, --skip-first N, avoids this)")
    assert why_no_capture(ProfileConfig(), 0, [READY, COUNTED, foreign, bare]) == held.removesuffix(
        " (a schedule that starts at step 4 or later, --skip-first N, avoids this)"
    )  # a form not known: the whole line
    elsewhere = warned.replace("pid=7", "pid=8")  # another process's capture was held: not this one's reason
    why = why_no_capture(ProfileConfig(), 0, [READY, COUNTED, foreign, elsewhere])
    assert "their steps were not counted" in why, why


def test_a_wait_for_the_thread_that_npuprof_does_not_read_is_the_reason_with_its_fix() -> None:
    """The main thread polled a flag of its function's (``while not state["done"]: time.sleep(1)``), which
    npuprof does not read: the last line said only that a thread's steps were ignored, and to join() it.
    The line that names that wait and its fix is the reason, for its own process only."""
    foreign = (
        AGENT + "step boundaries from thread train are ignored: thread MainThread drives the profiler (one "
        'thread only: docs/architecture.md, "Step boundaries")'
    )
    unread = (
        "thread train's steps are not counted: thread MainThread waits for it polling state['done'], a "
        "variable of its function, which npuprof does not read (that would keep its variables alive); wait "
        "on a threading.Event that thread sets (or join() it, or keep the flag in a module global)"
    )
    assert why_no_capture(ProfileConfig(), 0, [READY, COUNTED, foreign, AGENT + unread]) == unread
    elsewhere = AGENT.replace("pid=7", "pid=8") + unread  # another process's wait: not this one's reason
    why = why_no_capture(ProfileConfig(), 0, [READY, COUNTED, foreign, elsewhere])
    assert "their steps were not counted" in why, why


def test_steps_of_a_thread_that_took_over_are_no_reason() -> None:
    """helper-219: the thread then took over counting (4 steps counted): too few steps is the reason."""
    foreign = (
        AGENT + "step boundaries from thread Thread-1 (train) are ignored: another thread drives the "
        'profiler (one thread only: docs/architecture.md, "Step boundaries")'
    )
    took = (
        AGENT + "thread Thread-1 (train) takes over counting the steps: it stepped 3 times while the thread "
        'that counted them waited for other threads (docs/architecture.md, "Step boundaries")'
    )
    elsewhere = foreign.replace("pid=7", "pid=8")  # another process's steps, never taken over
    why = why_no_capture(ProfileConfig(), 0, [READY, COUNTED, foreign, took, FOUR_STEPS])
    assert "the schedule needs 9 steps" in why, why
    why = why_no_capture(ProfileConfig(), 0, [READY, COUNTED, foreign, took, elsewhere])
    assert why.startswith("step boundaries from thread Thread-1 (train) are ignored"), why


def test_a_step_on_module_the_job_runs_as_its_script_is_named_as_main(tmp_path: Path) -> None:
    """`--step-on pkg.train:step -- python -m pkg.train`: the module is __main__ there, never imported."""
    import subprocess
    import sys

    from conftest import clean_env, npuprof

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "train.py").write_text("def step():\n    return 1\nfor _ in range(12):\n    step()\n")
    cmd = [sys.executable, "-m", "pkg.train"]
    assert subprocess.run(cmd, cwd=tmp_path, env=clean_env(), timeout=60).returncode == 0
    done = npuprof("run", "-o", str(tmp_path / "r"), "--step-on", "pkg.train:step", "--", *cmd, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    # said as the run starts too (was: only at the end, of a job that may run for hours counting nothing)
    assert done.stderr.startswith(
        "npuprof run: warning: --step-on pkg.train:step: the job runs pkg.train as its script "
        "(-m pkg.train), where it is __main__ and not imported, so this counts no step unless a process "
        "imports it; --step-on __main__:step counts the script's calls\n"
    ), done.stderr
    said = " ".join(done.stderr.split())
    assert "the job runs pkg.train as its script (-m), where it is __main__: --step-on __main__:step" in said
    # the same module imported by a script is no such case
    started = "2026-12-02 07:00:00 [INFO] [launcher pid=6] run abc starts: python train.py"
    why = why_no_capture(ProfileConfig(step_on="pkg.train:step"), 0, [started])
    assert "__main__" not in why


def test_a_package_run_with_m_runs_its_main_as_the_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`python -m pkg`, pkg a package, imports pkg and runs pkg/__main__.py as __main__: --step-on
    pkg.__main__:step got no warning as the run started, and its end named no __main__ (the job counted
    nothing), while --step-on pkg:istep, a function of pkg/__init__.py, was warned to count nothing."""
    import sys

    from conftest import npuprof

    from npuprof.job_script import runs_as_main

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("def istep():\n    return 1\n")
    main = "from pkg import istep\ndef step():\n    return istep()\nfor _ in range(12):\n    step()\n"
    (tmp_path / "pkg" / "__main__.py").write_text(main)
    cmd = [sys.executable, "-m", "pkg"]
    done = npuprof(
        "run", "-o", str(tmp_path / "r"), "--step-on", "pkg.__main__:step", "--", *cmd, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith(
        "npuprof run: warning: --step-on pkg.__main__:step: the job runs pkg.__main__ as its script "
        "(-m pkg), where it is __main__ and not imported, so this counts no step unless a process imports "
        "it; --step-on __main__:step counts the script's calls\n"
    ), done.stderr
    said = " ".join(done.stderr.split())
    assert (
        "the job runs pkg.__main__ as its script (-m pkg), where it is __main__: --step-on __main__:step"
        in said
    )
    monkeypatch.chdir(tmp_path)  # the package, in the directory the job runs in
    assert runs_as_main("pkg", cmd) is None  # imported by `python -m pkg`: its functions count
    assert runs_as_main("pkg.__main__", cmd) == "-m pkg"
    monkeypatch.chdir(tmp_path / "pkg")  # no package pkg here: a module pkg.py would be the script
    assert runs_as_main("pkg", cmd) == "-m pkg"


@pytest.mark.parametrize(
    ("module", "command", "how"),
    [
        ("train", "python train.py --lr 3", "train.py"),
        ("pkg.train", "python -u pkg/train.py", "pkg/train.py"),
        ("pkg.train", "torchrun --nproc-per-node 2 -m pkg.train", "-m pkg.train"),
        ("pkg.train", "python -m pkg.trainer", None),
        ("train", "python scripts/train.py", None),  # its `import train` may be another file
        ("train", "python run.py --script train.py", None),
        ("train", "launcher --new_switch train.py", None),  # maybe an option's value
        # a script whose name begins as an interpreter's was taken for one, its arguments for Python's
        ("python_train", "torchrun --nproc-per-node 2 python_train.py --lr 0.1", "python_train.py"),
        ("pypy_bench", "accelerate launch pypy_bench.py", "pypy_bench.py"),
        ("train", "bash -c 'python train.py'", "train.py"),  # a shell's -c line, read as a command
        ("train", "bash -c 'python prepare.py; python train.py'", None),
        ("pkg.train", "srun -u python -m torch.distributed.run -m pkg.train", "-m pkg.train"),  # -u: a switch
    ],
)
def test_a_step_on_module_the_command_runs_as_its_script_is_known_before_the_job(
    module: str, command: str, how: str | None
) -> None:
    """What the start-time warning names: the module is the command's script, never imported by its name."""
    from npuprof.job_script import runs_as_main

    assert runs_as_main(module, shlex.split(command)) == how


@pytest.mark.parametrize(
    ("step_on", "command"),
    [("train:step", "python train.py --lr 3"), ("pkg.train:step", "python /job/pkg/train.py")],
)
def test_a_step_on_module_whose_file_the_job_runs_is_named_as_main(step_on: str, command: str) -> None:
    """`--step-on train:step -- python train.py`: the file run is __main__, never imported as train; the
    reason said only that no process imported train (helper-157)."""
    started = f"2026-12-02 07:00:00 [INFO] [launcher pid=6] run abc starts: {command}"
    why = " ".join(why_no_capture(ProfileConfig(step_on=step_on), 0, [started]).split())
    script = command.split()[1]
    module = step_on.partition(":")[0]
    said = f"the job runs {script}, the file of {module}, as its script, where it is __main__: --step-on "
    assert said + "__main__:step" in why, why
    # a file of the same name elsewhere (another package's train.py) is no such case
    other = why_no_capture(ProfileConfig(step_on=step_on), 0, [started.replace("train.py", "xtrain.py")])
    assert "__main__" not in other, other


@pytest.mark.parametrize(
    ("step_on", "command"),
    [
        ("pkg.train:step", "python run.py --file pkg/train.py"),
        ("train:step", "torchrun --nproc-per-node 2 main.py --config train.py"),
        ("pkg.train:step", "python run.py -m pkg.train"),
    ],
)
def test_a_step_on_module_named_only_by_the_scripts_arguments_is_not_called_main(
    step_on: str, command: str
) -> None:
    """The end of a run that counted nothing said "the job runs pkg/train.py, the file of pkg.train, as its
    script" of any word of the command, the script's own arguments included (`python run.py --file
    pkg/train.py` runs run.py, which may import pkg.train), and "-m" of a script's `-m` argument."""
    started = f"2026-12-07 06:20:00 [INFO] [launcher pid=6] run abc starts: {command}"
    why = " ".join(why_no_capture(ProfileConfig(step_on=step_on), 0, [started]).split())
    assert "no process of the job imported" in why and "__main__" not in why, why


@pytest.mark.parametrize(
    ("step_on", "command"),
    [
        ("ev.py:eval_batch", "python ev.py 12"),
        ("ev.py:eval_batch", "python /job/ev.py"),
        ("src/ev.py:eval_batch", "python src/ev.py"),
    ],
)
def test_a_step_on_naming_the_script_file_is_told_main(step_on: str, command: str) -> None:
    """helper-313: `--step-on ev.py:eval_batch -- python ev.py` (the file named, not a module) was told only
    that no process imported ev.py, and why the environment may not reach a process: the file run is
    __main__, and the reason says so, naming --step-on __main__:eval_batch."""
    started = f"2026-12-07 06:20:00 [INFO] [launcher pid=6] run abc starts: {command}"
    why = " ".join(why_no_capture(ProfileConfig(step_on=step_on), 0, [started]).split())
    script = command.split()[1]
    said = f"--step-on names a file, the one the job runs as its script ({script}), where it is __main__: "
    assert said + "--step-on __main__:eval_batch" in why, why
    # another file of that name is no such case
    other = why_no_capture(ProfileConfig(step_on=step_on), 0, [started.replace("ev.py", "xev.py")])
    assert "__main__" not in other, other


def test_a_job_ended_by_a_signal_is_named_so_and_gets_no_advice_on_counting_steps() -> None:
    """SIGTERM 1.5 s into start-up got "no optimizer's step() ran ... use --step-on"; SIGKILL (the kernel's
    out-of-memory killer, say) read as "the job failed (exit code 137)"."""
    why = why_no_capture(ProfileConfig(), 143, [READY], died_of=signal.SIGTERM)
    assert why == "the job was ended by SIGTERM (exit code 143) before a step was counted", why
    why = why_no_capture(ProfileConfig(), 137, [READY, COUNTED], died_of=signal.SIGKILL)
    assert why.startswith("the job was ended by SIGKILL (exit code 137) before the schedule's first capture")
    failed = why_no_capture(ProfileConfig(), 3, [READY, NO_OPTIMIZER])
    assert failed.startswith("the job failed (exit code 3) before any optimizer"), failed
    # an exit code of 128 + N: a wrapper shell's report of a process a signal ended, or the script's own
    # `sys.exit(130)`; not a death of the job's process (helper-76: "ended by SIGINT" for sys.exit(130))
    chose = why_no_capture(ProfileConfig(), 130, [READY])
    assert chose == (
        "the job failed (exit code 130: 128 + SIGINT, as a shell reports a process it ends) before a step "
        "was counted"
    ), chose


def test_the_post_processors_own_reason_for_an_unparsed_capture_is_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A parse that failed on a full disk was reported as "a post-processor stopped, killed, or still at
    work"; the post-processor had logged why."""
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import CaptureSummary

    name = "vm_7_20261203000000000_ascend_pt"
    log = tmp_path / "npuprof.log"
    log.write_text(
        "2026-12-03 00:00:00 [INFO] [launcher pid=6] run r1 starts: python train.py\n"
        f"2026-12-03 00:00:05 [WARNING] [postprocess pid=9] {name}: not analysed (failed: [Errno 28] No "
        "space left on device); run npuprof analyse on it later\n"
    )
    capture = CaptureSummary(tmp_path / name, "complete", None, 7, [6, 7], 1000, "", False)
    print_run_summary(tmp_path, [capture], 0, ProfileConfig(), log, run_id="r1")
    said = " ".join(capsys.readouterr().err.split())
    assert f"the post-processor said: {name}: not analysed (failed: [Errno 28] No space left" in said
    assert "killed, or still at work" not in said


def test_the_summary_counts_the_windows_that_could_not_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A disk that filled mid-job skipped hundreds of windows; stderr had said so once, at the time, and the
    summary only listed what was captured."""
    said = _summary_of_one_capture(
        tmp_path,
        capsys,
        "2026-12-03 00:00:00 [INFO] [launcher pid=6] run r1 starts: python train.py\n"
        "2026-12-03 00:00:01 [INFO] [agent pid=7] agent ready in train.py (rank 0, run r1)\n"
        "2026-12-03 00:00:01 [INFO] [agent pid=8] agent ready in train.py (rank 1, run r1)\n"
        "2026-12-03 00:00:01 [INFO] [agent pid=9] agent ready in train.py (rank 0, run r2)\n"
        "2026-12-03 00:00:09 [INFO] [agent pid=7] capture windows skipped in this process: 5\n"
        "2026-12-03 00:00:09 [INFO] [agent pid=8] capture windows skipped in this process: 3\n"
        "2026-12-03 00:00:09 [INFO] [agent pid=9] capture windows skipped in this process: 40\n",
    )
    # helper-108: no reason logged (the log could not take them) was read as the disk's fault
    no_reasons = "the log could not take the reasons: a full disk, or no file descriptor left"
    assert f"8 capture window(s) could not record ({no_reasons}" in said, said


def test_the_summary_gives_the_last_reason_a_window_could_not_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """helper-107: windows skipped because the job held every descriptor were summed up as "no room on the
    disk, or below --min-free-space"; the agent had logged the real reason."""
    said = _summary_of_one_capture(
        tmp_path,
        capsys,
        "2026-12-03 00:00:00 [INFO] [launcher pid=6] run r1 starts: python train.py\n"
        "2026-12-03 00:00:01 [INFO] [agent pid=7] agent ready in train.py (rank None, run r1)\n"
        "2026-12-03 00:00:02 [WARNING] [agent pid=7] capture at step 4 skipped: [Errno 28] No space left on "
        "device; training goes on, the next window is tried\n"
        "2026-12-03 00:00:03 [WARNING] [agent pid=7] capture at step 9 skipped: [Errno 24] Too many open "
        "files: 'x'; training goes on, the next window is tried\n"
        "2026-12-03 00:00:09 [INFO] [agent pid=7] capture windows skipped in this process: 2\n",
    )
    assert "2 capture window(s) could not record (the last: capture at step 9" not in said  # the reason only
    assert (
        "2 capture window(s) could not record (the last: [Errno 24] Too many open files: 'x'; see" in said
    ), said
    assert "no room on the disk" not in said


def test_a_capture_left_unfinalised_is_told_by_what_its_agent_logged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A job holding all but one descriptor: torch wrote no trace and the record could not be marked, so the
    summary guessed "the process ended before the capture was finalised" of a process that trained on; the
    agent had logged why the trace was not written."""
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import CaptureSummary

    rank_dir = tmp_path / "vm_7_20261203000000000_ascend_pt"
    other = tmp_path / "vm_8_20261203000000000_ascend_pt"
    log = tmp_path / "npuprof.log"
    log.write_text(
        "2026-12-03 00:00:00 [INFO] [launcher pid=6] run r1 starts: python train.py\n"
        f"2026-12-03 00:00:02 [WARNING] [agent pid=8] the trace of steps 2-3 was not written: torch wrote no "
        f"trace into {other} (is the disk full?)\n"
        f"2026-12-03 00:00:02 [WARNING] [agent pid=7] the trace of steps 2-3 was not written: torch wrote no "
        f"trace into {rank_dir}: no file descriptor was free for it\n"
    )
    left = "the process ended before the capture was finalised"
    captures = [
        CaptureSummary(rank_dir, "incomplete", None, 7, [2], 414, left, False),
        CaptureSummary(
            other.with_name("vm_9_20261203000000000_ascend_pt"), "incomplete", None, 9, [2], 414, left, False
        ),
    ]
    print_run_summary(tmp_path, captures, 0, ProfileConfig(), log, run_id="r1")
    said = "".join(capsys.readouterr().err.split())  # the line may be folded at any width
    # helper-108: not "the process ended" of one that trained on; the other's own guess stays
    why = "itsrecordcouldnotbefinalised:thetraceofsteps2-3wasnotwritten:torchwrotenotrace"
    why += f"into{rank_dir}:nofile"
    assert why in said and said.count("".join(left.split())) == 1, said


def test_a_capture_of_a_training_thread_whose_main_thread_never_installed_the_handler_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A capture recorded by a training thread asks the main thread for npuprof's SIGTERM handler; a main
    thread outside Python for the whole capture (time.sleep, C code) never installed it, and a SIGTERM
    killed the process at once: the summary said only "the process ended before the capture was
    finalised". A process whose main thread did install it (pid 8: killed some other way), or left it to the
    script's own handler (pid 9), keeps that guess."""
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import CaptureSummary

    pids = (7, 8, 9)
    dirs = [tmp_path / f"vm_{pid}_20261203000000000_ascend_pt" for pid in pids]
    log = tmp_path / "npuprof.log"
    log.write_text(
        "2026-12-03 00:00:00 [INFO] [launcher pid=6] run r1 starts: python train.py\n"
        + "".join(
            f"2026-12-03 00:00:01 [INFO] [agent pid={pid}] agent ready in train.py (rank None, run r1)\n"
            f"2026-12-03 00:00:02 [INFO] [agent pid={pid}] SIGTERM handler asked of the main thread: "
            "training runs on another thread\n"
            for pid in pids
        )
        + "2026-12-03 00:00:02 [INFO] [agent pid=8] SIGTERM handler installed by the main thread\n"
        + "2026-12-03 00:00:02 [INFO] [agent pid=9] SIGTERM handler left out by the main thread: the script "
        "handles SIGTERM or holds the wakeup fd\n"
    )
    left = "the process ended before the capture was finalised"
    captures = [
        CaptureSummary(d, "incomplete", None, pid, [2], 414, left, False)
        for d, pid in zip(dirs, pids, strict=True)
    ]
    print_run_summary(tmp_path, captures, 143, ProfileConfig(), log, run_id="r1")
    said = "".join(capsys.readouterr().err.split())  # the line may be folded at any width

    def words(text: str) -> str:
        return "".join(text.split())

    why = "had not installed npuprof's SIGTERM handler (only it may), so a SIGTERM ended the process at once"
    assert said.count(words(why)) == 1, said
    assert words(f"{dirs[0].name}: {left}: it recorded on a thread other than the main one") in said, said
    assert words(f"{dirs[1].name}: {left}") + "*" in said, said
    assert words(f"{dirs[2].name}: {left}") + "next:" in said, said


def test_a_capture_lost_to_a_sigterm_in_a_collective_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """helper-342: a rank blocked in a collective (its peer alive, not signalled) that got SIGTERM died of it
    after the handler's grace, its agent logging why the capture was lost; the summary said only "the process
    ended before the capture was finalised". Another process's line (pid 8) is not this one's reason."""
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import CaptureSummary

    dirs = [tmp_path / f"vm_{pid}_20261203000000000_ascend_pt" for pid in (7, 9)]
    log = tmp_path / "npuprof.log"
    log.write_text(
        "2026-12-03 00:00:00 [INFO] [launcher pid=6] run r1 starts: torchrun train.py\n"
        "2026-12-03 00:00:01 [INFO] [agent pid=7] agent ready in train.py (rank 0, run r1)\n"
        "2026-12-03 00:00:01 [INFO] [agent pid=9] agent ready in train.py (rank 1, run r1)\n"
        "2026-12-03 00:00:05 [WARNING] [agent pid=7] SIGTERM while the main thread is blocked outside Python "
        "(e.g. in a collective): the process dies now, as without npuprof; the capture in flight is lost\n"
    )
    left = "the process ended before the capture was finalised"
    captures = [
        CaptureSummary(d, "incomplete", rank, pid, [6], 453, left, False)
        for d, rank, pid in zip(dirs, (0, 1), (7, 9), strict=True)
    ]
    print_run_summary(tmp_path, captures, 1, ProfileConfig(), log, run_id="r1")
    said = "".join(capsys.readouterr().err.split())  # the line may be folded at any width
    why = "a SIGTERM came while its main thread was blocked outside Python"
    assert "".join(f"{dirs[0].name}: {left}: {why}".split()) in said, said
    assert said.count("".join(why.split())) == 1, said  # not of pid 9
    assert "".join(f"{dirs[1].name}: {left}".split()) in said, said


def _summary_of_one_capture(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    log_text: str,
    cfg: ProfileConfig | None = None,
    more: tuple[tuple[int, list[int]], ...] = (),
) -> str:
    """The run summary of a run r1 (``cfg``, the default's if None) with one complete, parsed capture of
    rank 0 (pid 7), and ``more`` of them ((rank, steps) each, pid 7 + the rank), over the log ``log_text``:
    its words, one space between each."""
    made = [(0, 7, [6, 7], None), *((k, 7 + k, steps, None) for k, steps in more)]
    return _summary_of_captures(tmp_path, capsys, log_text, cfg or ProfileConfig(), made)


def _summary_of_captures(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    log_text: str,
    cfg: ProfileConfig,
    made: list[tuple[int | None, int, list[int], int | None]],
) -> str:
    """The run summary of a run r1 whose complete, parsed captures are ``made`` (rank, pid, steps,
    torchrun's attempt each), over the log ``log_text``: its words, one space between each."""
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import CaptureSummary

    log = tmp_path / "npuprof.log"
    log.write_text(log_text)
    captures = [
        CaptureSummary(
            tmp_path / f"vm_{pid}_2026120300000{n:04}_ascend_pt",
            "complete",
            rank,
            pid,
            steps,
            1000,
            "",
            True,
            restart_count=attempt,
        )
        for n, (rank, pid, steps, attempt) in enumerate(made)
    ]
    print_run_summary(tmp_path, captures, 0, cfg, log, run_id="r1")
    return " ".join(capsys.readouterr().err.split())


def _repeat_2() -> tuple[ProfileConfig, int, int]:
    """--repeat 2 over --skip-first 5 --wait 0 --warmup 1 --active 3, and the steps its first and second
    captures record from (torch.profiler.schedule's cycles, by hand)."""
    cfg = ProfileConfig()
    cfg.schedule.repeat = 2
    cfg.schedule.skip_first, cfg.schedule.wait, cfg.schedule.warmup, cfg.schedule.active = 5, 0, 1, 3
    first = 5 + 0 + 1
    return cfg, first, first + (0 + 1 + 3)


def test_the_ranks_that_ranks_left_out_are_named_in_the_run_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`npuprof run --ranks 0 -- torchrun --nproc-per-node 2 ...`: the summary listed rank 0's capture
    alone, rank 1 never named (`npuprof analyse` names it); it now says --ranks left it out."""
    said = _summary_of_one_capture(
        tmp_path,
        capsys,
        TWO_RANKS_READY
        + "2026-12-03 00:00:02 [INFO] [agent pid=8] rank 1 not selected (--ranks); no capture at step 6\n"
        "2026-12-03 00:00:03 [INFO] [agent pid=7] steps counted in this process: 12\n"
        "2026-12-03 00:00:03 [INFO] [agent pid=8] steps counted in this process: 12\n",
        ProfileConfig(ranks=[0]),
    )
    assert "rank(s) 1 (1 of them) were not captured: this run was started with --ranks 0" in said, said
    assert "rank 1 recorded nothing" not in said, said  # as asked: not a rank that failed to record
    everyone = _summary_of_one_capture(
        tmp_path,
        capsys,
        TWO_RANKS_READY,
        ProfileConfig(ranks=[0, 1]),
        more=((1, [6, 7]),),
    )
    assert "were not captured" not in everyone, everyone


def test_a_rank_that_ended_before_its_second_capture_under_repeat_2_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--repeat 2, torchrun, rank 1 ending during its second warm-up: it had one capture and the summary
    said nothing of the second; it now says how many it made and where the next one was to record."""
    cfg = ProfileConfig()
    cfg.schedule.repeat = 2
    skip_first, wait, warmup, active = 5, 0, 1, 3
    cfg.schedule.skip_first, cfg.schedule.wait, cfg.schedule.warmup = skip_first, wait, warmup
    cfg.schedule.active = active
    second = skip_first + (wait + warmup + active) + wait + warmup  # torch.profiler.schedule's 2nd record
    said = _summary_of_one_capture(
        tmp_path,
        capsys,
        TWO_RANKS_READY + "2026-12-03 00:00:03 [INFO] [agent pid=7] steps counted in this process: 20\n"
        "2026-12-03 00:00:03 [INFO] [agent pid=8] steps counted in this process: 10\n",
        cfg,
        more=((0, [10, 12]), (1, [6, 8])),
    )
    assert (
        "rank 1 made 1 of the 2 captures the schedule asks (--repeat 2): it counted 10 step(s); its "
        f"capture 2 records from step {second} (pid 8)"
    ) in said, said
    assert "rank 0 made" not in said, said


def test_a_rank_whose_profiling_stopped_after_an_error_is_named_beside_the_others_captures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """torchrun, 2 ranks, rank 1 holding every descriptor: rank 0's capture was listed and nothing said that
    rank 1 had stopped profiling at step 2 (its stderr line names no rank)."""
    said = _summary_of_one_capture(
        tmp_path,
        capsys,
        TWO_RANKS_READY
        + "2026-12-03 00:00:01 [INFO] [agent pid=9] agent ready in train.py (rank 1, run r2)\n"
        "2026-12-03 00:00:02 [ERROR] [agent pid=9] capture control failed at step 5: ValueError('r2')\n"
        "2026-12-03 00:00:02 [ERROR] [agent pid=8] capture control failed at step 2: OSError(24, 'Too many "
        'open files\')\nTraceback (most recent call last):\n  File "x.py", line 1, in f\nOSError: 24\n',
    )
    stopped = "profiling stopped after an internal error in 1 process(es), which recorded nothing after it"
    why = "rank 1: capture control failed at step 2: OSError(24, 'Too many open files')"
    assert f"{stopped} ({why}); see" in said, said
    assert "ValueError" not in said, said  # another run's agent


def test_a_process_that_logged_two_internal_errors_is_one_process_whose_profiling_stopped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """helper-336: one process whose decision failed twice (re-entered from a signal handler's step) was
    said "profiling stopped after an internal error in 2 process(es)"."""
    said = _summary_of_one_capture(
        tmp_path,
        capsys,
        TWO_RANKS_READY
        + "2026-12-03 00:00:02 [ERROR] [agent pid=8] capture control failed at step 8: ImportError('first')\n"
        "2026-12-03 00:00:02 [ERROR] [agent pid=8] capture control failed at step 9: ImportError('again')\n",
    )
    stopped = "profiling stopped after an internal error in 1 process(es), which recorded nothing after it"
    assert f"{stopped} (rank 1: capture control failed at step 8: ImportError('first')); see" in said, said


def test_windows_a_forked_child_skipped_count_though_it_logged_no_count_at_its_exit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """helper-108: a child of os.fork ends by os._exit, which logs no count: its two skipped windows were
    left out of the summary."""
    skip = "capture at step {} skipped: [Errno 24] Too many open files; training goes on, the next window is"
    skip += " tried"
    said = _summary_of_one_capture(
        tmp_path,
        capsys,
        "2026-12-03 00:00:00 [INFO] [launcher pid=6] run r1 starts: python train.py\n"
        "2026-12-03 00:00:01 [INFO] [agent pid=7] agent ready in train.py (rank None, run r1)\n"
        f"2026-12-03 00:00:02 [WARNING] [agent pid=7] {skip.format(4)}\n"
        f"2026-12-03 00:00:02 [WARNING] [agent pid=8] {skip.format(9)}\n"
        f"2026-12-03 00:00:03 [WARNING] [agent pid=8] {skip.format(14)}\n"
        "2026-12-03 00:00:09 [INFO] [agent pid=7] capture windows skipped in this process: 1\n",
    )
    # a process that logged no count: its lines are all that is known (a full disk may have lost some)
    counted = "at least 3 capture window(s) could not record"
    assert f"{counted} (the last: [Errno 24] Too many open files; see" in said, said


def test_windows_skipped_by_a_process_without_a_count_are_exact_when_each_left_its_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A forked child (os._exit: no count at its exit) skipped two windows and each left its record (a
    directory holding it alone): the count of skipped windows is exact, not "at least" (the log's lines are
    a lower bound only where records are fewer), in the title and in the line that gives the reason (it
    said "at least 2" under a title of 2)."""
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.run_record import CaptureSummary

    why = "[Errno 24] Too many open files; training goes on, the next window is tried"
    log = tmp_path / "npuprof.log"
    log.write_text(
        "2026-12-03 00:00:00 [INFO] [launcher pid=6] run r1 starts: python train.py\n"
        "2026-12-03 00:00:01 [INFO] [agent pid=7] agent ready in train.py (rank None, run r1)\n"
        f"2026-12-03 00:00:02 [WARNING] [agent pid=8] capture at step 9 skipped: {why}\n"
        f"2026-12-03 00:00:03 [WARNING] [agent pid=8] capture at step 14 skipped: {why}\n"
        "2026-12-03 00:00:09 [INFO] [agent pid=7] capture windows skipped in this process: 0\n"
    )
    made = CaptureSummary(
        tmp_path / "vm_7_20261203000000000_ascend_pt", "complete", 0, 7, [6, 7], 1000, "", True
    )
    skipped = [
        CaptureSummary(
            tmp_path / f"vm_8_2026120300000{step:04}_ascend_pt", "incomplete", 0, 8, [step], 300,
            f"capture at step {step} skipped: {why}", False, record_only=True,
        )
        for step in (9, 14)
    ]  # fmt: skip
    print_run_summary(tmp_path, [made, *skipped], 0, ProfileConfig(), log, run_id="r1")
    said = " ".join(capsys.readouterr().err.split())
    assert "npuprof: 1 capture(s), 2 capture window(s) skipped," in said, said
    assert "npuprof: 2 capture window(s) could not record (the last: [Errno 24] Too many open files;" in said


def test_windows_of_a_disk_full_until_the_jobs_end_are_a_lower_bound(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """helper-117: the disk full from step 24 to the job's end (about 25 windows skipped): the count at exit
    and most skip lines were lost, and the summary said "4 capture window(s) could not record", as exact."""
    skip = "capture at step {} skipped: [Errno 28] No space left on device; training goes on, the next window"
    said = _summary_of_one_capture(
        tmp_path,
        capsys,
        "2026-12-03 00:00:00 [INFO] [launcher pid=6] run r1 starts: python train.py\n"
        "2026-12-03 00:00:01 [INFO] [agent pid=7] agent ready in train.py (rank None, run r1)\n"
        f"2026-12-03 00:00:02 [WARNING] [agent pid=7] {skip.format(24)} is tried\n"
        f"2026-12-03 00:00:03 [WARNING] [agent pid=7] {skip.format(27)} is tried\n",
    )
    assert "at least 2 capture window(s) could not record (the last: [Errno 28] No space left" in said, said


def test_a_capture_partial_at_both_ends_says_both(tmp_path: Path) -> None:
    """helper-119: a time window that began inside step 0 and outlasted the job: its record had both steps
    partial, and the summary's note named the last one only (the first was left out when "partial" was
    said already)."""
    import json

    from npuprof.results import layout
    from npuprof.results.run_record import captures_of_run

    rank_dir = tmp_path / "vm_7_20261203000000000_ascend_pt"
    rank_dir.mkdir()
    record = {
        "run_id": "r1",
        "status": layout.STATUS_COMPLETE,
        "steps": list(range(21)),
        "first_step_partial": True,
        "detail": "training ended before the capture's last step; step 20 is partial",
    }
    (rank_dir / layout.CAPTURE_RECORD).write_text(json.dumps(record))
    (capture,) = captures_of_run(tmp_path, "r1")
    assert capture.detail.startswith(
        "step 0 is partial: not a whole training step: it holds the set-up since the first optimizer was "
        "made, or began where a time window opened; training ended"
    ), capture
    assert capture.detail.endswith("step 20 is partial")


def test_a_capture_from_step_0_is_not_said_to_begin_inside_it(tmp_path: Path) -> None:
    """helper-248: `npuprof run --skip-first 0 --warmup 0` records step 0 from its start (the first
    optimizer's creation), set-up included; the summary said "step 0 is partial: recording began inside
    it" and analyse "the capture began inside this step, not at its start", untrue there. Both now say
    why it is no whole step in words true of a schedule's capture and of a time window's."""
    import json

    from analyse_support.handmade import cpu_trace, with_steps, write_rank_dir

    from npuprof.analysis.report import build_report
    from npuprof.results import layout
    from npuprof.results.run_record import captures_of_run

    rank_dir = write_rank_dir(tmp_path, with_steps(cpu_trace(), {0: 6000, 1: 3000}), rank=0)
    record = {"run_id": "r1", "status": layout.STATUS_COMPLETE, "steps": [0, 1], "first_step_partial": True}
    record["last_step_partial"] = False
    (rank_dir / layout.CAPTURE_RECORD).write_text(json.dumps(record))
    why = "not a whole training step: it holds the set-up since the first optimizer was made"
    (capture,) = captures_of_run(tmp_path, "r1")
    assert capture.detail.startswith(f"step 0 is partial: {why}"), capture.detail
    (rank,) = build_report(tmp_path, jobs=1).ranks
    assert (rank.partial_step, rank.step_time_mean_us) == (0, 3000)
    assert isinstance(rank.partial_reason, str) and rank.partial_reason.startswith(why), rank.partial_reason
    assert "began inside" not in capture.detail + rank.partial_reason


def test_a_capture_sigterm_finalised_says_its_last_step_is_partial(tmp_path: Path) -> None:
    """helper-248: `timeout -s TERM` around a run stopped a capture inside its step 36; the summary said
    "* <dir>: stopped by SIGTERM", where a Ctrl-C's said "...; step 36 is partial" (as analyse says both):
    the step read as whole. It is said for every capture whose record marks its last step partial."""
    import json

    from npuprof.results import layout
    from npuprof.results.run_record import captures_of_run

    for pid, partial in ((7, True), (8, False)):
        rank_dir = tmp_path / f"vm_{pid}_20261203000000000_ascend_pt"
        rank_dir.mkdir()
        record = {
            "run_id": "r1",
            "pid": pid,
            "status": layout.STATUS_COMPLETE,
            "steps": [31, 32, 33, 34, 35, 36],
            "last_step_partial": partial,
            "detail": "stopped by SIGTERM",
        }
        (rank_dir / layout.CAPTURE_RECORD).write_text(json.dumps(record))
    details = {c.pid: c.detail for c in captures_of_run(tmp_path, "r1")}
    assert details == {7: "stopped by SIGTERM; step 36 is partial", 8: "stopped by SIGTERM"}


def test_two_nodes_sharing_output_and_pids_each_read_their_own_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two nodes of a torchrun job, each in a container (a pid namespace: the same pids), one -o on shared
    storage: one npuprof.log. Node B's agent shared node A's pid, so A's summary took all of that pid's lines
    for another run's: it said "no process of the job imported torch.optim" of a job whose rank 0 counted
    3 steps; and it counted B's dead post-processor as its own. Every line now names its run."""
    from npuprof.agent.log import AgentLog
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results import logfile
    from npuprof.results.run_record import CaptureSummary

    log = tmp_path / "npuprof.log"
    ours, theirs = AgentLog(str(log), "agent", "aaaa11112222"), AgentLog(str(log), "agent", "bbbb11112222")
    logfile.log(log, "INFO", "launcher", "run aaaa11112222 starts: torchrun train.py", "aaaa11112222")
    logfile.log(log, "INFO", "launcher", "run bbbb11112222 starts: torchrun train.py", "bbbb11112222")
    ours.info("agent ready in train.py (rank 0, run aaaa11112222)")
    theirs.info("agent ready in train.py (rank 1, run bbbb11112222)")
    ours.info("steps are counted on the optimizer SGD (the first optimizer to step)")
    theirs.info("post-processor pid 4242 had ended: a new one takes the next captures")
    ours.info("steps counted in this process: 3")
    print_run_summary(tmp_path, [], 0, ProfileConfig(), log, run_id="aaaa11112222")
    said = " ".join(capsys.readouterr().err.split())
    assert "the job ended before the schedule's first capture, which records from step 6" in said, said
    assert "the most steps a process counted: 3" in said, said
    rank_dir = tmp_path / "h_7_20261203000000000_ascend_pt"
    capture = CaptureSummary(rank_dir, "complete", 0, 7, [6, 7], 1, "", True)
    print_run_summary(tmp_path, [capture], 0, ProfileConfig(), log, run_id="aaaa11112222")
    said = " ".join(capsys.readouterr().err.split())
    assert "found dead" not in said, said
    # node B's summary has its own line
    print_run_summary(tmp_path, [capture], 0, ProfileConfig(), log, run_id="bbbb11112222")
    said = " ".join(capsys.readouterr().err.split())
    assert "a background post-processor was found dead 1 time(s)" in said, said


def test_a_post_processor_whose_pipe_the_script_closed_is_not_said_dead(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """helper-151: a forked child closed every descriptor (os.closerange), its post-processor's pipe among
    them, which ended that post-processor at the EOF: the summary said it "was found dead (killed? out of
    memory?)". It now says what happened, in how many processes; a real death in another process (kill -9)
    is still said as one."""
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.postprocess import replaced_because
    from npuprof.results.run_record import CaptureSummary

    run = "aaaa11112222"

    def agent(pid: int, message: str) -> str:
        return f"2026-12-03 07:00:00 [INFO] [agent pid={pid} run={run}] {message}\n"

    log = tmp_path / "npuprof.log"
    lines = [
        f"2026-12-03 07:00:00 [INFO] [launcher pid=6 run={run}] run {run} starts: python train.py\n",
        agent(7, f"agent ready in train.py (rank None, run {run})"),
        agent(8, replaced_because(4242, pipe_lost=True, alive=False)),
        agent(8, replaced_because(4243, pipe_lost=True, alive=True)),  # closed again: one process still
        agent(10, replaced_because(None, pipe_lost=True, alive=False)),  # before its pid was known
    ]
    log.write_text("".join(lines))
    rank_dir = tmp_path / "h_8_20261203000000000_ascend_pt"
    capture = CaptureSummary(rank_dir, "complete", 0, 8, [6, 7], 1, "", True)
    print_run_summary(tmp_path, [capture], 0, ProfileConfig(), log, run_id=run)
    said = " ".join(capsys.readouterr().err.split())
    assert "found dead" not in said and "killed?" not in said, said
    assert (
        "the script closed npuprof's pipe to its background post-processor in 2 process(es) "
        "(os.closerange?), which ends that post-processor (not a kill)"
    ) in said, said
    log.write_text(
        "".join([*lines, agent(9, replaced_because(4244, pipe_lost=False, alive=False))])
    )  # kill -9
    print_run_summary(tmp_path, [capture], 0, ProfileConfig(), log, run_id=run)
    said = " ".join(capsys.readouterr().err.split())
    assert "a background post-processor was found dead 1 time(s) (killed? out of memory?)" in said, said


def test_captures_left_unparsed_after_the_script_closed_the_pipe_say_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """helper-151: a script that closed every descriptor at each step (os.closerange) closed each new
    post-processor's pipe; past RESTARTS replacements its captures were kept unparsed, and the summary
    blamed "a post-processor stopped, killed, or still at work in the background"."""
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.postprocess import replaced_because
    from npuprof.results.run_record import CaptureSummary

    name = "vm_7_20261203000000000_ascend_pt"
    log = tmp_path / "npuprof.log"
    closes = [
        f"2026-12-03 00:00:0{k} [INFO] [agent pid=7 run=r1] {replaced_because(None, True, False)}\n"
        for k in range(3)
    ]
    log.write_text(
        "2026-12-03 00:00:00 [INFO] [launcher pid=6 run=r1] run r1 starts: python train.py\n"
        + "".join(closes)
        + f"2026-12-03 00:00:05 [WARNING] [agent pid=7 run=r1] {name}: not parsed or gzipped (no "
        "post-processor); run npuprof analyse\n"
    )
    capture = CaptureSummary(tmp_path / name, "complete", None, 7, [6, 7], 1000, "", False)
    print_run_summary(tmp_path, [capture], 0, ProfileConfig(), log, run_id="r1")
    said = " ".join(capsys.readouterr().err.split())
    assert "killed, or still at work" not in said, said
    assert (
        "1 complete capture(s) not parsed when npuprof ended (the script closed npuprof's pipe to their "
        "process's post-processor as they were handed over, or once it had been replaced 3 times "
        "(os.closerange?): see"
    ) in said, said
    # another process's closures say nothing of this one's capture
    log.write_text(
        log.read_text().replace("[agent pid=7 run=r1] the script", "[agent pid=8 run=r1] the script")
    )
    print_run_summary(tmp_path, [capture], 0, ProfileConfig(), log, run_id="r1")
    said = " ".join(capsys.readouterr().err.split())
    assert "a post-processor stopped, killed, or still at work in the background" in said, said


def test_captures_left_on_the_way_by_a_process_killed_after_its_capture_say_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A SIGTERM to the job after a capture's end and before its hand-over (seconds with --memory-timeline:
    the snapshot's copy comes first) left it unparsed, and the summary blamed "a post-processor stopped,
    killed, or still at work in the background: see npuprof.log", where nothing was said of one: its
    post-processor never got the capture. A process that logged its exit lines is not said to be killed."""
    from npuprof.reports.run_summary import print_run_summary
    from npuprof.results.logfile import STEPS_AT_EXIT
    from npuprof.results.postprocess import post_processor_of_run_lives
    from npuprof.results.run_record import CaptureSummary

    run = f"r{os.urandom(6).hex()}"  # of this test alone: a live post-processor of the run is looked for
    name = "vm_7_20261203000000000_ascend_pt"
    log = tmp_path / "npuprof.log"
    lines = (
        f"2026-12-03 00:00:00 [INFO] [launcher pid=6 run={run}] run {run} starts: python train.py\n"
        f"2026-12-03 00:00:01 [INFO] [agent pid=7 run={run}] agent ready in train.py (rank None, run {run})\n"
        f"2026-12-03 00:00:02 [INFO] [agent pid=7 run={run}] capture of steps 6-8 written to "
        f"{tmp_path / name}\n"
    )
    log.write_text(lines)
    capture = CaptureSummary(tmp_path / name, "complete", None, 7, [6, 7, 8], 1000, "", False)
    print_run_summary(tmp_path, [capture], 128 + 15, ProfileConfig(), log, run_id=run)
    said = " ".join(capsys.readouterr().err.split())
    assert "killed, or still at work" not in said, said
    assert (
        "1 complete capture(s) not parsed when npuprof ended (their process ended without its exit lines and "
        "the job's exit code is 143 (128 + SIGTERM): killed before it handed them over?: see"
    ) in said, said
    print_run_summary(tmp_path, [capture], 128 + 15, ProfileConfig(), log, run_id=run, died_of=signal.SIGTERM)
    said = " ".join(capsys.readouterr().err.split())
    assert "its exit lines and the job died of SIGTERM: killed before it handed them over?: see" in said, said
    # torchrun, rank 1 killed -9 one step after a --memory-timeline capture (its snapshot still copied):
    # torchrun exits 1, and the summary blamed a post-processor
    print_run_summary(tmp_path, [capture], 1, ProfileConfig(), log, run_id=run)
    said = " ".join(capsys.readouterr().err.split())
    assert "its exit lines and the job failed (exit code 1): killed before it handed them over?: see" in said
    # a post-processor of the run still at work (its wait cut short by Ctrl-C): it may have them
    sleeper = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "npuprof.results.postprocess", "--run", run]
    )
    try:
        while not post_processor_of_run_lives(run):  # its command line, once it has been exec'd
            assert sleeper.poll() is None
        print_run_summary(tmp_path, [capture], 128 + 15, ProfileConfig(), log, run_id=run)
    finally:
        sleeper.kill()
        sleeper.wait()
    said = " ".join(capsys.readouterr().err.split())
    assert "killed before it handed them" not in said, said
    assert "a post-processor stopped, killed, or still at work in the background" in said, said
    # the same job, its process having logged its exit: the kill is not what left the capture unparsed
    log.write_text(lines + f"2026-12-03 00:00:03 [INFO] [agent pid=7 run={run}] {STEPS_AT_EXIT}9\n")
    print_run_summary(tmp_path, [capture], 128 + 15, ProfileConfig(), log, run_id=run)
    said = " ".join(capsys.readouterr().err.split())
    assert "killed before it handed them" not in said, said
    assert "a post-processor stopped, killed, or still at work in the background" in said, said


def _agent_at_its_exit(info: Callable[[str], object], **controller: object) -> Any:
    """npuprof's agent as its process ends (only what _finalise_at_exit reads): its log lines go to
    ``info``, its controller has ``controller``'s attributes and wraps no step function."""
    from types import SimpleNamespace

    from npuprof.agent import entry

    agent = entry.Agent.__new__(entry.Agent)
    agent.cfg = ProfileConfig()
    agent.log = SimpleNamespace(info=info)  # type: ignore[assignment]
    agent.controller = SimpleNamespace(step_function_wrapped=False, **controller)  # type: ignore[assignment]
    agent._counts_logged_in = None  # type: ignore[assignment]
    agent._hand_over_the_rest = lambda copies_s=0.0: None  # type: ignore[method-assign]
    return agent


def test_a_rank_that_made_no_optimizer_is_not_said_to_be_killed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """helper-153: torchrun, 2 ranks, rank 1 only logging the losses rank 0 sends it (no optimizer), ending
    normally: the summary said 'rank 1 recorded nothing: it ended without logging the steps it counted (by
    os._exit, or killed)'. Its agent now says at exit that it had nothing to count steps on, and the
    summary says that instead."""

    from npuprof.agent import window_plan

    logged: list[str] = []
    agent = _agent_at_its_exit(logged.append, armed=False, step=0, finish_at_exit=lambda reason, cut="": None)
    monkeypatch.setattr(window_plan, "starts_workers", lambda: False)
    monkeypatch.setenv("RANK", "1")
    agent._finalise_at_exit("training ended")
    assert logged == ["no step counted in this process: it made no optimizer"], logged

    said = _summary_of_one_capture(
        tmp_path,
        capsys,
        TWO_RANKS_READY + "2026-12-03 00:00:02 [INFO] [agent pid=7] steps counted in this process: 12\n"
        f"2026-12-03 00:00:02 [INFO] [agent pid=8] {logged[0]}\n",
    )
    assert (
        "rank 1 recorded nothing: it made no optimizer, so it counted no step; the schedule records from "
        "step 6 (pid 8)"
    ) in said, said
    assert "os._exit" not in said, said


def test_a_process_killed_before_its_first_step_is_not_said_to_have_stepped_no_optimizer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`npuprof run -- bash -c 'python train.py; echo done'`, train.py killed with kill -9 (the
    out-of-memory killer) after making its optimizer, before its first step: the job ended 0, and the reason
    was "no optimizer's step() ran in the job", with advice on --step-on. Every agent logs a line as its
    process ends (a process without a rank too); one that logged none never reached its end."""

    from npuprof.agent import window_plan

    logged: list[str] = []
    agent = _agent_at_its_exit(logged.append, armed=False, step=0, finish_at_exit=lambda reason, cut="": None)
    monkeypatch.setattr(window_plan, "starts_workers", lambda: False)
    for name in ("RANK", "LOCAL_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        monkeypatch.delenv(name, raising=False)
    agent._counts_logged_in = None  # type: ignore[assignment]
    agent._ready_in = os.getpid() + 1  # type: ignore[assignment]  # a forked child (a DataLoader worker)
    agent._finalise_at_exit("training ended")
    assert logged == [], logged  # says nothing, as before: it never said it was ready
    agent._ready_in = os.getpid()  # type: ignore[assignment]  # the process whose agent said ready
    agent._finalise_at_exit("training ended")
    assert logged == [NO_OPTIMIZER.removeprefix(AGENT)], logged  # a process without a rank ends so too

    why = why_no_capture(ProfileConfig(), 0, [READY])
    assert why.startswith("a process of the job (pid 7) never reached its exit"), why
    assert "killed by a signal" in why and "optimizer" not in why and "--step-on" not in why, why
    # torchrun's own process (it starts the workers, says so at its end) beside a worker killed so
    other = "2026-12-02 07:00:00 [INFO] [agent pid=8] "
    lines = [other + "agent ready in torchrun (rank None)", READY.replace("None", "0")]
    lines.append(other + "this process started the job's workers (torchrun): they record, not it")
    why = why_no_capture(ProfileConfig(), 1, lines)
    assert why.startswith("the job failed (exit code 1) and a process of the job (pid 7) never"), why
    # beside a process that ended normally having made no optimizer (a pool's worker ended by SIGTERM,
    # say): that one is the news
    lines = [READY, other + "agent ready in /w/pool.py (rank None)", other + NO_OPTIMIZER.removeprefix(AGENT)]
    assert "no optimizer's step() ran" in why_no_capture(ProfileConfig(), 0, lines)
    # the job's own death by a signal says it already
    why = why_no_capture(ProfileConfig(), 137, [READY], died_of=signal.SIGKILL)
    assert why == "the job was ended by SIGKILL (exit code 137) before a step was counted", why


@pytest.mark.parametrize(
    ("raised", "detail"),
    [
        (
            ValueError("bad batch at step 7\nmore"),
            "the process died of an uncaught ValueError (bad batch at step 7)",
        ),
        (KeyError("x" * 200), f"the process died of an uncaught KeyError ('{'x' * 78}…)"),
        (RuntimeError(), "the process died of an uncaught RuntimeError"),
        (None, "training ended"),  # a return, or sys.exit: the interpreter keeps no exception
    ],
)
def test_a_capture_cut_short_by_an_uncaught_exception_says_so(
    monkeypatch: pytest.MonkeyPatch, raised: BaseException | None, detail: str
) -> None:
    """A script that raised to the top inside a capture: its capture said "training ended before the
    capture's last step", as if the job had ended well; only the job's exit code told otherwise."""

    reasons: list[str] = []
    agent = _agent_at_its_exit(
        lambda line: None,
        armed=True,
        step=8,
        windows_skipped=0,
        finish_at_exit=lambda reason, cut="": reasons.append(reason + cut),
    )
    for name in ("last_exc", "last_value"):  # 3.12 keeps the first, and the second as before
        monkeypatch.setattr(sys, name, raised, raising=False)
    agent._finalise_at_exit("training ended")
    assert reasons == [f"{detail} before the capture's last step; step 8 is partial"]


def _child_ends(raise_in_run: Callable[[], None], finalise: Callable[[], None]) -> None:
    """A multiprocessing child's end as ``Process._bootstrap`` runs it: its exit finalizers (npuprof's
    ``_at_exit`` among them) called in the ``finally`` of ``run()``, what ``run()`` raised still in flight."""
    try:
        try:
            raise_in_run()
        finally:
            finalise()
    except BaseException:  # multiprocessing turns it into the child's exit code
        pass


def _spawn_wrapped(fn: Callable[[], None]) -> Callable[[], None]:
    """torch.multiprocessing.spawn's wrapper of a rank's function: an exception is caught, sent to the
    parent and the rank leaves by sys.exit(1)."""

    def wrapped() -> None:
        try:
            fn()
        except Exception:
            sys.exit(1)

    return wrapped


def _boom() -> None:
    raise RuntimeError("boom in spawn\nsecond line")


@pytest.mark.parametrize(
    ("run", "detail"),
    [
        (_spawn_wrapped(_boom), "the process exited with code 1 after raising RuntimeError (boom in spawn)"),
        (_boom, "the process died of an uncaught RuntimeError (boom in spawn)"),  # a bare Process
        (lambda: sys.exit(3), "the process exited with code 3"),
        (lambda: sys.exit("bad config"), "the process exited with code 1"),
        (_spawn_wrapped(lambda: None), "training ended"),
        (lambda: sys.exit(0), "training ended"),
    ],
    ids=["spawn-raises", "process-raises", "exit-3", "exit-text", "spawn-returns", "exit-0"],
)
def test_a_multiprocessing_childs_capture_says_what_failed_it(
    monkeypatch: pytest.MonkeyPatch, run: Callable[[], None], detail: str
) -> None:
    """mp.spawn without torchrun, rank 1 raising RuntimeError at step 4 of a capture of steps 3-5: both
    ranks' captures said "training ended before the capture's last step", as if both had ended well (the
    same job under torchrun said "the process died of an uncaught RuntimeError (boom)")."""

    reasons: list[str] = []
    agent = _agent_at_its_exit(
        lambda line: None,
        armed=True,
        step=4,
        windows_skipped=0,
        finish_at_exit=lambda reason, cut="": reasons.append(reason + cut),
    )
    for name in ("last_exc", "last_value"):  # a child keeps none: nothing reached the interpreter's top
        monkeypatch.setattr(sys, name, None, raising=False)
    _child_ends(run, lambda: agent._finalise_at_exit("training ended"))
    assert reasons == [f"{detail} before the capture's last step; step 4 is partial"]


def test_a_spawned_ranks_capture_is_finalised_where_what_failed_it_is_known(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A rank of mp.spawn (start method spawn) is finalised from atexit, once the exception is gone: the
    agent woken as the child imports the parent's main module also finalises it from multiprocessing's
    exit finalizers, run in Process._bootstrap's finally (its registry cleared by the bootstrap first)."""
    import weakref
    from multiprocessing import util as mp_util

    monkeypatch.setattr(mp_util, "_afterfork_registry", weakref.WeakValueDictionary())
    monkeypatch.setattr(sys, "orig_argv", [sys.executable, "-c", "...", "--multiprocessing-fork"])
    for name in ("last_exc", "last_value"):
        monkeypatch.setattr(sys, name, None, raising=False)
    monkeypatch.setattr("atexit.register", lambda fn: None)
    monkeypatch.setattr(os, "register_at_fork", lambda **hooks: None)
    reasons: list[str] = []
    agent = _agent_at_its_exit(
        lambda line: None,
        armed=True,
        step=4,
        windows_skipped=0,
        finish_at_exit=lambda reason, cut="": reasons.append(reason + cut),
    )
    agent._mp_after_fork = False
    # (the registry itself: each Finalize holds it as a default argument) this process's, put back after
    registry = mp_util._finalizer_registry
    kept = dict(registry)
    try:
        agent._exit_hooks()
        registry.clear()  # Process._bootstrap, as it starts
        mp_util._run_after_forkers()
        _child_ends(_spawn_wrapped(_boom), lambda: mp_util._run_finalizers(0))
    finally:
        registry.clear()
        registry.update(kept)
    assert reasons == [
        "the process exited with code 1 after raising RuntimeError (boom in spawn) before the capture's "
        "last step; step 4 is partial"
    ]


def test_a_window_that_passed_while_a_thread_took_over_is_the_reason() -> None:
    """Mine, by hand: a sanity step on the main thread, then 200 short steps in a thread, the main thread
    slow to reach join(): the thread took over at its 18th step, the window of steps 5-8 had passed
    uncounted (logged as a warning), and the summary said 'npuprof's log holds no reason it recorded
    none'."""
    took = (
        AGENT + "thread train takes over counting the steps: it stepped 18 times while the thread that "
        'counted them waited for other threads (docs/architecture.md, "Step boundaries")'
    )
    passed = AGENT.replace("[INFO]", "[WARNING]") + (
        "capture window not recorded: steps 5-8 of its window passed uncounted (thread train took over "
        "counting)"
    )
    at_exit = AGENT + "steps counted in this process: 201"
    why = why_no_capture(ProfileConfig(), 0, [READY, COUNTED, took, passed, at_exit])
    assert why == (
        "capture window not recorded: steps 5-8 of its window passed uncounted (thread train took over "
        "counting)"
    ), why


def _agent_said(pid: int, message: str) -> str:
    return f"2026-12-03 00:00:01 [INFO] [agent pid={pid}] {message}\n"


def test_a_process_without_a_rank_that_ended_before_its_second_capture_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`python train.py` (no RANK), --repeat 2, the script ending in its second warm-up: the summary
    listed its one capture and said nothing of the second (only ranked processes were counted). An
    evaluation process of the job that never stepped is still not named."""
    cfg, _first, second = _repeat_2()
    log = (
        _agent_said(7, "agent ready in train.py (rank None, run r1)")
        + _agent_said(9, "agent ready in evaluate.py (rank None, run r1)")
        + _agent_said(7, "steps counted in this process: 10")
        + _agent_said(9, "no step counted in this process: it made no optimizer")
    )
    said = _summary_of_captures(tmp_path, capsys, log, cfg, [(None, 7, [6, 8], None)])
    assert (
        "process 7 (no rank) made 1 of the 2 captures the schedule asks (--repeat 2): it counted 10 step(s); "
        f"its capture 2 records from step {second}"
    ) in said, said
    assert "process 9" not in said and "recorded nothing" not in said, said


def test_a_process_without_a_rank_is_ready_as_rank_0_and_still_read_as_one_without(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The agent's ready line of a process without a rank read "(rank None, run R)": the "rank 0" that
    --ranks counts it as (README) is said, in the form an older reader of the line parses, and the run's
    summary still names it as a process without a rank."""
    import re

    from npuprof.agent.entry import ready_line

    line = ready_line("train.py", None, "run r1")
    assert "None" not in line, line
    # the pattern of npuprof's readers before, as it was written
    older = re.compile(r"^agent ready in .* \(rank (?P<rank>[^,\s)]+)(?:, run (?P<run>\w+))?\)$")
    assert (older.match(line)["rank"], older.match(line)["run"]) == ("0", "r1"), line
    assert ready_line("train.py", 3, "run r1") == "agent ready in train.py (rank 3, run r1)"
    cfg, _first, second = _repeat_2()
    log = _agent_said(7, line) + _agent_said(7, "steps counted in this process: 10")
    said = _summary_of_captures(tmp_path, capsys, log, cfg, [(None, 7, [6, 8], None)])
    assert (
        "process 7 (no rank) made 1 of the 2 captures the schedule asks (--repeat 2): it counted 10 step(s); "
        f"its capture 2 records from step {second}"
    ) in said, said


def test_a_process_that_learnt_its_rank_after_its_agent_woke_goes_by_its_captures_rank(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """torch.multiprocessing.spawn, no RANK: each agent woke before init_process_group and said "rank None",
    and the captures' records name ranks 0 and 1. A process that made its captures is not named as one
    without a rank that recorded nothing; one that fell short is named by its rank."""
    cfg, _first, second = _repeat_2()
    log = ""
    for pid, steps in ((7, 20), (8, 10)):
        log += _agent_said(pid, "agent ready in train.py (rank None, run r1)")
        log += _agent_said(pid, f"steps counted in this process: {steps}")
    made: list[tuple[int | None, int, list[int], int | None]] = [
        (0, 7, [6, 8], None),
        (0, 7, [10, 12], None),
        (1, 8, [6, 8], None),
    ]
    said = _summary_of_captures(tmp_path, capsys, log, cfg, made)
    assert (
        "npuprof: rank 1 made 1 of the 2 captures the schedule asks (--repeat 2): it counted 10 step(s); its "
        f"capture 2 records from step {second} (pid 8)"
    ) in said, said
    assert "no rank" not in said and "rank 0" not in said, said


def test_hundreds_of_ranks_in_the_same_state_share_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """torchrun, 200 ranks, --repeat 2: 129 ranks ending after their first capture got 129 lines of the
    same words. They now share one, the ranks as ranges; the odd one (no capture) keeps its own, and the
    ranks that made both captures get none."""
    cfg, first, second = _repeat_2()
    short = [*range(128), 130]
    log, made = "", []
    for rank in range(200):
        pid = 1000 + rank
        log += _agent_said(pid, f"agent ready in train.py (rank {rank}, run r1)")
        steps = 10 if rank in short else 3 if rank == 128 else 14
        log += _agent_said(pid, f"steps counted in this process: {steps + rank % 2}")
        if rank != 128:
            made.append((rank, pid, [6, 8], None))
        if rank not in short and rank != 128:
            made.append((rank, pid, [10, 12], None))
    said = _summary_of_captures(tmp_path, capsys, log, cfg, made)
    pids = ", ".join(str(1000 + rank) for rank in short[:8])
    assert (
        "npuprof: ranks 0-127, 130 (129 of them) made 1 of the 2 captures the schedule asks (--repeat 2): "
        f"each counted 10 to 11 step(s); their capture 2 records from step {second} (pids {pids}, ...)"
    ) in said, said
    assert (
        f"npuprof: rank 128 recorded nothing: it counted 3 step(s); the schedule records from step {first} "
        "(pid 1128)"
    ) in said, said
    assert said.count("npuprof: rank") == 2, said


def test_a_ranks_captures_are_counted_in_each_attempt_torchrun_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """torchrun --max-restarts 1, --repeat 2: both ranks killed after their first capture, restarted, and
    ending again after one: each rank had 2 captures over the two attempts, and the summary said nothing
    short. Each attempt's ranks are counted apart now, the attempt named, from the agents' ready lines."""
    from npuprof.agent.entry import _attempt

    cfg, _first, second = _repeat_2()
    log, made = "", []
    for attempt, pids in ((0, (7, 8)), (1, (9, 10))):
        monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", str(attempt))
        for rank, pid in enumerate(pids):
            log += _agent_said(pid, f"agent ready in train.py (rank {rank}, run r1{_attempt()})")
            if attempt:
                log += _agent_said(pid, "steps counted in this process: 9")
            made.append((rank, pid, [6, 8], attempt))
    said = _summary_of_captures(tmp_path, capsys, log, cfg, made)
    assert (
        "ranks 0-1 (2 of them) in attempt 0 made 1 of the 2 captures the schedule asks (--repeat 2): each "
        "ended without logging the steps it counted (by os._exit, or killed); their capture 2 records from "
        f"step {second} (pids 7, 8)"
    ) in said, said
    assert (
        "ranks 0-1 (2 of them) in attempt 1 made 1 of the 2 captures the schedule asks (--repeat 2): each "
        f"counted 9 step(s); their capture 2 records from step {second} (pids 9, 10)"
    ) in said, said
    assert said.index("in attempt 0 made") < said.index("in attempt 1 made"), said


def test_a_rank_restarted_with_its_nodes_count_unchanged_is_counted_in_each_of_its_processes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two nodes, --repeat 2: node A's worker (rank 0) failed after its 2 captures and came back as attempt
    1; node B's (rank 1), stopped and started again, came back as attempt 0 (torchrun counts per node) and
    ended after 1 capture. Rank 1 in attempt 0 had 3 captures over its two processes, and the summary said
    nothing short; each of its processes is counted on its own now."""
    from npuprof.agent.entry import _attempt

    cfg, _first, second = _repeat_2()
    log, made = "", []
    for rank, pid, attempt, captures, steps in (
        (0, 7, 0, 2, 30),
        (1, 8, 0, 2, 30),
        (0, 9, 1, 2, 14),
        (1, 10, 0, 1, 9),
    ):
        monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", str(attempt))
        log += _agent_said(pid, f"agent ready in train.py (rank {rank}, run r1{_attempt()})")
        log += _agent_said(pid, f"steps counted in this process: {steps}")
        made += [(rank, pid, [6, 8], attempt), (rank, pid, [10, 12], attempt)][:captures]
    said = _summary_of_captures(tmp_path, capsys, log, cfg, made)
    assert (
        "npuprof: rank 1 in attempt 0 (one of its 2 processes of that count: torchrun counts each node's "
        "restarts, and restarts a node's workers with its count unchanged when another node's fail) made 1 "
        "of the 2 captures the schedule asks (--repeat 2): it counted 9 step(s); its capture 2 records from "
        f"step {second} (pid 10)"
    ) in said, said
    assert said.count("npuprof: rank") == 1, said


def test_a_restart_that_captured_nothing_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """torchrun --max-restarts 1: the first attempt made its captures, the second was killed before its
    first: the summary said nothing of a restart (no capture was of attempt 1) and nothing short (each
    rank had its capture). It now says the job restarted, and what the second attempt's ranks made."""
    from npuprof.agent.entry import _attempt

    cfg, first, _second = _repeat_2()
    cfg.schedule.repeat = 1
    log = ""
    for attempt, pids in ((0, (7, 8)), (1, (9, 10))):
        monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", str(attempt))
        for rank, pid in enumerate(pids):
            log += _agent_said(pid, f"agent ready in train.py (rank {rank}, run r1{_attempt()})")
    made: list[tuple[int | None, int, list[int], int | None]] = [(0, 7, [6, 8], 0), (1, 8, [6, 8], 0)]
    said = _summary_of_captures(tmp_path, capsys, log, cfg, made)
    assert (
        "npuprof: torchrun restarted the job 1 time(s): these captures are all of attempt 0 "
        "(TORCHELASTIC_RESTART_COUNT; 0: the first)"
    ) in said, said
    assert (
        "ranks 0-1 (2 of them) in attempt 1 recorded nothing: each ended without logging the steps it "
        f"counted (by os._exit, or killed); the schedule records from step {first} (pids 9, 10)"
    ) in said, said


def test_a_multi_line_program_is_one_record_of_the_log_and_none_of_its_lines_is_read_as_npuprofs(
    tmp_path: Path,
) -> None:
    """`npuprof run -- python -c PROGRAM`: "starts: COMMAND" wrote the program as it is, one record over
    several lines, and a line of it like the bootstrap's was reported as the agent failing to start."""
    from conftest import npuprof

    from npuprof.results.logfile import log_records

    planted = "[ERROR] [bootstrap pid=1] agent failed to start, training goes on without profiling: planted"
    # a line as a record of npuprof.log is written, its time first (a program that reads the log)
    timed = "2026-12-02 07:00:00 " + planted.replace("planted", "timed")
    program = f"import sys\n# {planted}\n# {timed}\nsys.exit(0)"
    done = npuprof("run", "-o", str(tmp_path / "r"), "--", sys.executable, "-c", program)
    assert done.returncode == 0, done.stderr
    assert "planted" not in done.stderr and "timed" not in done.stderr, done.stderr
    log = (tmp_path / "r" / "npuprof.log").read_text()
    started = [record for record in log_records(log) if "planted" in record or "timed" in record]
    assert len(started) == 1 and " starts: " in started[0] and "sys.exit(0)" in started[0], log
    # a shell takes the command back as it was run
    command = started[0].split(" starts: ", 1)[1]
    echoed = subprocess.run(["bash", "-c", f"printf '%s\\0' {command}"], capture_output=True, check=True)
    assert echoed.stdout.split(b"\0")[:-1] == [os.fsencode(sys.executable), b"-c", program.encode()]


def test_a_script_whose_path_the_log_quotes_is_named_as_main() -> None:
    """The start line quotes the command as a shell would take it: a script's path with a blank is one
    word there, read back whole."""
    started = "2026-12-02 07:00:00 [INFO] [launcher pid=6] run abc starts: python '/my job/pkg/train.py' -v"
    why = " ".join(why_no_capture(ProfileConfig(step_on="pkg.train:step"), 0, [started]).split())
    assert "the job runs /my job/pkg/train.py, the file of pkg.train, as its script" in why, why


@pytest.mark.parametrize(
    ("step_on", "wake"),
    [
        ("__main__:evaluate", "the script's definition of evaluate"),
        ("__main__:Evaluator.run", "the script's definition of Evaluator"),
        ("mypkg.infer:Engine.generate", "the import of mypkg.infer"),
    ],
)
def test_a_delay_under_step_on_names_where_its_clock_may_start(step_on: str, wake: str) -> None:
    """--step-on wakes npuprof's agent where the function is defined (or its module imported), before
    `import torch` when that comes first, and the window's clock starts there (README, "Time windows"): a
    script sleeping 1 s before its `def evaluate`, that never imports torch, was told 'the clock starts at
    `import torch`; the process that ran longest ended 1.0 s after it'."""
    due = "--delay: the process ended before its window began: due 5 s after the agent woke, it ended "
    lines = [READY, AGENT + due + "1.0 s after"]
    why = why_no_capture(ProfileConfig(delay=5.0, step_on=step_on), 0, lines)
    assert f"(the clock starts at `import torch`, or at {wake} when that comes first; " in why, why
    assert "the process that ran longest ended 1.0 s after it" in why, why


def test_a_delay_already_under_the_jobs_time_is_not_advised_again() -> None:
    """A job without optimizer steps that ran 0.8 s after `import torch`, most of it in the import, with
    --delay 0: its window, due at once, could not open before the job ended (it opens outside any import),
    and the last line advised "a --delay under that opens it" of a --delay 0 that had not."""
    due = "--delay: the process ended before its window began: due 0 s after the agent woke, it ended "
    why = why_no_capture(ProfileConfig(delay=0.0), 0, [READY, NO_OPTIMIZER, AGENT + due + "0.8 s after"])
    assert why.startswith("the job ended before the --delay window began"), why
    assert "a --delay under that opens it" not in why, why
    assert "ended 0.8 s after it, past the window's start, before the window could open" in why, why
    assert "--step-on MODULE:QUALNAME" in why, why
    # a --delay longer than the job keeps its advice
    longer = why_no_capture(ProfileConfig(delay=2.0), 0, [READY, NO_OPTIMIZER, AGENT + due + "0.8 s after"])
    assert "ended 0.8 s after it: a --delay under that opens it" in longer, longer
