"""The trace-changed check of a gzipped trace (npuprof/analysis/parse.py trace_changed_since) on gzips of
several members, which end in their last member's size only."""

from __future__ import annotations

import gzip
import json
import random
import zlib
from pathlib import Path

import pytest

from npuprof.analysis.parse import trace_changed_since

NAME = "w_1_20250101000000000.pt.trace.json"


def _plain(size: int) -> bytes:
    """A trace of about ``size`` bytes that compresses about 2:1 (its names hex digits): no long runs."""
    pick = random.Random(size)
    events = [
        f'{{"ph": "X", "name": "{pick.randbytes(24).hex()}", "ts": {n}, "dur": 1}}' for n in range(size // 90)
    ]
    return ('{"traceEvents": [\n' + ",\n".join(events) + "\n]}\n").encode()


def _rank_dir(tmp_path: Path, plain: bytes, packed: bytes) -> tuple[Path, Path]:
    """A rank dir whose tables were made from ``plain`` (analyse.done names it) and whose trace is now
    ``packed``, as the post-processor leaves it (the plain trace removed)."""
    rank_dir = tmp_path / "w_1_20250101000000000_ascend_pt"
    done = rank_dir / "ASCEND_PROFILER_OUTPUT" / "analyse.done"
    done.parent.mkdir(parents=True)
    done.write_text(json.dumps({"trace": NAME, "bytes": len(plain)}) + "\n")
    (rank_dir / f"{NAME}.gz").write_bytes(packed)
    return done, rank_dir


def _members(plain: bytes, size: int) -> bytes:
    """``plain`` gzipped ``size`` bytes a member, as bgzip (64 KiB blocks) or `cat a.gz b.gz` write it."""
    return b"".join(gzip.compress(plain[at : at + size], mtime=0) for at in range(0, len(plain), size))


@pytest.mark.parametrize("halves", [False, True])  # bgzip's 64 KiB blocks; `cat a.gz b.gz` of 2 halves
def test_a_gzip_of_several_members_is_not_said_cut(tmp_path: Path, halves: bool) -> None:
    """`cat a.gz b.gz` or bgzip of the trace its tables were made from was said "not the whole gzip of the
    N bytes of NAME ... (cut or written since)": its last 4 bytes are its last member's size. It is neither:
    the check, which does not read the file whole, does not say it is."""
    plain = _plain(10 << 20)
    member = (len(plain) + 1) // 2 if halves else 65280
    packed = _members(plain, member)
    assert gzip.decompress(packed) == plain
    said = trace_changed_since(*_rank_dir(tmp_path, plain, packed))
    of = f"the {len(plain):,} bytes of {NAME} its tables were made from"
    if not halves:  # its last members, in the last MiB, read whole: several, whose sizes its end does not add
        assert (
            said
            == f"its trace {NAME}.gz is a gzip of several members: its size could not be checked against {of}"
        )
    else:  # its last member starts before the last MiB: it may be cut as well as several members
        assert len(gzip.compress(plain[member:], mtime=0)) > 1 << 20
        assert said == (
            f"its trace {NAME}.gz does not end as the gzip of {of} does (cut or written since, or gzipped in "
            "several members)"
        )


def test_a_small_gzip_of_several_members_is_read_whole_and_checked(tmp_path: Path) -> None:
    """A gzip of several members within the end read is read whole: the size its members hold is
    checked, the same (nothing said) or another (written since: it is a whole gzip, not cut)."""
    plain = _plain(200_000)
    packed = _members(plain, 50_000)
    assert len(packed) < 1 << 20 and len(plain) > 100_000
    assert trace_changed_since(*_rank_dir(tmp_path / "same", plain, packed)) == ""
    other = _members(plain[:-1000], 50_000)
    said = trace_changed_since(*_rank_dir(tmp_path / "other", plain, other))
    assert said == (
        f"its trace {NAME}.gz is a gzip of another size than the {len(plain):,} bytes of {NAME} its tables "
        "were made from (written since)"
    )


def test_a_cut_gzip_is_still_told_changed(tmp_path: Path) -> None:
    """The post-processor's one member, cut: said changed, as before; whole: nothing said."""
    plain = _plain(4 << 20)
    packed = gzip.compress(plain, mtime=0)
    assert trace_changed_since(*_rank_dir(tmp_path / "whole", plain, packed)) == ""
    for cut in (len(packed) // 2, len(packed) - 1):
        said = trace_changed_since(*_rank_dir(tmp_path / str(cut), plain, packed[:cut]))
        assert said.startswith(f"its trace {NAME}.gz does not end as the gzip of the {len(plain):,} bytes"), (
            said
        )


def test_the_parse_that_follows_says_which_of_cut_several_members_or_written_again_it_was(
    tmp_path: Path,
) -> None:
    """A .gz whose last member starts before the end read was said "cut or written since, or gzipped in
    several members": its end cannot tell them apart, but the parse that follows reads every member, and
    the line said after it names which it was: cut short (up to where), the same bytes in several members,
    or another size in one member."""
    from _forked_cli import npuprof

    plain = _plain(6 << 20)
    one = gzip.compress(plain, mtime=0)
    halves = _members(plain, (len(plain) + 1) // 2)
    assert len(gzip.compress(plain[(len(plain) + 1) // 2 :], mtime=0)) > 1 << 20  # starts before the last MiB
    other = _plain(5 << 20)
    cut = one[: len(one) // 2]
    held = len(zlib.decompressobj(31).decompress(cut))  # the text the cut member holds
    its, of = f"its trace {NAME}.gz", f"the {len(plain):,} bytes of {NAME} its tables were made from"
    expected = {
        "cut": f"{its} is cut short: its gzip data ends early, after {held:,} bytes of text ({of})",
        "halves": f"{its} holds {of} in 2 gzip members (gzipped again)",
        "other": f"{its} holds {len(other):,} bytes in one gzip member, not {of} (written since)",
    }
    for how, packed in {"cut": cut, "halves": halves, "other": gzip.compress(other, mtime=0)}.items():
        _done, rank_dir = _rank_dir(tmp_path / how, plain, packed)
        assert "cut or written since, or gzipped in several members" in trace_changed_since(_done, rank_dir)
        done = npuprof("analyse", str(rank_dir), "--format", "json")
        said = " ".join(done.stderr.split())
        assert f"{rank_dir}: {expected[how]}: parsed again" in said, said
