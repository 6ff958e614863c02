"""`npuprof analyse --steps`: which steps a report keeps. One step (``7``), a range (``3-5``), an open end
(``10-``: step 10 and every later one) or a list of these (``3,5,8-10``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

# at most 18 digits, as npuprof run's numbers (cli/run_flags.py): int() refuses over 4300, and its
# ValueError ("Exceeds the limit (4300 digits) ...; use sys.set_int_max_str_digits()") was the message
_PART_RE = re.compile(r"^([0-9]{1,18})(?:(-)([0-9]{1,18})?)?$")
EXAMPLES = "3, 3-5, 10- or 3,5,8-10"


@dataclass(frozen=True)
class StepSelection:
    """Inclusive spans of step numbers, sorted and merged; ``None`` as an end: no end."""

    spans: tuple[tuple[int, int | None], ...]

    def __contains__(self, step: object) -> bool:
        if not isinstance(step, int) or isinstance(step, bool):
            return False
        return any(lo <= step and (hi is None or step <= hi) for lo, hi in self.spans)

    @property
    def text(self) -> str:
        """As a user would write it: ``3,5-7,9-``."""
        return ",".join(_span_text(lo, hi) for lo, hi in self.spans)

    @property
    def one_range(self) -> tuple[int, int] | None:
        """``(A, B)`` when this is the one closed range A-B (the report's ``steps_filter``), else None."""
        if len(self.spans) == 1 and self.spans[0][1] is not None:
            lo, hi = self.spans[0]
            return lo, hi  # type: ignore[return-value]
        return None


def _span_text(lo: int, hi: int | None) -> str:
    if hi is None:
        return f"{lo}-"
    return str(lo) if lo == hi else f"{lo}-{hi}"


def of_range(lo: int, hi: int) -> StepSelection:
    return StepSelection(((lo, hi),))


def parse_steps(text: str) -> StepSelection:
    """``text`` as --steps takes it; ValueError saying what is wrong and how to write it."""
    spans: list[tuple[int, int | None]] = []
    for part in text.replace(" ", "").split(","):
        match = _PART_RE.match(part)
        if not match:
            raise ValueError(f"{text!r} is not a step, range or list of them; use e.g. {EXAMPLES}")
        lo = int(match.group(1))
        hi: int | None = None if match.group(2) and match.group(3) is None else int(match.group(3) or lo)
        if hi is not None and hi < lo:
            raise ValueError(f"{text!r}: the range {part} ends before it starts; use e.g. {EXAMPLES}")
        spans.append((lo, hi))
    return StepSelection(_merged(spans))


def _merged(spans: list[tuple[int, int | None]]) -> tuple[tuple[int, int | None], ...]:
    merged: list[tuple[int, int | None]] = []
    for lo, hi in sorted(spans, key=lambda s: s[0]):
        if merged:
            last_lo, last_hi = merged[-1]
            if last_hi is None or lo <= last_hi + 1:
                end = None if last_hi is None or hi is None else max(last_hi, hi)
                merged[-1] = (last_lo, end)
                continue
        merged.append((lo, hi))
    return tuple(merged)
