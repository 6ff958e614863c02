"""Runs npuprof's NpuBackend against the torch_npu stand-in (tests/fake_torch_npu) in this process and
prints one JSON document on the last line of stdout. Usage:

    driver.py mapping OUTPUT_DIR CASES_JSON   each case: ProfileConfig fields; create a profiler, no capture
    driver.py capture OUTPUT_DIR CASE_JSON STEPS   a training loop stepped the way npuprof's controller does
    driver.py probe                            npu_available(), the reason, own-mode detection
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def _log_path() -> str:
    return os.environ["FAKE_TORCH_NPU_LOG"]


def _log_offset() -> int:
    try:
        return os.path.getsize(_log_path())
    except OSError:
        return 0


def _calls_since(offset: int) -> list[dict[str, Any]]:
    try:
        with open(_log_path(), encoding="utf-8") as f:
            f.seek(offset)
            return [json.loads(line) for line in f if line.strip()]
    except OSError:
        return []


def _config(case: dict[str, Any], output: str) -> Any:
    from npuprof.config import ProfileConfig

    cfg = ProfileConfig.from_payload({"output": output, **case})
    return cfg.validate()


def _jsonable(value: Any) -> Any:
    from torch_npu._calls import jsonable

    return jsonable(value)


def mapping(output: str, cases: list[dict[str, Any]]) -> dict[str, Any]:
    from npuprof.agent.backends.npu_backend import NpuBackend
    from npuprof.agent.schedule import SchedulePlan

    backend = NpuBackend()
    results = []
    for case in cases:
        cfg = _config(case, output)
        offset = _log_offset()
        ignored = backend.ignored_flags(cfg)
        prof = backend.create_profiler(cfg, SchedulePlan(cfg.schedule).action_at, lambda p: None, worker="w")
        results.append(
            {
                "ignored": ignored,
                "calls": _calls_since(offset),
                "experimental": _jsonable(vars(prof.prof_if.experimental_config)),
                "schedule_dict": _jsonable(vars(prof.schedule)),
                "schedule_actions": [prof.schedule(i).name for i in range(12)],
            }
        )
    return {
        "name": backend.name,
        "device": backend.device,
        "versions": backend.version_info(),
        "results": results,
    }


def capture(output: str, case: dict[str, Any], steps: int) -> dict[str, Any]:
    """Steps the backend exactly as npuprof.agent.controller does: open a profiler at the first busy step
    (create, align, start), prof.step() at each later boundary, close it when the plan says NONE."""
    import torch

    from npuprof.agent.backends.npu_backend import NpuBackend
    from npuprof.agent.schedule import Action, SchedulePlan

    cfg = _config(case, output)
    plan = SchedulePlan(cfg.schedule)
    backend = NpuBackend()
    exported: list[dict[str, Any]] = []
    state = {"step": 0, "prof": None, "profilers": 0}

    def on_trace_ready(prof: Any) -> None:
        rank_dir, trace = backend.export_raw(prof, None, "w")
        exported.append({"rank_dir": str(rank_dir), "trace": trace, "at_step": state["step"]})

    def boundary() -> None:
        step, prof = state["step"], state["prof"]
        wanted = plan.action_at(step)
        if prof is None:
            if wanted is Action.NONE:
                return
            prof = backend.create_profiler(cfg, plan.action_at, on_trace_ready, worker="w")
            state["profilers"] += 1
            backend.align(prof, step)
            prof.start()
            state["prof"] = prof
            return
        prof.step()
        if wanted is Action.NONE:
            prof.stop()
            state["prof"] = None

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    boundary()  # step 0 begins
    for _ in range(steps):
        loss = model(torch.randn(4, 8)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        state["step"] += 1
        boundary()
    if state["prof"] is not None:
        state["prof"].stop()
    return {
        "exported": exported,
        "profilers": state["profilers"],
        "pid": os.getpid(),
        "device": backend.device,
    }


def probe() -> dict[str, Any]:
    from npuprof.agent.backends.npu_backend import (
        npu_available,
        torch_npu_own_mode_active,
        unavailable_reason,
    )

    available = npu_available()
    result: dict[str, Any] = {
        "available": available,
        "reason": unavailable_reason(),
        "own_mode": torch_npu_own_mode_active(),
    }
    if available:
        import torch

        result["torch_npu_registered"] = bool(torch.npu.is_available())
        from npuprof.agent.backends import select_backend
        from npuprof.agent.log import AgentLog

        result["selected"] = select_backend(AgentLog(None, "test")).name
    return result


def main() -> None:
    mode = sys.argv[1]
    if mode == "mapping":
        result = mapping(sys.argv[2], json.loads(sys.argv[3]))
    elif mode == "capture":
        result = capture(sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4]))
    else:
        result = probe()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
