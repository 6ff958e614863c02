"""The trace vocabulary: what the categories and names of trace events mean, across torch releases and
torch_npu, in one place for every reader (the tables, export-stacks, memory-timeline). The forms are listed
in docs/formats.md ("Traces npuprof reads").
"""

from __future__ import annotations

import re
from typing import Any

# Kineto's categories as torch 2.x writes them
CPU_OP = "cpu_op"
USER_ANNOTATION = "user_annotation"
GPU_USER_ANNOTATION = "gpu_user_annotation"
KERNEL = "kernel"
MEMCPY = "gpu_memcpy"
MEMSET = "gpu_memset"
RUNTIME = "cuda_runtime"
DRIVER = "cuda_driver"
PYTHON_FUNCTION = "python_function"
CPU_INSTANT = "cpu_instant_event"
OVERHEAD = "overhead"
CUDA_SYNC = "cuda_sync"
PROFILER_RANGE = "cuda_profiler_range"
TRACE = "Trace"
FLOW_LAUNCH = "ac2g"
FLOW_FWDBWD = "fwdbwd"
# torch_npu's: the host's task queue (its own category for the X events of both ends) and its flows
ENQUEUE = "enqueue"
DEQUEUE = "dequeue"
FLOW_ASYNC_NPU = "async_npu"  # operator -> the device task it launched
FLOW_HOST_TO_DEVICE = "HostToDevice"  # CANN runtime call -> device task
FLOW_TASK_QUEUE = "async_task_queue"  # enqueue -> dequeue
# torch_npu's device tasks (the events of its "Ascend Hardware" process) carry no category at all
NO_CATEGORY = ""

# torch 1.8-1.10 wrote other names for the same categories
OLD_NAMES = {
    "Operator": CPU_OP,
    "Kernel": KERNEL,
    "Memcpy": MEMCPY,
    "Memset": MEMSET,
    "Runtime": RUNTIME,
}


def canonical(cat: str) -> str:
    """The torch 2.x name of a category (old names mapped; others unchanged)."""
    return OLD_NAMES.get(cat, cat)


# what counts as device time; the other device categories (annotations, ranges) only overlay it
DEVICE_WORK_CATS = frozenset({KERNEL, MEMCPY, MEMSET})
DEVICE_CATS = DEVICE_WORK_CATS | {GPU_USER_ANNOTATION, PROFILER_RANGE}
# host calls that hand work to the device (PrivateUse1: out-of-tree backends that go through Kineto)
RUNTIME_CATS = frozenset({RUNTIME, DRIVER, "privateuse1_runtime", "privateuse1_driver"})
HOST_FLOW_CATS = frozenset({FLOW_LAUNCH, FLOW_FWDBWD, FLOW_ASYNC_NPU, FLOW_TASK_QUEUE, FLOW_HOST_TO_DEVICE})
# the flows from a host call to the device work it launched, best first when several end at one task
# (Kineto's ac2g; torch_npu's async_npu from the operator, HostToDevice from the CANN runtime call)
LAUNCH_FLOW_RANK = {FLOW_LAUNCH: 0, FLOW_ASYNC_NPU: 1, FLOW_HOST_TO_DEVICE: 2}
LAUNCH_FLOW_CATS = frozenset(LAUNCH_FLOW_RANK)
# known categories whose complete (X) events no table counts as operators, device tasks or steps: host work
# (Python frames, torch_npu's task queue, ...) and device overlays (cuda_profiler_range)
UNCOUNTED_CATS = frozenset(
    {PYTHON_FUNCTION, OVERHEAD, CUDA_SYNC, TRACE, CPU_INSTANT, ENQUEUE, DEQUEUE, PROFILER_RANGE}
    | HOST_FLOW_CATS
)
# processes of torch_npu's trace_view.json and of device traces that are device work, and those that are
# neither host threads nor device work (overlays npuprof or torch_npu computed)
DEVICE_PROCESS_RE = re.compile(r"(?i)ascend hardware|^gpu\b|^npu\b|^device\b|^stream\b")
# Kineto's process_labels of a GPU's process ("GPU 0"), whose name is the host's ("python"); torch_npu's
# labels ("NPU", "CPU") also stand on overlays (Overlap Analysis): only this form says "a device"
GPU_LABEL_RE = re.compile(r"(?i)^gpu \d+$")
NPU_PROCESS_RE = re.compile(r"(?i)ascend hardware|^npu\b")
NOT_HOST_PROCESS_RE = re.compile(r"(?i)overlap analysis|^hccl\b|^communication\b|^spans?$|^traces?$")
# torch_npu's communication process: its collectives on "Group <g> Communication" threads, their tasks on
# "Plane <n>" threads (what msprof-analyze's compare reads as the communication bar); their time is
# communication (docs/formats.md, "Traces npuprof reads")
COMM_PROCESS_RE = re.compile(r"(?i)^hccl\b|^communication\b")
# torch_npu's own name of it ("Communication" is npuprof's, on CPU traces too): a trace with it is an NPU's
HCCL_PROCESS_RE = re.compile(r"(?i)^hccl\b")
COMM_OP_THREAD_RE = re.compile(r"(?i)communication")
# in a warning about complete events left out that may be device work (the report then does not call the
# trace CPU-only without saying so)
MAYBE_DEVICE_WORK = "possible device work"
# the warning's start on a torch_npu capture whose trace_view.json holds no device work: its device is the
# NPU all the same, its figures the host's (report._npu_capture_without_device_work)
NO_NPU_WORK = "torch_npu recorded no device work"
NO_EVENTS = "the trace holds no events"  # the warning's start: the report then claims nothing of the device
# said of a capture with the profiler's own span and no operator (analyse's note, export-stacks' error)
NO_OPERATOR_RAN = (
    "no operator ran in this capture: the process did no torch work while it recorded (it waited, for a "
    "subprocess or workers that train, whose captures are other rank dirs, say)"
)


def no_operator_ran(steps: list[int]) -> str:
    """NO_OPERATOR_RAN of a capture whose ``steps`` (its ProfilerStep numbers) held no operator. With steps,
    it is most often the trace torch.profiler writes as its profile ends right after a ``prof.step()``
    began a step of a new cycle (a tensorboard_trace_handler folder's last trace, its one step of a few
    µs; helper-349: said only to be a process that waited for others)."""
    if not steps:
        return NO_OPERATOR_RAN
    said = f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}-{steps[-1]}"
    return (
        f"no operator ran in this capture ({said}): torch.profiler writes such a trace when its profile ends "
        "right after a prof.step() began a step (a `with torch.profiler.profile(schedule=...)` block left as "
        "a new cycle began; the trace before it holds the steps recorded), or the process did no torch work "
        "while it recorded (it waited, for a subprocess or workers that train, say)"
    )


# trace_view.json's layers that repeat what the host's threads did (docs/formats.md): the GC pauses
# (category "GC", process "Python GC") and the MsprofTx marks and ranges (no category; args
# "event_type", as CANN writes mstx data). Readers of host work leave them out.
GC_CAT = "GC"
MSTX_ARGS_KEY = b'"event_type"'


def is_mstx_mark(cat: str | None, raw_args: bytes | memoryview | None) -> bool:
    """An event of CANN's MsprofTx layer: no category, its raw ``args`` (msgspec.Raw, bytes) naming an
    ``event_type``."""
    return not cat and bool(raw_args) and MSTX_ARGS_KEY in bytes(raw_args or b"")


# torch_npu's CANN process: the runtime calls (AscendCL@...) of the host's own threads (same thread ids)
RUNTIME_PROCESS_RE = re.compile(r"(?i)^cann\b")
# the kind of a torch_npu device task: its args["Task Type"] (AI_CORE, AI_CPU, HCCL, ...), else this
DEVICE_TASK_KIND = "task"


def is_device_task_category(cat: str) -> bool:
    """A category device work is known to carry (in a device process): Kineto's tasks, or none at all
    (torch_npu's Ascend Hardware tasks). Old names are taken too."""
    return cat == NO_CATEGORY or canonical(cat) in DEVICE_WORK_CATS


def unknown_device_work_note(counts: dict[tuple[str, str], int], treatment: str) -> str:
    """The one line that names device work of categories the vocabulary does not know: ``counts`` by
    (process name, category)."""
    total = sum(counts.values())
    parts = [
        f"{n} of category {cat!r} in process {process!r}" for (process, cat), n in sorted(counts.items())
    ]
    shown = "; ".join(parts[:5]) + (f"; and {len(parts) - 5} more" if len(parts) > 5 else "")
    return (
        f"{total} device event(s) of a category npuprof does not know ({shown}): {treatment}; "
        "check the breakdown against the trace"
    )


# the task kind of each device category, as kernel_details.csv names it
TASK_KIND = {KERNEL: "kernel", MEMCPY: "memcpy", MEMSET: "memset"}
# device tasks that move or fill memory through the copy engines rather than compute: not Computing
# (docs/formats.md, "Step breakdown"). Kineto's memcpy and memset; torch_npu's DMA tasks, by task type in
# later releases and by name (task type "Other") in earlier ones. An Ascend memset kernel (MemSet,
# atomic_memset) runs on a vector core: it computes, as torch_npu's own Computing lane counts it.
COPY_TASK_KINDS = frozenset({"memcpy", "memset", "SDMA_SQE", "PCIE_DMA_SQE"})
COPY_TASK_NAMES = frozenset({"MEMCPY_ASYNC"})
TASK_CORE = {"kernel": "CUDA kernel", "memcpy": "memcpy", "memset": "memset"}
COMM_CORE = "NCCL"

MEMORY_EVENT = "[memory]"
# torch's c10::DeviceType numbers as a [memory] event's "Device Type" carries them, named as torch names a
# device (memory-timeline's "npu:0"; analyse writes them upper-case, "NPU:0", as torch_npu's
# memory_record.csv does): the NPU is 20 (PrivateUse1) from torch_npu 2.1, 9 (c10's XLA, as which torch_npu
# registered it) before
DEVICE_TYPES = {0: "cpu", 1: "cuda", 9: "npu", 20: "npu"}
STEP_PREFIX = "ProfilerStep#"


def step_inside(ts: float, dur: float, outer_ts: float, outer_dur: float) -> bool:
    """Whether a ``ProfilerStep#N`` span [ts, ts + dur) lies inside an earlier step of its thread (and is
    not that span): torch's steps follow one another, so it is a ``record_function`` the script named so, a
    range of that step, not a step (analyse and export-stacks read it alike)."""
    end = outer_ts + outer_dur
    return outer_ts <= ts < end and ts + dur <= end and (ts, dur) != (outer_ts, outer_dur)


STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
# torch's DataLoader iterators record each batch fetch as ``enumerate(DataLoader)#<IterClass>.__next__``
# (_SingleProcessDataLoaderIter, _MultiProcessingDataLoaderIter, a subclass's name): a cpu_op or a
# user_annotation depending on the release (docs/formats.md, "Step breakdown")
DATA_FETCH_PREFIX = "enumerate(DataLoader)#"


def is_data_fetch(name: str) -> bool:
    return name.startswith(DATA_FETCH_PREFIX)


COMM_KERNEL_MARKS = ("nccl", "hccl", "rccl")
COMM_TASK_PREFIXES = ("hcom_",)  # torch_npu's HCCL operators as device tasks: hcom_allReduce__123_0
COMM_ANNOTATION_PREFIXES = ("gloo:", "nccl:", "hccl:", "mpi:", "ucc:")
COMM_RECORD = "record_param_comms"
C10D_PREFIX = "c10d::"
# the functional collectives' operators (torch.distributed._functional_collectives, traced or eager): the
# collective (``_c10d_functional::all_reduce``) and the wait for it (``_c10d_functional::wait_tensor``)
C10D_PREFIXES = (C10D_PREFIX, "_c10d_functional::", "c10d_functional::", "_c10d_functional_autograd::")


# A Python frame of npuprof's own code in a --with-stack trace ("/site-packages/npuprof/agent/steps.py(57):
# stepped"): the step wrapper in the training thread, and npuprof's own threads (hand-over, disk guard,
# SIGTERM watcher), in those packages' subfolders too (agent/backends/). Stacks leave them out: they are not
# the user's program.
# torch writes a frame's file relative to the sys.path entry it was found in when it can (helper-123:
# "npuprof/agent/steps.py(117): stepped" for a site-packages or PYTHONPATH install): no "/" before it then
_NPUPROF_FRAME_RE = re.compile(
    r"(?:^|[/\\])npuprof[/\\](?:agent|results|_bootstrap)[/\\](?:[^/\\(]+[/\\])*[^/\\(]*\.py\("
)


def is_npuprof_frame(name: str) -> bool:
    return _NPUPROF_FRAME_RE.search(name) is not None


# npuprof's wrappers around the script's own calls (its step function, Optimizer.step, a collective, the
# script's profiler, an import, a function under ``@npuprof.range``: marks.py's ``ranged*``): the calls below
# them are the script's. Any other npuprof frame is npuprof's own work (a step boundary stepping torch's
# profiler, a range opened or ended), and what it calls is npuprof's too.
_NPUPROF_WRAPPER_RE = re.compile(
    r"(?:^|[/\\])npuprof[/\\](?:agent[/\\](?:steps|user_profiler|comm_marks)\.py\(|_bootstrap[/\\][^/\\(]*\.py\("
    r"|marks\.py\(\d+\):[ _]ranged)"
)
# npuprof.range's and npuprof.mark's code (marks.py), called by the script itself: export-stacks shows it as
# it shows npuprof's other frames (README, "export-stacks"); analyse keeps it (is_npuprof_frame: a thread
# that runs it is the script's, and its operators stay on marks.py's lines)
_NPUPROF_MARKS_RE = re.compile(r"(?:^|[/\\])npuprof[/\\]marks\.py\(")
NPUPROF_WORK = "[npuprof]"  # the frame export-stacks shows for npuprof's own work in the script's threads


def is_npuprof_wrapper_frame(name: str) -> bool:
    return _NPUPROF_WRAPPER_RE.search(name) is not None


def is_npuprof_stack_frame(name: str) -> bool:
    """A frame export-stacks does not show as the script's: npuprof's own (is_npuprof_frame) or its marks'."""
    return is_npuprof_frame(name) or _NPUPROF_MARKS_RE.search(name) is not None


def is_comm_name(name: str) -> bool:
    """A communication kernel (nccl/hccl/rccl in its name) or a host collective span (``gloo:...``)."""
    low = name.lower()
    return (
        any(mark in low for mark in COMM_KERNEL_MARKS)
        or low.startswith(COMM_ANNOTATION_PREFIXES)
        or low.startswith(COMM_TASK_PREFIXES)
    )


def is_comm_operator(name: str) -> bool:
    """An operator that is a communication call rather than computing (on the CPU, where the device is the
    host): a communication name, a ``c10d::`` call or ``record_param_comms``."""
    return is_comm_name(name) or name.startswith(C10D_PREFIXES) or name == COMM_RECORD


def is_send_or_receive(name: str) -> bool:
    """NCCL's point-to-point kernel (``ncclDevKernel_SendRecv``), which does either."""
    return "sendrecv" in name.lower()


def is_receive(name: str) -> bool:
    """A receive (its time in a step is the pipeline's bubble)."""
    low = name.lower()
    return "recv" in low or "receive" in low


def external_id(args: dict[str, Any]) -> int:
    """A host record's External id (torch 1.8-1.10: ``external id``; -1: none or unreadable)."""
    value = args.get("External id", args.get("external id", -1))
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return -1
