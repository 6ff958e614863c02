"""Parse one rank directory: write ``ASCEND_PROFILER_OUTPUT/`` from its raw trace (docs/formats.md).

``parse_rank_dir(rank_dir, force=False, workers=1) -> ParseOutcome`` never raises for bad data: the outcome
says what went wrong. ``python -m npuprof.analysis.parse RANK_DIR [--force] [-j N]`` does the same from a
shell (exit 0 when parsed or already parsed, 1 otherwise).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from npuprof.analysis.forked import Forked, SharedColumns
from npuprof.results import layout
from npuprof.results.atomic import atomic_writer, make_dir, remove_dead_writers_temps, write_bytes, write_text
from npuprof.results.cut_capture import (
    DIED_WHILE_WRITTEN,
    died_while_written_line,
    is_cut_by_death,
    keep_trace_cut_by_death,
    part_kept_later,
)
from npuprof.results.paths import UnsafePathError, resolve_output_path, trace_cache_root

SUMMARY_FILE = "npuprof_summary.json"  # npuprof's own digest for `npuprof analyse` reports
TABLE_SUFFIXES = (".csv", ".json", ".db")  # what a parse writes in ASCEND_PROFILER_OUTPUT/ (docs/formats.md)


@dataclass
class ParseOutcome:
    """What happened to one rank dir. ``status``: parsed | cached | failed | incomplete | missing | corrupt |
    truncated | needs_torch_npu | db_only. ``ok`` is true for parsed and cached."""

    rank_dir: Path
    status: str
    reason: str = ""
    rank: int | None = None
    seconds: float = 0.0
    files: list[str] = field(default_factory=list)
    no_space: bool = False  # failed for a full disk (or quota): the report can be made elsewhere
    read_only: bool = False  # its tables could not be written there (permissions, a read-only mount)
    kept_earlier: bool = False  # failed, and the tables of an earlier complete parse were put back
    held_earlier: bool = False  # failed, and those could not all be put back: kept aside for the next parse
    # the tables an earlier parse wrote (analyse.done there) that were gone, deleted since: parsed again
    tables_missing: list[str] = field(default_factory=list)
    # an earlier parse's tables (analyse.done there) made from the trace as it was then: how it changed since
    trace_changed: str = ""

    @property
    def ok(self) -> bool:
        return self.status in ("parsed", "cached")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["rank_dir"] = str(self.rank_dir)
        d["ok"] = self.ok
        return d


def write_csv(
    path: Path, header: list[str], rows: list[list[Any]] | None = None, lines: Iterable[str] | None = None
) -> None:
    """``path`` (atomically): the header, then ``rows`` (cells) or ``lines`` (CSV text without line ends,
    any iterable: a generator keeps a few batches of a large table in memory, not all of it)."""
    import itertools

    from npuprof.analysis.cells import csv_line

    with atomic_writer(path, "w") as handle:
        handle.write("".join(csv_line(row) + "\n" for row in [header, *(rows or [])]))
        if lines is not None:
            lines = iter(lines)
            while batch := list(itertools.islice(lines, 200_000)):
                handle.write("\n".join(batch) + "\n")


def write_json_fast(path: Path, obj: Any, indent: int = 4) -> None:
    import msgspec

    data = msgspec.json.encode(obj)
    write_bytes(path, (msgspec.json.format(data, indent=indent) if indent else data) + b"\n")


@contextlib.contextmanager
def alone_in(out_dir: Path) -> Iterator[bool]:
    """Hold an exclusive, non-blocking ``flock`` on the directory ``out_dir`` itself (no lock file) while
    parsing: True when this parse got it, so no other parse writes there now (the lock dies with its
    holder, kill -9 included). Parsing goes on either way; the lock only tells whether the temporary files
    there are a dead parse's."""
    import fcntl

    flags = (
        os.O_RDONLY
        | getattr(os, "O_DIRECTORY", 0)
        | getattr(os, "O_NOFOLLOW", 0)
        | getattr(os, "O_CLOEXEC", 0)
    )
    try:
        fd = os.open(out_dir, flags)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
        else:
            yield True
    finally:
        os.close(fd)


def _run_goes_on_elsewhere(rank_dir: Path) -> bool:
    """Whether the capture's run has not ended on another host (a shared file system): its post-processor's
    temporary files there, idle while it waits for its process to record, are no dead writer's (helper-129:
    an analyse from the login node would have deleted a gzip in progress)."""
    record = layout.read_capture_record(rank_dir) or {}
    return layout.launcher_elsewhere(rank_dir.parent, record.get("run_id")) is not None


def _kept_read_only(folder: Path) -> str:
    """Why nothing is to be written in ``folder`` (a rank dir, or its tables folder; when that is not made
    yet, the rank dir it would be made in) though this process could: no one may write there (mode 555,
    ``chmod -R a-w``: its owner keeps it as it is), which root's writes pass (helper-139: `analyse` as
    root made ASCEND_PROFILER_OUTPUT/ in such a rank dir). "" when it may be written."""
    import stat

    for path in (folder, folder.parent):
        try:
            info = os.stat(path)
        except FileNotFoundError:
            continue
        except OSError:
            return ""  # said by the write itself
        if stat.S_ISDIR(info.st_mode) and not info.st_mode & 0o222:
            return f"Permission denied ({path.name}/ is kept read-only: mode {info.st_mode & 0o7777:o})"
        return ""
    return ""


def remove_leftovers(out_dir: Path) -> None:
    """Delete what a parse killed mid-way left behind (its temporary files: ``.<name>.<...>.tmp``, and a
    ``trace_view.json`` it had moved aside: ``.trace_view.json.<...>.old``); only plain files, and not those
    of a parse that still runs (helper-139: one started while another held the lock outlives it, and the
    next to take the lock deleted its files under it: its parse failed)."""
    entries = list(os.scandir(out_dir))
    held = _sets_aside_unparsed(out_dir, entries)
    for entry in entries:
        if entry.name.endswith(held):
            continue
        if entry.is_file(follow_symlinks=False) and _left_by_a_dead_parse(entry):
            with contextlib.suppress(OSError):
                os.unlink(entry.path)


def _sets_aside_unparsed(out_dir: Path, entries: list[os.DirEntry[str]]) -> tuple[str, ...]:
    """The endings (``.PID-HEX12.old``) of the sets of tables kept aside (:class:`EarlierTables`) while
    ``out_dir`` holds no parse (no analyse.done): such a set is the only complete one left (a put back
    that failed midway), kept until a parse writes analyse.done or puts it back."""
    if os.path.lexists(out_dir / layout.ANALYSE_DONE):
        return ()
    mark = f".{layout.ANALYSE_DONE}."
    tags = [
        e.name[len(mark) :] for e in entries if e.name.startswith(mark) and e.name.endswith((".old", MOVING))
    ]
    return tuple(
        f".{tag.removesuffix(MOVING).removesuffix('.old')}{end}" for tag in tags for end in (".old", MOVING)
    )


def _left_by_a_dead_parse(entry: os.DirEntry[str]) -> bool:
    """Whether ``entry`` is a temporary file of a parse that has ended (or of this process): its writer's pid
    is in the name (``.NAME.PID-HEX12.tmp`` / ``.old``); a name without one is an older npuprof's. A pid
    that runs a process started after the file last changed is another's (reused: a container's pids
    start again at 1), not its writer's: the file's gigabytes would be kept as long as that one lives."""
    from npuprof.results.atomic import writer_pid

    name = entry.name
    if not name.startswith(".") or not name.endswith((".tmp", ".old", MOVING)):
        return False
    kept = name.endswith((".old", MOVING))  # a set kept aside (EarlierTables): named as its writer's .tmp
    pid = writer_pid(name.removesuffix(".old").removesuffix(MOVING) + ".tmp" if kept else name)
    if pid is None or pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return True
    except PermissionError:
        pass  # another user's process: alive
    except OSError:
        return False
    try:
        changed = entry.stat(follow_symlinks=False).st_ctime
    except OSError:
        return False
    return layout.started_after(pid, changed)  # the writer made (or renamed) its file after it started


ALWAYS_WRITTEN = (
    "trace_view.json",
    "step_trace_time.csv",
    "kernel_details.csv",
    "operator_details.csv",
    "op_statistic.csv",
    SUMMARY_FILE,
)  # by every parse of a Kineto trace (docs/formats.md)


def made_from_record(trace: Path) -> str:
    """What analyse.done says of the trace its tables are made from: its name and size (docs/formats.md,
    "The result tree"). Not its mtime or inode, as a bare trace's tables say (report._identity): a copy of
    the result tree (cp -r, a sync to shared storage) changes those, and every rank would be parsed again."""
    import json

    return json.dumps({"trace": trace.name, "bytes": trace.stat().st_size}) + "\n"


def trace_changed_since(done: Path, rank_dir: Path) -> str:
    """How ``rank_dir``'s trace differs from the one its tables were made from (``done``'s record): another
    size (cut short since, a copy cut, written again), or another name that is not that one gzipped (the
    post-processor gzips the trace it parsed); "" when it is the same, or when ``done`` does not say (empty:
    an older npuprof's, torch_npu's) or there is no trace."""
    trace = layout.find_raw_trace(rank_dir)
    if trace is None:
        return ""
    try:
        record = layout.read_json_record(done, 4096)
        size = trace.stat().st_size
    except (OSError, ValueError):
        return ""
    if not isinstance(record, dict):
        return ""
    name, then = record.get("trace"), record.get("bytes")
    if not isinstance(name, str) or not isinstance(then, int) or isinstance(then, bool):
        return ""
    if name != trace.name:
        if trace.name == f"{name}.gz":
            return _gzip_changed(trace, name, then, size)
        return f"its trace is {trace.name}, its tables were made from {name}"
    if size == then:
        return ""
    return f"its trace {name} is {size:,} bytes, {then:,} when its tables were made (cut or written since)"


def _gzipped_from(done: Path, trace: Path) -> tuple[str, int] | None:
    """The name and size of the trace ``done`` says its tables were made from, where ``trace`` is its .gz;
    else None."""
    try:
        record = layout.read_json_record(done, 4096)
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    name, then = record.get("trace"), record.get("bytes")
    if not isinstance(name, str) or type(then) is not int or trace.name != f"{name}.gz":
        return None
    return name, then


def _gzip_changed(packed: Path, name: str, then: int, size: int) -> str:
    """How ``packed``, the gzip of ``name``, differs from the ``then`` bytes its tables were made from
    (gzip_size); "" when it does not, or it cannot be told."""
    from npuprof.analysis.gzip_size import GzipSize, gzip_size

    found = gzip_size(packed, then, size)
    if found is GzipSize.SAME:
        return ""
    its, of = f"its trace {packed.name}", f"the {then:,} bytes of {name} its tables were made from"
    if found is GzipSize.UNCHECKED:  # bgzip, cat a.gz b.gz: its end holds its last member's size only
        return f"{its} is a gzip of several members: its size could not be checked against {of}"
    if found is GzipSize.WRITTEN_AGAIN:
        return f"{its} is a gzip of another size than {of} (written since)"
    # the post-processor's one member cut or written again, or several whose last starts before the end read
    return (
        f"{its} does not end as the gzip of {of} does (cut or written since, or gzipped in several members)"
    )


def _tables_whole(out_dir: Path) -> bool:
    """Whether the tables every parse writes are there: one deleted since (by hand, a cleaning script)
    makes the rank dir parsed again rather than reported from what is left (when its trace is there to
    parse: without it, what is left is all there is)."""
    return all(os.path.isfile(out_dir / name) for name in ALWAYS_WRITTEN)


def table_stamps(out_dir: Path) -> dict[str, tuple[int, int]]:
    """Each table file of ``out_dir`` by name: its inode and change time, to tell later which a parse
    wrote (:func:`drop_tables`)."""
    stamps: dict[str, tuple[int, int]] = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir(out_dir):
            if entry.name.endswith(TABLE_SUFFIXES) and entry.is_file(follow_symlinks=False):
                info = entry.stat(follow_symlinks=False)
                stamps[entry.name] = (info.st_ino, info.st_mtime_ns)
    return stamps


def is_own_table(name: str) -> bool:
    """Whether ``name`` is a file a parse of npuprof's writes into ASCEND_PROFILER_OUTPUT/ (docs/formats.md,
    "The result tree"): a table, the summary, the annotations, the db export."""
    from npuprof.analysis.annotation_schema import ANNOTATIONS_FILE

    return (
        name in ALWAYS_WRITTEN
        or name in SIDE_TABLES
        or name in (ANNOTATIONS_FILE, layout.ANALYSIS_DB)
        or (name.startswith("ascend_pytorch_profiler") and name.endswith(".db"))
    )


SIDE_TABLES = ("communication.json", "communication_matrix.json", "memory_record.csv", "operator_memory.csv")


def drop_tables(out_dir: Path, before: dict[str, tuple[int, int]]) -> None:
    """After a parse that failed (a full disk): when it wrote any table (one not as in ``before``), delete
    the tables of ``out_dir`` (npuprof's own output directory of the capture): those it wrote, and those of
    an earlier parse, so that no set short of some, or mixing two parses, looks complete; when it wrote
    none, an earlier parse's set stays whole. A file of the user's there (``notes.csv``, a tool's output:
    a name no parse writes, not written by this one) is not a table: a failed parse deleted it too."""
    now = table_stamps(out_dir)
    if any(before.get(name) != stamp for name, stamp in now.items()):
        for name, stamp in now.items():
            if before.get(name) == stamp and not is_own_table(name):
                continue
            with contextlib.suppress(OSError):
                os.unlink(out_dir / name)
    with contextlib.suppress(OSError):
        remove_leftovers(out_dir)


class EarlierTables:
    """The tables of an earlier complete parse (``analyse.done`` there) kept aside while ``out_dir`` is
    parsed again: each hard-linked under the hidden name of a parse's leftover (``.NAME.PID-HEX12.old``,
    which :func:`remove_leftovers` deletes once this process is gone), so that a re-parse that fails (a full
    disk, a trace damaged since) puts them back as they were (:meth:`put_back`) instead of deleting them
    (docs/formats.md, "The result tree": a parse that fails).
    Where a link fails (a file system without hard links, a tmpfs out of inodes) our tables and analyse.done
    are moved aside under those names instead (:attr:`moved`; the user's files stay where they are), and
    moved back on a failure: they were deleted with the failed parse's (helper-256). Nothing is kept where
    there was no complete set."""

    def __init__(self, out_dir: Path | None, done: str = layout.ANALYSE_DONE) -> None:
        self.out_dir, self.done = out_dir or Path(), done
        self.aside: dict[str, str] = {}  # name -> its hidden link (or, moved, its hidden name)
        self.whole = False
        self.held = False  # a put back failed midway: the links stay for the next parse
        self.moved = False  # no links could be made: the set itself was moved aside
        self.partly_moved = False  # a killed parse's set, moved aside in part (of_a_killed_parse)
        self._restored: list[str] = []  # names a put back moved back (their hidden names gone)
        if out_dir is None:  # nothing kept
            return
        try:
            entries = list(os.scandir(out_dir))
        except OSError:
            return
        names = [
            entry.name
            for entry in entries
            if (entry.name == done or entry.name.endswith(TABLE_SUFFIXES))
            and (entry.is_file(follow_symlinks=False) or entry.is_symlink())
        ]
        if done not in names:
            return
        tag = f"{os.getpid()}-{os.urandom(6).hex()}"  # its writer's, as atomic.temp_name's
        # analyse.done's link made last, dropped first: where it is, the whole set is (of_a_killed_parse)
        for name in sorted(names, key=lambda name: name == done):
            aside = str(out_dir / f".{name}.{tag}.old")
            try:
                os.link(out_dir / name, aside, follow_symlinks=False)
            except OSError:
                self.drop()
                self._move_aside([name for name in names if is_own_table(name) or name == done], tag)
                return
            self.aside[name] = aside
        self.whole = True

    def _move_aside(self, names: list[str], tag: str) -> None:
        """No link could be made: ``names`` renamed to their hidden names. analyse.done goes first, to its
        ``.moving`` name (no set short of some looks parsed), and is renamed to its ``.old`` one, the mark
        that the whole set is aside, last: a parse killed in between left the rest in place, which
        :meth:`of_a_killed_parse` then keeps. A rename refused midway moves them back."""
        moving = str(self.out_dir / f".{self.done}.{tag}{MOVING}")
        try:
            for name in sorted(names, key=lambda name: name != self.done):
                aside = moving if name == self.done else str(self.out_dir / f".{name}.{tag}.old")
                os.replace(self.out_dir / name, aside)
                self.aside[name] = aside
            self.aside[self.done] = str(self.out_dir / f".{self.done}.{tag}.old")
            os.replace(moving, self.aside[self.done])
        except OSError:
            for moved, hidden in self.aside.items():
                with contextlib.suppress(OSError):
                    os.replace(moving if moved == self.done else hidden, self.out_dir / moved)
            self.aside.clear()
            return
        self.whole = self.moved = True

    def put_back(self) -> bool:
        """After a failed parse: every table now there replaced by the earlier set, as it was (the same
        files); False (nothing put back) when no set was kept, and when a link or rename fails midway: then
        no table of ours is left to look parsed, and the links aside stay (:attr:`held`) for the next parse
        to put back (:meth:`of_a_killed_parse`). Each name is put back from a new link of its aside one, so
        that those stay until the whole set is back: a rename that consumed them deleted, on a failure
        midway, the tables already put back with the failed parse's, and the links not yet put back were
        dropped as leftovers; the earlier set was lost, and a file of the user's there with it."""
        if not self.whole:
            return False
        try:
            for name in table_stamps(self.out_dir) if not self.partly_moved else ():
                if name not in self.aside and is_own_table(name):  # the failed parse's (never the user's)
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(self.out_dir / name)
            for name in sorted(self.aside, key=lambda name: name == self.done):  # analyse.done's last
                if not _same_entry(self.aside[name], self.out_dir / name):
                    self._restore(name)
        except OSError:
            self._hold()
            return False
        self.drop()
        return True

    def _restore(self, name: str) -> None:
        """``name`` made its earlier file again: a new link of the one aside, or, where links fail (a set
        moved aside, or a killed parse's so kept), the file aside moved back."""
        aside = self.aside[name]
        try:
            _link_over(aside, self.out_dir / name)
        except OSError:
            if not self.moved and not self._links_fail(aside):
                raise
            os.replace(aside, self.out_dir / name)
            self._restored.append(name)

    def _links_fail(self, aside: str) -> bool:
        """Whether no link of ``aside`` can be made here (a killed parse's set moved aside)."""
        from npuprof.results.atomic import temp_name

        probe = temp_name(Path(aside))
        try:
            os.link(aside, probe, follow_symlinks=False)
        except OSError:
            return True
        with contextlib.suppress(OSError):
            os.unlink(probe)
        return False

    def _hold(self) -> None:
        """A put back failed midway: our tables there (the failed parse's, the earlier ones already put
        back, which their links aside still hold) are deleted, a file of another name (the user's) is not;
        the links aside are kept for the next parse. An earlier file already moved back (its hidden name
        gone) is moved aside again first: the only copy."""
        for name in list(self._restored):
            with contextlib.suppress(OSError):
                os.replace(self.out_dir / name, self.aside[name])
                self._restored.remove(name)
        for name in {*table_stamps(self.out_dir), *self.aside}:
            if (is_own_table(name) or name == self.done) and name not in self._restored:
                with contextlib.suppress(OSError):
                    os.unlink(self.out_dir / name)
        self.held = True

    @classmethod
    def of_a_killed_parse(cls, out_dir: Path, done: str = layout.ANALYSE_DONE) -> EarlierTables:
        """The set a parse killed mid-way (kill -9) had kept aside, to be put back before ``out_dir`` is
        parsed again (a parse that has it to itself; none has written analyse.done since): without it, a
        next parse that failed too (the disk still full) left no complete set, as the killed one's links
        were deleted as its leftovers. Empty (``put_back`` does nothing) unless one dead parse's
        ``analyse.done`` link is there, which is made after all its others and deleted before them."""
        kept = cls(None, done)
        kept.out_dir = out_dir
        try:
            if os.path.lexists(out_dir / done):
                return kept
            entries = [entry for entry in os.scandir(out_dir) if entry.name.endswith((".old", MOVING))]
        except OSError:
            return kept
        marks = [
            entry
            for entry in entries
            if entry.name.startswith(f".{done}.") and entry.is_file() and _left_by_a_dead_parse(entry)
        ]
        if len(marks) != 1:
            return kept
        # killed while it moved its set aside (no links there): the rest is still in place, and it wrote
        # nothing yet; nothing in place is deleted (put_back)
        kept.moved = kept.partly_moved = marks[0].name.endswith(MOVING)
        tag = marks[0].name[len(done) + 2 :].removesuffix(MOVING).removesuffix(".old")
        aside: dict[str, str] = {done: marks[0].path}
        for entry in entries:
            name = entry.name[1 : -len(f".{tag}.old")]
            if entry.name.endswith(f".{tag}.old") and name.endswith(TABLE_SUFFIXES):
                aside[name] = entry.path
        kept.aside = aside
        kept.whole = True
        return kept

    def drop(self) -> None:
        """Delete the links not put back (the parse succeeded, or the set could not be kept); not those of a
        put back that failed midway, the only copy of the earlier set."""
        if self.held:
            return
        for name in sorted(self.aside, key=lambda name: name != self.done):  # analyse.done's first
            with contextlib.suppress(OSError):
                os.unlink(self.aside[name])
        self.aside.clear()
        self.whole = False


def _link_over(source: str, target: Path) -> None:
    """``target`` made a link of ``source``'s inode (never followed), by a new link renamed over it."""
    from npuprof.results.atomic import temp_name

    temp = temp_name(target)
    os.link(source, temp, follow_symlinks=False)
    try:
        os.replace(temp, target)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _same_entry(one: str | Path, other: str | Path) -> bool:
    """Whether two names are links of one inode (neither followed)."""
    try:
        return os.path.samestat(os.lstat(one), os.lstat(other))
    except OSError:
        return False


# analyse.done's hidden name while a set is moved aside (EarlierTables._move_aside)
MOVING = ".moving"
# said after a failed re-parse's own reason when the earlier tables were put back (EarlierTables)
EARLIER_TABLES_KEPT = "the tables of its earlier parse are kept as they were"
# said instead when they could not all be put back (EarlierTables.held)
EARLIER_TABLES_HELD = (
    "the tables of its earlier parse are kept aside, put back by the next npuprof analyse of it"
)


class ParsedMeanwhile(FileNotFoundError):
    """A table this parse wrote is gone, and another parse's analyse.done is there: that parse (it had the
    folder to itself) moved this one's tables aside and wrote a complete set of its own."""


# the reason given with a capture another parse of its folder parsed while this one was at work
PARSED_MEANWHILE = (
    "parsed meanwhile by another process (its run's post-processor or another npuprof analyse): "
    "its tables are that parse's, complete (analyse.done)"
)


def tables_still_there(out_dir: Path, written: Iterable[str]) -> None:
    """Raise (FileNotFoundError) when a table this parse wrote is gone from ``out_dir`` before its
    analyse.done is: a parse beside it that had the folder to itself deleted every table there, this one's
    too (:func:`drop_tables` when it failed, :class:`EarlierTables` when it set them aside), and analyse.done
    would have marked the set left, short of them, as parsed (helper-216). :class:`ParsedMeanwhile` when
    that parse's analyse.done is there now (this one's was unlinked before writing): it ended well, and
    its set is whole; else whether it failed or is still at work is not known."""
    for name in written:
        if not os.path.lexists(out_dir / name):
            if os.path.lexists(out_dir / layout.ANALYSE_DONE):
                raise ParsedMeanwhile(errno.ENOENT, PARSED_MEANWHILE, str(out_dir / name))
            raise FileNotFoundError(
                errno.ENOENT,
                "deleted meanwhile by another parse of this folder, which failed or is still at work "
                "(run npuprof analyse again once it has ended)",
                str(out_dir / name),
            )


def _capture_asked_for_db(rank_dir: Path) -> bool:
    """Whether the capture was made with ``--export-type db`` (its profiler_info's ``_export_type``), so that
    a later parse (``--no-analyse``, then ``npuprof analyse``) writes the db without being told again."""
    for info in rank_dir.glob("profiler_info*.json"):
        try:
            config = layout.read_json_record(info).get("config", {})
            kind = config.get("experimental_config", {}).get("_export_type")
        except (OSError, ValueError, AttributeError):
            continue
        kinds = kind if isinstance(kind, list) else [kind]
        return any(isinstance(k, str) and k.lower() == "db" for k in kinds)
    return False


def _no_trace_reason(out_dir: Path) -> str:
    """Why a rank dir gives no report: no trace; or only a trace_view.json, which is read as a trace file
    of its own (parsing it here would write over it)."""
    view = out_dir / "trace_view.json"
    if view.is_file():
        return (
            f"no raw trace and no tables torch_npu wrote, only {layout.PARSED_DIR}/trace_view.json: analyse "
            f"that file itself (npuprof analyse {view})"
        )
    if _torch_npu_left_nothing(out_dir):
        return TORCH_NPU_LEFT_NOTHING.format(out=out_dir.name)
    return "no trace in this directory"


def _torch_npu_left_nothing(out_dir: Path) -> bool:
    """torch_npu's analyse.done beside its profiler_info, and nothing to read or parse again (a capture
    of torch.profiler's, as its record names it, had no torch_npu parse: helper-129)."""
    backend = (layout.read_capture_record(out_dir.parent) or {}).get("backend", "torch_npu")
    return (
        backend == "torch_npu"
        and (out_dir / layout.ANALYSE_DONE).exists()
        and any(out_dir.parent.glob("profiler_info*.json"))
    )


def _nothing_to_parse_again(rank_dir: Path) -> bool:
    return layout.find_raw_trace(rank_dir) is None and not layout.holds_ascend_raw_data(rank_dir)


# helper-129: said instead "torch_npu's parse left none of its tables", beside them
FORCED_WITHOUT_RAW_DATA = (
    "--force: not parsed again, its raw trace is gone (deleted since its parse?): this report is made from "
    "the tables of its earlier parse"
)


# helper-123: torch_npu's parse failed (it writes analyse.done whatever the outcome) and simplified its raw
# data away: --force only said "no trace"
TORCH_NPU_LEFT_NOTHING = (
    "torch_npu's parse left none of its tables in {out}/ and no raw data to parse again (FRAMEWORK/, PROF_* "
    "are gone): nothing here can be analysed; capture again"
)


def _torch_npu_parse_failed(rank_dir: Path, out_dir: Path) -> bool:
    """A torch_npu rank dir (its raw data, or its profiler_info) whose ASCEND_PROFILER_OUTPUT/ holds none of
    its tables nor npuprof's summary: torch_npu's parse failed there, though it may have written
    analyse.done (it does so whatever the outcome since 2026-01, helper-122). Parsed again where its raw
    data is left, else said (_no_trace_reason), never taken as done."""
    if layout.find_raw_trace(rank_dir) is not None:
        return False
    if not (layout.holds_ascend_raw_data(rank_dir) or any(rank_dir.glob("profiler_info*.json"))):
        return False
    return not (out_dir / SUMMARY_FILE).exists() and not layout.has_torch_npu_tables(rank_dir)


def _parse_ascend(rank_dir: Path, outcome: ParseOutcome) -> ParseOutcome:
    try:
        from torch_npu.profiler.profiler import analyse  # type: ignore[import-not-found]
    except Exception as exc:  # ImportError, or the CANN libraries missing
        outcome.status = "needs_torch_npu"
        outcome.reason = (
            f"Ascend raw data (FRAMEWORK/, PROF_*) needs torch_npu's own parser, and "
            f"`import torch_npu.profiler` failed here ({type(exc).__name__}: {exc}); run "
            f"`npuprof analyse` where torch_npu and CANN are installed"
        )
        return outcome
    analyse(str(rank_dir))
    done = rank_dir / layout.PARSED_DIR / layout.ANALYSE_DONE
    if layout.has_torch_npu_tables(rank_dir):
        if not done.exists():
            write_text(done, "")
        outcome.status = "parsed"
    elif layout.torch_npu_parsed_without_device_tables(rank_dir):
        # no device work in it (or its device data did not parse): its trace_view.json is read instead
        # (report._trace_view_instead), as where torch_npu is not installed
        outcome.status = "missing"
        outcome.reason = layout.torch_npu_no_device_tables_note(rank_dir)
    else:
        outcome.status = "failed"
        outcome.reason = (
            f"torch_npu's parser wrote none of its tables into {layout.PARSED_DIR}/ (its messages say why)"
        )
    return outcome


def parse_rank_dir(
    rank_dir: Path,
    force: bool = False,
    workers: int = 1,
    export_db: bool = False,
    heed_read_only: bool = True,
    only_alone: bool = False,
) -> ParseOutcome:
    """Write ``rank_dir/ASCEND_PROFILER_OUTPUT/`` (all tables that apply, ``analyse.done`` last); with
    ``export_db`` also the SQLite files of torch_npu's db export (npuprof/analysis/db_export.py).

    Skips a dir already parsed (``analyse.done`` present) unless ``force``, or ``export_db`` asks for a db
    it lacks. ``workers`` > 1 reads a big trace in that many processes. ``heed_read_only=False`` (the run's
    post-processor) writes in a rank dir its own run made without write bits (a job's ``umask 222``), as
    root may. ``only_alone``: parse only when no other parse (a run's post-processor, another analyse) holds
    its tables' folder, else answer "in progress" and write nothing. Never raises for bad input: see
    ``ParseOutcome.status``/``reason``.
    """
    t0 = time.perf_counter()
    rank_dir = Path(rank_dir)
    outcome = ParseOutcome(rank_dir, "failed")
    try:
        if not rank_dir.is_dir():
            outcome.status, outcome.reason = "missing", f"{rank_dir} is not a directory"
            return outcome
        outcome.rank = layout.rank_of(rank_dir)
        # a post-processor killed while it gzipped the trace left gigabytes under a hidden name
        if not _run_goes_on_elsewhere(rank_dir):
            if not (heed_read_only and _kept_read_only(rank_dir)):
                keep_trace_cut_by_death(rank_dir)  # the part of its trace torch wrote before the job died
                remove_dead_writers_temps(rank_dir)
            tables = rank_dir / layout.PARSED_DIR
            if not tables.is_symlink() and not (heed_read_only and _kept_read_only(tables)):
                remove_dead_writers_temps(tables)
        # a link above the rank dir (a home or scratch that is one) is followed; ASCEND_PROFILER_OUTPUT
        # itself a link, or a link planted in /tmp, is refused (npuprof/results/paths.py)
        out_dir = resolve_output_path(rank_dir / layout.PARSED_DIR, "parsed output directory")
        done = out_dir / layout.ANALYSE_DONE
        has_db = layout.has_profiler_db(rank_dir)
        export_db = export_db or _capture_asked_for_db(rank_dir)
        from npuprof.analysis import ascend_output

        if ascend_output.db_only_by_torch_npu(rank_dir):
            outcome.status = "db_only"
            outcome.reason = (
                "torch_npu parsed it into its db only (export_type db: ASCEND_PROFILER_OUTPUT/"
                "ascend_pytorch_profiler_*.db); npuprof's report reads torch_npu's text tables: capture with "
                "--export-type text,db for both; msprof-analyze's db recipes read this db as it is"
            )
            return outcome
        changed = trace_changed_since(done, rank_dir) if done.exists() and not force else ""
        if (
            done.exists()
            and not force
            and (has_db or not export_db)
            and (_tables_whole(out_dir) or layout.find_raw_trace(rank_dir) is None)
            and not _torch_npu_parse_failed(rank_dir, out_dir)
            and not changed
        ):
            outcome.status = "cached"
            return outcome
        outcome.trace_changed = changed
        if (
            force
            and done.exists()
            and (has_db or not export_db)  # a db asked for needs the trace: "missing" below (helper-131)
            and _tables_whole(out_dir)
            and _nothing_to_parse_again(rank_dir)
        ):
            # its raw trace deleted since its parse (to save space): what --force would remake stands
            outcome.status, outcome.reason = "cached", FORCED_WITHOUT_RAW_DATA
            return outcome
        if ascend_output.parsed_by_torch_npu(rank_dir):  # its tables are read as they are, never re-parsed
            outcome.status = "cached"
            return outcome
        if done.exists() and not force and layout.find_raw_trace(rank_dir) is not None:
            outcome.tables_missing = [n for n in ALWAYS_WRITTEN if not os.path.isfile(out_dir / n)]
        status = layout.capture_status(rank_dir)
        notes: list[str] = []
        if (
            status.status == layout.STATUS_INCOMPLETE
            and (layout.read_capture_record(rank_dir) or {}).get("status") == layout.STATUS_INCOMPLETE
            and " skipped: " not in status.detail
            and layout.find_raw_trace(rank_dir) is not None
        ):
            # stopped before its end by npuprof (--min-free-space) with its trace written whole (a trace
            # is renamed into place once written): what it holds is read, the stop said with it
            why = f" ({status.detail})" if status.detail else ""
            notes.append(f"the capture was stopped before its planned end{why}; its trace is read")
        elif (
            status.status == layout.STATUS_INCOMPLETE
            and (raw := layout.find_raw_trace(rank_dir)) is not None
            and is_cut_by_death(raw)
        ):
            # its process died while torch wrote its trace: the part written is read (docs/formats.md)
            notes.append(f"{DIED_WHILE_WRITTEN} ({status.detail}): interrupted; what was written is read")
        elif status.status == layout.STATUS_CAPTURING:  # its run is alive: it may well be recording
            outcome.status = "in progress"
            outcome.reason = (
                f"{status.detail.removeprefix('in progress: ')}; analyse it once the run has ended"
            )
            return outcome
        elif not status.complete:
            outcome.status = "incomplete" if status.status != "unknown" else "missing"
            outcome.reason = (
                (
                    status.detail
                    if " skipped: " in status.detail
                    else f"interrupted capture: {status.detail}{part_kept_later(rank_dir)}"
                )
                if status.status != "unknown"
                else _no_trace_reason(out_dir)
            )
            return outcome
        if layout.find_raw_trace(rank_dir) is None and layout.holds_ascend_raw_data(rank_dir):
            return _parse_ascend(rank_dir, outcome)
        raw = layout.find_raw_trace(rank_dir)
        if raw is None:
            outcome.status = "missing"
            outcome.reason = (
                TORCH_NPU_LEFT_NOTHING.format(out=out_dir.name)
                if _torch_npu_left_nothing(out_dir)
                else f"no *.pt.trace.json(.gz) in {rank_dir}"
            )
            return outcome
        if heed_read_only and (kept := _kept_read_only(out_dir)):
            raise PermissionError(errno.EACCES, kept, str(out_dir))
        make_dir(out_dir)
        with alone_in(out_dir) as alone:
            if only_alone and not alone:
                outcome.status, outcome.reason = "in progress", ANOTHER_PARSE_AT_WORK
                return outcome
            if alone:
                EarlierTables.of_a_killed_parse(out_dir).put_back()
                remove_leftovers(out_dir)
            # only a parse that has the folder to itself keeps (and puts back) an earlier set
            earlier = EarlierTables(out_dir if alone else None)
            # a db already there is rewritten with the tables: it never describes an older parse
            before = table_stamps(out_dir)
            # the trace its tables were made from, where it is now gzipped: what the read finds says how
            gzipped_from = _gzipped_from(done, raw) if outcome.trace_changed else None
            gzip_read: list[Any] = []
            try:
                if done.exists():
                    done.unlink()
                try:
                    made_from = made_from_record(raw)
                    outcome.files = write_outputs(
                        raw, out_dir, outcome.rank, workers, export_db or has_db, notes, gzip_read
                    )
                except FileNotFoundError:  # the run's post-processor gzipped the trace meanwhile: the .gz
                    gzipped = layout.find_raw_trace(rank_dir)
                    if gzipped is None or gzipped == raw:
                        raise
                    made_from = made_from_record(gzipped)
                    outcome.files = write_outputs(
                        gzipped, out_dir, outcome.rank, workers, export_db or has_db, notes
                    )
                tables_still_there(out_dir, outcome.files)
                # under the lock: a parse that gets it next takes no temporary file of ours for a dead one's;
                # inside the try: a full disk here puts the earlier set back too
                write_text(done, made_from)
            except BaseException:
                # a set of tables short of some is not left to look parsed (Ascend's tools); an earlier
                # complete set is put back as it was
                if alone and earlier.put_back():
                    outcome.kept_earlier = True
                    remove_leftovers(out_dir)
                elif alone:
                    outcome.held_earlier = earlier.held
                    drop_tables(out_dir, before)
                raise
            finally:
                earlier.drop()
        outcome.files.append(layout.ANALYSE_DONE)
        outcome.status = "parsed"
        if gzipped_from is not None and gzip_read:
            from npuprof.analysis.gzip_size import changed_as_read

            outcome.trace_changed = changed_as_read(raw.name, *gzipped_from, gzip_read[-1])
    except UnsafePathError as exc:
        outcome.status, outcome.reason = "failed", str(exc)
    except ParsedMeanwhile:
        outcome.status, outcome.reason = "cached", PARSED_MEANWHILE
        outcome.files = []
    except Exception as exc:
        from npuprof.analysis.trace_loader import TraceError

        if isinstance(exc, TraceError):
            outcome.status, outcome.reason = exc.kind, str(exc)
        else:
            outcome.status = "failed"
            outcome.reason = failure_reason(exc)
            outcome.no_space = isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)
            outcome.read_only = isinstance(exc, OSError) and exc.errno in (
                errno.EROFS,
                errno.EACCES,
                errno.EPERM,
            )
            if os.environ.get("NPUPROF_DEBUG"):
                traceback.print_exc()
        if outcome.kept_earlier:
            outcome.reason += f"; {EARLIER_TABLES_KEPT}"
        elif outcome.held_earlier:
            outcome.reason += f"; {EARLIER_TABLES_HELD}"
        if outcome.trace_changed:  # why a rank dir with tables was parsed at all
            outcome.reason = f"{outcome.trace_changed}; parsed again: {outcome.reason}"
    finally:
        outcome.seconds = round(time.perf_counter() - t0, 3)
    return outcome


ANOTHER_PARSE_AT_WORK = (
    "another parse is writing its tables now (its run's post-processor, or another npuprof analyse): "
    "analyse it again once that has ended"
)


def failure_reason(exc: BaseException) -> str:
    """Why a parse failed, in words: a full disk (or quota) says so and what to do, any other OS error
    names its file; the rest by the exception's name and message."""
    filename = written_file(exc.filename) if isinstance(exc, OSError) else None
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return (
            f"the disk is full ({exc.strerror}{f': {filename}' if filename else ''}); "
            "no partial set of tables is left: free some space, then npuprof analyse it again"
        )
    if isinstance(exc, OSError) and exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        where = f": {filename}" if filename else ""
        return (
            f"{exc.strerror}{where}; its tables cannot be written there: analyse a copy in a writable "
            f"place, or its trace file itself (npuprof analyse TRACE: the tables then go to "
            f"{trace_cache_root()})"
        )
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}" + (f": {filename}" if filename else "")
    return f"{type(exc).__name__}: {exc}"


def written_file(filename: Any) -> Any:
    """The file a failed write was making, as a user knows it: a writer's temporary file
    (``.NAME.PID-HEX12.tmp``, atomic.temp_name; a re-parse's ``.NAME.PID-HEX12.old``) is its table
    ``NAME``; a private temporary file of tempfile's (``tmpXXXXXXXX``: a trace's decompressed copy, the
    overlays spooled) is the folder it was made in (helper-216: the reason named
    ``.trace_view.json.123-0a1b2c3d4e5f.tmp``, a file that is never there). Anything else as it is."""
    import re

    from npuprof.results.atomic import writer_pid

    if not isinstance(filename, str) or not filename:
        return filename
    head, _, name = filename.rpartition("/")
    temp = name.removesuffix(".old") + ".tmp" if name.endswith(".old") else name
    if writer_pid(temp) is not None:
        base = temp[1:].removesuffix(".tmp").removesuffix(".tmp")
        return f"{head}/{base.rsplit('.', 1)[0]}" if head else base.rsplit(".", 1)[0]
    if re.fullmatch(r"tmp[a-z0-9_]{8}", name):
        return f"{head}/" if head else filename
    return filename


def _side_outputs(
    extract: Any,
    meta: dict[str, Any],
    out_dir: Path,
    rank: int | None,
    nested: Callable[[], Any],
    comm_ops: list[Any] | None = None,
) -> dict[str, Any]:
    """communication.json, communication_matrix.json, memory_record.csv and operator_memory.csv; returns
    the files written and what the summary needs. ``nested()`` gives ``tables.nest(extract)``, asked for
    last (the main process computes it meanwhile)."""
    from npuprof.analysis import communication, memory, tables

    wall, cpu = time.perf_counter(), time.process_time()
    windows = tables.step_windows(extract)
    device_id = tables.device_id_of(extract)
    base_ns = tables.base_ns_of(meta)
    files: list[str] = []
    ops = communication.collect(extract, meta) if comm_ops is None else comm_ops
    comm_summary = communication.summary(ops)
    comm_by_step = communication.summary_by_step(ops, windows) if ops else {}
    if ops:
        comm, matrix = communication.build(ops, windows, rank, base_ns)
        write_json_fast(out_dir / "communication.json", comm)
        write_json_fast(out_dir / "communication_matrix.json", matrix)
        files += ["communication.json", "communication_matrix.json"]
    mem_cols = memory.memory_columns(extract)
    peaks: dict[str, Any] = {}
    memory_notes: list[str | None] = []
    step_peaks: list[tuple[float, float] | None] = []
    if mem_cols:
        write_csv(
            out_dir / "memory_record.csv",
            memory.MEMORY_RECORD_HEADER,
            lines=memory.memory_record_lines(mem_cols, device_id, base_ns),
        )
        lines, peaks = memory.operator_memory_lines(mem_cols, nested(), extract.strings, device_id, base_ns)
        write_csv(out_dir / "operator_memory.csv", memory.OPERATOR_MEMORY_HEADER, lines=lines)
        files += ["memory_record.csv", "operator_memory.csv"]
        step_peaks = memory.step_peaks(mem_cols, windows, extract.memory_until)
        memory_notes = [memory.missed_frees_note(int((mem_cols["missed"] > 0).sum()))]
        if extract.memory_until is not None:  # cut in its [memory] events: the capture's peak not known
            peaks = {key: None for key in peaks}
    return {
        "files": files,
        "communication": comm_summary,
        "communication_by_step": comm_by_step,
        "peaks": peaks,
        "step_peaks": step_peaks,
        "memory_notes": [note for note in memory_notes if note],
        "seconds": (time.perf_counter() - wall, time.process_time() - cpu),
    }


def _db_outputs(out_dir: Path, sources: Any) -> dict[str, Any]:
    """The db export (npuprof/analysis/db_export.py): the files written, the seconds it took, and why it
    failed (``error``). A failed export never fails the parse (the text tables stand), and leaves no db of
    an earlier parse behind: the rank has no db, which the report says and `npuprof analyse` fills in."""
    from npuprof.analysis import db_export

    wall, cpu = time.perf_counter(), time.process_time()
    result: dict[str, Any] = {"files": []}
    try:
        result["files"] = db_export.write_databases(out_dir, sources)
    except Exception as exc:
        result["error"] = failure_reason(exc)
        _drop_db(out_dir, sources.rank)
    result["seconds"] = (time.perf_counter() - wall, time.process_time() - cpu)
    return result


def _drop_db(out_dir: Path, rank: int | None) -> None:
    """After a failed export: no db of an earlier parse left to look current, no temporary file of the
    writer (a forked one that died is gone by now)."""
    from npuprof.analysis.db_export import remove_stale_temps

    for name in (layout.profiler_db_name(rank), layout.ANALYSIS_DB):
        with contextlib.suppress(OSError):
            (out_dir / name).unlink()
    remove_stale_temps(out_dir)


def _db_warning(error: str | None) -> list[str]:
    if error is None:
        return []
    return [f"the db export (--export-type db) failed, the text tables are complete: {error}"]


class _Phases:
    """With NPUPROF_TIMING=1 in the environment: the wall and CPU seconds of each phase, on stderr."""

    def __init__(self) -> None:
        self.on = bool(os.environ.get("NPUPROF_TIMING"))
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def __call__(self, label: str) -> None:
        if self.on:
            wall, cpu = time.perf_counter(), time.process_time()
            self.report(label, wall - self.wall, cpu - self.cpu)
            self.wall, self.cpu = wall, cpu

    def report(self, label: str, wall: float, cpu: float) -> None:
        if self.on:
            print(f"npuprof timing: {label:<22} {wall:7.3f} s wall {cpu:7.3f} s cpu", file=sys.stderr)


class _Superseded:
    """Moves the ``path`` about to be replaced (a re-parse) out of the way under a hidden name, so that the
    rename of the new file does not replace it: ext4 flushes a file renamed over another one, and frees the
    old one's pages and blocks, in the rename (~0.5 s for 1 GB). The old file is deleted once this process
    has written its tables (a concurrent delete would slow their fsyncs down), in a thread
    (``release_soon()``: ~0.2 s for 1 GB, mostly waiting on the journal), or put back by ``finish()`` when
    the new one was never written."""

    def __init__(self, path: Path) -> None:
        tag = f"{os.getpid()}-{os.urandom(6).hex()}"  # its writer's, as atomic.temp_name's
        self.path, self.name = path, str(path.parent / f".{path.name}.{tag}.old")
        self.moved = False
        self.thread: Any = None
        if path.is_file() and not path.is_symlink():
            with contextlib.suppress(OSError):
                os.rename(path, self.name)
                self.moved = True

    def release_soon(self) -> None:
        """The new file is in place: delete the old one in a thread, overlapping what is left to do."""
        if self.moved and os.path.lexists(self.path):
            import threading

            self.thread = threading.Thread(target=self._settle, name="npuprof-unlink", daemon=True)
            self.thread.start()

    def finish(self) -> None:
        """Wait for the deletion, or settle now: delete the old file, or put it back."""
        if self.thread is not None:
            self.thread.join()
        else:
            self._settle()

    def _settle(self) -> None:
        if self.moved:
            with contextlib.suppress(OSError):
                if os.path.lexists(self.path):
                    os.unlink(self.name)
                else:
                    os.rename(self.name, self.path)


def write_outputs(
    raw: Path,
    out_dir: Path,
    rank: int | None,
    workers: int = 1,
    export_db: bool = False,
    notes: Sequence[str] = (),
    gzip_read: list[Any] | None = None,
) -> list[str]:
    """Parse ``raw`` and write every table into ``out_dir`` (with ``export_db`` the db files too);
    return the file names written. ``gzip_read``: for a .gz, gets what its decompression found
    (trace_view.GzipRead)."""
    superseded = _Superseded(out_dir / "trace_view.json")
    try:
        return _write_outputs(raw, out_dir, rank, workers, superseded, export_db, notes, gzip_read)
    finally:
        superseded.finish()


def _write_outputs(
    raw: Path,
    out_dir: Path,
    rank: int | None,
    workers: int,
    superseded: _Superseded,
    export_db: bool,
    notes: Sequence[str] = (),
    gzip_read: list[Any] | None = None,
) -> list[str]:
    """The rank's tables (`_write_outputs_of`), refused as ``changed`` when the trace was written while they
    were made of it (TraceVersion)."""
    from npuprof.analysis.trace_loader import TraceVersion

    read_as = TraceVersion(raw)
    try:
        written = _write_outputs_of(raw, out_dir, rank, workers, superseded, export_db, notes, gzip_read)
        read_as.still_the_same()
    finally:
        read_as.close()
    return written


def _write_outputs_of(
    raw: Path,
    out_dir: Path,
    rank: int | None,
    workers: int,
    superseded: _Superseded,
    export_db: bool,
    notes: Sequence[str],
    gzip_read: list[Any] | None = None,
) -> list[str]:
    phase = _Phases()
    written: list[str] = []
    # trace_view.json is written from the (plain) raw trace, event by event, in torch_npu's form: read from
    # the raw file itself, or for a .gz one from a private decompressed copy (read behind its decompression
    # with -j > 1). With -j > 1 a forked process writes the events while this one builds the tables.
    with atomic_writer(out_dir / "trace_view.json", "wb", fsync=False) as tv, contextlib.ExitStack() as stack:
        with open(raw, "rb") as probe:
            gz = probe.read(2) == b"\x1f\x8b"
        import msgspec

        from npuprof.analysis import (
            annotations,
            call_stacks,
            communication,
            step_fields,
            summary_schema,
            tables,
            trace_body,
            trace_view,
        )
        from npuprof.analysis.scan import scan, scan_behind
        from npuprof.analysis.trace_loader import TraceError, with_gzip_note

        gzip_note: str | None = None  # bytes after the gzip data, left out
        if not gz:
            source = stack.enter_context(open(raw, "rb")).fileno()
            extract, meta, events_end = scan(raw, fd=source, workers=workers)
        else:
            import tempfile

            plain = stack.enter_context(tempfile.TemporaryFile(dir=out_dir))
            source = plain.fileno()
            if workers > 1:  # read behind the decompression (a forked process), then split the rest
                growth = trace_view.Decompression(raw, plain)
                try:
                    extract, meta, events_end = scan_behind(raw, source, growth, workers)
                except TraceError as exc:
                    raise with_gzip_note(exc, growth.note) from exc
                finally:
                    growth.cancel()
                gzip_note, found = growth.note, growth.read
            else:
                found = trace_view.decompress(raw, plain)
                gzip_note = found.note
                try:
                    extract, meta, events_end = scan(raw, fd=source, workers=workers)
                except TraceError as exc:
                    raise with_gzip_note(exc, gzip_note) from exc
            if gzip_read is not None and found is not None:
                gzip_read.append(found)
        phase("scan")
        info = meta.get("distributedInfo")
        traced = info.get("rank") if isinstance(info, dict) and isinstance(info.get("rank"), int) else None
        rank_note = list(notes)  # what the caller knows of the capture, then the rank's own
        if gzip_note:
            rank_note.append(gzip_note)
        if rank is None:
            rank = traced
        elif traced is not None and traced != rank:  # as msprof-analyze does, the file name wins
            rank_note.append(
                f"the trace says rank {traced} (distributedInfo), profiler_info_{rank}.json rank {rank}: "
                f"reported as rank {rank}"
            )
        base_ns = tables.base_ns_of(meta)
        # the user's marks and ranges, --msprof-tx's comm: ranges and GC pauses (nothing when none)
        rank_notes = annotations.RankAnnotations(raw.parent)
        events_start = trace_view.events_start(raw, source)
        fork = workers > 1
        # communication and memory tables in a second process (forked: it shares the columns) when allowed;
        # the operators' nesting, which both need, is computed here (after the call stacks) and handed over
        comm_record = rank_notes.want.comm_ranges if rank_notes.want is not None else None
        comm_calls = communication.call_groups(
            [(r.name, r.start_ns, r.end_ns) for r in comm_record.ranges] if comm_record else [], base_ns
        )
        comm_ops = communication.collect(extract, meta, comm_calls)
        nested = SharedColumns(tables.OpView, len(extract.op_ts), fork)
        side = Forked(
            fork, lambda: _side_outputs(extract, meta, out_dir, rank, nested.get, comm_ops), nested.after_fork
        )
        body: trace_body.SplitBody | None = None
        db_job: Forked | None = None
        spooled: trace_view.Spooled | None = None
        try:
            stacks = None
            if meta.get("with_stack"):  # torch >= 2 writes the stacks as python_function spans (scanned)
                added = call_stacks.call_stacks(extract, call_stacks.frames_of(extract))
                stacks = trace_body.Stacks(extract, added)
                phase("call stacks")
            tv.flush()
            # the events, rewritten, by one forked process, or by two (each half) where the trace allows
            body = trace_body.SplitBody(
                fork,
                tv.fileno(),
                out_dir,
                raw,
                source,
                (events_start, events_end),
                trace_body.split_point(extract.cuts, events_start, events_end),
                base_ns,
                stacks,
                trace_body.overlap_pids(extract),
                damaged=bool(extract.damaged.total or extract.timeless),
            )
            ops = tables.nest(extract)
            nested.publish(ops)
            phase("nest")
            tabs = tables.build_tables(extract, ops, base_ns)
            phase("tables")
            rank_notes.read_spans(raw, source)
            rank_notes.take_layer(extract.mstx)
            layers = rank_notes.trace_events(extract.process_names, tables.device_id_of(extract), base_ns)
            if export_db:  # the db export: forked (it overlaps writing trace_view.json), or inline below
                from npuprof.analysis import db_export

                sources = db_export.DbSources(
                    extract, ops, tabs, tables.step_windows(extract), comm_ops, rank, base_ns, meta,
                    raw.parent, rank_notes.all_spans(base_ns), rank_notes.gc,
                )  # fmt: skip
                db_job = Forked(fork, functools.partial(_db_outputs, out_dir, sources))
            spooled = trace_view.Spooled(
                trace_view.overlays(tabs, extract, comm_ops, base_ns, layers), out_dir
            )
            phase("trace_view overlays")
            written_body = body.result()
            phase("trace_view events")
            head = trace_view.metadata(extract, written_body)
            trace_view.write_tail(tv.fileno(), head, not written_body.wrote, spooled)
        except BaseException:
            if body is not None:
                body.close()
            nested.close()
            side.close()
            if db_job is not None:
                db_job.cancel()
            raise
        finally:
            if spooled is not None:
                spooled.close()
    written.append("trace_view.json")
    phase("trace_view")

    try:
        write_csv(out_dir / "step_trace_time.csv", step_fields.STEP_HEADER, tabs.step_rows)
        for name, table in (
            ("kernel_details.csv", tabs.kernels),
            ("operator_details.csv", tabs.operators),
            ("op_statistic.csv", tabs.op_stats),
        ):  # typed columns, formatted here (analysis/ascend_tables.py)
            write_csv(out_dir / name, table.header, lines=table.csv_lines())
    except BaseException:
        side.close()
        if db_job is not None:
            db_job.cancel()
        raise
    written += ["step_trace_time.csv", "kernel_details.csv", "operator_details.csv", "op_statistic.csv"]
    phase("csv")
    superseded.release_soon()  # after this process's fsyncs, which a concurrent delete would slow down
    side_result = side.result()
    phase("wait for side tables")
    phase.report("(side tables)", *side_result["seconds"])
    written += side_result["files"]
    for step, peak in zip(tabs.summary["steps"], side_result["step_peaks"], strict=False):
        step["memory_peak_mb"], step["memory_peak_reserved_mb"] = peak or (None, None)
    peaks = side_result["peaks"]
    comm_summary = side_result["communication"]
    db_note = None
    db_steps_note: list[str] = []
    if db_job is not None:
        try:
            db_result = db_job.result()
        except (Exception, SystemExit) as exc:  # the child died: the text tables stand without it
            db_result = {"files": [], "seconds": (0.0, 0.0), "error": f"{type(exc).__name__}: {exc}"}
            _drop_db(out_dir, rank)
        phase("wait for the db")
        phase.report("(db)", *db_result["seconds"])
        written += db_result["files"]
        db_note = db_result.get("error")
        if db_result["files"]:
            from npuprof.analysis.db_export import steps_left_out

            db_steps_note = steps_left_out(tables.step_windows(extract))

    world = meta.get("distributedInfo")
    world_size = world.get("world_size") if isinstance(world, dict) else None
    if not isinstance(world_size, int) or isinstance(world_size, bool) or not 0 < world_size < 1 << 31:
        world_size = None  # the trace says anything: only a count of ranks is one
    summary = summary_schema.as_plain(
        msgspec.convert(
            {
                "rank": rank,
                "trace": raw.name,
                "events": extract.event_count,
                **tabs.summary,
                "memory": peaks,
                "communication": comm_summary,
                "communication_by_step": side_result.get("communication_by_step") or {},
                "world_size": world_size,
                **(
                    {"warnings": notes}
                    if (
                        notes := _said_once_if_died(raw, extract, rank_note, extract.warnings())
                        + tables.link_notes(tabs, extract)
                        + tables.process_notes(tabs, extract)
                        + tables.lane_notes(tabs)
                        + tables.device_notes(tabs, extract)
                        + side_result["memory_notes"]
                        + _db_warning(db_note)
                        + db_steps_note
                        + tables.base_ns_notes(meta)
                    )
                    else {}
                ),
                **({"time_base_ns": base_ns} if base_ns else {}),
                **({"cut_short": extract.cut_summary()} if extract.cut is not None else {}),
            },
            summary_schema.Summary,
        )
    )
    written += rank_notes.write(out_dir, tables.step_windows(extract), base_ns)
    write_json_fast(out_dir / SUMMARY_FILE, summary, indent=0)
    written.append(SUMMARY_FILE)
    phase("summary")
    return written


def _said_once_if_died(raw: Path, extract: Any, rank_note: list[str], warnings: list[str]) -> list[str]:
    """``rank_note`` then ``warnings``; for a trace its job died while torch wrote it, read cut short, the
    death's note and the cut reader's line as one line (cut_capture.died_while_written_line), first."""
    cut = extract.cut
    if cut is None or not is_cut_by_death(raw):
        return rank_note + warnings
    reader_line = cut.note(extract.event_count)  # then its steps left out, in the same line
    try:
        size = raw.stat().st_size
    except OSError:
        size = cut.size - cut.nuls
    whole = sorted({step[0] for step in extract.steps})
    said = died_while_written_line(size, extract.event_count, whole, list(extract.open_steps))
    said += extract.after_ops_note()
    return (
        [said]
        + [n for n in rank_note if not n.startswith(DIED_WHILE_WRITTEN)]
        + [w for w in warnings if not w.startswith(reader_line)]
    )


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m npuprof.analysis.parse",
        description="Parse one npuprof rank directory into ASCEND_PROFILER_OUTPUT/.",
    )
    parser.add_argument("rank_dir", type=Path)
    parser.add_argument("--force", action="store_true", help="re-parse even when analyse.done exists")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="processes reading the trace (default 1)")
    parser.add_argument("--db", action="store_true", help="also write the db export (--export-type db)")
    args = parser.parse_args(argv)
    outcome = parse_rank_dir(args.rank_dir, force=args.force, workers=max(1, args.jobs), export_db=args.db)
    msg = f"{outcome.rank_dir}: {outcome.status}" + (f": {outcome.reason}" if outcome.reason else "")
    print(msg, file=sys.stdout if outcome.ok else sys.stderr)
    return 0 if outcome.ok else 1


if __name__ == "__main__":
    sys.exit(main())
