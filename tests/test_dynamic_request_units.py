"""A --dynamic request read from profiler_config.json (agent/dynamic_request.py) at its edges (helper-373's
mutation hunt: each of these could change with every test passing): torch_npu's metadata limits to the
character, the key's length counted in the total, op_attr dropped only under Level_none, a memory timeline
kept with with_modules for with_stack, and min_free_space left the run's."""

from __future__ import annotations

import json
from typing import Any

from npuprof.agent.dynamic_request import Request, parse_request
from npuprof.config import ProfileConfig

LIMIT = 4096  # torch_npu's characters a metadata value (and key)
TOTAL = 50 * 1024  # ... and in all


def _request(document: dict[str, Any], **base: Any) -> tuple[Request | None, list[str]]:
    heard: list[str] = []
    cfg = ProfileConfig(output="/run/out", dynamic="/cfg", **base)
    raw = json.dumps(document).encode()
    request = parse_request(raw, "d", cfg, lambda level, message: heard.append(f"{level} {message}"))
    return request, heard


def test_metadata_at_torch_npus_limits_is_kept_whole_and_one_over_is_cut_or_left_out() -> None:
    entries = {"at": "v" * LIMIT, "over": "w" * (LIMIT + 1), "k" * LIMIT: "x", "l" * (LIMIT + 1): "y"}
    request, heard = _request({"start_step": -1, "metadata": entries})
    assert request is not None
    assert request.cfg.metadata == {"at": "v" * LIMIT, "over": "w" * LIMIT, "k" * LIMIT: "x"}, heard
    said = " | ".join(heard)
    assert "metadata 'over' cut from 4097 to 4096 characters" in said, said
    assert f"metadata {'l' * 40!r}: a key of 4097 characters; left out" in said, said
    assert "'at'" not in said and f"{'k' * 40!r}" not in said, said


def test_metadata_up_to_50_kib_in_all_keys_counted_is_kept() -> None:
    # 12 entries of a 2-character key and a 4096-character value: 49,176; the last has room for 2,024 more
    entries = {f"{chr(97 + i)}0": "v" * LIMIT for i in range(12)}  # a0 .. l0
    room = TOTAL - 12 * (2 + LIMIT)
    entries["z0"] = "w" * (room - 2)  # reaches 50 KiB exactly with its key
    entries["z1"] = ""  # its key alone goes over
    request, heard = _request({"start_step": -1, "metadata": entries})
    assert request is not None
    assert list(request.cfg.metadata) == [*(f"{chr(97 + i)}0" for i in range(12)), "z0"], heard
    said = " | ".join(heard)
    assert "metadata 'z1' left out: the entries reach 50 KiB in all" in said and "'z0'" not in said, said


def test_op_attr_is_dropped_only_under_level_none() -> None:
    for level, kept in (("Level_none", False), ("Level0", True), ("Level1", True)):
        request, heard = _request(
            {"start_step": -1, "experimental_config": {"profiler_level": level, "op_attr": True}}
        )
        assert request is not None and request.cfg.op_attr is kept, (level, heard)
        assert any("op_attr has no effect" in line for line in heard) is not kept, heard


def test_a_memory_timeline_is_kept_with_modules_in_place_of_stacks() -> None:
    asked = {"start_step": -1, "record_shapes": True, "profile_memory": True, "with_stack": False}
    for with_modules, kept in ((True, ["html"]), (False, [])):
        request, heard = _request({**asked, "with_modules": with_modules}, memory_timeline=["html"])
        assert request is not None and request.cfg.memory_timeline == kept, (with_modules, heard)


def test_min_free_space_stays_the_runs() -> None:
    request, heard = _request({"start_step": -1, "min_free_space": "1G"}, min_free_space="5G")
    assert request is not None and request.cfg.min_free_space == "5G", heard
    assert any("min_free_space is the run's (npuprof run --min-free-space); ignored here" in h for h in heard)


def test_a_request_for_an_empty_rank_list_describes_its_ranks_as_none() -> None:
    request, heard = _request({"start_step": 7, "active": 2, "is_rank": True, "rank_list": []})
    assert request is not None, heard
    assert request.describe() == "capture 2 step(s) from step 7 on ranks none (empty rank_list) into /run/out"
    request, heard = _request({"start_step": 7, "active": 2, "is_rank": True, "rank_list": [3, 1, 2]})
    assert request is not None and request.describe().endswith(" on ranks 1-3 into /run/out"), heard
