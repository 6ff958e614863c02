"""A rank dir torch_npu parsed itself: the report's summary read from its tables, nothing re-parsed.

torch_npu writes ``ASCEND_PROFILER_OUTPUT/`` (docs/formats.md, "What the parser writes") without npuprof's
``npuprof_summary.json``. :func:`summary_of` builds that summary from the tables instead:

- steps from ``step_trace_time.csv``: a step's duration is Computing + Communication(Not Overlapped) + Free
  (the three parts a step is cut into), its start the first device task of the step
  (``kernel_details.csv``'s ``Start Time(us)``, epoch µs) less Preparing; where a step ran no task, the
  ``ProfilerStep#N`` span of ``trace_view.json``; a step's memory peak is over its host start to the end of
  torch_npu's window (first task + duration), which holds the whole host span, Preparing included;
- top kernels per step from ``kernel_details.csv`` (both real headers: the columns are found by name);
- top operators from ``operator_details.csv`` (no step column, so they count for the whole capture; torch_npu
  writes one row per operator call there, its parent untold, so an operator whose only child has its name
  is two calls, its total counted twice, where torch's and npuprof's own tables count one call:
  ``tables.OpView.inner_repeat``); without that file (torch_npu writes it only with record_shapes or
  with_stack) from the operators of ``trace_view.json``, nested as in a trace npuprof parses (calls counted
  as torch's);
- communication from ``communication.json``, memory peaks from ``memory_record.csv``.
Files that are absent leave their part empty, and the summary's warnings say which.
"""

from __future__ import annotations

import csv
import json
import math
import re
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from npuprof.analysis import vocabulary as vocab
from npuprof.analysis.summary_schema import TOP_PER_STEP, Summary, SummaryStep, TopKernel, TopOperator
from npuprof.results import layout

if TYPE_CHECKING:
    import numpy as np

STEP_FILE = "step_trace_time.csv"
KERNEL_FILE = "kernel_details.csv"
OPERATOR_FILE = "operator_details.csv"
_WINDOW = "_memory_window_end"  # a step's key until its memory peak is taken: where its window ends
UNKNOWN_START = -0.0  # a step's start_us not known: 0 in any sum, told apart by its sign (report.start_known)
COMMUNICATION_FILE = "communication.json"
MEMORY_FILE = "memory_record.csv"
TRACE_VIEW_FILE = "trace_view.json"
MAX_DEVICE_MB = float(1 << 30)  # 1 PiB: no device's memory comes near; a larger (or negative) size is damage
SDMA_PARTS = ("HCCS", "PCIE", "SIO")  # the links torch_npu's SDMA total is made of
# torch_npu's memory_record.csv components: PTA is PyTorch's caching allocator (what torch.npu reports);
# GE, APP and the others are CANN's own pools
ALLOCATOR_COMPONENT = "PTA"


class AscendTableError(ValueError):
    """A table torch_npu wrote cannot be read; the message names the file and the problem."""


def parsed_by_torch_npu(rank_dir: Path) -> bool:
    """torch_npu parsed this rank dir (its step or kernel table is there) and npuprof did not (no summary of
    npuprof's own, no Kineto trace it would parse)."""
    from npuprof.analysis.parse import SUMMARY_FILE

    out = rank_dir / layout.PARSED_DIR
    if not (out / STEP_FILE).is_file() and not (out / KERNEL_FILE).is_file():
        return False
    if parsed_by_npuprof(rank_dir):
        return False
    return not (out / SUMMARY_FILE).exists() and layout.find_raw_trace(rank_dir) is None


def parsed_by_npuprof(rank_dir: Path) -> bool:
    """npuprof recorded this capture with torch's own profiler (its record's backend is not torch_npu): its
    tables are npuprof's parse of a Kineto trace, never torch_npu's, even once its summary and its trace
    are gone (helper-208: read as torch_npu's, a CPU capture was reported as an NPU one, its operators'
    calls counted once each and listed again as "kernels by device time")."""
    backend = (layout.read_capture_record(rank_dir) or {}).get("backend")
    return isinstance(backend, str) and backend != "torch_npu"


def db_only_by_torch_npu(rank_dir: Path) -> bool:
    """torch_npu parsed this rank dir into its db only (``export_type=Db``): a profiler db, none of its
    text tables, nothing of npuprof's (no summary, no Kineto trace it would parse)."""
    from npuprof.analysis.parse import SUMMARY_FILE

    out = rank_dir / layout.PARSED_DIR
    if not layout.has_profiler_db(rank_dir) or (out / STEP_FILE).exists() or (out / KERNEL_FILE).exists():
        return False
    return not (out / SUMMARY_FILE).exists() and layout.find_raw_trace(rank_dir) is None


# in each such rank's JSON warnings; said once for all of them on the terminal (a note, not a fault)
PARSED_BY_TORCH_NPU = "parsed by torch_npu: read from its tables in ASCEND_PROFILER_OUTPUT/, not re-parsed"


def summary_of(rank_dir: Path) -> Summary:
    """The summary of a rank dir torch_npu parsed; AscendTableError when its step table is unreadable."""
    out = rank_dir / layout.PARSED_DIR
    warnings: list[str] = [PARSED_BY_TORCH_NPU]
    lacking = _lacking(out / KERNEL_FILE, KERNEL_COLUMNS)
    kernels: list[tuple[int | None, str, float, float]] = []
    unreadable, damaged, kernel_lines = 0, [], []
    if (out / KERNEL_FILE).is_file() and not lacking:
        try:
            kernels, unreadable, short, bad_steps, damaged, kernel_lines = _kernels(out / KERNEL_FILE)
            warnings.extend(damaged)
            if cut := _cut_short(out / KERNEL_FILE, short):
                warnings.append(cut)
            if bad_steps:
                warnings.append(_bad_step_ids_note(out / KERNEL_FILE, "Step Id", bad_steps, "in no step"))
        except AscendTableError as exc:
            warnings.append(f"{exc}: no top kernels")
            lacking = "unread"
    if lacking == "unread":
        pass  # said above
    elif lacking:
        warnings.append(f"{KERNEL_FILE} has no column {lacking}: its kernels are not read (no top kernels)")
    elif unreadable:
        rows = unreadable + len(kernels)
        some = f"{unreadable} of its {rows} rows" if kernels else f"all {rows} rows"
        warnings.append(
            f"{KERNEL_FILE}: {some} have no number for 'Start Time(us)' or 'Duration(us)', or a negative "
            "one (a damaged or cut file?): they are left out of the top kernels and of the steps' device "
            "time"  # helper-217: a duration of -5.5 was said to be no number
        )
    elif not kernels and not damaged:
        warnings.append(f"no {KERNEL_FILE} rows: no top kernels")
    steps, device_id, whole = _steps(out / STEP_FILE, kernels, out / TRACE_VIEW_FILE, warnings)
    if longer := _longer_than_their_step(kernels, kernel_lines, whole):
        warnings.append(longer)
    if rowless := _steps_without_a_row(kernels, steps):
        warnings.append(rowless)
    memory_rows: list[tuple[float, float, float | None]] = []
    operators: list[TopOperator] = []
    try:
        memory_rows = _memory(out / MEMORY_FILE, warnings) if (out / MEMORY_FILE).is_file() else []
    except AscendTableError as exc:
        warnings.append(f"{exc}: no memory figures")
    try:
        said = len(warnings)
        operators = _top_operators(out / OPERATOR_FILE, warnings)  # every name, largest first
        # helper-217: not when its rows were left out as damaged (said), as the kernel and memory tables
        if not operators and (out / OPERATOR_FILE).is_file() and len(warnings) == said:
            warnings.append(f"no {OPERATOR_FILE} rows: no top operators")
    except AscendTableError as exc:
        warnings.append(f"{exc}: no top operators")
    groups = _kernel_groups(kernels)
    if not (out / OPERATOR_FILE).is_file():
        operators = _trace_view_operators(out / TRACE_VIEW_FILE, warnings)
    comm_by_step: dict[str, dict[str, int | float]] = {}
    return Summary(
        rank=layout.rank_of(rank_dir),
        trace=str(out),
        events=len(kernels),
        device="NPU",
        device_id=device_id,
        steps=_with_memory(steps, memory_rows),
        top_operators=operators[:TOP_PER_STEP],
        top_kernels=_top_kernels(kernels, groups),
        operator_totals=operators,
        kernel_totals=_kernel_totals(groups),
        memory=_memory_peaks(memory_rows),
        communication=_communication(out / COMMUNICATION_FILE, kernels, warnings, comm_by_step),
        communication_by_step=comm_by_step,
        world_size=_world_size(rank_dir),
        warnings=warnings,
    )


KERNEL_COLUMNS = ("Name", "Start Time(us)", "Duration(us)")  # what the report reads of each device task
STEP_COLUMNS = ("Step", "Computing", "Free")  # a step table without these is not torch_npu's
CLUSTER_STEP_COLUMNS = ("Step", "Type", "Index")  # msprof-analyze's table across ranks has these


def _lacking(path: Path, columns: tuple[str, ...]) -> str:
    """The columns of ``columns`` the CSV's header lacks, as text ("" when it has them all, or when the
    file is not there or cannot be read: said where it is read)."""
    try:
        with _open_table(path) as handle:
            header = _header(next(csv.reader(handle), []))
    except (OSError, csv.Error):
        return ""
    missing = [c for c in columns if c not in header]
    return ", ".join(repr(c) for c in missing)


def _header(cells: list[str]) -> list[str]:
    """A table's first row as its header, without the byte order marks in front of its first cell: the file
    is read as UTF-8 with one BOM (utf-8-sig), and a table written over itself, or copied by a tool that adds
    its own, starts with two, the second read as text of the first column's name (helper-228:
    kernel_details.csv had no "Step Id", every kernel in no step; memory_record.csv no "Component", every
    pool's records one series; unsaid; docs/formats.md)."""
    return [cells[0].lstrip("\ufeff"), *cells[1:]] if cells else cells


def _open_table(path: Path) -> TextIO:
    """One of torch_npu's tables, opened as every result file is: never through a symbolic link (one could
    lead out of the tree: /etc/passwd read as operators), never blocking on a FIFO."""
    return open(layout.open_regular(path), newline="", encoding="utf-8-sig", errors="replace")


def _table_bytes(path: Path) -> bytes:
    """A JSON file of torch_npu's, without the byte order marks in front: json reads one, and a file written
    over itself has two (helper-228: communication.json was "unreadable (Expecting value: line 1 column 1)",
    its totals lost; as :func:`_header`)."""
    with open(layout.open_regular(path), "rb") as handle:
        data = handle.read()
    while data.startswith(BOM):
        data = data[len(BOM) :]
    return data


BOM = "\ufeff".encode()


# the longest cell read: csv's default (128 KiB) refused a table whose quote left open took more text than
# that (a memory_record.csv of 5,000 records lost them all, said as "field larger than field limit"), and a
# Call Stack cell of a deep stack may be long; no cell of torch_npu's comes near this
CELL_LIMIT = 64 << 20
# the largest trace_view.json whose operators stand in for a missing operator_details.csv
TRACE_VIEW_OPERATORS_LIMIT = 256 << 20


# what _numbered_rows knows of a row's text, for _Damage.leaves_out
PLAIN = 0  # one line of UTF-8 text, not the last: no quote left open, no damaged bytes (nothing to look for)
LOOK = 1  # look for them, cell by cell
OPEN_AT_END = 2  # the table ends inside a quote the row opened, without a line break after it


def _numbered_rows(path: Path, damage: _Damage) -> Iterator[tuple[int, dict[str | None, Any], int]]:
    """The rows of the table as csv.DictReader gives them (a row's cells past the header under the key None,
    the cells it lacks None; blank lines skipped), each with the line it starts on (the header's is 1), so
    that damage can be said where it is, and what its text says of damage (PLAIN, LOOK or OPEN_AT_END: its
    last line has no line break, and csv gives the quote's text up to the end as a cell, the row short by
    the cells it lost, no sign of the quote left). A cell past CELL_LIMIT ends the table there when a quote
    left open took it (what follows is the quote's text), told to ``damage``, the rows before it read; a
    line that is such a cell unquoted is left out alone, told to ``damage``, the rows after it read."""
    record: list[str] = []  # the lines of the row being read
    ended = []  # the table's last line has been read

    def lines(handle: TextIO) -> Iterator[str]:
        for text in handle:
            # a NUL is no text of torch_npu's (a tail zero-filled by a crash, a cut copy): damaged bytes, read
            # as those that are no UTF-8 are (helper-243: a Name holding NULs reached the report, its JSON and
            # CSV, unsaid; on Python 3.10, whose csv refuses a NUL, the whole table was unread)
            if "\x00" in text:
                text = text.replace("\x00", "\ufffd")
            record.append(text)
            yield text
        ended.append(True)

    limit = csv.field_size_limit(max(csv.field_size_limit(), CELL_LIMIT))
    start = 1
    try:
        with _open_table(path) as handle:
            reader = csv.reader(lines(handle))
            header = next(reader, None)
            header = None if header is None else _header(header)
            start = reader.line_num + 1
            record.clear()
            while header is not None:
                try:
                    cells = next(reader)
                except StopIteration:
                    break
                except csv.Error as exc:
                    # the reader goes on at the next line: only where no quote holds what follows
                    if not _an_unquoted_cell_past_the_limit(exc, record):
                        raise
                    damage.huge.append(start)
                    record.clear()
                    start = reader.line_num + 1
                    continue
                # helper-217: looking at every cell of every row cost ~100 µs a row (a kernel table of
                # 236,400 rows: 25 s), where a row on one line of text can hold no damage looked for
                if len(record) == 1 and not ended and "\ufffd" not in record[0]:
                    kind = PLAIN
                elif record[-1][-1:] not in ("\r", "\n") and _ends_inside_a_quote("".join(record)):
                    kind = OPEN_AT_END
                else:
                    kind = LOOK
                record.clear()
                # DictReader skips blank lines; a row of empty cells is one too (a spreadsheet saves its blank
                # rows so: helper-217, read as a step '-' of 0 ms, an operator named "", a damaged record)
                # helper-217: two tables joined (the second's header, its BOM kept, was a step '-' of 0 ms)
                # a BOM at a row's start: a table joined after another, without its header (helper-228:
                # memory_record.csv's "\ufeffPTA" was a pool of its own, its records left out unsaid)
                bom = bool(cells) and cells[0].startswith("\ufeff")
                if bom:
                    cells[0] = cells[0].lstrip("\ufeff")
                if cells[:1] and cells == header:
                    damage.headers.append(start)
                elif any(cells):
                    if bom:
                        damage.boms.append(start)
                    row: dict[str | None, Any] = dict(zip(header, cells, strict=False))
                    if len(cells) > len(header):
                        row[None] = cells[len(header) :]
                    row.update((key, None) for key in header[len(cells) :])
                    yield start, row, kind
                start = reader.line_num + 1
            record.clear()
    except layout.UnsafeFileError as exc:
        raise AscendTableError(f"{path.name} is {exc.strerror}") from None
    except csv.Error as exc:
        if not str(exc).startswith("field larger than field limit") or start == 1:
            raise AscendTableError(f"{path.name}: {exc}") from None
        damage.read_to = start  # helper-217
    except OSError as exc:
        raise AscendTableError(f"{path.name}: {exc}") from None
    finally:
        csv.field_size_limit(limit)


def _an_unquoted_cell_past_the_limit(exc: csv.Error, record: list[str]) -> bool:
    """Whether csv refused a row (its lines so far ``record``) for a cell past the field limit that no quote
    holds: one line of text that is no table's (a run of damaged bytes without a line break; helper-243:
    said as a quote left open, every row after it lost)."""
    return str(exc).startswith("field larger than field limit") and not _ends_inside_a_quote("".join(record))


def _ends_inside_a_quote(text: str) -> bool:
    """Whether the CSV text of one row ends inside a quoted cell, read as Python's csv reader reads it: a
    quote opens a cell only at its start, ``""`` inside is a quote, text after the closing quote is kept
    up to the next comma."""
    at = 0
    while at < len(text):  # at a cell's start
        if text[at] == '"':
            at += 1
            while True:
                close = text.find('"', at)
                if close < 0:
                    return True
                if not text.startswith('"', close + 1):
                    at = close + 1
                    break
                at = close + 2  # "" inside the cell
        comma = text.find(",", at)
        if comma < 0:
            return False
        at = comma + 1
    return False


def _cells(row: dict[str | None, Any]) -> list[tuple[str | None, str]]:
    """(column, text) of every cell of a row of :func:`_numbered_rows`, those past the header's included
    (column None)."""
    return [
        (key, c) for key, v in row.items() for c in (v if isinstance(v, list) else [v]) if isinstance(c, str)
    ]


_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # the line ends a table opened with newline="" is split at
# torch_npu writes operator_details.csv's Input Shapes and Call Stack with a line break after each ";" (one
# input, one frame a line; the cell quoted): a break there is its own, not a quote left open
_OWN_BREAK = re.compile(r";(?:\r\n|\r|\n)")


def _lines(lines: list[int]) -> str:
    return ", ".join(map(str, lines[:5])) + (", ..." if len(lines) > 5 else "")


class _Damage:
    """The rows of one table that are damaged, and how, to be said with their lines: a quote not closed on
    its line (csv reads the lines after it into that row's cells, their rows lost) and bytes that are no
    UTF-8 (read as U+FFFD). A row with damaged bytes in a column of ``read`` (every column when None: the
    figures and the keys a row is counted under) is left out; one with them only in other cells (a name)
    keeps its figures and is kept, the bytes shown as U+FFFD. ``multiline``: the columns whose line breaks
    after ";" are torch_npu's own (_OWN_BREAK).

    In such a table a quote left open can close on the quote that opens a later row's cell of lines, and
    that row's line then ends the damaged row (its last cell ending in ";"): the lines after, to the end of
    that cell and its row, come as rows of their own, out of step with the header (an operator named "8",
    its times another's). They are left out with the damaged row, their lines counted with it."""

    def __init__(self, name: str, read: tuple[str, ...] | None = None, multiline: tuple[str, ...] = ()):
        self.name, self.read, self.multiline = name, read, multiline
        self.quotes: list[tuple[int, int]] = []  # (line, how many lines after it the row took)
        self.not_text: list[int] = []  # left out
        self.kept: list[int] = []
        self.kept_in: set[str] = set()
        self.breaks: list[int] = []  # rows holding a line break inside a quoted text cell: read
        self.broken_in: set[str] = set()
        self._split = False  # the last row ended inside a cell of lines a quote left open split
        self.read_to = 0  # the line of the row whose cell past CELL_LIMIT ended the reading (_numbered_rows)
        self.headers: list[int] = []  # lines that repeat the header (_numbered_rows)
        self.boms: list[int] = []  # lines of rows a byte order mark starts (_numbered_rows)
        self.huge: list[
            int
        ] = []  # lines holding a cell past CELL_LIMIT with no quote around it (_numbered_rows)

    def leaves_out(self, line: int, row: dict[str | None, Any], kind: int = LOOK) -> bool:
        """Whether the row at ``line`` is damaged past reading (recorded, to be said by :meth:`notes`);
        ``kind``: what :func:`_numbered_rows` saw of its text."""
        if kind == PLAIN and not self._split:
            return False
        cells = _cells(row)
        lines = sum(len(_LINE_BREAK.findall(c.rstrip("\r\n"))) for _k, c in cells)
        own = self.multiline
        broken = [k for k, c in cells if _LINE_BREAK.search(_OWN_BREAK.sub(";", c) if k in own else c)]
        if self._split:
            at, taken = self.quotes[-1]
            self.quotes[-1] = (at, taken + 1 + lines)
        elif broken and self._cells_of_lines(row, broken):
            self.breaks.append(line)
            self.broken_in.update(map(repr, broken))
            self._split = False
            return self._not_text(line, cells)
        elif broken:
            self.quotes.append((line, lines))
        elif kind == OPEN_AT_END:
            # helper-217: without a line break after it, the quote left no sign in the cells: the row was
            # said "cut short" (step, kernel tables), "no number" (memory) or read (operators, its times
            # another's); lines it holds are torch_npu's own (a Call Stack cut inside)
            self.quotes.append((line, 0))
        else:
            self._split = False
            return self._not_text(line, cells)
        self._split = bool(self.multiline) and bool(cells) and cells[-1][1].endswith(";")
        return True

    def _cells_of_lines(self, row: dict[str | None, Any], broken: list[str | None]) -> bool:
        """Whether the line breaks of the cells ``broken`` of a row are text those cells hold, as csv reads
        them, not a quote left open: the row has the header's cells, and those cells are text (no column
        of ``read``) holding no comma. A quote left open holds the rest of its line and the lines after it,
        each a row of the table's commas; the row it ends on can still have the header's cells, its figures
        another row's (helper-217)."""
        if None in row or None in row.values():
            return False
        if self.read is None or any(k is None or k in self.read for k in broken):
            return False
        return not any("," in row[k] for k in broken)

    def _not_text(self, line: int, cells: list[tuple[str | None, str]]) -> bool:
        damaged = [k for k, c in cells if "\ufffd" in c]
        if not damaged:
            return False
        if self.read is None or any(k in self.read for k in damaged):
            self.not_text.append(line)
            return True
        self.kept.append(line)
        self.kept_in.update("cells past its header" if k is None else repr(k) for k in damaged)
        return False

    def notes(self, then: str) -> list[str]:
        """What is said of the damaged rows; ``then``: what those left out are left out of."""
        notes = []
        if self.read_to:
            limit = f"{CELL_LIMIT / (1 << 20):g} MiB"
            notes.append(
                f"{self.name}: a quote at line {self.read_to} is not closed within {limit}: the table is not "
                f"read past it (that row and those after it left out of {then})"
            )
        if len(self.quotes) == 1 and self.quotes[0][1]:
            line, taken = self.quotes[0]
            notes.append(
                f"{self.name}: a quote at line {line} is not closed on its line: the {taken} line(s) after "
                f"it were misread, their rows lost (that row left out of {then} too)"
            )
        elif len(self.quotes) == 1:  # on the last line: no line after it was taken
            notes.append(
                f"{self.name}: a quote at line {self.quotes[0][0]} is never closed (the table ends inside "
                f"it: a cut line?): that row is left out of {then}"
            )
        elif self.quotes:
            lines, taken = _lines([q for q, _t in self.quotes]), sum(t for _q, t in self.quotes)
            notes.append(
                f"{self.name}: quotes at lines {lines} are not closed on their lines: the {taken} line(s) "
                f"after them were misread, those rows lost (theirs left out of {then} too)"
            )
        if self.breaks:
            notes.append(
                f"{self.name}: {len(self.breaks)} row(s) hold a line break inside a quoted cell of "
                f"{', '.join(sorted(self.broken_in))} (line {_lines(self.breaks)}; torch_npu writes none: an "
                "edited table?): read as csv reads it, the break part of that cell"
            )
        if self.huge:
            notes.append(
                f"{self.name}: line {_lines(self.huge)} hold(s) a cell past {CELL_LIMIT / (1 << 20):g} MiB "
                "with no quote around it (no cell of torch_npu's comes near: damaged bytes?): left out of "
                f"{then}, the rows after read"
            )
        if self.headers:
            notes.append(
                f"{self.name}: its header is repeated at line {_lines(self.headers)} (tables joined?): not "
                "read as a row"
            )
        if self.boms:
            notes.append(
                f"{self.name}: a byte order mark starts line {_lines(self.boms)} (tables joined?): dropped, "
                "the row read"
            )
        if self.not_text:
            notes.append(
                f"{self.name}: {len(self.not_text)} line(s) are not UTF-8 text (damaged bytes; line "
                f"{_lines(self.not_text)}): left out of {then}"
            )
        if self.kept:
            columns = ", ".join(sorted(self.kept_in))
            notes.append(
                f"{self.name}: {len(self.kept)} line(s) are not UTF-8 text in {columns} only (damaged bytes; "
                f"line {_lines(self.kept)}): kept, their figures whole, those bytes shown as U+FFFD"
            )
        return notes


# no figure of torch_npu's tables comes near: 1e18 µs is 31,700 years (an epoch µs time now is 1.7e15), 1e18
# MB a zettabyte. A cell beyond it is damage: read, two such (1e308) summed to inf, which analyse's JSON wrote
# as Infinity, no JSON at all to a strict reader (helper-200)
MAX_CELL = 1e18
# torch_npu's times are int64 nanoseconds, written as µs: none is past 2**63 ns (9.223e15 µs, the year 2262).
# A time or duration cell past this bound (below it, whatever a float of the cell rounds to) is damage, left
# out and said (helper-228: a memory record at 9.3e15 µs became a raw event of 9.3e18 ns, past the int64
# that torch's raw memory events hold; docs/formats.md)
MAX_TIME_US = 9.2e15


def _past_time_note(name: str, columns: str, lines: list[int], then: str) -> str:
    """What is said of the rows left out for a time past MAX_TIME_US in ``columns``."""
    return (
        f"{name}: {len(lines)} row(s) have a {columns} past {MAX_TIME_US:.2g} µs (beyond 2**63 ns: no "
        f"clock's time; a damaged file?): left out of {then} (line {_lines(lines)})"
    )


def _number(text: str | None) -> float | None:
    """A cell as a finite float within ±MAX_CELL; None for torch_npu's ``N/A``, an empty cell or a damaged
    one."""
    if text is None:
        return None
    try:
        value = _float(text)
    except ValueError:
        return None
    return value if abs(value) <= MAX_CELL else None


def _float(text: str) -> float:
    """A cell's number as torch_npu writes one: ASCII, no "_". float() also takes "1_000" (1000) and digits
    of other scripts ("１２３", "١٢٣": 123), which no writer of these tables makes: damage, read as a figure
    (helper-228; trace times refuse them too, docs/formats.md). ValueError for any other text."""
    text = text.strip()
    if not text.isascii() or "_" in text:
        raise ValueError(text)
    return float(text)


def _size(text: str | None) -> float | None:
    """A memory size cell as a finite float, however large (sizes no device has are told apart from cells
    that are no number, and said: MAX_DEVICE_MB)."""
    try:
        value = _float(text or "")
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _duration(text: str | None) -> float | None:
    """A time cell that may be absent (empty, ``N/A``: 0), else a finite number >= 0; None when damaged."""
    if text is None or text.strip() in ("", "N/A"):
        return 0.0
    value = _number(text)
    return value if value is not None and value >= 0 else None


def _step_id(text: str | None) -> int | None:
    """A step (or device) number as torch_npu writes it: ASCII digits, or digits and a point and zeros (a
    writer through pandas makes a column of ints with gaps floats: "3.0"); nothing else. helper-201: read as
    a float, "1_0" was step 10 (float() takes underscores), "1e300" a step '-' said to be no whole number.
    At most STEP_DIGITS digits (leading zeros aside): helper-243: a cell of 5,000 digits was past Python's
    limit on int(), the rank unreadable, and one of 30 a step no int64 holds."""
    digits = (text or "").strip()
    whole, point, zeros = digits.partition(".")
    if point and (zeros.strip("0") or not zeros):
        return None
    if not (whole.isascii() and whole.isdigit()) or len(whole.lstrip("0")) > STEP_DIGITS:
        return None
    return int(whole)


STEP_DIGITS = 18  # a step number's digits at most: below 2**63, in an int64 (as a database's integers are)
SHOWN_CELL = 40  # the characters of a cell a note shows


def _bad_step_ids_note(path: Path, column: str, bad: list[str], then: str) -> str:
    """What is said of cells of a step column that are not empty and no step number (:func:`_step_id`)."""
    cut = [s if len(s) <= SHOWN_CELL else f"{s[:SHOWN_CELL]}..." for s in bad[:3]]
    shown = ", ".join(map(repr, cut)) + (", ..." if len(bad) > 3 else "")
    return (
        f"{path.name} has {len(bad)} {column} cell(s) that are no step number (ASCII digits, at most "
        f"{STEP_DIGITS}: {shown}): {then}"
    )


def _is_short(row: dict[str | None, Any]) -> bool:
    """A row with fewer cells than the header (csv.DictReader fills the cells it lacks with None)."""
    return None in row.values()


class _Shape:
    """The rows of one table whose cells are not the header's in number, left out and said with their
    lines: fewer (a copy or a write that stopped mid-row, a cell lost) or more (two rows run together, a
    comma not quoted). Either way the cells after the first one lost or added are read under other columns'
    names: an operator's Device Total Duration(us) as its Host Total, a record's Total Active(MB) as its
    Total Reserved (docs/formats.md, "What the parser writes": every row of torch_npu's has its header's
    cells)."""

    def __init__(self, name: str, short: bool = True):
        """``short``: whether rows of fewer cells are left out here (the step and kernel tables say theirs
        with :func:`_cut_short`)."""
        self.name, self.short_too = name, short
        self.short: list[int] = []
        self.long: list[int] = []

    def leaves_out(self, line: int, row: dict[str | None, Any]) -> bool:
        if self.short_too and _is_short(row):
            self.short.append(line)
        elif any(c.strip() for c in row.get(None) or ()):  # empty cells past the header: a trailing comma
            self.long.append(line)
        else:
            return False
        return True

    def notes(self, then: str) -> list[str]:
        """What is said of the rows left out; ``then``: what they are left out of."""
        notes = []
        if self.short:
            cut = _cut_short(Path(self.name), len(self.short), f"left out of {then}")
            notes.append(f"{cut} (line {_lines(self.short)})")
        if self.long:
            notes.append(
                f"{self.name} has {len(self.long)} row(s) with more cells than its header (two rows run "
                f"together?): left out of {then} (line {_lines(self.long)})"
            )
        return notes


def _cut_short(path: Path, short_rows: int, then: str = "its last figures may be wrong") -> str:
    """A warning when the table looks cut (a copy or a write that stopped mid-row: no row of torch_npu's has
    fewer cells than the header, :func:`_is_short`), else "". A last row without a line break is not a
    sign: Ascend's own 2025 kernel table ends so, every row whole (tests/fixtures' kernel_details_2025.csv).
    ``then`` says what became of those rows."""
    if not short_rows:
        return ""
    what = f"{short_rows} row(s) with fewer cells than its header"
    return f"{path.name} looks cut short ({what}): {then}"


def _kernels(
    path: Path,
) -> tuple[list[tuple[int | None, str, float, float]], int, int, list[str], list[str], list[int]]:
    """(step, name, start epoch µs, duration µs) of each device task, how many rows had no number for
    the start or the duration (``N/A``, a damaged cell, a row cut short), how many rows had fewer
    cells than the header, the Step Id cells that were neither empty nor a step number, what is said
    of the rows damaged past reading (:class:`_Damage`: left out), and the line of each task."""
    kernels, unreadable, short, bad_steps, past, lines = [], 0, 0, [], [], []
    streams: list[str] = []
    # helper-202: a quote not closed on its line took the lines after it into one cell (their kernels lost,
    # said as a row cut short), bytes that are no UTF-8 gave a kernel a name of U+FFFD, unsaid
    damage = _Damage(KERNEL_FILE, read=("Step Id", "Start Time(us)", "Duration(us)"))
    # helper-217: a row of more cells than the header (two rows run together: the second's kernel lost) was
    # read as whole, unsaid
    shape = _Shape(KERNEL_FILE, short=False)
    for line, row, kind in _numbered_rows(path, damage):
        if damage.leaves_out(line, row, kind) or shape.leaves_out(line, row):
            continue
        if _is_short(row):
            short += 1
        start, duration = _number(row.get("Start Time(us)")), _number(row.get("Duration(us)"))
        if (start is not None and start > MAX_TIME_US) or (duration is not None and duration > MAX_TIME_US):
            past.append(line)
            continue
        # helper-217: a negative start (before 1970) was read, the step then starting there, unsaid
        if start is None or duration is None or start < 0 or duration < 0:
            unreadable += 1
            continue
        step = _step_id(row.get("Step Id"))
        if step is None and (row.get("Step Id") or "").strip():  # helper-201: "1.5" was in no step, unsaid
            bad_steps.append((row.get("Step Id") or "").strip())
        kernels.append((step, row.get("Name") or "", start, duration))
        streams.append((row.get("Stream ID") or "").strip())
        lines.append(line)
    then = "the top kernels and the steps' starts"
    notes = [*damage.notes(then), *shape.notes(then)]
    if past:
        notes.append(_past_time_note(KERNEL_FILE, "'Start Time(us)' or 'Duration(us)'", past, then))
    if repeated := _repeated(kernels, streams, lines):
        # helper-228: a table joined with itself counted every task twice, said only as a repeated header
        notes.append(
            f"{KERNEL_FILE}: {len(repeated)} row(s) repeat an earlier task whole (its step, stream, name, "
            "start and duration: a table written twice, or joined with itself?): each is counted, in "
            f"the top kernels' counts and times (line {_lines(repeated)})"
        )
    return kernels, unreadable, short, bad_steps, notes, lines


def _repeated(
    kernels: list[tuple[int | None, str, float, float]], streams: list[str], lines: list[int]
) -> list[int]:
    """The lines of the tasks that repeat an earlier one whole: its step, stream, name, start (to the
    table's 0.001 µs) and duration, which no two tasks share. Two streams may each run a task of one name
    at one time (a collective's tasks on its streams; helper-243: such a pair was said to be a table joined
    with itself). One C-level pass when there are none."""
    tasks = list(zip(kernels, streams, strict=True))
    if len(set(tasks)) == len(tasks):
        return []
    seen: set[tuple[tuple[int | None, str, float, float], str]] = set()
    repeated = []
    for task, line in zip(tasks, lines, strict=True):
        if task in seen:
            repeated.append(line)
        seen.add(task)
    return repeated


# how much longer than its step a task may be, for the tables' rounding (to 0.001 or 0.01 µs each)
STEP_SLACK_US = 1.0


def _steps_without_a_row(
    kernels: list[tuple[int | None, str, float, float]], steps: list[dict[str, Any]]
) -> str:
    """What is said of the kernel table's steps that the step table has no row for, else "". torch_npu
    writes a row for each step its tasks are in (docs/formats.md, "Step breakdown"): a row was lost, or the
    tables are of two captures (helper-243: a step's row deleted, its tasks stayed in the top kernels and
    the step was gone from the report, unsaid)."""
    shown = {s["step"] for s in steps}
    tasks = Counter(step for step, _name, _start, _dur in kernels if step is not None and step not in shown)
    if not tasks:
        return ""
    numbers = sorted(tasks)
    listed = ", ".join(map(str, numbers[:5])) + (", ..." if len(numbers) > 5 else "")
    return (
        f"{KERNEL_FILE} has {sum(tasks.values())} task(s) of {len(numbers)} step(s) that {STEP_FILE} has no "
        f"row for (step {listed}: a row lost, or tables of two captures?): they are counted in the top "
        "kernels; those steps are not shown"
    )


def _longer_than_their_step(
    kernels: list[tuple[int | None, str, float, float]], lines: list[int], whole: dict[int | None, float]
) -> str:
    """What is said of the tasks that last longer than their whole step (``whole``: the step table's
    duration of each step whose three parts it wrote as numbers; under None, the row of a capture without
    steps, which holds its every task), else "". torch_npu's step runs from its
    first task to the later of its last task's end and its host span's end (docs/formats.md, "Step
    breakdown"): no task of the step is longer. One of the two tables is damaged or not of this capture,
    and which is not known: the tasks are kept, said (helper-228: a duration of 1e12 µs was the top kernel
    of a step of 5.5 ms, unsaid; helper-243: a task of no step was not checked, nor in a capture without
    steps, whose one row spans it whole)."""
    longer = [
        (duration, line, step, name)
        for (step, name, _start, duration), line in zip(kernels, lines, strict=True)
        if step in whole and duration > whole[step] + STEP_SLACK_US
    ]
    if not longer:
        return ""
    duration, line, step, name = max(longer, key=lambda k: (k[0], -k[1]))
    return (
        f"{KERNEL_FILE}: {len(longer)} task(s) last longer than their whole step in {STEP_FILE} (Computing + "
        f"Communication(Not Overlapped) + Free; the longest: {name!r}, {duration:.15g} µs in step "
        f"{'-' if step is None else step} of "
        f"{whole[step]:.15g} µs, line {line}): one of the two tables is damaged or of another capture; their "
        f"durations are counted as written (line {_lines(sorted(k[1] for k in longer))})"
    )


def _steps(
    path: Path, kernels: list[tuple[int | None, str, float, float]], trace_view: Path, warnings: list[str]
) -> tuple[list[dict[str, Any]], int | None, dict[int | None, float]]:
    """The steps of the step table, its device id, and the duration of each step whose Computing,
    Communication(Not Overlapped) and Free it wrote as numbers, none negative (the longest of its rows)."""
    if not path.is_file():
        hint = (
            f"; its trace can be analysed on its own: npuprof analyse {trace_view}"
            if trace_view.is_file()
            else ""
        )
        raise AscendTableError(f"no {STEP_FILE} in {path.parent}: torch_npu's parse did not finish{hint}")
    if not _lacking(path, CLUSTER_STEP_COLUMNS):
        raise AscendTableError(
            f"{STEP_FILE} is msprof-analyze's cluster_step_trace_time.csv (a row a rank or stage: columns "
            "'Type', 'Index'), not one rank's step table: analyse the rank dirs it was made from"
        )
    lacking = _lacking(path, STEP_COLUMNS)
    if lacking:
        raise AscendTableError(
            f"{STEP_FILE} has no column {lacking} (is it comma-separated UTF-8, as torch_npu writes it?)"
        )
    first_task: dict[int | None, float] = {}
    for step, _name, start, _dur in kernels:
        if start < first_task.get(step, math.inf):
            first_task[step] = start
    rows, device_id, missing, negative, bad_steps, short = [], None, set(), set(), [], 0
    whole: dict[int | None, float] = {}
    # helper-201: a quote not closed on its line read the lines after it into one cell, the steps there
    # vanishing, said only as "no value for Preparing"; a line of bytes that are no UTF-8 was a step "-" of
    # zeros. Every cell of the table is a figure: a row with either is left out
    damage = _Damage(STEP_FILE)
    # helper-217: a row of more cells than the header was read shifted (a cell too many in front: a step 0
    # of another column's figures), unsaid
    shape = _Shape(STEP_FILE, short=False)
    for line, row, kind in _numbered_rows(path, damage):
        if damage.leaves_out(line, row, kind) or shape.leaves_out(line, row):
            continue
        if _is_short(row):
            # helper-201: a row cut off by a copy ("0,2,200,2") was a step of made-up figures, its missing
            # cells counted as 0; it is left out, said as kernel_details.csv's short rows are
            short += 1
            continue
        if device_id is None:
            device_id = _step_id(row.get("Device_id"))
        values, parts = {}, 0
        for key, column in (
            ("computing_us", "Computing"),
            ("comm_not_overlapped_us", "Communication(Not Overlapped)"),
            ("overlapped_us", "Overlapped"),
            ("communication_us", "Communication"),
            ("free_us", "Free"),
            ("bubble_us", "Bubble"),
            ("preparing_us", "Preparing"),
        ):
            value = _number(row.get(column))
            if value is not None and abs(value) > MAX_TIME_US:  # helper-228: 9e17 µs was a step's duration
                value = None
            if value is None:
                missing.add(column)
            elif value < 0 and column != "Preparing":  # preparing is negative when a step's task starts early
                # helper-228: a Computing of -1000 was summed into the step's duration (500 - 1000: a step
                # of -500 µs), only "a damaged table?" said; counted as 0, as a cell of no number is
                negative.add(column)
                value = 0.0
            elif column in _STEP_PARTS:
                parts += 1
            values[key] = value or 0.0
        step = _step_id(row.get("Step"))
        if step is None and (row.get("Step") or "").strip():
            bad_steps.append(row["Step"].strip())
        rows.append((step, values))
        # a row of no Step: a capture without steps as one, holding every task (npuprof's own table writes it
        # so: step_breakdown.StepBreakdown.ascend_rows), the bound of the tasks of no step
        if (step is not None or not (row.get("Step") or "").strip()) and parts == len(_STEP_PARTS):
            duration = values["computing_us"] + values["comm_not_overlapped_us"] + values["free_us"]
            whole[step] = max(whole.get(step, 0.0), duration)
    damaged = [*damage.notes("the steps"), *shape.notes("the steps")]
    warnings.extend(damaged)
    cut = _cut_short(path, short, "left out of the steps")
    if not rows:
        why = "; ".join([*damaged, cut] if cut else damaged)
        raise AscendTableError(f"{STEP_FILE} has no rows" + (f" whole: {why}" if why else ""))
    if cut:
        warnings.append(cut)
    if missing:
        warnings.append(f"{STEP_FILE} has no value for {', '.join(sorted(missing))} (counted as 0)")
    if negative:
        warnings.append(
            f"{STEP_FILE} has negative times in {', '.join(sorted(negative))} (a damaged table?): "
            "counted as 0"
        )
    if bad_steps:
        warnings.append(_bad_step_ids_note(path, "Step", bad_steps, "shown as step '-'"))
    numbers = Counter(step for step, _ in rows if step is not None)
    repeated = sorted(step for step, k in numbers.items() if k > 1)
    if repeated:
        warnings.append(f"{STEP_FILE} has more than one row for step(s) {repeated}: each row is shown")
    host_spans = None
    if any(step not in first_task for step, _ in rows):
        host_spans = _profiler_steps(trace_view)
    steps, misplaced = [], []
    for step, values in rows:
        duration = values["computing_us"] + values["comm_not_overlapped_us"] + values["free_us"]
        if step in first_task:
            start = first_task[step] - values["preparing_us"]
            # torch_npu's window runs from the first task to the later of the last task's end and the host
            # span's end (docs/formats.md): from the host step's start to there, the step's memory window
            window_end = first_task[step] + duration
            if not 0 <= start <= MAX_TIME_US:
                # helper-228: a Preparing of 1e17 µs started the step at -9.8e16 µs (before 1970), that
                # start compared across ranks, unsaid
                misplaced.append(step)
                start = window_end = UNKNOWN_START  # and no memory peak
        elif host_spans and step in host_spans:
            start, window_end = host_spans[step]
        else:
            start = window_end = math.nan
        steps.append(
            {
                "step": step,
                "start_us": start,
                "duration_us": round(duration, 3),
                **values,
                _WINDOW: window_end,
            }
        )
    if misplaced:
        warnings.append(
            f"{STEP_FILE}: the Preparing of step(s) {misplaced} puts their start before 1970 or past "
            f"{MAX_TIME_US:.2g} µs (a damaged table?): their start (skew across ranks, memory peak) is not "
            "known"
        )
    unknown = [s["step"] for s in steps if math.isnan(s["start_us"])]
    if unknown:
        # helper-273: said "no task in kernel_details.csv" of a table whose tasks all had an empty Step Id
        stepless = sum(1 for step, _name, _start, _dur in kernels if step is None)
        why = f"no task of theirs in {KERNEL_FILE}"
        if stepless and None not in unknown:
            why += f": {stepless} of its {len(kernels)} tasks have no Step Id"
        warnings.append(
            f"no start time for steps {unknown} ({why}; no ProfilerStep in {TRACE_VIEW_FILE}): their start "
            "skew across ranks is not known"
        )
        for s in steps:
            if math.isnan(s["start_us"]):
                s["start_us"] = s[_WINDOW] = UNKNOWN_START  # and no memory peak
    for s in steps:
        s["start_us"] = round(s["start_us"], 3)
    return steps, device_id, whole


_STEP_PARTS = ("Computing", "Communication(Not Overlapped)", "Free")  # what a step's duration is made of


def _profiler_steps(trace_view: Path) -> dict[int, tuple[float, float]]:
    """The start and end (epoch µs) of each ``ProfilerStep#N`` span of torch_npu's trace_view.json."""
    if not trace_view.is_file():
        return {}
    from npuprof.analysis.trace_loader import TraceError, load_trace

    try:
        trace = load_trace(trace_view, keep=lambda e: e.ph == "X" and e.name.startswith("ProfilerStep#"))
    except TraceError:
        return {}
    spans: dict[int, tuple[float, float]] = {}
    for event in trace.events:
        number = _step_id(event.name.partition("#")[2])
        if number is not None and isinstance(event.ts, float):
            start = event.ts + trace.ts_base
            spans.setdefault(number, (start, start + (event.dur if isinstance(event.dur, float) else 0.0)))
    return spans


def _kernel_groups(
    kernels: list[tuple[int | None, str, float, float]],
) -> dict[tuple[int | None, str], list[float]]:
    """(step, name) -> [count, summed duration] of the device tasks."""
    groups: dict[tuple[int | None, str], list[float]] = {}
    for step, name, _start, duration in kernels:
        acc = groups.setdefault((step, name), [0, 0.0])
        acc[0] += 1
        acc[1] += duration
    return groups


def _top_kernels(
    kernels: list[tuple[int | None, str, float, float]],
    groups: dict[tuple[int | None, str], list[float]] | None = None,
) -> list[TopKernel]:
    groups = _kernel_groups(kernels) if groups is None else groups
    by_step: dict[int | None, list[TopKernel]] = {}
    for (step, name), (count, total) in groups.items():
        by_step.setdefault(step, []).append(TopKernel(step=step, name=name, count=int(count), total_us=total))
    overall: dict[str, float] = {}
    for (_step, name), (_count, total) in groups.items():
        overall[name] = overall.get(name, 0.0) + total
    # each step's first, and the capture's first in every step (see tables._grouped_top)
    top_overall = set(sorted(overall, key=lambda name: (-overall[name], name))[:TOP_PER_STEP])
    out = []
    for step in sorted(by_step, key=lambda s: (s is None, s or 0)):
        ranked = sorted(by_step[step], key=lambda k: (-k.total_us, k.name))
        chosen = [k for i, k in enumerate(ranked) if i < TOP_PER_STEP or k.name in top_overall]
        out.extend(
            TopKernel(step=k.step, name=k.name, count=k.count, total_us=round(k.total_us, 3)) for k in chosen
        )
    return out


def _kernel_totals(groups: dict[tuple[int | None, str], list[float]]) -> list[TopKernel]:
    """Every kernel name over the whole capture (for pooling captures: summary_schema)."""
    totals: dict[str, list[float]] = {}
    for (_step, name), (count, total) in groups.items():
        acc = totals.setdefault(name, [0, 0.0])
        acc[0] += count
        acc[1] += total
    return [TopKernel(step=None, name=n, count=int(c), total_us=round(t, 3)) for n, (c, t) in totals.items()]


_OPERATOR_TIMES = ("Host Self Duration(us)", "Host Total Duration(us)", "Device Total Duration(us)")
SELF_SLACK_US = 0.01  # how much longer than its total a call's self time may be written (both rounded)


def _top_operators(path: Path, warnings: list[str]) -> list[TopOperator]:
    """Every operator name's calls and summed times; rows with a time that is no duration (damage, an
    edit: torch_npu writes a number in each) count it as 0, said in ``warnings``."""
    if not path.is_file():
        return []
    groups: dict[str, list[float]] = {}
    damaged, self_longer = 0, []
    # helper-202: a quote not closed on its line took the lines after it into one cell, their operators lost
    # and the row read as an operator of that cell's text; bytes that are no UTF-8 named an operator U+FFFD
    damage = _Damage(OPERATOR_FILE, read=_OPERATOR_TIMES, multiline=("Input Shapes", "Call Stack"))
    # helper-217: a row of fewer or more cells than the header was read with its times shifted (a row that
    # lost its Call Stack: its Device Total as its Host Total), unsaid
    shape = _Shape(OPERATOR_FILE)
    for line, row, kind in _numbered_rows(path, damage):
        if damage.leaves_out(line, row, kind) or shape.leaves_out(line, row):
            continue
        acc = groups.setdefault(row.get("Name") or "", [0, 0.0, 0.0, 0.0])
        acc[0] += 1
        times = [_duration(row.get(column)) for column in _OPERATOR_TIMES]
        damaged += any(t is None for t in times)
        if times[0] is not None and times[1] is not None and times[0] > times[1] + SELF_SLACK_US:
            self_longer.append(line)
        for k, t in enumerate(times, 1):
            acc[k] += t or 0.0
    warnings.extend([*damage.notes("the top operators"), *shape.notes("the top operators")])
    if damaged:
        warnings.append(
            f"{OPERATOR_FILE}: {damaged} row(s) have a time that is no duration (not a number, or negative): "
            "counted as 0 in the top operators"
        )
    if self_longer:
        # helper-228: a Host Self of 1e12 µs beside a Host Total of 10 made its operator the top one, unsaid
        warnings.append(
            f"{OPERATOR_FILE}: {len(self_longer)} row(s) have a 'Host Self Duration(us)' longer than their "
            "'Host Total Duration(us)' (no call's own time is: a damaged table?): counted as written (line "
            f"{_lines(self_longer)})"
        )
    chosen = sorted(groups.items(), key=lambda kv: (-kv[1][1], kv[0]))
    return [
        TopOperator(
            step=None,
            name=name,
            count=int(count),
            self_us=round(self_us, 3),
            total_us=round(total_us, 3),
            device_us=round(device_us, 3),
        )
        for name, (count, self_us, total_us, device_us) in chosen
    ]


def _trace_view_operators(trace_view: Path, warnings: list[str]) -> list[TopOperator]:
    """Every operator name of torch_npu's trace_view.json, for a rank dir without operator_details.csv
    (torch_npu writes it only with record_shapes or with_stack, or it was deleted): npuprof's own nesting
    of the trace's operators, as for a trace it parses (each name's calls as torch's ``key_averages()``
    counts them, self and total time, device time of the tasks each launched), largest self time first;
    where they come from said in ``warnings``."""
    if not trace_view.is_file():
        warnings.append(f"no {OPERATOR_FILE}: no top operators")
        return []
    if (size := trace_view.stat().st_size) > TRACE_VIEW_OPERATORS_LIMIT:
        # read at every analyse (torch_npu's tables are never cached): a rank's GB would cost every report of
        # a cluster tens of seconds
        warnings.append(
            f"no {OPERATOR_FILE}, and {TRACE_VIEW_FILE} is {size / 2**20:,.0f} MiB (over "
            f"{TRACE_VIEW_OPERATORS_LIMIT >> 20} MiB: not read at every report): no top operators; torch_npu "
            f"writes {OPERATOR_FILE} for a capture with record_shapes=True (npuprof run --record-shapes)"
        )
        return []
    from npuprof.analysis import tables
    from npuprof.analysis.scan import scan
    from npuprof.analysis.trace_loader import TraceError

    try:
        extract, _meta, _end = scan(trace_view)
        ops = tables.nest(extract)
        totals = tables.build_tables(extract, ops).summary.get("operator_totals") or []
    except (TraceError, OSError, ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        # a form no reader foresaw costs the top operators, never the rank's steps and kernels
        warnings.append(f"no {OPERATOR_FILE}, and {TRACE_VIEW_FILE} cannot be read ({exc}): no top operators")
        return []
    warnings.extend(f"{TRACE_VIEW_FILE}: {note}" for note in _reading_notes(extract))
    if not totals:
        warnings.append(f"no {OPERATOR_FILE}, and {TRACE_VIEW_FILE} holds no operator: no top operators")
        return []
    warnings.append(
        f"no {OPERATOR_FILE} (torch_npu writes it only with record_shapes or with_stack): the top operators "
        f"are {TRACE_VIEW_FILE}'s operators, nested by npuprof (calls counted as torch's key_averages() "
        "counts them)"
    )
    chosen = sorted(totals, key=lambda op: (-op["self_us"], op["name"]))
    return [
        TopOperator(
            step=None,
            name=op["name"],
            count=int(op["count"]),
            self_us=op["self_us"],
            total_us=op["total_us"],
            device_us=op["device_us"],
        )
        for op in chosen
    ]


def _reading_notes(extract: Any) -> list[str]:
    """What the scan of trace_view.json passed over or mended, as the report of a trace says it: only what
    bears on its operators (its steps and device tasks come from torch_npu's tables here)."""
    from npuprof.analysis import trace_repairs

    notes = []
    if extract.repaired_strings:
        notes.append(trace_repairs.not_text_note(extract.repaired_strings))
    if extract.repaired_names:
        notes.append(trace_repairs.unescaped_note(extract.repaired_names))
    if extract.repaired_values:
        notes.extend(trace_repairs.unwritten_notes(extract.repaired_values))
    if extract.cut is not None:
        notes.append(extract.cut.note(extract.event_count))
    if extract.damaged.total:
        notes.append(extract.damaged.note())
    if extract.timeless:
        notes.append(f"{extract.timeless} complete event(s) without a ts or a dur were left out")
    return notes


def _memory(path: Path, warnings: list[str]) -> list[tuple[float, float, float | None]]:
    """(time epoch µs, allocated MB, reserved MB) of the allocator's records (:func:`_allocator_rows`),
    every device's; records of impossible sizes or with no number are left out, said in ``warnings``."""
    _component, rows, impossible, unread, damaged = _allocator_rows(path)
    warnings.extend(damaged)
    if impossible:
        warnings.append(impossible_memory_note(impossible))
    if unread:
        warnings.append(unread_memory_note(unread))
    elif not rows and not impossible and not damaged:
        warnings.append(f"no {MEMORY_FILE} rows: no memory figures")
    return sorted(((t, a, r) for _d, _text, t, a, r in rows), key=lambda row: row[0])  # stable in ties


def memory_records(path: Path, warnings: list[str]) -> list[tuple[float, float, float | None]]:
    """:func:`_memory`: memory_record.csv's allocator records, what was left out said in ``warnings``."""
    return _memory(path, warnings)


def impossible_memory_note(records: int) -> str:
    return (
        f"{records} record(s) of {MEMORY_FILE} with a size no device has (negative, or over "
        f"{MAX_DEVICE_MB:.0f} MB) left out: the file was damaged or edited"
    )


def unread_memory_note(unread: int) -> str:
    """helper-200: rows whose time or allocated size was no number (N/A, a date, another unit's column:
    Timestamp(ns), Total Allocated(KB)) were left out without a word, a whole file of them read as no
    memory at all."""
    return (
        f"{MEMORY_FILE}: {unread} row(s) have no number for 'Timestamp(us)' or 'Total Allocated(MB)', or a "
        "negative time (a damaged file, or columns of another name?): left out"
    )


def allocator_records(
    path: Path,
) -> tuple[str, dict[str, list[tuple[int, float, float | None]]], int, int, list[str]]:
    """memory_record.csv's allocator records by device (``Device Type`` as written, ``NPU:0``): (time
    epoch ns, exact from the cell's digits; allocated MB; reserved MB), with the component they are of, and
    how many records of impossible sizes, and how many rows with no number for the time or allocated size,
    were left out, and what is said of the rows damaged past reading (:class:`_Damage`: left out). Raises
    AscendTableError when it cannot be read."""
    component, rows, impossible, unread, damaged = _allocator_rows(path)
    by_device: dict[str, list[tuple[int, float, float | None]]] = {}
    for device, text, t, allocated, reserved in rows:
        try:
            ns = int(Decimal(text.strip()) * 1000)
        except (InvalidOperation, ValueError, OverflowError):
            ns = round(t * 1000)
        by_device.setdefault(device, []).append((ns, allocated, reserved))
    return component, by_device, impossible, unread, damaged


# which component's rows are the allocator's, in order of preference: PyTorch's caching allocator (PTA),
# else it and CANN's graph engine together, else the application's total (APP)
ALLOCATOR_COMPONENTS = (ALLOCATOR_COMPONENT, "PTA+GE", "APP")


def _allocator_rows(
    path: Path,
) -> tuple[str, list[tuple[str, str, float, float, float | None]], int, int, list[str]]:
    """(component, [(device, time text, time µs, allocated MB, reserved MB)], how many records of the file
    had impossible sizes, how many no number for the time or allocated size, both left out, what is said
    of the rows damaged past reading) of one component: the first of ALLOCATOR_COMPONENTS the file has,
    else the first it lists (components are pools of their own: their totals are never mixed)."""
    rows: dict[str, list[tuple[str, str, float, float, float | None]]] = {}
    impossible = unread = 0
    past: list[int] = []
    # helper-202: a quote not closed on its line took the lines after it into one cell, their records lost
    # (said as one row of no number); bytes that are no UTF-8 in a Component put a record in a pool of its
    # own, left out unsaid. Component and Device Type are keys the records are counted under: read as figures
    damage = _Damage(
        MEMORY_FILE,
        read=("Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)", "Device Type"),
    )
    # helper-217: a row of fewer or more cells than the header was read shifted (its Total Active(MB) as
    # its reserved size) or said as one of no number
    shape = _Shape(MEMORY_FILE)
    for line, row, kind in _numbered_rows(path, damage):
        if damage.leaves_out(line, row, kind) or shape.leaves_out(line, row):
            continue
        text = row.get("Timestamp(us)") or ""
        if row.get("Component") == "APP" and not (row.get("Total Allocated(MB)") or "").strip():
            # CANN's application total (npu_mem: no allocated size, its ddr + hbm as Total Reserved), which
            # torch_npu writes with the NPU activity and profile_memory: no damage, not the allocator's
            # (helper-218: each one was said "no number ... a damaged file")
            continue
        t, allocated = _number(text), _size(row.get("Total Allocated(MB)"))
        # helper-201: a negative time was read, that record then counting as what every step started with
        if t is None or t < 0 or allocated is None:
            unread += 1
            continue
        if t > MAX_TIME_US:
            past.append(line)
            continue
        component, reserved = row.get("Component") or "", _size(row.get("Total Reserved(MB)"))
        if not 0 <= allocated <= MAX_DEVICE_MB or (
            reserved is not None and not 0 <= reserved <= MAX_DEVICE_MB
        ):
            impossible += 1
            continue
        rows.setdefault(component, []).append((row.get("Device Type") or "", text, t, allocated, reserved))
    component = next((c for c in ALLOCATOR_COMPONENTS if c in rows), next(iter(rows), ""))
    notes = [*damage.notes("the memory figures"), *shape.notes("the memory figures")]
    if past:
        notes.append(_past_time_note(MEMORY_FILE, "'Timestamp(us)'", past, "the memory figures"))
    return component, rows.get(component, []), impossible, unread, notes


def _memory_peaks(rows: list[tuple[float, float, float | None]]) -> dict[str, int | float | None]:
    if not rows:
        return {}
    reserved = [r for _t, _a, r in rows if r is not None]
    return {
        "peak_allocated_mb": round(max(a for _t, a, _r in rows), 3),
        "peak_reserved_mb": round(max(reserved), 3) if reserved else None,
    }


def _with_memory(steps: list[dict[str, Any]], rows: list[tuple[float, float, float | None]]) -> list[Any]:
    """The steps, each with the memory peaks of its window: what it started with (the last record before
    it) and every record inside it. ``rows`` sorted by time."""
    times = [t for t, _a, _r in rows]
    peaks = _RunMaxima(rows)
    out = []
    for step in steps:
        window_end = step.pop(_WINDOW)
        fields = {key: step[key] for key in ("step", "start_us", "duration_us")}
        fields.update((k, v) for k, v in step.items() if k not in fields)
        if rows:
            first, end = bisect_left(times, step["start_us"]), bisect_left(times, window_end)
            allocated, reserved = peaks.over(max(first - 1, 0), end)
            fields["memory_peak_mb"] = None if allocated is None else round(allocated, 3)
            fields["memory_peak_reserved_mb"] = None if reserved is None else round(reserved, 3)
        out.append(SummaryStep(**fields))
    return out


class _RunMaxima:
    """The largest allocated and reserved size of any run of records, each asked in O(log records): the
    windows of a damaged step table overlap, each one holding up to every record (300 steps x 500k records
    took 57 s read record by record)."""

    def __init__(self, rows: list[tuple[float, float, float | None]]) -> None:
        import numpy as np  # not at the module's top: the training process's backend imports this module

        self._leaves = 1 << max(len(rows) - 1, 0).bit_length()
        self._allocated = self._tree(np.fromiter((a for _t, a, _r in rows), float, len(rows)))
        reserved = ((-math.inf if r is None else r) for _t, _a, r in rows)  # no figure: never the largest
        self._reserved = self._tree(np.fromiter(reserved, float, len(rows)))

    def _tree(self, values: np.ndarray) -> np.ndarray:
        """A max segment tree: node i holds the larger of nodes 2i and 2i + 1, the leaves from ``_leaves``."""
        import numpy as np

        tree = np.full(2 * self._leaves, -math.inf)
        tree[self._leaves : self._leaves + len(values)] = values
        level = self._leaves
        while level > 1:
            children = tree[level : 2 * level]
            tree[level // 2 : level] = np.maximum(children[0::2], children[1::2])
            level //= 2
        return tree

    def over(self, lo: int, hi: int) -> tuple[float | None, float | None]:
        """(largest allocated, largest reserved) of records lo..hi-1; None where there is none."""
        allocated = reserved = -math.inf
        lo, hi = lo + self._leaves, hi + self._leaves
        while lo < hi:
            if lo & 1:
                allocated, reserved = max(allocated, self._allocated[lo]), max(reserved, self._reserved[lo])
                lo += 1
            if hi & 1:
                hi -= 1
                allocated, reserved = max(allocated, self._allocated[hi]), max(reserved, self._reserved[hi])
            lo, hi = lo // 2, hi // 2
        return _figure(allocated), _figure(reserved)


def _figure(value: float) -> float | None:
    return None if value == -math.inf else float(value)


def _communication(
    path: Path,
    kernels: list[tuple[int | None, str, float, float]],
    warnings: list[str],
    by_step: dict[str, dict[str, int | float]],
) -> dict[str, int | float]:
    """Operators, time and size of communication.json's collective and point-to-point operations; each
    step's into ``by_step`` (by step number, from its keys ``step<N>``)."""
    if not path.is_file():
        tasks = sum(1 for _step, name, _start, _dur in kernels if vocab.is_comm_name(name))
        if tasks:  # torch_npu writes the file whenever collectives ran
            warnings.append(
                f"no {COMMUNICATION_FILE}, though {KERNEL_FILE} has {tasks} communication task(s): "
                "no communication totals"
            )
        return {"operators": 0}
    try:
        data = json.loads(_table_bytes(path))
    except (OSError, ValueError, RecursionError) as exc:
        warnings.append(f"{COMMUNICATION_FILE} unreadable ({exc}): no communication totals")
        return {"operators": 0}
    total: dict[str, int | float] = {"operators": 0}
    by_step.clear()
    if not isinstance(data, dict):
        warnings.append(
            f"{COMMUNICATION_FILE} is not torch_npu's form (an object of steps): no communication totals"
        )
        return total
    in_form, without_time, without_size = False, 0, 0
    for key, step in data.items():
        count, time_ms, size_mb = 0, 0.0, 0.0
        for kind in ("collective", "p2p"):
            ops = step.get(kind) if isinstance(step, dict) else None
            in_form = in_form or isinstance(ops, dict)
            for name, op in ops.items() if isinstance(ops, dict) else ():
                if name == "Total Op Info" or not isinstance(op, dict):
                    continue
                count += 1
                time_info = op.get("Communication Time Info")
                elapse = (
                    _number(str(time_info.get("Elapse Time(ms)", "")))
                    if isinstance(time_info, dict)
                    else None
                )
                # helper-201: a negative time (-1 ms) or size was added in, unsaid: damage, as no number is;
                # helper-243: so is one past MAX_TIME_US, as every other time (1e15 ms was 31,700 years)
                if elapse is None or not 0 <= elapse <= MAX_TIME_US / 1000:
                    without_time += 1
                else:
                    time_ms += elapse
                mb, damaged_size = _transit_mb(op.get("Communication Bandwidth Info"))
                without_size += damaged_size
                size_mb += mb
        if not count:
            continue
        figures = {"operators": count, "time_us": round(time_ms * 1000, 3), "size_mb": round(size_mb, 6)}
        number = str(key)[4:]
        # "step<N>": what --steps sums. ASCII digits only: str.isdigit() also takes "²", which int() refuses
        # (helper-200: a key "step²" cost the rank its whole report); "step1" and "step01" are one step;
        # no more digits than a step number has (helper-243: "step" and 5,000 digits cost the rank too)
        if (
            str(key).startswith("step")
            and number.isascii()
            and number.isdigit()
            and _step_id(number) is not None
        ):
            into = by_step.setdefault(str(int(number)), {"operators": 0, "time_us": 0.0, "size_mb": 0.0})
            into["operators"] = int(into["operators"]) + count
            into["time_us"] = round(float(into["time_us"]) + figures["time_us"], 3)
            into["size_mb"] = round(float(into["size_mb"]) + figures["size_mb"], 6)
        total = {
            "operators": int(total["operators"]) + count,
            "time_us": round(float(total.get("time_us", 0.0)) + figures["time_us"], 3),
            "size_mb": round(float(total.get("size_mb", 0.0)) + figures["size_mb"], 6),
        }
    if data and not in_form:  # another tool's file of that name (msprof-analyze's cluster form)
        warnings.append(
            f"{COMMUNICATION_FILE} is not torch_npu's form (no step with 'collective' or 'p2p' "
            "operations): no communication totals"
        )
    else:
        if without_time:
            warnings.append(
                f"{COMMUNICATION_FILE}: {without_time} operation(s) have no 'Elapse Time(ms)' that is a "
                f"duration (no number, a negative one, or one past {MAX_TIME_US / 1000:.2g} ms: beyond 2**63 "
                "ns): counted without their time"
            )
        if without_size:
            warnings.append(
                f"{COMMUNICATION_FILE}: {without_size} operation(s) have a 'Transit Size(MB)' that is no "
                "size (no number, or a negative one: a damaged file?): counted without it"
            )
    return total


def _transit_mb(bandwidth: Any) -> tuple[float, bool]:
    """The MB an operation moved: every transport's, where SDMA (when present) already sums HCCS and PCIE;
    and whether a transport's size was no number or negative (damage: left out of the sum; helper-243: one
    of no number, "abc" or 1e300, was counted as 0, unsaid). A transport without the key moved nothing."""
    if not isinstance(bandwidth, dict):
        return 0.0, False
    skip = SDMA_PARTS if "SDMA" in bandwidth else ()
    sizes = [
        _number(str(info["Transit Size(MB)"]))
        for name, info in bandwidth.items()
        if isinstance(info, dict) and name not in skip and "Transit Size(MB)" in info
    ]
    kept = [mb for mb in sizes if mb is not None and mb >= 0]
    return sum(kept), len(kept) < len(sizes)


def _world_size(rank_dir: Path) -> int | None:
    """``distributed_args.world_size`` of profiler_metadata.json, when torch_npu recorded it."""
    try:
        data = json.loads(_table_bytes(rank_dir / "profiler_metadata.json"))
    except (OSError, ValueError, RecursionError):
        return None
    args = data.get("distributed_args") if isinstance(data, dict) else None
    size = args.get("world_size") if isinstance(args, dict) else None
    return size if isinstance(size, int) and not isinstance(size, bool) else None
