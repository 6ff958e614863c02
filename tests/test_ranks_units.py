"""agent/ranks.py in-process: the rank a capture record names, with a stand-in torch.distributed."""

from __future__ import annotations

import sys
import types

import pytest

from npuprof.agent import ranks


def _fake_dist(rank: int) -> types.SimpleNamespace:
    state = {"initialised": False}
    return types.SimpleNamespace(
        state=state,
        is_available=lambda: True,
        is_initialized=lambda: state["initialised"],
        get_rank=lambda: rank if state["initialised"] else (_ for _ in ()).throw(RuntimeError("no group")),
    )


@pytest.mark.parametrize("variable", ranks.RANK_VARIABLES)
def test_a_launcher_variable_names_the_rank(monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    for name in ranks.RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, "4")
    assert ranks.current_rank() == 4


def test_the_rank_stays_known_after_destroy_process_group(monkeypatch: pytest.MonkeyPatch) -> None:
    """helper-163: mp.spawn ranks that call init_process_group(rank=r) themselves (no RANK variable), rank 1
    ending its training, then destroy_process_group(): its capture, ended at exit, was written with rank
    null, and the run's summary showed rank "-" for it (analyse, reading the trace, said rank 1)."""
    for name in ranks.RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(ranks, "_last_process_group_rank", None, raising=False)
    dist = _fake_dist(1)
    monkeypatch.setitem(sys.modules, "torch.distributed", dist)
    assert ranks.current_rank() is None  # before init_process_group
    dist.state["initialised"] = True
    assert ranks.current_rank() == 1
    dist.state["initialised"] = False  # destroy_process_group()
    assert ranks.current_rank() == 1
    monkeypatch.setenv("RANK", "0")  # a launcher's variable still comes first
    assert ranks.current_rank() == 0


def test_a_later_process_group_gives_its_own_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that destroys its group and inits another with another rank (an elastic restart in the
    same process, a test harness) is the new group's rank, not the first one kept; with no group since,
    the last rank stays (helper-165: a rank kept only while none was known passed the test above)."""
    for name in ranks.RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(ranks, "_last_process_group_rank", None, raising=False)
    first, second = _fake_dist(1), _fake_dist(3)
    monkeypatch.setitem(sys.modules, "torch.distributed", first)
    first.state["initialised"] = True
    assert ranks.current_rank() == 1
    first.state["initialised"] = False  # destroy_process_group()
    monkeypatch.setitem(sys.modules, "torch.distributed", second)
    assert ranks.current_rank() == 1  # no group yet: the last one's rank
    second.state["initialised"] = True  # init_process_group(rank=3)
    assert ranks.current_rank() == 3
    second.state["initialised"] = False
    assert ranks.current_rank() == 3


@pytest.mark.parametrize(
    ("local_rank", "hidden"), [("²", False), ("", False), ("-1", False), ("0", False), (" 1 ", True)]
)
def test_a_local_rank_that_is_no_number_leaves_profiling_on(
    tmp_path, monkeypatch: pytest.MonkeyPatch, local_rank: str, hidden: bool
) -> None:
    """torchrun --local-ranks-filter 0 and ``LOCAL_RANK=²`` (``"²".isdigit()``, and ``int("²")`` a
    ValueError): the agent did not start, profiling was off in the process, its reason a ValueError's
    repr. A LOCAL_RANK that is no number leaves the output taken as seen."""
    import json

    from npuprof import ENV_CONFIG
    from npuprof.agent import entry
    from npuprof.config import ProfileConfig

    document = json.loads(
        ProfileConfig(output=str(tmp_path)).to_env({"run_id": "r", "log": str(tmp_path / "l")})
    )
    document["run"]["shown_local_ranks"] = [0]
    monkeypatch.setenv(ENV_CONFIG, json.dumps(document))
    monkeypatch.setenv("LOCAL_RANK", local_rank)
    monkeypatch.setattr(entry, "Agent", lambda cfg, run, log: log)  # what _start decided, no agent built
    monkeypatch.setattr(entry, "set_log", lambda log: None)
    monkeypatch.setitem(entry._state, "agent", None)
    log = entry._start()
    assert log is not None and log.output_hidden is hidden
