"""The copy of a capture's event tree that the memory timeline is categorised from
(agent/memory_snapshot.py; docs/formats.md, "Stacks and memory timeline files"), checked against the live
tree of a real, in-process torch.profiler capture, walked here; its failure, and its copy without pauses."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import msgspec
import pytest

from npuprof.agent import memory_snapshot
from npuprof.reports.memory_categories import load_snapshot
from npuprof.reports.memory_timeline import MemoryTimelineError


def _scaled(x: Any) -> Any:  # a plain Python call inside a module's forward: left out, its ops kept
    return x * 2.0


@pytest.fixture(scope="module")
def profiled() -> Any:
    import torch
    from torch.profiler import ProfilerActivity, profile

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(8, 4)

        def forward(self, x: Any) -> Any:
            return _scaled(self.layer(x))

    model = Net()
    opt = torch.optim.Adam(model.parameters())
    with profile(
        activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True, with_stack=True
    ) as prof:
        for _ in range(2):
            model(torch.randn(3, 8)).sum().backward()
            opt.step()
            opt.zero_grad()
        torch.full((2,), 1 + 2j)
        torch.cat([torch.zeros(2), torch.zeros(5)])  # a tensor list input
    return prof


def _shown(value: Any) -> Any:
    """A tensor input as (id, sizes), a list of tensors as a list of those; None for any other value."""
    if hasattr(value, "storage_data_ptr"):
        return (value.id, list(value.sizes))
    if isinstance(value, list) and value and all(hasattr(item, "storage_data_ptr") for item in value):
        return [(item.id, list(item.sizes)) for item in value]
    return None


def _expected(roots: list[Any]) -> list[tuple[Any, ...]]:
    """The events the copy keeps, in depth-first order with each one's nearest kept ancestor: operators
    (name, backward?, their tensor inputs' ids and sizes), allocations (bytes, device, totals) and the
    Python calls of modules and optimizers (their parameters' sizes)."""
    from torch._C._profiler import RecordScope, _EventType

    out: list[tuple[Any, ...]] = []

    def visit(event: Any, parent: int) -> None:
        fields, tag = event.extra_fields, event.tag
        row: tuple[Any, ...] | None = None
        if tag == _EventType.TorchOp:
            tensors = [_shown(value) for value in fields.inputs if _shown(value) is not None]
            backward = fields.scope == RecordScope.BACKWARD_FUNCTION
            row = ("op", parent, event.start_time_ns, event.name, backward, tensors)
        elif tag == _EventType.Allocation:
            row = ("alloc", parent, event.start_time_ns, fields.alloc_size, str(fields.device),
                   fields.total_allocated, fields.total_reserved)  # fmt: skip
        elif tag == _EventType.PyCall and fields.module is not None:
            row = (
                "module",
                parent,
                event.start_time_ns,
                [list(p.sizes) for _, p, _ in fields.module.parameters],
            )
        elif tag == _EventType.PyCall and fields.optimizer is not None:
            row = ("optimizer", parent, event.start_time_ns,
                   [list(p.sizes) for p, _, _ in fields.optimizer.parameters])  # fmt: skip
        if row is not None:
            out.append(row)
            parent = len(out) - 1
        for child in event.children:
            visit(child, parent)

    for root in roots:
        visit(root, -1)
    return out


def _copied(snapshot: dict[str, Any]) -> list[tuple[Any, ...]]:
    tensors = snapshot["tensors"]
    out: list[tuple[Any, ...]] = []
    for row in snapshot["events"]:
        kind, parent, start = row[0], row[1], row[2]
        if kind == memory_snapshot.OP:
            name, backward, inputs, tensor_mask = row[3], row[4], row[5], row[6]
            list_mask = row[7]
            shown: list[Any] = []
            for position, value in enumerate(inputs):
                if tensor_mask & (1 << position) and value is not None:
                    shown.append((tensors[value][0], tensors[value][5]))
                elif list_mask & (1 << position):
                    shown.append([(tensors[i][0], tensors[i][5]) for i in value])
            out.append(("op", parent, start, name, backward, shown))
        elif kind == memory_snapshot.ALLOCATION:
            out.append(("alloc", parent, start, row[6], row[7], row[8], row[9]))
        else:
            module, optimizer = row[3], row[4]
            if module is not None:
                out.append(("module", parent, start, [tensors[p][5] for p, _ in module]))
            else:
                out.append(("optimizer", parent, start, [tensors[p][5] for p, _, _ in optimizer]))
    return out


def test_the_copy_holds_the_trees_kept_events_in_order_under_their_nearest_kept_ancestor(
    profiled: Any, tmp_path: Path
) -> None:
    lines: list[str] = []
    path = tmp_path / memory_snapshot.SNAPSHOT_FILE
    memory_snapshot.SnapshotTask(profiled, path, lines.append).run(pause=False)
    assert lines == []
    snapshot = load_snapshot(path)
    expected = _expected(profiled.profiler.kineto_results.experimental_event_tree())
    assert _copied(snapshot) == expected
    kinds = {row[0] for row in expected}
    assert kinds == {"op", "alloc", "module", "optimizer"}, kinds
    # the tree has what the test is about: a backward op, and an op whose nearest kept ancestor is a module
    # through a plain Python call left out
    assert any(row[0] == "op" and row[4] for row in expected)
    assert any(
        row[0] == "op" and row[3] == "aten::mul" and expected[row[1]][0] == "module" for row in expected
    )
    (cat,) = [row for row in expected if row[0] == "op" and row[3] == "aten::cat"]
    assert [len(value) for value in cat[5] if isinstance(value, list)] == [2], cat
    # a complex scalar input travels as its two parts
    (full,) = [row for row in snapshot["events"] if row[0] == memory_snapshot.OP and row[3] == "aten::full"]
    assert full[5][1] == {"complex": [1.0, 2.0]}, full


def test_a_copy_that_failed_is_written_as_its_error_and_said(tmp_path: Path) -> None:
    """Whoever waits for the file learns why: the post-processor's memory timeline says it in one line."""
    tree = types.SimpleNamespace(experimental_event_tree=lambda: [object()])  # an event torch never made
    prof = types.SimpleNamespace(profiler=types.SimpleNamespace(kineto_results=tree))
    lines: list[str] = []
    path = tmp_path / "rank0_ascend_pt" / memory_snapshot.SNAPSHOT_FILE
    path.parent.mkdir()
    memory_snapshot.SnapshotTask(prof, path, lines.append).run(pause=False)
    assert len(lines) == 1 and lines[0].startswith(
        "rank0_ascend_pt: memory snapshot failed: AttributeError("
    ), lines
    with pytest.raises(MemoryTimelineError, match=r"^the training process could not copy the memory data: "
                       r"AttributeError\("):  # fmt: skip
        load_snapshot(path)


def test_a_copy_asked_without_pauses_never_sleeps_and_one_with_pauses_does(
    profiled: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slept: list[float] = []
    monkeypatch.setattr(memory_snapshot.time, "sleep", slept.append)
    memory_snapshot.SnapshotTask(profiled, tmp_path / "fast.msgpack", print).run(pause=False)
    assert slept == []
    memory_snapshot.SnapshotTask(profiled, tmp_path / "slow.msgpack", print).run()
    events = len(msgspec.msgpack.decode((tmp_path / "slow.msgpack").read_bytes())["events"])
    assert len(slept) >= events // (2 * memory_snapshot.SLICE_EVENTS) > 0
    assert (tmp_path / "fast.msgpack").read_bytes() == (tmp_path / "slow.msgpack").read_bytes()


def test_a_paused_copy_rests_its_factor_times_each_slices_cpu_time_until_hurried(
    profiled: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each slice is followed by a pause of PAUSE_FACTOR times the CPU time it took (here a clock of the
    test's: 1 ms a reading); hurry() (training has ended, or snapshots wait behind it) ends the pauses."""
    clock = iter(range(10**6))
    monkeypatch.setattr(memory_snapshot.time, "thread_time", lambda: next(clock) / 1000)
    task = memory_snapshot.SnapshotTask(profiled, tmp_path / "hurried.msgpack", print)
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 2:
            task.hurry()

    monkeypatch.setattr(memory_snapshot.time, "sleep", sleep)
    task.run()
    assert slept == [pytest.approx(memory_snapshot.PAUSE_FACTOR * 0.001)] * 2
    assert (tmp_path / "hurried.msgpack").is_file()
