"""ProfileConfig and the schedule plan: unit checks (no subprocess needed for pure functions)."""

from __future__ import annotations

import itertools
import json

import pytest
import torch.profiler as tp

from npuprof.agent.schedule import Action, SchedulePlan
from npuprof.config import (
    ConfigError,
    ProfileConfig,
    Schedule,
    config_from_json,
    parse_activities,
    parse_level,
    parse_ranks,
    template_json,
)

NATIVE = {
    tp.ProfilerAction.NONE: Action.NONE,
    tp.ProfilerAction.WARMUP: Action.WARMUP,
    tp.ProfilerAction.RECORD: Action.RECORD,
    tp.ProfilerAction.RECORD_AND_SAVE: Action.RECORD_AND_SAVE,
}


@pytest.mark.parametrize(
    ("skip_first", "wait", "warmup", "active", "repeat"),
    list(itertools.product([0, 1, 3], [0, 2], [0, 1], [1, 3], [0, 1, 2])),
)
def test_schedule_plan_matches_torch(
    skip_first: int, wait: int, warmup: int, active: int, repeat: int
) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch_fn = tp.schedule(skip_first=skip_first, wait=wait, warmup=warmup, active=active, repeat=repeat)
    plan = SchedulePlan(
        Schedule(skip_first=skip_first, wait=wait, warmup=warmup, active=active, repeat=repeat)
    )
    actions = [plan.action_at(step) for step in range(40)]
    assert actions == [NATIVE[torch_fn(step)] for step in range(40)]
    for step in range(39):
        upcoming = plan.next_busy_step(step)
        expected = next((s for s in range(step + 1, 40) if actions[s] is not Action.NONE), None)
        if expected is not None or repeat > 0:
            assert upcoming == expected
    # a window begins where torch's action leaves NONE or RECORD_AND_SAVE for a busy one
    starts = [
        s
        for s in range(40)
        if actions[s] is not Action.NONE
        and (s == 0 or actions[s - 1] in (Action.NONE, Action.RECORD_AND_SAVE))
    ]
    for step in range(-1, 30):
        expected = next((s for s in starts if s > step), None)
        if expected is not None or repeat > 0:
            assert plan.next_window_start(step) == expected, step


def test_the_next_busy_step_is_computed_not_searched_for() -> None:
    """It is asked at every step boundary outside a capture: with --wait 10^12 a search stalled training
    (one iteration per step of the wait)."""
    plan = SchedulePlan(Schedule(skip_first=5, wait=10**12, warmup=2, active=3, repeat=0))
    assert plan.next_busy_step(0) == 5 + 10**12
    assert plan.next_busy_step(5 + 10**12 + 3) == 5 + 10**12 + 4  # inside the window: the next step
    assert plan.next_busy_step(5 + 10**12 + 4) == 5 + 2 * 10**12 + 5  # after it: the next cycle's
    once = SchedulePlan(Schedule(skip_first=0, wait=10**12, warmup=0, active=1, repeat=1))
    assert (once.next_busy_step(0), once.next_busy_step(10**12)) == (10**12, None)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0])
def test_gc_threshold_must_be_a_finite_number_of_ms(value: float) -> None:
    with pytest.raises(ConfigError, match="--gc-detect-threshold"):
        ProfileConfig(gc_detect_threshold=value).validate()


def test_seed_example_captures() -> None:
    plan = SchedulePlan(Schedule(skip_first=1, wait=1, warmup=1, active=2, repeat=2))
    assert plan.recorded_steps(9) == [[3, 4], [7, 8]]


def test_parsers() -> None:
    assert parse_ranks("0,3-5") == [0, 3, 4, 5]
    assert parse_ranks("all") is None
    assert parse_level("none") == "Level_none" and parse_level("Level2") == "Level2"
    assert parse_activities("CPU,cuda") == ["cpu", "npu"]
    for bad in ("5-3", "x", ""):
        with pytest.raises(ConfigError):
            parse_ranks(bad)


def test_payload_round_trip() -> None:
    cfg = ProfileConfig(
        ranks=[1, 2], metadata={"a": "b"}, export_stacks=["self_cpu_time_total"], with_stack=True
    )
    cfg.schedule.active = 7
    payload = json.loads(cfg.to_env({"run_id": "x"}))
    again = ProfileConfig.from_payload(payload["config"])
    assert again == cfg


def test_template_is_accepted_and_its_start_step_0_means_no_capture() -> None:
    cfg = config_from_json(template_json(), "profiler_config.json")
    assert cfg.validate().schedule.off  # start_step 0: no capture from the file, as in torch_npu
    cfg = config_from_json(
        {**template_json(), "start_step": 10, "active": 2, "is_rank": True, "rank_list": [0]}, "f"
    )
    assert cfg.schedule == Schedule(skip_first=10, wait=0, warmup=0, active=2, repeat=1)
    assert cfg.ranks == [0]


def test_a_rank_list_without_is_rank_is_said_to_be_ignored() -> None:
    """helper-130: `"rank_list": [3]` without `"is_rank": true` recorded every rank without a word (torch_npu
    reads rank_list only with is_rank): a user who meant --ranks 3 got all of them. One warning says so."""
    heard: list[str] = []
    cfg = config_from_json({"start_step": 3, "rank_list": [3]}, "f.json", warn=heard.append)
    assert cfg.ranks is None
    assert heard == ['f.json: rank_list [3] is used only with "is_rank": true (as in torch_npu); ignored']
    for quiet in ({"rank_list": []}, {"is_rank": True, "rank_list": [3]}, {"is_rank": False}):
        heard.clear()
        config_from_json({**template_json(), **quiet}, "f.json", warn=heard.append)
        assert not [line for line in heard if "rank_list" in line], (quiet, heard)


def test_config_errors_name_the_key() -> None:
    with pytest.raises(ConfigError, match="start_step"):
        config_from_json({"start_step": -1}, "f.json")
    with pytest.raises(ConfigError, match="rank_list"):
        config_from_json({"is_rank": True, "rank_list": ["a"]}, "f.json")
    with pytest.raises(ConfigError, match="with_stack"):
        config_from_json({"with_stack": "yes"}, "f.json")
    # a null level read as the word "None": Level_none, silently (no events but the steps' at all)
    with pytest.raises(ConfigError, match="profiler_level: must be a string or an integer, got null"):
        config_from_json({"experimental_config": {"profiler_level": None}}, "f.json")
    assert config_from_json({"experimental_config": {"profiler_level": "Level1"}}, "f.json").level == "Level1"
    # metadata nested as --metadata-json may not be (900 levels: a RecursionError traceback at launch)
    nested: list = []
    for _ in range(40):
        nested = [nested]
    with pytest.raises(ConfigError, match="metadata: a value: nests deeper than 32 levels"):
        config_from_json({"metadata": {"x": nested}}, "f.json")
    ok: list = []
    for _ in range(31):
        ok = [ok]
    assert config_from_json({"metadata": {"x": ok}}, "f.json").metadata == {"x": ok}
