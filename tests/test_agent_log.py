"""The agent's warnings: in the log once per process (again when changed), once per run on stderr."""

from __future__ import annotations

from pathlib import Path

import pytest

from npuprof.agent.log import AgentLog, get_log, never_raise, set_log


def test_a_warning_is_shown_once_per_run_across_processes(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    log_path = tmp_path / "npuprof.log"
    rank0 = AgentLog(str(log_path), "agent", "run1")
    rank1 = AgentLog(str(log_path), "agent", "run1")  # another process of the same run
    rank0.warn_once("k", "flag X ignored")
    rank1.warn_once("k", "flag X ignored")
    rank0.warn_once("k", "flag X ignored")
    assert capsys.readouterr().err.count("flag X ignored") == 1
    # in the log once per process: rank 0 saying it again added a copy of its own line
    assert log_path.read_text().count("flag X ignored") == 2
    rank0.warn_once("k", "flag Y ignored")  # another warning of the key: logged
    assert log_path.read_text().count("flag Y ignored") == 1
    AgentLog(str(log_path), "agent", "run2").warn_once("k", "flag X ignored")  # a later run says it again
    assert capsys.readouterr().err.count("flag X ignored") == 1


def test_a_warning_only_hidden_ranks_met_is_repeated_at_the_runs_end(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # helper-182: with torchrun's --redirects 3 alone every rank's stderr goes to its log file, and a
    # warning was shown there only: the console never said it
    from npuprof import runner

    log_path = str(tmp_path / "npuprof.log")
    rank_logs = tmp_path / "torchelastic" / "attempt_0" / "0"  # torchrun's files of a worker
    rank_logs.mkdir(parents=True)
    (rank_logs / "stderr.log").write_text("")
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(rank_logs / "error.json"))
    rank0 = AgentLog(log_path, "agent", "run1", output_hidden=True)
    rank1 = AgentLog(log_path, "agent", "run1", output_hidden=True)
    for rank in (rank0, rank1):
        rank.warn_once("level", "ignored on the torch-cpu backend: --level 1")
        rank.warn_once("other", "shown by a rank whose output is seen")
    AgentLog(log_path, "agent", "run1").warn_once("other", "shown by a rank whose output is seen")
    monkeypatch.delenv("TORCHELASTIC_ERROR_FILE")  # a process torchrun names no file for
    rank1.warn_once("late", "a hidden rank's second warning")
    assert capsys.readouterr().err.count("npuprof: ignored on the torch-cpu backend") == 2  # their own
    runner._repeat_hidden_warnings(tmp_path, "run1")
    shown = capsys.readouterr().err.splitlines()
    assert len(shown) == 2, shown  # each once, in the order met; not the one a shown rank showed
    assert shown[0].startswith("npuprof: ignored on the torch-cpu backend: --level 1 (met by ranks whose")
    assert shown[0].endswith(f": {rank_logs / 'stderr.log'})")  # where the first rank showed it
    assert shown[1].startswith("npuprof: a hidden rank's second warning (met by ranks whose")
    assert shown[1].endswith(f": {log_path})")  # torchrun kept no file of it (--local-ranks-filter alone)
    runner._repeat_hidden_warnings(tmp_path, "run2")  # another run's: none
    assert capsys.readouterr().err == ""


@pytest.fixture
def process_log():
    """set_log() changes a process-wide log: put the previous one back afterwards."""
    previous = get_log()
    yield set_log
    set_log(previous)


def test_never_raise_logs_reports_and_returns_none(
    tmp_path: Path, capsys: pytest.CaptureFixture, process_log
) -> None:
    log = AgentLog(str(tmp_path / "npuprof.log"), "agent", "r")
    process_log(log)
    switched_off = []

    @never_raise("the step hook", on_error=lambda: switched_off.append(True))
    def hook() -> int:
        raise RuntimeError("boom")

    assert hook() is None and hook() is None
    assert switched_off == [True, True]
    assert capsys.readouterr().err.count("the step hook failed") == 1
    assert "RuntimeError: boom" in (tmp_path / "npuprof.log").read_text()


def test_a_failure_the_log_cannot_take_does_not_point_at_the_log(
    tmp_path: Path, capsys: pytest.CaptureFixture, process_log
) -> None:
    """helper-100: with no descriptor left (or no room), "details in .../npuprof.log" pointed at a log that
    held none of them."""
    (tmp_path / "npuprof.log").mkdir()  # a log that cannot be appended to
    log = AgentLog(str(tmp_path / "npuprof.log"), "agent", "r")
    process_log(log)

    @never_raise("starting the post-processor")
    def start() -> None:
        raise OSError(24, "Too many open files")

    start()
    (said,) = [line for line in capsys.readouterr().err.splitlines() if "starting the post-processor" in line]
    assert said.endswith("npuprof.log could not take the details"), said


def test_the_log_rotates_into_one_backup(tmp_path: Path) -> None:
    from npuprof.results import logfile

    path = tmp_path / "npuprof.log"
    line = "x" * 1000
    lines = logfile.ROTATE_BYTES // 1000 * 3  # three logs' worth
    for i in range(lines):
        assert logfile.log(path, "INFO", "test", f"{i} {line}")
    backup = tmp_path / "npuprof.log.1"
    assert path.stat().st_size <= logfile.ROTATE_BYTES + 2000
    assert backup.stat().st_size <= logfile.ROTATE_BYTES + 2000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["npuprof.log", "npuprof.log.1"]
    last = path.read_text().splitlines()[-1]
    assert f"{lines - 1} {line}" in last and "[INFO] [test pid=" in last


def test_the_log_never_follows_a_link_nor_blocks_on_a_fifo(tmp_path: Path) -> None:
    import os

    from npuprof.results import logfile

    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    (tmp_path / "linked.log").symlink_to(victim)
    os.mkfifo(tmp_path / "fifo.log")
    assert not logfile.log(tmp_path / "linked.log", "INFO", "test", "hello")
    assert not logfile.log(tmp_path / "fifo.log", "INFO", "test", "hello")  # returns at once, no reader
    assert victim.read_text() == "keep\n"
    AgentLog(str(tmp_path / "linked.log"), "agent").warning("hello")
    assert victim.read_text() == "keep\n"


def test_the_log_is_not_written_into_a_fifo_that_has_a_reader(tmp_path: Path) -> None:
    """A FIFO planted under the log's name with a process reading it: opening it for writing succeeds
    (without a reader it fails at once), but it is no regular file, so nothing is written there."""
    import os

    from npuprof.results import logfile

    fifo = tmp_path / "npuprof.log"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        assert not logfile.log(fifo, "INFO", "test", "hello")
        assert os.read(reader, 100) == b""  # its writer end closed, nothing in it
    finally:
        os.close(reader)


def test_a_log_another_process_rotated_first_is_not_rotated_again(tmp_path: Path) -> None:
    """Two writers found the log full; the first moved it to .1 and started a new one: the second's rotation,
    of the file it opened (now .1), must not move the new log over the full backup (its lines lost)."""
    import os

    from npuprof.results import logfile

    path = tmp_path / "npuprof.log"
    path.write_text("full\n")
    opened = os.stat(path)  # the second writer's view of the log it opened
    os.rename(path, tmp_path / "npuprof.log.1")  # the first writer's rotation
    path.write_text("new\n")  # and the next line, in a new log
    logfile._rotate(str(path), opened)
    assert (path.read_text(), (tmp_path / "npuprof.log.1").read_text()) == ("new\n", "full\n")


def test_warning_marks_are_not_written_through_a_planted_link(tmp_path: Path, capsys) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / ".npuprof_reported").symlink_to(elsewhere)
    AgentLog(str(out / "npuprof.log"), "agent", "run1").warn_once("k", "disk nearly full")
    assert "disk nearly full" in capsys.readouterr().err
    assert list(elsewhere.iterdir()) == []


def test_a_line_the_disk_cut_short_is_taken_back(tmp_path: Path) -> None:
    """helper-117: a disk that filled inside a line left it cut ("... [Errno 28] No"), and the next writer's
    line was glued to it, which the run's summary then quoted. A real tmpfs of two pages, written until
    full: every line left in the log is whole."""
    from conftest import small_tmpfs

    from npuprof.results import logfile

    with small_tmpfs(tmp_path / "tmpfs", "8k") as mount:
        path = mount / "npuprof.log"
        message = "capture at step {} skipped: [Errno 28] No space left on device; training goes on"
        results = [logfile.log(path, "WARNING", "agent", message.format(n)) for n in range(200)]
        assert results[0] and not results[-1]
        kept = results.index(False)
        assert not any(results[kept:])  # once full, full
        # an agent's log tries again through the descriptor it keeps (helper-118: that write tore the line)
        agent_log = AgentLog(str(path), "agent", "r")
        agent_log.keep_a_descriptor()
        assert not agent_log.warning("a line that does not fit either, " * 3)
        text = path.read_text()
        assert text.endswith("\n") and len(text.splitlines()) == kept
        assert all(line.endswith(message.format(n)) for n, line in enumerate(text.splitlines()))


def test_a_line_cut_short_is_taken_back_only_while_it_ends_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bytes of a line cut short are removed while they end the file; a line another process appended
    after them is never lost (ours then stays cut)."""
    import os

    from npuprof.results import logfile

    path = tmp_path / "npuprof.log"
    assert logfile.log(path, "INFO", "agent", "first")
    real_write = os.write
    other: list[bytes] = []

    def cut_short(fd: int, data: bytes) -> int:
        written = real_write(fd, data[:10])
        if other:  # another process's line lands right after ours
            with open(path, "ab") as handle:
                handle.write(other[0])
        return written

    monkeypatch.setattr(logfile.os, "write", cut_short)
    assert not logfile.log(path, "INFO", "agent", "second")
    assert path.read_text().splitlines() == [path.read_text().splitlines()[0]]
    assert path.read_text().endswith("first\n")
    other.append(b"a line of another process\n")
    assert not logfile.log(path, "INFO", "agent", "third")
    assert path.read_text().endswith("a line of another process\n")


def _half_of_each_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """os.write as a disk that fills inside the data: half of it is written."""
    import os

    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, bytes(data)[: len(data) // 2]))


def test_a_dynamic_log_line_the_disk_cut_short_is_taken_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A --dynamic log's line cut short by a full disk stayed, and the next line ran into it: npuprof status
    read the two as one (the capture's end line lost). A line is whole or absent."""
    from npuprof.agent.dynamic_log import append, format_line, parse_line

    path = str(tmp_path / "dp_vm_7_rank_0.log")
    first = format_line("INFO", "capture started at step 3 into /o/d", step=3)
    second = format_line("INFO", "capture 1 of steps 3-4 complete in /o/d", step=5)
    with monkeypatch.context() as patched:
        _half_of_each_write(patched)
        assert not append(path, first)
    assert append(path, second)
    lines = Path(path).read_text().splitlines(keepends=True)
    assert lines == [second], lines
    assert parse_line(lines[0]) is not None


def test_a_dynamic_log_on_a_full_tmpfs_holds_whole_lines_only(tmp_path: Path) -> None:
    """The same on a real tmpfs of two pages, written until full."""
    from conftest import small_tmpfs

    from npuprof.agent.dynamic_log import append, format_line

    with small_tmpfs(tmp_path / "tmpfs", "8k") as mount:
        path = str(mount / "dp_vm_7_rank_0.log")
        lines = [format_line("INFO", f"at step {n} " + "x" * 90, step=n) for n in range(200)]
        results = [append(path, line) for line in lines]
        assert results[0] and not results[-1]
        kept = results.index(False)
        assert Path(path).read_text() == "".join(lines[:kept])


def test_a_note_of_a_capture_root_the_disk_cut_short_is_taken_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """.npuprof_elsewhere/'s line of a --dynamic prof_dir outside -o, cut short by a full disk, ran into the
    next one: the run's summary and analyse then looked for its captures in a directory joined of both."""
    from npuprof.results import layout

    with monkeypatch.context() as patched:
        _half_of_each_write(patched)
        layout.note_capture_root(tmp_path, "r1", Path("/data/first/captures"))
    layout.note_capture_root(tmp_path, "r1", Path("/data/second"))
    assert layout.capture_roots(tmp_path, "r1") == [Path("/data/second")]


def test_records_a_torn_line_ran_into_are_read_apart(tmp_path: Path) -> None:
    """A line a full disk cut short that could not be taken back (another process had appended after it)
    joins the next writer's: the run's summary and npuprof status read both as one, the second's record
    lost. Each is read on its own."""
    from npuprof.cli.status import _processes
    from npuprof.reports.run_summary import run_log_lines

    log = tmp_path / "npuprof.log"
    log.write_text(
        "2026-12-06 10:00:00 [INFO] [launcher pid=1 run=r1] run r1 starts: python t.py\n"
        "2026-12-06 10:00:01 [WARNING] [agent pid=2 run=r1] capture at step 4 skipped: [Errno 28] No sp"
        "2026-12-06 10:00:02 [INFO] [agent pid=3 run=r1] steps counted in this process: 9\n"
    )
    lines = run_log_lines(log, "r1")
    assert lines[-1] == "2026-12-06 10:00:02 [INFO] [agent pid=3 run=r1] steps counted in this process: 9"
    assert lines[-2].endswith("No sp"), lines
    dynamic = tmp_path / "log"
    dynamic.mkdir()
    (dynamic / "dp_elsewhere_7_rank_0.log").write_text(
        "2026-12-06 10:00:00,000 [INFO] [7] npuprof.dynamic: [step 3] capture started at step 3 into /o"
        "2026-12-06 10:00:01,000 [INFO] [7] npuprof.dynamic: [step 5] capture 1 of steps 3-4 complete in "
        "/o/d\n"
    )
    (process,) = _processes(dynamic)
    assert process["captures"] == [{"steps": "3-4", "status": "complete", "directory": "/o/d"}]
    assert process["last_step"] == 5
    # the lines as written since helper-256, the writer's UTC offset after the time
    (dynamic / "dp_elsewhere_7_rank_0.log").write_text(
        "2026-12-06 10:00:00,000 +0530 [INFO] [7] npuprof.dynamic: [step 3] capture started at step 3 into /o"
        "2026-12-06 10:00:01,000 +0530 [INFO] [7] npuprof.dynamic: [step 6] capture 1 of steps 3-5 complete "
        "in /o/e\n"
    )
    (process,) = _processes(dynamic)
    assert process["captures"] == [{"steps": "3-5", "status": "complete", "directory": "/o/e"}]
    assert process["last_step"] == 6
