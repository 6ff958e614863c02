"""Atomic writes never fail on text that came from bytes that were not UTF-8 (a path, a command line), and
never leave a partial file."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _forked_cli import npuprof  # report commands forked from a process that imported them: see its doc
from analyse_support.handmade import cpu_trace, write_rank_dir
from conftest import clean_env

from npuprof.results import atomic

NOT_UTF8 = os.fsdecode(b"/data/run-\xff\xfe")  # as Python reads such bytes: lone surrogates


def test_json_with_lone_surrogates_is_the_same_value_in_valid_utf8(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    atomic.write_json(path, {"output": NOT_UTF8, "team": "性能"})
    data = path.read_bytes()
    data.decode("utf-8")  # valid UTF-8
    value = json.loads(data)
    assert value == {"output": NOT_UTF8, "team": "性能"}
    assert os.fsencode(value["output"]) == b"/data/run-\xff\xfe"


def test_plain_json_stays_readable_text(tmp_path: Path) -> None:
    path = tmp_path / "info.json"
    atomic.write_json(path, {"team": "性能"})
    assert path.read_text(encoding="utf-8") == '{\n    "team": "性能"\n}\n'


def test_text_with_lone_surrogates_gets_its_original_bytes(tmp_path: Path) -> None:
    path = tmp_path / "table.csv"
    atomic.write_text(path, f"path\n{NOT_UTF8}\n")
    assert path.read_bytes() == b"path\n/data/run-\xff\xfe\n"


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    atomic.write_json(path, {"old": True})
    with pytest.raises(TypeError), atomic.atomic_writer(path, "w") as handle:
        handle.write("{")
        raise TypeError("boom")
    assert json.loads(path.read_text()) == {"old": True}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["record.json"]


def test_a_fifo_named_as_the_file_is_not_replaced(tmp_path: Path) -> None:
    """The rename would replace a device or FIFO given as an output (as root, -o /dev/null replaced the
    system's /dev/null): refused, the node left as it was, no temporary file left."""
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        atomic.write_json(fifo, {"a": 1})
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


_WRITER = """
import sys, time
from npuprof.results import atomic
with atomic.atomic_writer(sys.argv[1], "wb") as handle:
    handle.write(b"x" * 65536)
    handle.flush()
    print("writing", flush=True)
    time.sleep(600)
"""


def _writer_killed_while_writing(target: Path, kill: bool = True) -> tuple[subprocess.Popen, Path]:
    """A real process inside ``atomic_writer(target)``; kill -9'ed there when ``kill``. Its temporary file."""
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(target)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "writing\n"
    (temp,) = [p for p in target.parent.iterdir() if p.name.startswith(f".{target.name}.")]
    if kill:
        proc.kill()
        proc.wait()
    return proc, temp


def test_analyse_removes_what_a_writer_killed_mid_write_left_and_nothing_else(tmp_path: Path) -> None:
    """kill -9 of a post-processor while it gzipped a trace left its partial .gz under a hidden name for
    ever; `npuprof analyse` of the rank dir now removes it once it has been idle a minute and its writer is
    gone. A live writer's temporary file, a dead one's written to seconds ago and the user's own hidden
    files stay."""
    rank_dir = write_rank_dir(tmp_path, cpu_trace())
    old = time.time() - 120
    _proc, stale = _writer_killed_while_writing(rank_dir / "w.pt.trace.json.gz")
    os.utime(stale, (old, old))
    _proc, recent = _writer_killed_while_writing(rank_dir / "r.pt.trace.json.gz")
    alive, live = _writer_killed_while_writing(rank_dir / "l.pt.trace.json.gz", kill=False)
    try:
        os.utime(live, (old, old))
        own = rank_dir / ".mine.123-notours.tmp"
        # hex after a dead pid, but not the 12 digits atomic_writer's names carry
        own_hex = rank_dir / f".notes.{_proc.pid}-cafe.tmp"
        for path in (own, own_hex):
            path.write_text("the user's")
            os.utime(path, (old, old))
        result = npuprof("analyse", str(rank_dir), env=clean_env())
        assert result.returncode == 0, result.stderr
        assert not stale.exists()
        assert recent.exists() and live.exists() and own.exists() and own_hex.exists()
    finally:
        alive.kill()
        alive.wait()


def test_a_parse_that_takes_the_lock_leaves_a_live_parses_files_alone(tmp_path: Path) -> None:
    """helper-139: a parse started while another held the rank dir's lock (an `analyse` beside the run's
    post-processor) outlives it; the next to take the lock (`analyse --force`) deleted every hidden
    temporary file there, the live parse's too, whose rename then failed ("No such file"). Only a dead
    parse's are deleted now (at once: the lock says no parse of this host runs there but live ones)."""
    rank_dir = write_rank_dir(tmp_path, cpu_trace())
    assert npuprof("analyse", str(rank_dir), env=clean_env()).returncode == 0
    tables = rank_dir / "ASCEND_PROFILER_OUTPUT"
    _proc, dead = _writer_killed_while_writing(tables / "op_statistic.csv")
    alive, live = _writer_killed_while_writing(tables / "kernel_details.csv", kill=False)
    try:
        result = npuprof("analyse", str(rank_dir), "--force", env=clean_env())
        assert result.returncode == 0, result.stderr
        assert live.exists() and not dead.exists()
    finally:
        alive.kill()
        alive.wait()


def test_a_dead_parses_files_under_a_pid_another_process_took_since_are_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A parse killed -9 left its temporary files (gigabytes: trace_view.json's) under its pid; a process
    started since under that pid (a container's pids start again at 1) kept them as "a live parse's" as long
    as it lived. A process that started after the file last changed is not its writer: they are deleted; the
    files of a writer that started before them stay."""
    from npuprof.analysis import parse
    from npuprof.results import layout

    tables = tmp_path / "ASCEND_PROFILER_OUTPUT"
    tables.mkdir()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        pid = other.pid
        left = [
            tables / f".trace_view.json.{pid}-0123456789ab.tmp",
            tables / f".trace_view.json.{pid}-a0b1c2d3e4f5.old",
        ]
        for path in left:
            path.write_bytes(b"[")
        started = layout.process_start_time(pid)
        assert started is not None and started <= time.time()
        parse.remove_leftovers(tables)
        assert all(path.exists() for path in left)  # its writer's pid, started before them: alive
        real = layout.process_start_time
        monkeypatch.setattr(
            layout, "process_start_time", lambda p="self": time.time() + 60 if p == pid else real(p)
        )
        parse.remove_leftovers(tables)
        assert not any(path.exists() for path in left)
    finally:
        other.kill()
        other.wait()


def test_kinetos_temporary_file_of_a_killed_export_is_removed_too(tmp_path: Path) -> None:
    """kill -9 while Kineto wrote the raw trace left `.NAME.tmp.tmp` (gigabytes on a real job) for ever:
    npuprof's export name carries its pid now, and Kineto's own temporary file of it is told by it."""
    import subprocess
    import sys

    from npuprof.agent.backends import torch_backend
    from npuprof.results import atomic

    rank_dir = write_rank_dir(tmp_path, cpu_trace())
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead = int(gone.stdout)
    ours = atomic.temp_name(rank_dir / "w.pt.trace.json")
    assert atomic.writer_pid(ours.name) == os.getpid()
    left = rank_dir / f".w.pt.trace.json.{dead}-0123456789ab.tmp.tmp"
    left.write_bytes(b'{"traceEvents": [')
    old = time.time() - 120
    os.utime(left, (old, old))
    given: list[str] = []

    class Prof:  # torch's export, as far as the name it is given
        def export_chrome_trace(self, path: str) -> None:
            given.append(path)
            Path(path).write_text('{"traceEvents": []}')

    torch_backend.TorchBackend(use_cuda=False).export_raw(Prof(), rank_dir, "w")
    assert atomic.writer_pid(Path(given[0]).name) == os.getpid()
    assert atomic.writer_pid(Path(given[0] + ".tmp").name) == os.getpid()  # Kineto's own temporary file
    result = npuprof("analyse", str(rank_dir), env=clean_env())
    assert result.returncode == 0, result.stderr
    assert not left.exists()


def test_a_bare_traces_failed_parse_leaves_the_tables_of_one_at_work_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two analyses of one bare trace at once (helper-139): the one that failed (a full disk) deleted every
    table in <trace>.npuprof/, those the other was writing too; a parse that has not the folder to itself
    (another holds its lock, as rank dirs' parses do) leaves them."""
    import errno
    import fcntl

    from npuprof.analysis import report

    trace = tmp_path / "trace.json"
    trace.write_text('{"traceEvents": []}')
    tables = tmp_path / f"trace.json{report.BARE_SUFFIX}"
    tables.mkdir()
    (tables / "kernel_details.csv").write_text("Name\n")  # the other parse's, written a moment ago

    def full_disk(_trace: Path, out_dir: Path, *_args: object) -> list[str]:
        (out_dir / "step_trace_time.csv").write_text("Step\n")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(report, "write_outputs", full_disk)
    fd = os.open(tables, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the other parse, at work
        outcome, out_dir = report._parse_bare(trace, force=True, workers=1)
    finally:
        os.close(fd)
    assert outcome.status == "failed" and out_dir == tables
    assert (tables / "kernel_details.csv").exists()
    # alone, the same failure leaves no set short of some tables
    outcome, _ = report._parse_bare(trace, force=True, workers=1)
    assert outcome.status == "failed"
    assert not [p.name for p in tables.glob("*.csv")]


def test_the_earlier_tables_a_killed_re_parse_kept_aside_are_put_back(tmp_path: Path) -> None:
    """helper-216: `analyse --force` killed -9 mid-way keeps the earlier complete set as hard links
    (.NAME.PID-HEX12.old) beside a half-written new one, analyse.done gone; the next parse deleted those
    links as the dead parse's leftovers, so when it failed too (the disk still full, the trace damaged
    since) nothing complete was left. The dead parse's set is put back first, and then kept as ever."""
    from npuprof.analysis import parse

    rank_dir = write_rank_dir(tmp_path, cpu_trace())
    assert parse.parse_rank_dir(rank_dir).status == "parsed"
    tables = rank_dir / "ASCEND_PROFILER_OUTPUT"

    def stamps() -> dict[str, tuple[int, int, bytes]]:
        return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes()) for p in tables.iterdir()}

    earlier = stamps()
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    tag = f"{int(gone.stdout)}-0123456789ab"  # the killed parse's
    for name in earlier:
        os.link(tables / name, tables / f".{name}.{tag}.old")
    (tables / "analyse.done").unlink()
    (tables / "trace_view.json").unlink()  # its new one not written yet
    atomic.write_text(tables / "kernel_details.csv", "Name\n")  # its new one
    trace = rank_dir / "host.1.pt.trace.json"
    text = trace.read_bytes()
    trace.write_bytes(text[: len(text) // 2] + b"@@@{{{" + text[len(text) // 2 + 6 :])  # damaged since
    outcome = parse.parse_rank_dir(rank_dir)
    assert not outcome.ok and outcome.kept_earlier, outcome
    assert stamps() == earlier  # as before the killed parse, and no link of it left


def test_a_parse_whose_tables_another_failed_parse_deleted_is_not_marked_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """helper-216: two parses of one folder at once (an analyse beside the run's post-processor, or two
    analyses): the one with the folder to itself failed (a full disk) and deleted every table there, those
    the other had written too; the other wrote the rest and analyse.done, and a set short of some tables
    looked parsed. It fails instead, without analyse.done, and says why."""
    from npuprof.analysis import parse

    rank_dir = write_rank_dir(tmp_path, cpu_trace())
    tables = rank_dir / "ASCEND_PROFILER_OUTPUT"

    def a_failing_parse(out_dir: Path, written: list[str]) -> None:
        (out_dir / "kernel_details.csv").unlink()  # the other parse's drop_tables

    outcome = _parsed_beside_another(
        monkeypatch, parse, tables, a_failing_parse, lambda: parse.parse_rank_dir(rank_dir)
    )
    assert outcome.status == "failed" and "deleted meanwhile by another parse" in outcome.reason, outcome
    assert str(tables / "kernel_details.csv") in outcome.reason, outcome.reason
    assert not (tables / "analyse.done").exists()


def test_a_parse_whose_tables_another_parse_replaced_whole_says_parsed_not_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parse beside it that had the folder to itself set this one's tables aside and wrote a complete
    set of its own, analyse.done last: the capture was said "failed: deleted meanwhile by another parse
    ... that failed", though that parse had parsed it. It is said parsed by another process, its tables
    read as that parse left them."""
    from npuprof.analysis import parse

    rank_dir = write_rank_dir(tmp_path, cpu_trace())
    tables = rank_dir / "ASCEND_PROFILER_OUTPUT"
    outcome = _parsed_beside_another(
        monkeypatch, parse, tables, _one_that_ended_well, lambda: parse.parse_rank_dir(rank_dir)
    )
    assert outcome.ok and outcome.status == "cached", outcome
    assert "parsed meanwhile by another process" in outcome.reason, outcome.reason
    assert "failed" not in outcome.reason, outcome.reason
    assert (tables / "analyse.done").read_text() == "the other parse's\n"  # its analyse.done stands


def test_a_bare_traces_parse_whose_tables_another_parse_replaced_whole_says_parsed_not_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same race for a bare trace's tables (``<trace>.npuprof/``): its parse was said "failed", and
    the error, an OSError, was taken for the folder's, so the tables were made again in scratch."""
    from npuprof.analysis import report

    trace = tmp_path / "t.pt.trace.json"
    trace.write_text(json.dumps(cpu_trace()))
    tables = tmp_path / ("t.pt.trace.json" + report.BARE_SUFFIX)
    outcome, out_dir = _parsed_beside_another(
        monkeypatch, report, tables, _one_that_ended_well, lambda: report._parse_bare(trace, False, 1)
    )
    assert outcome.status == "cached" and out_dir == tables, (outcome, out_dir)
    assert "parsed meanwhile by another process" in outcome.reason, outcome.reason
    assert (tables / "analyse.done").read_text() == "the other parse's\n"


def _parsed_beside_another(
    monkeypatch: pytest.MonkeyPatch,
    module: Any,
    tables: Path,
    the_other_did: Callable[[Path, list[str]], None],
    parse: Callable[[], Any],
) -> Any:
    """What ``parse()`` gives while another parse holds ``tables`` (made here) and does ``the_other_did(out
    dir, files written)`` to them once this one has written its own (``module.write_outputs``)."""
    import fcntl

    tables.mkdir()
    real = module.write_outputs

    def beside_the_other(raw: Path, out_dir: Path, *args: object, **kwargs: object) -> list[str]:
        written = real(raw, out_dir, *args, **kwargs)
        the_other_did(out_dir, written)
        return written

    monkeypatch.setattr(module, "write_outputs", beside_the_other)
    fd = os.open(tables, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the other parse, at work
        return parse()
    finally:
        os.close(fd)


def _one_that_ended_well(out_dir: Path, written: list[str]) -> None:
    """The other parse set this one's tables aside (one is gone, its own not yet in place) and ended well."""
    (out_dir / written[0]).unlink()
    (out_dir / "analyse.done").write_text("the other parse's\n")  # which has ended once this one looks


def test_a_failed_forced_parse_of_symlinked_tables_leaves_no_link_aside(tmp_path: Path) -> None:
    """Tables a user linked in from elsewhere (each a symbolic link): `analyse --force` keeps them aside as
    hard links of the links; a re-parse that failed put them back by rename(2), which does nothing between
    two links of one inode, and remove_leftovers deletes plain files only: a `.NAME.PID-HEX12.old` link per
    table stayed for good (two failed ones kept a killed parse's set from being put back:
    EarlierTables.of_a_killed_parse wants one). The links' targets are never written."""
    from npuprof.analysis import parse

    rank_dir = write_rank_dir(tmp_path, cpu_trace())
    assert parse.parse_rank_dir(rank_dir).status == "parsed"
    tables = rank_dir / "ASCEND_PROFILER_OUTPUT"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for table in sorted(tables.iterdir()):
        table.rename(elsewhere / table.name)
        table.symlink_to(elsewhere / table.name)
    kept = {p.name: p.read_bytes() for p in elsewhere.iterdir()}
    (rank_dir / "host.1.pt.trace.json").write_text("{not a trace")  # damaged since
    outcome = parse.parse_rank_dir(rank_dir, force=True)
    assert not outcome.ok and outcome.kept_earlier, outcome
    assert sorted(os.listdir(tables)) == sorted(kept)  # nothing aside left
    assert all((tables / name).is_symlink() for name in kept)
    assert {p.name: p.read_bytes() for p in elsewhere.iterdir()} == kept


def test_a_failed_parse_keeps_a_users_own_file_beside_the_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A parse that fails (a full disk) deletes the tables it wrote and an earlier parse's, so that no set
    short of some looks complete; it deleted every .csv / .json / .db there, a file of the user's
    (notes.csv, a tool's output) with them."""
    import errno

    from npuprof.analysis import parse

    rank_dir = write_rank_dir(tmp_path, cpu_trace())
    tables = rank_dir / "ASCEND_PROFILER_OUTPUT"
    tables.mkdir()
    (tables / "my_notes.csv").write_text("mine\n")
    (tables / "communication.json").write_text("{}")  # an earlier parse's, left without analyse.done
    real = parse.write_csv

    def full(path: Path, *args: object, **kwargs: object) -> None:
        if Path(path).name == "kernel_details.csv":
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(parse, "write_csv", full)
    outcome = parse.parse_rank_dir(rank_dir)
    assert outcome.status == "failed" and outcome.no_space, outcome
    assert sorted(os.listdir(tables)) == ["my_notes.csv"]
    assert (tables / "my_notes.csv").read_text() == "mine\n"


def test_a_put_back_that_fails_midway_loses_neither_the_earlier_tables_nor_the_users_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`analyse --force` failing (a full disk), then putting the earlier complete set back and failing
    midway (the disk still full): every table already put back was deleted with the failed parse's, and so
    was a file of the user's there (notes.csv); the links not yet put back were dropped as leftovers. Nothing
    of ours is left to look parsed, the user's file stays, and the next parse puts the earlier set back."""
    import errno

    from npuprof.analysis import parse

    rank_dir = write_rank_dir(tmp_path, cpu_trace())
    assert parse.parse_rank_dir(rank_dir).status == "parsed"
    tables = rank_dir / "ASCEND_PROFILER_OUTPUT"
    (tables / "notes.csv").write_text("mine\n")

    def contents() -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in tables.iterdir()}

    earlier = contents()
    assert "analyse.done" in earlier and len(earlier) > 4, earlier
    real_write, real_link, real_replace = parse.write_text, os.link, os.replace
    calls = {"left": -1}  # armed (the put back's link and rename calls before one fails) once the parse fails

    def full(path: Path, *args: object, **kwargs: object) -> None:
        if Path(path).name == "analyse.done":  # every table written again: each is put back
            calls["left"] = 4
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real_write(path, *args, **kwargs)  # type: ignore[arg-type]

    def failing(real: object) -> object:
        def call(*args: object, **kwargs: object) -> None:
            if calls["left"] == 0:
                raise OSError(errno.ENOSPC, "No space left on device")
            calls["left"] -= calls["left"] > 0
            real(*args, **kwargs)  # type: ignore[operator]

        return call

    monkeypatch.setattr(parse, "write_text", full)
    monkeypatch.setattr(os, "link", failing(real_link))
    monkeypatch.setattr(os, "replace", failing(real_replace))
    outcome = parse.parse_rank_dir(rank_dir, force=True)
    monkeypatch.undo()
    assert outcome.status == "failed" and outcome.no_space and not outcome.kept_earlier, outcome
    assert calls["left"] == 0  # the put back failed midway
    assert "kept aside, put back by the next npuprof analyse" in outcome.reason, outcome.reason
    shown = sorted(name for name in os.listdir(tables) if not name.startswith("."))
    assert shown == ["notes.csv"], shown  # no set short of some looks parsed; the user's file stays
    assert (tables / "notes.csv").read_text() == "mine\n"
    # the next parse (the trace damaged since: it fails too) puts the earlier set back, as it was
    trace = rank_dir / "host.1.pt.trace.json"
    trace.write_text("{not a trace")
    outcome = parse.parse_rank_dir(rank_dir)
    assert not outcome.ok and outcome.kept_earlier, outcome
    assert contents() == earlier


def test_a_killed_writers_temporary_file_under_a_pid_another_process_took_since_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A post-processor killed -9 while it gzipped a trace (or torch while it wrote one) left a temporary file
    of gigabytes under its pid; a process started since under that pid (a container's pids start again at
    1) kept it as "its live writer's" for as long as that one lived. Removed, as parse's own leftovers are;
    the file of a writer that started before it stays."""
    from npuprof.results import layout

    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        left = tmp_path / f".host.1.pt.trace.json.gz.{other.pid}-0123456789ab.tmp"
        left.write_bytes(b"\x1f\x8b" + b"\0" * 4096)
        old = time.time() - 120
        os.utime(left, (old, old))
        assert atomic.remove_dead_writers_temps(tmp_path) == {} and left.exists()  # its writer: alive
        real = layout.process_start_time
        monkeypatch.setattr(
            layout, "process_start_time", lambda p="self": time.time() + 60 if p == other.pid else real(p)
        )
        assert atomic.remove_dead_writers_temps(tmp_path) == {left.name: 4098}
        assert not left.exists()
    finally:
        other.kill()
        other.wait()
