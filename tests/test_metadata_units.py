"""agent/metadata.py's profiler_metadata.json at torch_npu's limits to the character (helper-373's mutation
hunt: a key or value of exactly 4096 characters cut or left out, the 50 KiB total refused when reached
exactly, and the keys left out of the total, passed every test)."""

from __future__ import annotations

from npuprof.agent.metadata import build_metadata

LIMIT = 4096
TOTAL = 50 * 1024


def test_a_key_and_a_value_of_4096_characters_are_kept_whole() -> None:
    heard: list[str] = []
    written = build_metadata({"k" * LIMIT: "v", "at": "w" * LIMIT}, lambda key, line: heard.append(line))
    assert written["k" * LIMIT] == "v" and written["at"] == "w" * LIMIT
    assert heard == []


def test_the_entries_may_reach_50_kib_exactly_their_keys_counted() -> None:
    heard: list[str] = []
    user = {f"{chr(97 + i)}0": "v" * LIMIT for i in range(12)}  # a0 .. l0: 12 x 4098 = 49,176
    user["z0"] = "w" * (TOTAL - 12 * (2 + LIMIT) - 2)  # 2,022 more with its key: 51,200 exactly
    user["z1"] = ""  # its key alone goes over
    written = build_metadata(user, lambda key, line: heard.append(line))
    assert "z0" in written and "z1" not in written
    assert heard == [
        "profiler_metadata.json: metadata 'z1' left out: the entries reach 50 KiB in all (torch_npu's limit)"
    ]
