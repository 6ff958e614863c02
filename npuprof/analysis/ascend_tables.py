"""kernel_details.csv, operator_details.csv and op_statistic.csv as typed columns (docs/formats.md, "The
Ascend tables as columns").

Each table holds numpy columns; every text column is an id into the table's ``strings`` (the trace's
interned strings; -1 where the table has no value). The values are those a database writer wants (integer
epoch nanoseconds, unrounded µs); ``csv_lines()`` formats them at write time, column by column in batches of
``LINES_BATCH`` rows, into exactly the CSV text torch_npu writes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from npuprof.analysis.cells import (
    LINES_BATCH,
    NA,
    Memo,
    csv_cell,
    csv_cells,
    float_texts,
    int_cells,
    shape_cells_of,
    us_texts,
)
from npuprof.analysis.rounding import rounded

# kernel_details.csv as torch_npu writes it (its 2023 and 2025 releases; docs/formats.md): the AI Core
# metrics columns that follow Context ID there depend on aic_metrics and are left out
KERNEL_HEADER = [
    "Step Id",
    "Model ID",
    "Task ID",
    "Stream ID",
    "Name",
    "Type",
    "Accelerator Core",
    "Start Time(us)",
    "Duration(us)",
    "Wait Time(us)",
    "Block Dim",
    "Mix Block Dim",
    "Input Shapes",
    "Input Data Types",
    "Input Formats",
    "Output Shapes",
    "Output Data Types",
    "Output Formats",
    "Context ID",
]
OPERATOR_HEADER = [
    "Name",
    "Input Shapes",
    "Call Stack",
    "Host Self Duration(us)",
    "Host Total Duration(us)",
    "Device Self Duration(us)",
    "Device Total Duration(us)",
    "Device Self Duration With AICore(us)",
    "Device Total Duration With AICore(us)",
]
OP_STAT_HEADER = [
    "OP Type",
    "Core Type",
    "Count",
    "Total Time(us)",
    "Min Time(us)",
    "Avg Time(us)",
    "Max Time(us)",
    "Ratio(%)",
]
EAGER_MODEL = 4294967295  # torch_npu's Model ID of a task outside any graph (eager mode)
_NA_TAIL = f",{NA}" * 6  # Input Data Types .. Context ID: filled by torch_npu from CANN, not known here

# a column's cells for a batch of rows: one text when every row has it (joined once, not per row), else a list
Cells = str | list[str]


@dataclass(frozen=True)
class KernelTable:
    """kernel_details.csv: one row per device task, by start time (on a CPU capture, the step thread's
    innermost operators and the collectives' spans: the CPU is the device there). Integer columns hold -1
    where torch_npu writes N/A."""

    strings: list[str]
    # the step windows' numbers; None: the trace has no steps (the table has no Step Id column)
    step_numbers: tuple[int | None, ...] | None
    step: np.ndarray  # index into step_numbers; -1: outside every step
    model_id: np.ndarray
    task_id: np.ndarray  # the correlation id
    stream: np.ndarray  # the stream, or with stream_names the index of the thread that ran the task
    stream_names: list[str] | None  # a CPU capture's streams: the thread id of each thread index
    name: np.ndarray  # string id
    type: np.ndarray  # string id: the launching operator's name, else the task kind
    core: np.ndarray  # string id: the accelerator core
    start_ns: np.ndarray  # epoch nanoseconds (the trace's time plus its time base)
    duration_us: np.ndarray  # float64, unrounded
    wait_us: np.ndarray  # the gap since the previous task of the same stream ended
    block_dim: np.ndarray
    mix_block_dim: np.ndarray
    input_shapes: np.ndarray  # string id of Kineto's Input Dims text; -1 for none
    # the operator (index into the OpView) that launched each task, -1 for none: for the db export
    launcher: np.ndarray | None = None
    # each task's runtime call, an index into the extract's launch_* columns, -1 for none: the db's CANN_API
    launch: np.ndarray | None = None
    # each task's device as the trace says it (a kernel's args.device), -1 where it does not: the db's TASK
    device: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.start_ns)

    @classmethod
    def empty(cls, strings: list[str], step_numbers: tuple[int | None, ...] | None) -> KernelTable:
        none, no_time = np.zeros(0, np.int64), np.zeros(0)
        return cls(
            strings, step_numbers, step=none, model_id=none, task_id=none, stream=none, stream_names=None,
            name=none, type=none, core=none, start_ns=none, duration_us=no_time, wait_us=no_time,
            block_dim=none, mix_block_dim=none, input_shapes=none,
        )  # fmt: skip

    @property
    def header(self) -> list[str]:
        return KERNEL_HEADER if self.step_numbers is not None else KERNEL_HEADER[1:]

    def csv_lines(self) -> list[str]:
        """The rows of kernel_details.csv, CSV text without line ends."""
        strings = self.strings
        names = csv_cells(strings, {-1: ""})
        shapes = shape_cells_of(strings)
        span = len(strings) + 1
        # cells that go together are formatted together: Type and Core; Mix Block Dim, Input Shapes and
        # the columns after them
        type_core_key = self.type * span + self.core
        type_core = Memo(lambda key: f"{names[key // span]},{names[key % span]}")
        columns: list[Callable[[slice], Cells]] = []
        if self.step_numbers is not None:
            step_cells = ["" if s is None else str(s) for s in self.step_numbers] + [""]
            columns.append(lambda part: list(map(step_cells.__getitem__, self.step[part].tolist())))
        threads = None if self.stream_names is None else [csv_cell(s) for s in self.stream_names]
        duration, wait = np.round(self.duration_us, 3), np.round(self.wait_us, 3)
        columns += [
            lambda part: _int_column(self.model_id[part]),
            lambda part: _int_column(self.task_id[part]),
            lambda part: _stream_column(self.stream[part], threads),
            lambda part: list(map(names.__getitem__, self.name[part].tolist())),
            lambda part: list(map(type_core.__getitem__, type_core_key[part].tolist())),
            lambda part: us_texts(self.start_ns[part]),
            lambda part: float_texts(duration[part]),
            lambda part: float_texts(wait[part]),
            lambda part: _int_column(self.block_dim[part]),
            lambda part: _shapes_tail(self.mix_block_dim[part], self.input_shapes[part], shapes),
        ]
        return _lines(len(self), columns)


@dataclass(frozen=True)
class OperatorTable:
    """operator_details.csv: one row per operator name, input shapes and call stack, by host self time
    (largest first). Times are sums in µs, unrounded; the two AI Core columns are always 0 here."""

    strings: list[str]
    name: np.ndarray  # string id
    input_shapes: np.ndarray  # string id of Kineto's Input Dims text, as written there; -1 for none
    call_stack: np.ndarray  # string id; -1 for none
    host_self_us: np.ndarray
    host_total_us: np.ndarray
    device_self_us: np.ndarray
    device_total_us: np.ndarray

    def __len__(self) -> int:
        return len(self.name)

    @classmethod
    def empty(cls, strings: list[str]) -> OperatorTable:
        ints, floats = np.zeros(0, np.int64), np.zeros(0)
        return cls(strings, ints, ints, ints, floats, floats, floats, floats)

    @property
    def header(self) -> list[str]:
        return OPERATOR_HEADER

    def csv_lines(self) -> list[str]:
        """The rows of operator_details.csv, CSV text without line ends."""
        cells = csv_cells(self.strings, {-1: ""})
        times = [
            np.array(rounded(column, 3))
            for column in (self.host_self_us, self.host_total_us, self.device_self_us, self.device_total_us)
        ]
        return _lines(
            len(self),
            [
                lambda part: list(map(cells.__getitem__, self.name[part].tolist())),
                lambda part: list(map(cells.__getitem__, self.input_shapes[part].tolist())),
                lambda part: list(map(cells.__getitem__, self.call_stack[part].tolist())),
                *(lambda part, t=t: float_texts(t[part]) for t in times),
                lambda part: "0,0",
            ],
        )


@dataclass(frozen=True)
class OpStatTable:
    """op_statistic.csv: per operator type and core, the count and times of its tasks (of its operators'
    self times on a CPU capture), by total time (largest first); times in µs, unrounded."""

    strings: list[str]
    op_type: np.ndarray  # string id
    core: np.ndarray  # string id
    count: np.ndarray
    total_us: np.ndarray
    min_us: np.ndarray
    avg_us: np.ndarray
    max_us: np.ndarray
    ratio_pct: np.ndarray  # the share of the summed total time, in percent

    def __len__(self) -> int:
        return len(self.op_type)

    @classmethod
    def empty(cls, strings: list[str]) -> OpStatTable:
        ints, floats = np.zeros(0, np.int64), np.zeros(0)
        return cls(strings, ints, ints, ints, floats, floats, floats, floats, floats)

    @property
    def header(self) -> list[str]:
        return OP_STAT_HEADER

    def csv_lines(self) -> list[str]:
        """The rows of op_statistic.csv, CSV text without line ends."""
        cells = csv_cells(self.strings, {})
        times = [
            np.array(rounded(column, 3)) for column in (self.total_us, self.min_us, self.avg_us, self.max_us)
        ]
        ratio = np.array(rounded(self.ratio_pct, 2))
        return _lines(
            len(self),
            [
                lambda part: list(map(cells.__getitem__, self.op_type[part].tolist())),
                lambda part: list(map(cells.__getitem__, self.core[part].tolist())),
                lambda part: int_cells(self.count[part]),
                *(lambda part, t=t: float_texts(t[part]) for t in times),
                lambda part: float_texts(ratio[part]),
            ],
        )


def _int_column(values: np.ndarray) -> Cells:
    """Integer cells (N/A for a negative one); one text when they are all the same."""
    if len(values) and bool((values == values[0]).all()):
        return int_cells(values[:1])[0]
    return int_cells(values)


def _stream_column(stream: np.ndarray, threads: list[str] | None) -> Cells:
    """The stream numbers, or the cells of the threads they index."""
    return _int_column(stream) if threads is None else list(map(threads.__getitem__, stream.tolist()))


def _shapes_tail(mix: np.ndarray, shapes: np.ndarray, shape_cells: dict[int, str]) -> list[str]:
    """Mix Block Dim, Input Shapes and the N/A columns after them, as one cell each row."""
    if len(mix) and bool((mix == mix[0]).all()):
        mix_cell = int_cells(mix[:1])[0]
        tail = Memo(lambda sid: f"{mix_cell},{shape_cells[sid]}{_NA_TAIL}")
        return list(map(tail.__getitem__, shapes.tolist()))
    return [f"{m},{shape_cells[s]}{_NA_TAIL}" for m, s in zip(int_cells(mix), shapes.tolist(), strict=True)]


def _lines(n: int, columns: list[Callable[[slice], Cells]]) -> list[str]:
    """``n`` CSV lines, ``column(part)`` giving the cells of the rows in the slice ``part``: built column-wise
    in batches (the columns of text are several times the lines), one C-level join per row."""
    lines: list[str] = []
    for lo in range(0, n, LINES_BATCH):
        part = slice(lo, min(lo + LINES_BATCH, n))
        lines += _joined([column(part) for column in columns], part.stop - part.start)
    return lines


def _joined(cells: list[Cells], n: int) -> Iterable[str]:
    """The rows of ``n`` cells each column; neighbouring constant columns are joined once."""
    merged: list[Cells] = []
    for cell in cells:
        if isinstance(cell, str) and merged and isinstance(merged[-1], str):
            merged[-1] = f"{merged[-1]},{cell}"
        else:
            merged.append(cell)
    return map(",".join, zip(*([c] * n if isinstance(c, str) else c for c in merged), strict=True))
