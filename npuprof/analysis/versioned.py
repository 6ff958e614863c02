"""The versioned JSON files npuprof hands over (the summary, the annotations, the report): decoded into
their Structs, or one error naming a newer / older version or the damaged field (docs/formats.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec


class _Versioned(msgspec.Struct):
    version: Any = None


_VERSION_DECODER = msgspec.json.Decoder(_Versioned)


@dataclass(frozen=True)
class Words:
    """How one file's errors read: ``not_ours`` (not this file at all), the version's ``label``, the fixes
    for a newer and an older version, and ``suffix`` after the not-ours and damaged messages."""

    not_ours: str
    label: str
    newer_fix: str
    older_fix: str
    suffix: str = ""


def decode_versioned(
    data: bytes | str, decoder: msgspec.json.Decoder, current: int, error: type[ValueError], words: Words
) -> Any:
    """``data`` decoded by ``decoder`` when its ``version`` is ``current``; else ``error``."""
    try:
        version = _VERSION_DECODER.decode(data).version
    except (msgspec.DecodeError, RecursionError) as exc:
        raise error(f"{words.not_ours} ({_short(str(exc))}){words.suffix}") from None
    if version != current:
        newer = _is_newer(version, current)
        shown = version if newer else _short(repr(version))
        raise error(
            f"written by {'a newer' if newer else 'an older'} npuprof ({words.label} {shown}, this one reads "
            f"{current}); {words.newer_fix if newer else words.older_fix}"
        )
    try:
        return decoder.decode(data)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise error(f"damaged ({_short(str(exc))}){words.suffix}") from None


def written_by_newer(data: bytes | str, current: int) -> bool:
    """Whether ``data`` names a version above ``current``: a newer npuprof's file, which this one neither
    reads nor writes over."""
    try:
        return _is_newer(_VERSION_DECODER.decode(data).version, current)
    except (msgspec.DecodeError, RecursionError):
        return False


def _is_newer(version: Any, current: int) -> bool:
    return isinstance(version, int) and not isinstance(version, bool) and version > current


# the raw trace deleted since the parse (to save space): --force has nothing to parse again
TRACE_GONE = "its raw trace is gone (deleted since its parse?): --force has nothing to parse it again from"


def trace_gone_words(not_ours: str, label: str) -> Words:
    """The words of a file whose rank dir's raw trace is gone: no fix sends the user to --force."""
    return Words(
        not_ours=not_ours,
        label=label,
        newer_fix=f"upgrade npuprof to read it; {TRACE_GONE}",
        older_fix=f"an npuprof of that version reads it; {TRACE_GONE}",
        suffix=f"; {TRACE_GONE}",
    )


SHOWN_CHARS = 80  # of a value or a decoder's message in an error: a corrupt file's may be megabytes


def _short(text: str) -> str:
    """``text`` cut to SHOWN_CHARS, its cut marked (helper-154: a version nested 10,000 lists deep was shown
    whole, a one-line error of 20,000 characters)."""
    return text if len(text) <= SHOWN_CHARS else f"{text[: SHOWN_CHARS - 1]}…"
