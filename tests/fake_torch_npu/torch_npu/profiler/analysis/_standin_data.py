"""Stand-in only: the raw data of a capture and its parsing, in the forms the real torch_npu writes.

The stand-in records on the CPU with torch's Kineto profiler. At the end of a capture (``record_raw``) that
recording becomes the raw layout torch_npu leaves in a rank directory:

    FRAMEWORK/torch.op_range          the framework operators (and record_function ranges such as
                                      ProfilerStep#N), one JSON record a line (torch_npu: binary TLV records)
    FRAMEWORK/torch.memory_usage      the allocator samples, when profile_memory
    FRAMEWORK/torch.op_mark           the task queue's marks (TASK_QUEUE_ENABLE, on unless "0", as in
                                      torch_npu): each launch enqueued inside its operator, dequeued on
                                      a consumer thread of the process, which makes the AscendCL call
    PROF_000001_<stamp>_<TAG>/        CANN's data: host/data/api_event.data.slice_0 (the AscendCL calls
                                      that launched device tasks), device_0/data/hwts.data.0.slice_0 (the
                                      device tasks: one per innermost ``aten::`` operator, on stream 2)

and ``parse`` turns it into ASCEND_PROFILER_OUTPUT/ as torch_npu's parser does: trace_view.json (a bare JSON
array; ``ts`` a string of epoch microseconds with nanosecond decimals; the processes Python, CANN, Ascend
Hardware and Overlap Analysis with their labels and sort indexes; ``cpu_op`` operators, ProfilerStep#N
among them, ``Input Dims`` / ``Input type`` as its strings; the task queue's ``Enqueue`` (``Enqueue@<launch>``
in releases since June 2025) and ``Dequeue@<launch>`` spans with their ``async_task_queue`` flows, the
consumer thread sorted after the others and holding the AscendCL calls; ``fwdbwd`` flows from each
forward operator to its backward one by sequence number; ``async_npu`` flows and
``HostToDevice`` ones whose id is the task's connection id above 32 one-bits),
kernel_details.csv (the header of the 2023 release at Level1 and Level2), operator_details.csv (a row per
call), memory_record.csv and operator_memory.csv (with profile_memory; with the NPU activity too, CANN's APP
rows first in memory_record.csv, and npu_module_mem.csv), op_statistic.csv and step_trace_time.csv; a table
without rows is not written. The Overlap Analysis lanes are CANN's, over the whole capture (Free: the gaps
between device work); the steps of kernel_details.csv and step_trace_time.csv are torch_npu's device windows
(``step_range``: from the step's first task to the later of its last task's end and the host span's end), its
lanes counted whole in the window holding their start (``step_table``; no Device_id column before June 2025).
``stacks`` is its export_stacks (to a ``.log`` file). A rank's gloo collectives become HCCL operators
(kernel_details.csv rows of core HCCL, an ``HCCL`` process in trace_view.json, the Communication lanes) and
communication.json and communication_matrix.json (``_standin_comm``). At Level0 (the default)
kernel_details.csv has its shorter header (``LEVEL0_KERNEL_HEADER``).
Nothing here uses npuprof.
"""

from __future__ import annotations

import csv
import itertools
import json
import os
import random
import re
import string
import time
from typing import Any

from . import _standin_comm

OP_RANGE = "torch.op_range"
MEMORY_USAGE = "torch.memory_usage"
OP_MARK = "torch.op_mark"
API_EVENTS = os.path.join("host", "data", "api_event.data.slice_0")
DEVICE_TASKS = os.path.join("device_0", "data", "hwts.data.0.slice_0")
HCCL_OPS = os.path.join("device_0", "data", _standin_comm.HCCL_DATA)
# CANN's sampling of the device's memory (profile_memory with the NPU activity: ProfilerMgr asks for
# ACL_PROF_TASK_MEMORY and sys-hardware-mem at 50 Hz): the application's total (npu_mem: event APP, ddr + hbm
# in "memory(KB)", no allocated size) and each module's reserved memory (npu_module_mem)
NPU_MEM = os.path.join("device_0", "data", "npu_mem.data.0.slice_0")
NPU_MODULE_MEM = os.path.join("device_0", "data", "npu_module_mem.data.0.slice_0")
SAMPLE_NS = 20_000_000
MODULES = (("SLOG", 2048.0), ("RUNTIME", 6144.0), ("HCCL", 1024.0))  # reserved KB each (CANN's module names)
STREAM = 2
EAGER_MODEL = 4294967295
DEVICE_PID = 800  # torch_npu's "Ascend Hardware" pid in Ascend's public sample

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
MEMORY_RECORD_HEADER = [
    "Component",
    "Timestamp(us)",
    "Total Allocated(MB)",
    "Total Reserved(MB)",
    "Total Active(MB)",
    "Stream Ptr",
    "Device Type",
]
OPERATOR_MEMORY_HEADER = [
    "Name",
    "Size(KB)",
    "Allocation Time(us)",
    "Release Time(us)",
    "Active Release Time(us)",
    "Duration(us)",
    "Active Duration(us)",
    "Allocation Total Allocated(MB)",
    "Allocation Total Reserved(MB)",
    "Allocation Total Active(MB)",
    "Release Total Allocated(MB)",
    "Release Total Reserved(MB)",
    "Release Total Active(MB)",
    "Stream Ptr",
    "Device Type",
]
NPU_MODULE_MEM_HEADER = ["Device_id", "Component", "Timestamp(us)", "Total Reserved(MB)", "Device"]
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
STEP_HEADER = [
    "Device_id",
    "Step",
    "Computing",
    "Communication(Not Overlapped)",
    "Overlapped",
    "Communication",
    "Free",
    "Stage",
    "Bubble",
    "Communication(Not Overlapped and Exclude Receive)",
    "Preparing",
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
_CUBE = re.compile(r"mm|matmul|linear|conv|bmm", re.I)


def us(ns: int) -> str:
    """Nanoseconds as torch_npu's time text: microseconds with three decimals."""
    return f"{ns // 1000}.{ns % 1000:03d}"


def _jsonl(path: str, records: list[dict[str, Any]]) -> None:
    os.makedirs(os.path.dirname(path), mode=0o750, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record) + "\n")


def _read_jsonl(path: str) -> list[dict[str, Any]]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def prof_dir(prof_path: str) -> str | None:
    found = sorted(d for d in os.listdir(prof_path) if d.startswith("PROF_"))
    return os.path.join(prof_path, found[-1]) if found else None


# ---- recording -------------------------------------------------------------------------------------------
def record_raw(prof_path: str, kineto: dict[str, Any], record_shapes: bool = True, npu: bool = True) -> None:
    """Write the FRAMEWORK/ and PROF_*/ data of a capture from the Kineto recording (a Chrome trace dict,
    recorded with shapes; the operators keep theirs only with ``record_shapes``). Without the NPU activity
    (``npu`` False) CANN collects nothing: torch_npu's ProfilerMgr starts msprof only for it (npu_trace), so
    the rank dir has no PROF_* directory, only FRAMEWORK/ (the task queue's marks included)."""
    base = int(kineto.get("baseTimeNanoseconds") or 0)

    def ns(ts: float) -> int:
        return base + round(float(ts) * 1000)

    events = kineto.get("traceEvents", [])
    frames = [e for e in events if e.get("cat") == "python_function" and e.get("ph") == "X"]
    ops = []
    for e in events:
        if e.get("ph") != "X" or e.get("cat") not in ("cpu_op", "user_annotation"):
            continue
        if _standin_comm.is_collective_span(e):  # HCCL's operators on an NPU (below), no framework range
            continue
        args = e.get("args") or {}
        start, end = ns(e["ts"]), ns(e["ts"] + e.get("dur", 0))
        ops.append(
            {
                "name": e.get("name", ""),
                "start_ns": start,
                "end_ns": end,
                "pid": e.get("pid"),
                "tid": e.get("tid"),
                "seq": args.get("Sequence number", -1),
                "fwd_tid": args.get("Fwd thread id", 0),
                "input_shapes": args.get("Input Dims") if record_shapes else None,
                "input_dtypes": args.get("Input type") if record_shapes else None,
                "call_stack": _stack_at(frames, e),
            }
        )
    ops.sort(key=lambda o: (o["start_ns"], -o["end_ns"]))
    framework = os.path.join(prof_path, "FRAMEWORK")
    os.makedirs(framework, mode=0o750, exist_ok=True)
    _jsonl(os.path.join(framework, OP_RANGE), ops)
    memory = [
        {
            "time_ns": ns(e["ts"]),
            "ptr": (e.get("args") or {}).get("Addr", 0),
            "alloc_size": (e.get("args") or {}).get("Bytes", 0),
            "total_allocated": (e.get("args") or {}).get("Total Allocated", 0),
            "total_reserved": (e.get("args") or {}).get("Total Reserved", 0),
            "pid": e.get("pid"),
            "tid": e.get("tid"),
        }
        for e in events
        if e.get("name") == "[memory]"
    ]
    if memory:
        _jsonl(os.path.join(framework, MEMORY_USAGE), memory)
    stamp = time.strftime("%Y%m%d%H%M%S") + f"{int(time.time() * 1000) % 1000:03d}"
    tag = "".join(random.choice(string.ascii_uppercase) for _ in range(16))
    cann = os.path.join(prof_path, f"PROF_000001_{stamp}_{tag}")
    apis, tasks, marks = _device_work(ops)
    if marks:
        _jsonl(os.path.join(framework, OP_MARK), marks)
    if not npu:
        return
    _jsonl(os.path.join(cann, API_EVENTS), apis)
    _jsonl(os.path.join(cann, DEVICE_TASKS), tasks)
    if memory and ops:  # CANN samples the device's memory from the capture's start to its end
        first, last = ops[0]["start_ns"], max(op["end_ns"] for op in ops)
        peak = max(m["total_reserved"] for m in memory)
        times = [*range(first, last, SAMPLE_NS), last]
        _jsonl(
            os.path.join(cann, NPU_MEM),
            [
                {"event": "APP", "time_ns": t, "memory_kb": peak / 1024 + 512 * 1024, "device": 0}
                for t in times
            ],
        )
        _jsonl(
            os.path.join(cann, NPU_MODULE_MEM),
            [
                {"component": name, "time_ns": t, "reserved_kb": kb, "device": 0}
                for t in times
                for name, kb in MODULES
            ],
        )
    collectives = _standin_comm.raw_collectives(kineto, ns)
    if collectives:
        _jsonl(os.path.join(cann, HCCL_OPS), collectives)
    os.makedirs(os.path.join(cann, "mindstudio_profiler_output"), mode=0o750, exist_ok=True)
    os.makedirs(os.path.join(cann, "mindstudio_profiler_log"), mode=0o750, exist_ok=True)


def _stack_at(frames: list[dict[str, Any]], op: dict[str, Any]) -> str:
    """The Python stack open at the operator's start on its thread (innermost first, ``;``-joined, as
    torch records it), from the python_function spans and their parent ids."""
    if not frames:
        return ""
    by_id = {(f.get("args") or {}).get("Python id"): f for f in frames}
    inner = None
    for f in frames:
        open_then = f.get("tid") == op.get("tid") and f["ts"] <= op["ts"] < f["ts"] + f.get("dur", 0)
        if open_then and (inner is None or f["ts"] >= inner["ts"]):
            inner = f
    names = []
    seen = set()
    while inner is not None and id(inner) not in seen:
        seen.add(id(inner))
        if re.search(r"\(\d+\): ", inner.get("name", "")):
            names.append(inner["name"])
        inner = by_id.get((inner.get("args") or {}).get("Python parent id"))
    return ";".join(names)


def task_queue_enabled() -> bool:
    """torch_npu's task queue (TASK_QUEUE_ENABLE, on unless "0"): operators enqueue their launches and a
    dequeue thread makes the AscendCL calls."""
    return os.environ.get("TASK_QUEUE_ENABLE", "1").strip() != "0"


def _dequeue_tid(ops: list[dict[str, Any]]) -> int:
    """The task queue's consumer thread: one more thread of the training process (an OS thread id near
    the main one, as torch_npu's is)."""
    return max(int(op["tid"]) for op in ops) + 1553


def _device_work(
    ops: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The AscendCL launches and device tasks of the innermost ``aten::`` operators (one each), and, with
    the task queue on (torch_npu's default), its marks: each launch enqueued inside its operator and made on
    the dequeue thread inside a ``Dequeue`` span (FRAMEWORK's op_mark records)."""
    # ops are sorted by (start, -end): on its thread, the next operator is inside this one when it starts
    # before this one ends
    next_on_thread: dict[int, int] = {}
    last: dict[Any, int] = {}
    for k, op in enumerate(ops):
        if op["tid"] in last:
            next_on_thread[last[op["tid"]]] = k
        last[op["tid"]] = k
    leaves = [
        (k, op)
        for k, op in enumerate(ops)
        if op["name"].startswith("aten::")
        and not (k in next_on_thread and ops[next_on_thread[k]]["start_ns"] < op["end_ns"])
    ]
    queue = task_queue_enabled() and bool(leaves)
    dequeue_tid = _dequeue_tid(ops) if queue else None
    apis, tasks, marks = [], [], []
    free_at = dequeue_free = 0
    for n, (k, op) in enumerate(leaves, 1):
        span = max(op["end_ns"] - op["start_ns"], 1000)
        kind = "".join(p.capitalize() for p in op["name"][6:].strip("_").split("_")) or "Op"
        api_name = f"aclnn{kind}"
        if queue:
            # Enqueue inside the operator, on its thread; Dequeue later on the consumer thread, the
            # AscendCL call inside it
            enqueue = op["start_ns"] + (op["end_ns"] - op["start_ns"]) // 4
            enqueue_end = enqueue + max((op["end_ns"] - op["start_ns"]) // 4, 1)
            dequeue = max(enqueue_end + 1500, dequeue_free + 100)
            launch, api_tid = dequeue + 300, dequeue_tid
        else:
            launch, api_tid = op["start_ns"] + span // 10, op["tid"]
        api_end = launch + max(span // 5, 800)
        apis.append(
            {
                "name": api_name,
                "start_ns": launch,
                "end_ns": api_end,
                "tid": api_tid,
                "pid": op["pid"],
                "connection_id": 2 * n + 1,
            }
        )
        if queue:
            dequeue_free = api_end + 200
            for category, tid, at in (
                ("enqueue_start", op["tid"], enqueue),
                ("enqueue_end", op["tid"], enqueue_end),
                ("dequeue_start", dequeue_tid, dequeue),
                ("dequeue_end", dequeue_tid, dequeue_free),
            ):
                marks.append(
                    {
                        "category": category,
                        "time_ns": at,
                        "corr_id": n,
                        "tid": tid,
                        "pid": op["pid"],
                        "name": api_name,
                    }
                )
        # the task is sent inside the call (a runtime event there that the level's pruning leaves out)
        sent = launch + (api_end - launch) // 2
        start = max(sent + 100, free_at + 50)
        dur = max(span // 2, 500)
        free_at = start + dur
        tasks.append(
            {
                "task_id": n,
                "stream_id": STREAM,
                "name": f"{api_name}_{kind}AiCore_{kind}",
                "type": kind,
                "core": "AI_CORE" if _CUBE.search(op["name"]) else "AI_VECTOR_CORE",
                "start_ns": start,
                "dur_ns": dur,
                "block_dim": 8 if _CUBE.search(op["name"]) else 48,
                "op_index": k,
                "connection_id": 2 * n,
                "sent_ns": sent,
                "api_tid": api_tid,
            }
        )
    marks.sort(key=lambda m: m["time_ns"])
    return apis, tasks, marks


# ---- parsing ---------------------------------------------------------------------------------------------
def _parents(ops: list[dict[str, Any]]) -> list[int | None]:
    """Each operator's enclosing operator on its thread (ops sorted by start, longest first), or None."""
    parent: list[int | None] = []
    open_by_tid: dict[Any, list[int]] = {}
    for k, op in enumerate(ops):
        stack = open_by_tid.setdefault(op["tid"], [])
        while stack and ops[stack[-1]]["end_ns"] < op["end_ns"]:
            stack.pop()
        parent.append(stack[-1] if stack else None)
        stack.append(k)
    return parent


def _steps(ops: list[dict[str, Any]]) -> list[tuple[int, int, int]]:
    steps = []
    for op in ops:
        m = re.fullmatch(r"ProfilerStep#(\d+)", op["name"])
        if m:
            steps.append((int(m.group(1)), op["start_ns"], op["end_ns"]))
    return sorted(steps, key=lambda s: s[1])


def _union(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


LANES = ("Computing", "Communication", "Communication(Not Overlapped)", "Free")


def is_comm_task(task: dict[str, Any]) -> bool:
    return task.get("core") == "HCCL"


def _minus(spans: list[tuple[int, int]], cut: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of the (disjoint, sorted) ``spans`` outside the (disjoint, sorted) ``cut``."""
    out = []
    for a, b in spans:
        cursor = a
        for c, d in cut:
            if d <= cursor or c >= b:
                continue
            if c > cursor:
                out.append((cursor, c))
            cursor = max(cursor, d)
        if cursor < b:
            out.append((cursor, b))
    return out


def overlap_lanes(tasks: list[dict[str, Any]]) -> list[tuple[str, int, int]]:
    """CANN's Overlap Analysis lanes over the whole capture (the real trace_view.json: a Computing span per
    busy stretch of computing tasks, a Free span for each gap between device work, from the first task to
    the last): Computing, Communication, Communication(Not Overlapped) (communication outside computing)
    and Free, sorted by start."""
    compute = _union([(t["start_ns"], t["start_ns"] + t["dur_ns"]) for t in tasks if not is_comm_task(t)])
    comm = _union([(t["start_ns"], t["start_ns"] + t["dur_ns"]) for t in tasks if is_comm_task(t)])
    busy = _union(compute + comm)
    free = [(a[1], b[0]) for a, b in itertools.pairwise(busy) if b[0] > a[1]]
    lanes = [("Computing", a, b) for a, b in compute]
    lanes += [("Communication", a, b) for a, b in comm]
    lanes += [("Communication(Not Overlapped)", a, b) for a, b in _minus(comm, compute)]
    lanes += [("Free", a, b) for a, b in free]
    return sorted(lanes, key=lambda lane: (lane[1], LANES.index(lane[0])))


def collectives(prof_path: str) -> list[dict[str, Any]]:
    """The rank's HCCL operators (CANN's hccl data: see _standin_comm)."""
    cann = prof_dir(prof_path)
    return _read_jsonl(os.path.join(cann, HCCL_OPS)) if cann else []


def _lane_work(tasks: list[dict[str, Any]], comm: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The device work the Overlap Analysis lanes are made of: the tasks and the HCCL operators."""
    return tasks + [{"core": "HCCL", "start_ns": c["start_ns"], "dur_ns": c["dur_ns"]} for c in comm]


def step_range(
    prof_path: str, ops: list[dict[str, Any]], tasks: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """torch_npu's device window of each step (FwkCANNRelationParser.get_step_range): from the first task of
    the step's first launch that has tasks to the later of its last such launch's last task end and the
    host span's end. A step's launches are its Enqueues' correlation ids (the task queue on), else its
    AscendCL calls' start times, both within its ProfilerStep span; a step without any is left out."""
    enqueues, dequeues = task_queue(prof_path)
    cann = prof_dir(prof_path)
    apis = _read_jsonl(os.path.join(cann, API_EVENTS)) if cann else []
    api_of = {a["connection_id"]: a for a in apis}
    # launch key -> its tasks: an AscendCL call's start; with the task queue, the Dequeue it ran inside
    by_call: dict[int, list[dict[str, Any]]] = {}
    for t in tasks:
        api = api_of.get(t["connection_id"] + 1)
        if api is not None:
            by_call.setdefault(api["start_ns"], []).append(t)
    if dequeues:
        kernels: dict[Any, list[dict[str, Any]]] = {}
        for at, found in by_call.items():
            for d in dequeues:
                if d["ts_ns"] <= at <= d["ts_ns"] + d["dur_ns"]:
                    kernels.setdefault(d["corr_id"], []).extend(found)
                    break
        launches = [(e["ts_ns"], e["corr_id"]) for e in enqueues]
    else:
        kernels = dict(by_call)
        launches = [(at, at) for at in by_call]
    out = []
    for number, lo, hi in _steps(ops):
        keys = sorted(key for at, key in launches if lo <= at <= hi)
        if not keys:
            continue
        first = next((kernels[k] for k in keys if kernels.get(k)), [])
        last = next((kernels[k] for k in reversed(keys) if kernels.get(k)), [])
        start = min((t["start_ns"] for t in first), default=lo)
        end = max((t["start_ns"] + t["dur_ns"] for t in last), default=-1)
        out.append({"step": number, "start_ns": start, "end_ns": max(end, hi), "fwk_start_ns": lo})
    return out


def _step_in_range(ranges: list[dict[str, Any]], t: int) -> int | None:
    """kernel_details.csv's Step Id: the first step whose window holds the task's start (ends included)."""
    for r in ranges:
        if r["start_ns"] <= t <= r["end_ns"]:
            return r["step"]
    return None


def _shapes(dims: Any) -> str:
    if not isinstance(dims, list) or not any(dims):
        return "N/A"
    return '"' + ";".join(",".join(str(d) for d in t) if isinstance(t, list) else str(t) for t in dims) + '"'


def stacks(prof_path: str, output_path: str, metric: str) -> None:
    """torch_npu's export_stacks (StackViewParser): from the raw framework data, each operator with a call
    stack as ``outer;...;inner <int µs>`` (its host self time; the device metric: its tasks' time), to a
    ``.log`` file whatever the name asked ("Input file is not log file. Change to log file."); nothing
    when the raw data is gone (simplified away by a parse)."""
    ops = _read_jsonl(os.path.join(prof_path, "FRAMEWORK", OP_RANGE))
    if not ops:
        return
    name, suffix = os.path.splitext(os.path.realpath(output_path))
    if suffix != ".log":
        print("[WARNING] Input file is not log file. Change to log file.")
        output_path = name + ".log"
    children: dict[int, int] = {}  # index -> ns of the operators directly inside it
    open_ops: list[int] = []
    for k, op in enumerate(ops):  # sorted by start, longest first
        while open_ops and not (
            ops[open_ops[-1]]["tid"] == op["tid"] and op["end_ns"] <= ops[open_ops[-1]]["end_ns"]
        ):
            open_ops.pop()
        if open_ops:
            children[open_ops[-1]] = children.get(open_ops[-1], 0) + op["end_ns"] - op["start_ns"]
        open_ops.append(k)
    device = {}
    if metric != "self_cpu_time_total":
        cann = prof_dir(prof_path)
        for task in _read_jsonl(os.path.join(cann, DEVICE_TASKS)) if cann else []:
            device[task["op_index"]] = device.get(task["op_index"], 0) + task["dur_ns"]
    lines = []
    for k, op in enumerate(ops):
        if not op.get("call_stack"):
            continue
        ns = op["end_ns"] - op["start_ns"] - children.get(k, 0) if not device else device.get(k, 0)
        if ns / 1000 <= 0:
            continue
        frames = [f.strip() for f in op["call_stack"].split(";")]
        lines.append(";".join(reversed(frames)) + " " + str(int(ns / 1000)))
    with open(output_path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def _dims_text(dims: Any) -> str:
    """One input's dims, ","-joined (a scalar's: empty; a tensor list's nested dims flattened)."""
    if not isinstance(dims, list):
        return ""
    flat = [d for item in dims for d in (item if isinstance(item, list) else [item])]
    return ",".join(str(d) for d in flat)


def _npu_text(items: list[str]) -> str:
    """torch_npu's string of an operator's inputs: ";"-joined, then "\r\n" after each ";"."""
    return ";".join(items).replace(";", ";\r\n")


def task_queue(prof_path: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The Enqueue and Dequeue spans of FRAMEWORK's op_mark records, as torch_npu's
    FwkFileParser.get_task_queue_data pairs them: each end with the last open start of its thread and name."""
    marks = sorted(_read_jsonl(os.path.join(prof_path, "FRAMEWORK", OP_MARK)), key=lambda m: m["time_ns"])
    opened: dict[tuple[str, Any, str], list[dict[str, Any]]] = {}
    enqueues, dequeues = [], []
    for mark in marks:
        side, _, edge = mark["category"].partition("_")
        key = (side, mark["tid"], mark["name"])
        if edge == "start":
            opened.setdefault(key, []).append(mark)
            continue
        starts = opened.get(key)
        if not starts:
            continue
        start = starts.pop()
        starts.clear()
        span = {**mark, "ts_ns": start["time_ns"], "dur_ns": mark["time_ns"] - start["time_ns"]}
        (enqueues if side == "enqueue" else dequeues).append(span)
    return enqueues, dequeues


def _enqueue_name(origin: str | None) -> str:
    """torch_npu names an Enqueue after the launch it queued (``Enqueue@aclnnAdd``) since June 2025
    (FwkFileParser.get_fwk_trace_data); earlier releases wrote ``Enqueue``."""
    return "Enqueue" if _older_api() or origin is None else f"Enqueue@{origin}"


def trace_view(prof_path: str) -> list[dict[str, Any]]:
    """The events of torch_npu's trace_view.json for a rank dir's raw data."""
    ops = _read_jsonl(os.path.join(prof_path, "FRAMEWORK", OP_RANGE))
    cann = prof_dir(prof_path)
    apis = _read_jsonl(os.path.join(cann, API_EVENTS)) if cann else []
    tasks = _read_jsonl(os.path.join(cann, DEVICE_TASKS)) if cann else []
    if not ops:
        return []
    host = ops[0]["pid"]
    cann_pid, overlap_pid = host * 100 + 2, host * 10000 + 1100
    events: list[dict[str, Any]] = []

    def meta(kind: str, pid: int, tid: int, key: str, value: Any) -> None:
        events.append({"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": {key: value}})

    def process(pid: int, name: str, label: str, sort: int) -> None:
        meta("process_name", pid, 0, "name", name)
        meta("process_labels", pid, 0, "labels", label)
        meta("process_sort_index", pid, 0, "sort_index", sort)

    for op in ops:
        args: dict[str, Any] = {"Sequence number": op["seq"], "Fwd thread id": op["fwd_tid"]}
        if op.get("input_shapes") is not None:  # as torch_npu's data_reporter and TorchOpBean write them
            args["Input Dims"] = _npu_text([_dims_text(t) for t in op["input_shapes"]])
        if op.get("input_dtypes") is not None:
            args["Input type"] = _npu_text([str(t) for t in op["input_dtypes"]])
        if op.get("call_stack"):
            args["Call stack"] = op["call_stack"].replace(";", ";\r\n")
        events.append(
            {
                "ph": "X",
                "name": op["name"],
                "pid": op["pid"],
                "tid": op["tid"],
                "ts": us(op["start_ns"]),
                "dur": (op["end_ns"] - op["start_ns"]) / 1000,
                "cat": "cpu_op",
                "args": args,
            }
        )
    # the task queue (FwkFileParser.get_fwk_trace_data): the Dequeue spans with their flows' ends, then the
    # Enqueue spans with their starts, on the Python process's threads
    enqueues, dequeues = task_queue(prof_path)
    tids = {op["tid"]: False for op in ops}
    origin = {}
    for d in dequeues:
        tids[d["tid"]] = True
        origin[d["corr_id"]] = d["name"]
        events.append(_queue_event(d, host, f"Dequeue@{d['name']}", "dequeue"))
        events.append(_queue_flow("f", d, host))
    for e in enqueues:
        tids.setdefault(e["tid"], False)
        events.append(_queue_event(e, host, _enqueue_name(origin.get(e["corr_id"])), "enqueue"))
        events.append(_queue_flow("s", e, host))
    process(host, "Python", "CPU", 0)
    for tid, is_dequeue in tids.items():
        meta("thread_name", host, tid, "name", f"Thread {tid}")
        meta("thread_sort_index", host, tid, "sort_index", max(tids) + 1 if is_dequeue else tid)
    events.extend(_fwdbwd_flows(ops))
    if tasks:
        process(DEVICE_PID, "Ascend Hardware", "NPU", 8)
        meta("thread_name", DEVICE_PID, STREAM, "name", f"Stream {STREAM}")
        meta("thread_sort_index", DEVICE_PID, STREAM, "sort_index", STREAM)
        process(cann_pid, "CANN", "CPU", 2)
        for tid in dict.fromkeys(a["tid"] for a in apis):
            meta("thread_name", cann_pid, tid, "name", f"Thread {tid}")
            meta("thread_sort_index", cann_pid, tid, "sort_index", tid)
    for api, task in zip(apis, tasks, strict=True):
        events.append(
            {
                "name": f"AscendCL@{api['name']}",
                "pid": cann_pid,
                "tid": api["tid"],
                "ts": us(api["start_ns"]),
                "dur": (api["end_ns"] - api["start_ns"]) / 1000,
                "args": {
                    "Thread Id": api["tid"],
                    "Mode": "ACL_OP",
                    "level": "acl",
                    "id": api["name"],
                    "item_id": "0",
                    "connection_id": api["connection_id"],
                },
                "ph": "X",
            }
        )
        events.append(
            {
                "name": task["name"],
                "pid": DEVICE_PID,
                "tid": STREAM,
                "ts": us(task["start_ns"]),
                "dur": task["dur_ns"] / 1000,
                "args": {
                    "Model Id": EAGER_MODEL,
                    "Task Type": task["core"],
                    "Stream Id": STREAM,
                    "Task Id": task["task_id"],
                    "Batch Id": 0,
                    "Subtask Id": 4294967295,
                    "connection_id": task["connection_id"],
                },
                "ph": "X",
            }
        )
        # CANN's flow id: the task's connection id in the high 32 bits, all ones in the low ones
        flow = str((task["connection_id"] << 32) | 0xFFFFFFFF)
        events.append(
            {
                "name": f"HostToDevice{flow}",
                "ph": "s",
                "cat": "HostToDevice",
                "id": flow,
                "pid": cann_pid,
                "tid": task.get("api_tid", api["tid"]),
                "ts": us(task.get("sent_ns", api["start_ns"])),
            }
        )
        events.append(
            {
                "name": f"HostToDevice{flow}",
                "ph": "f",
                "id": flow,
                "ts": us(task["start_ns"]),
                "cat": "HostToDevice",
                "pid": DEVICE_PID,
                "tid": STREAM,
                "bp": "e",
            }
        )
        op = ops[task["op_index"]]
        events.append(
            {
                "ph": "s",
                "bp": "e",
                "name": "torch_to_npu",
                "id": task["start_ns"],
                "pid": op["pid"],
                "tid": op["tid"],
                "ts": us(op["start_ns"]),
                "cat": "async_npu",
            }
        )
        events.append(
            {
                "ph": "f",
                "bp": "e",
                "name": "torch_to_npu",
                "id": task["start_ns"],
                "pid": DEVICE_PID,
                "tid": STREAM,
                "ts": us(task["start_ns"]),
                "cat": "async_npu",
            }
        )
    # the HCCL process: each group's operators on its "Group <g> Communication" thread (the form of
    # docs' spec §7; no real file here has one), <g> the communicator's name, the key msprof-analyze's
    # compare looks the thread up by in profiler_metadata.json's parallel_group_info
    comm = collectives(prof_path)
    groups = list(dict.fromkeys(c["group"] for c in comm))
    names = {c["group"]: c.get("comm") or c["group"] for c in comm}
    if comm:
        hccl_pid = host * 100 + 4
        process(hccl_pid, "HCCL", "NPU", 9)
        for tid, group in enumerate(groups):
            meta("thread_name", hccl_pid, tid, "name", f"Group {names[group]} Communication")
            meta("thread_sort_index", hccl_pid, tid, "sort_index", tid)
        for c in comm:
            events.append(
                {
                    "name": c["name"],
                    "pid": hccl_pid,
                    "tid": groups.index(c["group"]),
                    "ts": us(c["start_ns"]),
                    "dur": c["dur_ns"] / 1000,
                    "args": {"model id": EAGER_MODEL, "connection_id": 0},
                    "ph": "X",
                }
            )
    if not cann:  # TraceViewParser without CANN's data: the framework's events only (FwkFileParser)
        return events
    # Overlap Analysis, as CANN's timeline has it: over the whole capture, not per step
    process(overlap_pid, "Overlap Analysis", "NPU", 11)
    for tid, name in enumerate(LANES):
        meta("thread_name", overlap_pid, tid, "name", name)
    for name, a, b in overlap_lanes(_lane_work(tasks, comm)):
        events.append(
            {
                "name": name,
                "pid": overlap_pid,
                "tid": LANES.index(name),
                "ts": us(a),
                "dur": (b - a) / 1000,
                "ph": "X",
            }
        )
    return events


def _fwdbwd_flows(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """torch_npu's ``fwdbwd`` flows (FwkFileParser, after the Python process's metadata, as the real
    trace_view.json has them): for each sequence number, from the forward operator of that number that
    started last (``Fwd thread id`` 0) to the backward operator of that number (``Fwd thread id`` not 0),
    the flow's id the sequence number; a number without both has none."""
    forward: dict[int, dict[str, Any]] = {}
    backward: dict[int, dict[str, Any]] = {}
    for op in ops:
        seq = op.get("seq")
        if not isinstance(seq, int) or seq < 0:
            continue
        if op.get("fwd_tid"):
            backward.setdefault(seq, op)
        elif seq not in forward or op["start_ns"] >= forward[seq]["start_ns"]:
            forward[seq] = op
    flows = []
    for seq in sorted(set(forward) & set(backward)):
        for ph, op in (("s", forward[seq]), ("f", backward[seq])):
            flows.append(
                {
                    "ph": ph,
                    "bp": "e",
                    "name": "fwdbwd",
                    "id": seq,
                    "pid": op["pid"],
                    "tid": op["tid"],
                    "ts": us(op["start_ns"]),
                    "cat": "fwdbwd",
                }
            )
    return flows


def _queue_event(span: dict[str, Any], pid: int, name: str, cat: str) -> dict[str, Any]:
    return {
        "ph": "X",
        "name": name,
        "pid": pid,
        "tid": span["tid"],
        "ts": us(span["ts_ns"]),
        "dur": span["dur_ns"] / 1000,
        "cat": cat,
        "args": {"correlation_id": span["corr_id"]},
    }


def _queue_flow(ph: str, span: dict[str, Any], pid: int) -> dict[str, Any]:
    return {
        "ph": ph,
        "bp": "e",
        "name": "enqueue_to_dequeue",
        "id": span["corr_id"],
        "pid": pid,
        "tid": span["tid"],
        "ts": us(span["ts_ns"]),
        "cat": "async_task_queue",
    }


def parse(prof_path: str, output: str) -> None:
    """ASCEND_PROFILER_OUTPUT/ (text export) from a rank dir's raw data."""
    os.makedirs(output, mode=0o750, exist_ok=True)
    events = trace_view(prof_path)
    if events:  # as torch_npu's FileManager.create_json_file: no data, no file
        with open(os.path.join(output, "trace_view.json"), "w", encoding="utf-8") as f:
            json.dump(events, f)
    ops = _read_jsonl(os.path.join(prof_path, "FRAMEWORK", OP_RANGE))
    cann = prof_dir(prof_path)
    if not cann:  # torch_npu's ONLY_FWK_CONFIG (no CANN data: CPU activity only): three tables, no more
        _operator_table(output, ops, {})
        _memory_table(prof_path, output, ops)
        return
    tasks = _read_jsonl(os.path.join(cann, DEVICE_TASKS))
    ranges = step_range(prof_path, ops, tasks)
    kernel_rows, stats = [], {}
    previous_end = None
    for task in tasks:
        op = ops[task["op_index"]]
        start, dur = task["start_ns"], task["dur_ns"]
        wait = 0 if previous_end is None else max(start - previous_end, 0)
        previous_end = start + dur
        step = _step_in_range(ranges, start)
        row = [
            EAGER_MODEL,
            task["task_id"],
            STREAM,
            task["name"],
            task["type"],
            task["core"],
            us(start),
            dur / 1000,
            wait / 1000,
            task["block_dim"],
            0,
            _shapes(op.get("input_shapes")),
            "FLOAT" if _shapes(op.get("input_shapes")) != "N/A" else "N/A",
            "FORMAT_ND",
            "N/A",
            "N/A",
            "N/A",
            "N/A",
        ]
        kernel_rows.append(([step if step is not None else ""] if ranges else []) + row)
        s = stats.setdefault((task["type"], task["core"]), [])
        s.append(dur / 1000)
    # the HCCL operators (the 2023 release's rows: no Task ID or Stream ID, core HCCL, Block Dim 0)
    comm = collectives(prof_path)
    previous_end = None
    for c in comm:
        start, dur = c["start_ns"], c["dur_ns"]
        wait = 0 if previous_end is None else max(start - previous_end, 0)
        previous_end = start + dur
        step = _step_in_range(ranges, start)
        row = [EAGER_MODEL, "N/A", "N/A", c["name"], c["type"], "HCCL", us(start), dur / 1000, wait / 1000, 0]
        kernel_rows.append(([step if step is not None else ""] if ranges else []) + row + ["N/A"] * 8)
    at = KERNEL_HEADER.index("Start Time(us)") - (0 if ranges else 1)
    kernel_rows.sort(key=lambda row: float(row[at]))
    header = KERNEL_HEADER if ranges else KERNEL_HEADER[1:]
    if _level(prof_path) == "Level0":
        header, kernel_rows = _level0_kernels(header, kernel_rows)
    _csv(os.path.join(output, "kernel_details.csv"), header, kernel_rows)
    for name, content in (
        ("communication.json", _standin_comm.communication(comm, ranges)),
        ("communication_matrix.json", _standin_comm.matrix(comm, ranges)),
    ):
        if content:  # as FileManager.create_json_file
            with open(os.path.join(output, name), "w", encoding="utf-8") as f:
                json.dump(content, f, indent=4)
    device_of: dict[int, float] = {}
    for task in tasks:
        device_of[task["op_index"]] = device_of.get(task["op_index"], 0.0) + task["dur_ns"] / 1000
    _operator_table(output, ops, device_of)
    _memory_table(prof_path, output, ops)
    grand = sum(sum(v) for v in stats.values()) or 1.0
    _csv(
        os.path.join(output, "op_statistic.csv"),
        OP_STAT_HEADER,
        [
            [
                t,
                c,
                len(v),
                round(sum(v), 3),
                round(min(v), 3),
                round(sum(v) / len(v), 3),
                round(max(v), 3),
                round(sum(v) / grand * 100, 2),
            ]
            for (t, c), v in stats.items()
        ],
    )
    _csv(os.path.join(output, "step_trace_time.csv"), *step_table(ops, _lane_work(tasks, comm), ranges))


def _operator_table(output: str, ops: list[dict[str, Any]], device_of: dict[int, float]) -> None:
    """operator_details.csv: ``device_of`` the device time of each operator's own tasks (by index)."""
    # as torch_npu's OperatorViewParser: a row per operator call, its host self time its duration less its
    # children's, its device total its own tasks' and those of the operators inside it
    parent = _parents(ops)
    device_total = dict(device_of)
    child_ns: dict[int, int] = {}
    for k in range(len(ops) - 1, -1, -1):  # children come after their parents
        p = parent[k]
        if p is not None:
            device_total[p] = device_total.get(p, 0.0) + device_total.get(k, 0.0)
            child_ns[p] = child_ns.get(p, 0) + ops[k]["end_ns"] - ops[k]["start_ns"]
    rows = []
    for k, op in enumerate(ops):
        if op["name"].startswith("ProfilerStep#"):
            continue
        total_ns = op["end_ns"] - op["start_ns"]
        shapes = op.get("input_shapes")
        own, total = round(device_of.get(k, 0.0), 3), round(device_total.get(k, 0.0), 3)
        rows.append(
            [
                op["name"],
                _npu_text([_dims_text(t) for t in shapes]) if shapes is not None else "",
                (op.get("call_stack") or "").replace(";", ";\r\n"),
                round((total_ns - child_ns.get(k, 0)) / 1000, 3),
                round(total_ns / 1000, 3),
                own,
                total,
                own,
                total,
            ]
        )
    _csv(os.path.join(output, "operator_details.csv"), OPERATOR_HEADER, rows)


def _memory_table(prof_path: str, output: str, ops: list[dict[str, Any]] | None = None) -> None:
    """memory_record.csv and operator_memory.csv as torch_npu's MemoryPrepareParser and MemoryViewParser
    write them, and npu_module_mem.csv as its IntegrateParser copies CANN's: with CANN's samples (the NPU
    activity), memory_record.csv's APP rows first (npu_mem's: ``Total Reserved(MB)`` its ddr + hbm, no
    allocated, active or stream value), then the allocator's (PTA) samples; times with a tab after them."""
    samples = sorted(
        _read_jsonl(os.path.join(prof_path, "FRAMEWORK", MEMORY_USAGE)), key=lambda m: m["time_ns"]
    )
    cann = prof_dir(prof_path)
    app = _read_jsonl(os.path.join(cann, NPU_MEM)) if cann else []
    rows: list[list[Any]] = [
        ["APP", us(a["time_ns"]) + "\t", "", a["memory_kb"] / 1024, "", "", f"NPU:{a['device']}"] for a in app
    ]
    rows += [
        [
            "PTA",
            us(m["time_ns"]) + "\t",
            m["total_allocated"] / 2**20,
            m["total_reserved"] / 2**20,
            m["total_allocated"] / 2**20,
            0,
            "NPU:0",
        ]
        for m in samples
    ]
    _csv(os.path.join(output, "memory_record.csv"), MEMORY_RECORD_HEADER, rows)
    _csv(
        os.path.join(output, "operator_memory.csv"),
        OPERATOR_MEMORY_HEADER,
        _operator_memory(samples, ops or []),
    )
    modules = _read_jsonl(os.path.join(cann, NPU_MODULE_MEM)) if cann else []
    _csv(
        os.path.join(output, "npu_module_mem.csv"),
        NPU_MODULE_MEM_HEADER,
        [
            [
                m["device"],
                m["component"],
                us(m["time_ns"]) + "\t",
                str(m["reserved_kb"] / 1024),
                f"NPU:{m['device']}",
            ]
            for m in modules
        ],
    )


def _operator_memory(samples: list[dict[str, Any]], ops: list[dict[str, Any]]) -> list[list[Any]]:
    """operator_memory.csv's rows (MemoryPrepareParser): each allocation of an address paired with the
    next release of it (a release with no allocation before it left out; an allocation released after the
    capture: its release cells empty), in the order of the allocations, named by the operator open at the
    allocation on its thread (innermost), "" when none; sizes in KB, totals in MB."""
    by_ptr: dict[Any, list[dict[str, Any]]] = {}
    for m in samples:
        by_ptr.setdefault(m["ptr"], []).append(m)
    pairs: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    for records in by_ptr.values():
        opened = None
        for m in records:
            if m["alloc_size"] > 0:
                if opened is not None:
                    pairs.append((opened, None))
                opened = m
            elif opened is not None:
                pairs.append((opened, m))
                opened = None
        if opened is not None:
            pairs.append((opened, None))
    pairs.sort(key=lambda pair: pair[0]["time_ns"])

    def name_at(m: dict[str, Any]) -> str:
        inner = None
        for op in ops:
            if op["tid"] == m.get("tid") and op["start_ns"] <= m["time_ns"] <= op["end_ns"]:
                inner = op  # ops are sorted by start, longest first: the last one holding it is innermost
        return inner["name"] if inner else ""

    rows = []
    for alloc, free in pairs:
        mb = [
            alloc["total_allocated"] / 2**20,
            alloc["total_reserved"] / 2**20,
            alloc["total_allocated"] / 2**20,
        ]
        row = [name_at(alloc), alloc["alloc_size"] / 1024, us(alloc["time_ns"]) + "\t"]
        if free is None:
            row += [None, None, None, None, *mb, None, None, None]
        else:
            released = [
                free["total_allocated"] / 2**20,
                free["total_reserved"] / 2**20,
                free["total_allocated"] / 2**20,
            ]
            row += [
                us(free["time_ns"]) + "\t",
                None,
                us(free["time_ns"] - alloc["time_ns"]) + "\t",
                None,
                *mb,
                *released,
            ]
        rows.append([*row, 0, "NPU:0"])
    return rows


def _level(prof_path: str) -> str:
    """The capture's profiler_level, from its profiler_info*.json (torch_npu's ProfilerConfig.load_info)."""
    for name in sorted(os.listdir(prof_path)):
        if name.startswith("profiler_info") and name.endswith(".json"):
            with open(os.path.join(prof_path, name), encoding="utf-8") as f:
                config = (json.load(f).get("config") or {}).get("experimental_config") or {}
            return config.get("_profiler_level") or "Level0"
    return "Level0"


# kernel_details.csv's columns at Level0 (KernelViewParser: CsvHeaders.OP_SUMMARY_KERNEL_BASE_HEADERS, not the
# CANN op summary's all): from February 2026 "Block Num" (before: "Block Dim"), from June 2025 "Device_id"
# first, from August 2026 the shape columns after them; "Step Id" first when there are steps
LEVEL0_KERNEL_HEADER = [
    "Device_id",
    "Name",
    "Type",
    "Accelerator Core",
    "Start Time(us)",
    "Duration(us)",
    "Wait Time(us)",
    "Block Num",
]
SHAPE_HEADER = [
    "Input Shapes",
    "Input Data Types",
    "Input Formats",
    "Output Shapes",
    "Output Data Types",
    "Output Formats",
]


def _level0_kernels(header: list[str], rows: list[list[Any]]) -> tuple[list[str], list[list[Any]]]:
    """The full kernel rows cut to Level0's columns, as the stand-in's release writes them."""
    if _older_api():
        short = [h if h != "Block Num" else "Block Dim" for h in LEVEL0_KERNEL_HEADER[1:]]
    else:
        short = LEVEL0_KERNEL_HEADER + SHAPE_HEADER
    if header[0] == "Step Id":
        short = ["Step Id", *short]
    source = {"Block Num": "Block Dim"}
    where = [header.index(source.get(h, h)) if source.get(h, h) in header else None for h in short]
    return short, [[0 if k is None else row[k] for k in where] for row in rows]  # Device_id: device 0


def step_table(
    ops: list[dict[str, Any]], tasks: list[dict[str, Any]], ranges: list[dict[str, Any]]
) -> tuple[list[str], list[list[Any]]]:
    """step_trace_time.csv as torch_npu's TraceStepTimeParser writes it: each Overlap Analysis lane span
    counted whole in the step whose device window [start, end) holds its start (none: left out), Preparing
    from the host step's start to the step's first Computing or Communication span, Stage the extent of its
    spans less Bubble; without steps, one row with an empty Step. Releases before June 2025 have no
    Device_id column."""
    lanes = overlap_lanes(tasks)
    if not lanes:
        return STEP_HEADER, []
    windows = ranges or [{"step": "", "start_ns": -1, "end_ns": -1, "fwk_start_ns": None}]
    sums = {id(w): dict.fromkeys(LANES, 0) for w in windows}
    extent: dict[int, list[int]] = {}
    first_task: dict[int, int] = {}
    for name, a, b in lanes:
        w = next((w for w in ranges if w["start_ns"] <= a < w["end_ns"]), None) if ranges else windows[0]
        if w is None:
            continue
        sums[id(w)][name] += b - a
        lo, hi = extent.setdefault(id(w), [a, b])
        extent[id(w)] = [min(lo, a), max(hi, b)]
        if name in ("Computing", "Communication"):
            first_task[id(w)] = min(first_task.get(id(w), a), a)
    if not ranges:  # torch_npu's: from the first framework operator
        windows[0]["fwk_start_ns"] = min((op["start_ns"] for op in ops), default=None)
    rows = []
    for w in windows:
        t = sums[id(w)]
        comm, not_overlapped = t["Communication"] / 1000, t["Communication(Not Overlapped)"] / 1000
        lo, hi = extent.get(id(w), [0, 0])
        first = first_task.get(id(w), -1000)  # torch_npu's -1 µs when none
        prepare = (first - w["fwk_start_ns"]) / 1000 if w["fwk_start_ns"] is not None else 0
        row = [
            w["step"],
            t["Computing"] / 1000,
            not_overlapped,
            comm - not_overlapped,
            comm,
            t["Free"] / 1000,
            (hi - lo) / 1000,
            0,
            max(not_overlapped, 0),
            prepare,
        ]
        rows.append(row)
    if _older_api():
        return STEP_HEADER[1:], rows
    return STEP_HEADER, [[0, *row] for row in rows]


def _older_api() -> bool:
    """A stand-in of a release before June 2025 (FAKE_TORCH_NPU_API 5.0.0, 6.0.0, mstx)."""
    return os.environ.get("FAKE_TORCH_NPU_API", "latest") in ("5.0.0", "6.0.0", "mstx")


def _csv(path: str, header: list[str], rows: list[list[Any]]) -> None:
    if not rows:  # as torch_npu's FileManager.create_csv_file: no rows, no file
        return
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
