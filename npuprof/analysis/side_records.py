"""The capture's side files of timed spans (``npuprof_gc.json``, ``npuprof_comm_ranges.json``;
docs/formats.md): read and checked the same way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec


def read_epoch_spans(path: Path, decoder: msgspec.json.Decoder, items: str, error: type[ValueError]) -> Any:
    """``path`` decoded by ``decoder``: version 1, ``clock`` ``epoch_ns``, no span of its ``items`` list
    ending before it starts; else ``error`` naming the file and the problem."""
    name = path.name
    try:
        record = decoder.decode(path.read_bytes())
    except (OSError, msgspec.DecodeError) as exc:
        raise error(f"{name} unreadable ({exc})") from None
    if record.version != 1 or record.clock != "epoch_ns":
        raise error(
            f"{name} is version {record.version} with clock {record.clock!r}, this npuprof reads "
            "version 1 with epoch_ns"
        )
    bad = next((span for span in getattr(record, items) if span.end_ns < span.start_ns), None)
    if bad is not None:
        raise error(f"{name}: a span ends before it starts ({bad.start_ns} > {bad.end_ns})")
    return record
