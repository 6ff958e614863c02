"""torch_npu's own exports, made in the step (agent/capture_exports.py): what they write is held to
--min-free-space all together, the memory timeline's peak is the most allocated at one time, and a stacks
file holds the metric its name says. In process, a stand-in of torch_npu's profiler object."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from npuprof.agent.capture_exports import export_capture_extras

STACKS = b"train.py(3):_<module>;aten::mm 40\ntrain.py(3):_<module>;aten::add 2\n"
# torch's raw events (ns, action, bytes, category): +100 parameter, +50 gradient, -100 parameter, +30
# activation; the total over time is 100, 150, 50, 80
RAW = [[1_000, 2, 100, 0], [2_000, 2, 50, 5], [3_000, 4, -100, 0], [4_000, 2, 30, 4]]
PEAK = 150


class _Profiler:
    """torch_npu's profile object as the step's exports use it."""

    record_shapes = profile_memory = with_stack = True
    with_modules = False

    def export_stacks(self, path: str, metric: str) -> None:
        Path(path).write_bytes(STACKS)

    def export_memory_timeline(self, path: str, device: str) -> None:
        Path(path).write_bytes(gzip.compress(json.dumps(RAW).encode()))


def _exports(rank_dir: Path, room: int | None, lines: list[str], stacks: bool = True) -> list[str]:
    rank_dir.mkdir()

    def short_of(wanted: int) -> str:
        return f"{wanted} bytes wanted, {room} left" if room is not None and wanted > room else ""

    done = export_capture_extras(
        _Profiler(),
        rank_dir,
        stacks_metrics=["self_cpu_time_total"] if stacks else [],
        memory_formats=["json"],
        device="npu:0",
        log=lines.append,
        short_of=short_of if room is not None else None,
    )
    return sorted(path.name for path in done.written)


def test_the_steps_exports_are_held_to_the_room_left_all_together(tmp_path: Path) -> None:
    lines: list[str] = []
    everything = _exports(tmp_path / "free", None, lines)
    assert everything == [
        "memory_timeline.json",
        "memory_timeline.meta.json",
        "memory_timeline.raw.json.gz",
        "stacks_self_cpu_time_total.folded",
    ], lines
    assert (tmp_path / "free" / "stacks_self_cpu_time_total.folded").read_bytes() == STACKS
    meta = json.loads((tmp_path / "free" / "memory_timeline.meta.json").read_text())
    assert meta["max_allocated_bytes"] == PEAK and meta["device"] == "npu:0"
    sizes = {name: (tmp_path / "free" / name).stat().st_size for name in everything}
    stacks = sizes["stacks_self_cpu_time_total.folded"]
    memory_base = sizes["memory_timeline.raw.json.gz"] + sizes["memory_timeline.meta.json"]
    # room for the stacks, or for the timeline's raw data and meta, but not for both
    room = max(stacks, memory_base)
    assert stacks + memory_base > room
    lines.clear()
    assert _exports(tmp_path / "short", room, lines) == ["stacks_self_cpu_time_total.folded"], lines
    assert any("memory_timeline.*" in line and "not written" in line for line in lines), lines
    # the timeline's raw data and meta go together or not at all: room for the larger alone is too little
    lines.clear()
    larger = max(sizes["memory_timeline.raw.json.gz"], sizes["memory_timeline.meta.json"])
    assert _exports(tmp_path / "shorter", larger, lines, stacks=False) == [], lines


class _RefusingProfiler(_Profiler):
    """torch's export_stacks refuses a metric it does not know with ValueError (profiler_util.EventList); this
    one refuses the NPU's own name (as upstream torch's, which names it self_privateuse1_time_total) and
    fails on the host's time with a ValueError of its own."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def export_stacks(self, path: str, metric: str) -> None:
        self.asked.append(metric)
        if metric == "self_privateuse1_time_total":
            Path(path).write_bytes(b"train.py(3):_<module>;aten::mm 999\n")  # the device's time
            return
        raise ValueError(f"cannot export {metric}")


def test_a_stacks_file_holds_its_own_metric_when_torch_npu_refuses_it(tmp_path: Path) -> None:
    """Only the NPU's time has another name to ask for (self_privateuse1_time_total): a host-time export that
    failed was asked again under the device's name, and its file, stacks_self_cpu_time_total.folded, held
    the device's time. It is left to the post-processor, which builds it from trace_view.json."""
    prof, lines = _RefusingProfiler(), []
    rank_dir = tmp_path / "rank0_ascend_pt"
    rank_dir.mkdir()
    done = export_capture_extras(
        prof,
        rank_dir,
        stacks_metrics=["self_cpu_time_total", "self_npu_time_total"],
        memory_formats=[],
        device="npu:0",
        log=lines.append,
    )
    assert prof.asked == ["self_cpu_time_total", "self_npu_time_total", "self_privateuse1_time_total"]
    assert [path.name for path in done.written] == ["stacks_self_npu_time_total.folded"]
    assert done.job == {"stacks": ["self_cpu_time_total"]}
    assert lines == [
        "export-stacks self_cpu_time_total: torch_npu's export_stacks failed (ValueError: cannot export "
        "self_cpu_time_total); npuprof builds them from trace_view.json"
    ]
