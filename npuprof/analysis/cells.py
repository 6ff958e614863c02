"""Cells of the CSV tables as torch_npu writes them: CSV-quoted strings, floats as ``repr`` writes them,
integers, and times as epoch microseconds with nanosecond decimals (docs/formats.md, "What the parser
writes"). Everything here works on whole columns: the tables have millions of rows."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from typing import Any

import msgspec
import numpy as np

NA = "N/A"  # torch_npu's cell for a value it does not have
LINES_BATCH = 1 << 16  # CSV rows formatted at a time


def csv_line(row: Iterable[Any]) -> str:
    """``row`` as one CSV row, without its line end: each cell as the csv module writes it, quoted when it
    holds a comma, a quote, a newline or a carriage return. The tables end their rows with ``\n``, and a
    writer told so quotes a cell's ``\n`` alone: a name holding a bare ``\r`` (someone's trace) was written
    as it is, where Python's csv reader ends the row, the rest of it read as a row of its own
    (docs/formats.md, "What the parser writes"). Told ``\r\n``, its default dialect's line end, the writer
    quotes both; that line end is cut here."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n").writerow(row)
    return buf.getvalue()[:-2]


def csv_cell(text: str) -> str:
    """``text`` as a cell of ``csv_line``."""
    return csv_line([text, ""])[:-1]


class Memo(dict):  # type: ignore[type-arg]
    """A dict that fills itself: ``memo[key]`` computes ``make(key)`` the first time."""

    def __init__(self, make: Any) -> None:
        super().__init__()
        self.make = make

    def __missing__(self, key: Any) -> Any:
        value = self[key] = self.make(key)
        return value


def csv_cells(strings: list[str], preset: dict[int, str]) -> dict[int, str]:
    """string id -> CSV cell, computed on first use; ``preset`` gives the cells of other (negative) ids."""
    cells = Memo(lambda sid: csv_cell(strings[sid]))
    cells.update(preset)
    return cells


_FLOAT_ENCODER = msgspec.json.Encoder()


def float_texts(values: np.ndarray) -> list[str]:
    """``repr`` of each value, as the csv module writes floats; a column with few distinct values (sizes,
    memory totals, durations) formats each distinct value once."""
    values = np.asarray(values, dtype=np.float64)
    n = len(values)
    if n >= 64:
        uniq, inverse = np.unique(values, return_inverse=True)
        if len(uniq) <= n // 4 and not bool((np.signbit(values) & (values == 0)).any()):  # no -0.0
            texts = _reprs(uniq)
            return list(map(texts.__getitem__, inverse.tolist()))
    return _reprs(values)


def _reprs(values: np.ndarray) -> list[str]:
    """``repr`` of each value. msgspec writes the same shortest digits ~4x faster, and the same text for 0
    and for magnitudes in [1e-4, 1e16); other values (exponent notation, inf, nan) go through ``repr``."""
    if len(values) == 0:
        return []
    texts = _FLOAT_ENCODER.encode(values.tolist())[1:-1].decode().split(",")
    size = np.abs(values)
    for i in np.flatnonzero(~((size == 0) | ((size >= 1e-4) & (size < 1e16)))).tolist():
        texts[i] = repr(float(values[i]))
    return texts


# ---- times as torch_npu writes them: epoch microseconds, as text with nanosecond decimals ------------------
_NUM_WIDTH = 32  # characters of a time's text that the array parse reads (longer ones go through Decimal)
_POS = np.arange(_NUM_WIDTH)
_STRING = msgspec.json.Decoder(str)


def json_string_text(text: bytes) -> bytes | None:
    """The UTF-8 text of the JSON string ``text`` (quoted, its escapes such as ``\\u0031`` decoded as every
    JSON reader decodes them); None when it is no JSON string."""
    try:
        return _STRING.decode(text).encode("utf-8", "replace")
    except msgspec.DecodeError:
        return None


def ns_of_texts(texts: list[bytes]) -> np.ndarray:
    """Nanoseconds (int64) of times in µs written as JSON numbers (``b"5298017518195.893"``, or quoted):
    exact for the digits given (a 4th decimal rounds half up); parsed as arrays, the rare exponent form or
    over-long text through Decimal. A text of no number, or of a time past an int64 of nanoseconds
    (±9.22e15 µs), is 0."""
    n = len(texts)
    if not n:
        return np.zeros(0, np.int64)
    arr = np.array(texts, dtype=f"S{_NUM_WIDTH + 1}")
    m = arr.view(np.uint8).reshape(n, _NUM_WIDTH + 1)
    if (m[:, 0] == 34).any():  # quoted: torch_npu's own string times
        arr = np.array([t.strip(b'" ') for t in texts], dtype=f"S{_NUM_WIDTH + 1}")
        m = arr.view(np.uint8).reshape(n, _NUM_WIDTH + 1)
    length = (m != 0).sum(axis=1)
    m = m[:, :_NUM_WIDTH]
    neg = m[:, 0] == 45  # "-"
    is_dot = m == 46
    has_dot = is_dot.any(axis=1)
    dot = np.where(has_dot, is_dot.argmax(axis=1), length)[:, None]
    digits = m.astype(np.int64) - 48
    is_digit = (digits >= 0) & (digits <= 9)
    # the power of ten of each digit in nanoseconds
    power = np.where(dot > _POS, dot - _POS + 2, 3 - (_POS - dot))
    used = is_digit & (power >= 0)
    ns = (np.where(used, digits, 0) * np.where(used, 10 ** np.clip(power, 0, 18), 0)).sum(axis=1)
    fourth = np.where(is_digit & (power == -1), digits, 0).sum(axis=1)
    ns = np.where(neg, -(ns + (fourth >= 5)), ns + (fourth >= 5))
    other = ~(is_digit | is_dot | (m == 0)) & ~((_POS == 0) & neg[:, None])
    # 16 digits of µs from a 9 on may pass an int64 of ns, which the sum above wraps (helper-243:
    # 9999999999999999.999 was -8446744073709551617); Decimal's result is checked when it is stored
    near_int64 = (dot[:, 0] - neg == 16) & (m[np.arange(n), neg.astype(np.intp)] == 57)
    bad = np.flatnonzero(other.any(axis=1) | (length > _NUM_WIDTH) | (dot[:, 0] - neg > 16) | near_int64)
    if len(bad):
        from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

        for i in bad.tolist():
            text = texts[i].strip()
            if text[:1] == b'"' and b"\\" in text:  # escapes ("\u0031"): the string they write (helper-197)
                text = json_string_text(text) or text
            try:
                value = Decimal(text.strip(b'" ').decode()) * 1000
                ns[i] = int(value.to_integral_value(ROUND_HALF_UP)) if value.is_finite() else 0
            except (InvalidOperation, UnicodeDecodeError, OverflowError, ValueError):
                ns[i] = 0
    return ns


_EXACT_US = float(1 << 43)  # below this many µs a float resolves nanoseconds (its half ulp < 0.5 ns)


def ns_of(values: np.ndarray) -> np.ndarray:
    """Nanoseconds (int64) of times in µs, rounded to the nearest: for a time read from a trace, the
    nanoseconds its text gave (a float resolves them below 2**43 µs; larger ones are read back from their
    shortest text)."""
    values = np.asarray(values, dtype=np.float64)
    whole = np.floor(values)
    with np.errstate(invalid="ignore"):
        ns = whole.astype(np.int64) * 1000 + np.round((values - whole) * 1000).astype(np.int64)
    far = np.flatnonzero(~(np.abs(values) < _EXACT_US))
    if len(far):
        ns[far] = ns_of_texts([t.encode() for t in _reprs(values[far])])
    return ns


def us_texts(ns: np.ndarray) -> list[str]:
    """Nanoseconds as µs text with three decimals (``1704161511420306.491``), as torch_npu writes times."""
    ns = np.asarray(ns, dtype=np.int64)
    if not len(ns):
        return []
    q, r = np.divmod(np.abs(ns), 1000)
    texts = (("%d.%03d\n" * len(ns)) % tuple(np.column_stack((q, r)).ravel().tolist()))[:-1].split("\n")
    for i in np.flatnonzero(ns < 0).tolist():
        texts[i] = "-" + texts[i]
    return texts


def epoch_texts(values: np.ndarray, base_ns: int) -> list[str]:
    """Trace times (µs after ``base_ns``) as epoch µs text with nanosecond decimals."""
    return us_texts(ns_of(values) + base_ns)


def ascend_shapes(dims: str) -> str:
    """Kineto's ``Input Dims`` text (``[[4],[8,4],[]]``) in kernel_details' form: one tensor's dims joined
    by ``,``, tensors by ``;``, in quotes (``"4;8,4;"``); ``N/A`` for none."""
    import json

    try:
        value = json.loads(dims)
    except ValueError:
        return dims or "N/A"
    except RecursionError:  # nested past the recursion limit: no Kineto shapes
        return "N/A"
    if not isinstance(value, list) or not value:
        return "N/A"

    def one(item: Any) -> str:
        if isinstance(item, list):
            if item and all(isinstance(d, list) for d in item):  # a TensorList
                return "|".join(_dims(d) for d in item)
            return _dims(item)
        return _scalar(item)

    cells = [one(v) for v in value]
    return '"' + ";".join(cells) + '"' if any(cells) else "N/A"


def _dims(item: list[Any]) -> str:
    return ",".join(_scalar(d) for d in item)


def _scalar(item: Any) -> str:
    """A dimension as text; a list or object where Kineto writes none is '?', never walked: a corrupt
    trace's may nest as deep as the JSON decoder goes (~10,000 levels on Python 3.13), past the
    interpreter's recursion limit."""
    return "?" if isinstance(item, (list, dict)) else str(item)


def shape_cells_of(strings: list[str]) -> dict[int, str]:
    """Input Dims string id -> kernel_details' Input Shapes cell (-1: N/A), computed on first use."""
    cells = Memo(lambda sid: csv_cell(ascend_shapes(strings[sid])))
    cells[-1] = NA
    return cells


def int_cells(values: np.ndarray) -> list[str]:
    """Integers as cells; a negative one (unknown) as N/A."""
    if not len(values):
        return []
    texts = _FLOAT_ENCODER.encode(values.tolist())[1:-1].decode().split(",")
    for i in np.flatnonzero(values < 0).tolist():
        texts[i] = NA
    return texts
