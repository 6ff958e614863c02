"""Whether a thread waits on an object that the calling thread releases: an ``Event`` it sets, a ``Queue``
it puts into (or takes from, or marks ``task_done``), a ``Condition`` it notifies, a ``Semaphore`` it
releases, a ``Barrier`` it waits at too (docs/architecture.md, "Step boundaries": a thread the driving one
waits for takes over counting).

The waiting thread's side is read from its frames: the outermost of the standard library's waits among its
innermost frames, and the object that wait is a method of. The calling thread's side is read from what it
runs, not from its frames' variables (reading those keeps a snapshot of them, a batch's tensors, alive until
the frame ends on Python 3.10-3.12): its ``Thread``'s target and arguments, or its subclass's ``run`` and
attributes, and the executor work items on its stack. The object must be reachable from there (an argument,
a closure's variable, a global the code names, or an attribute of one of those) and that code must name the
call that releases it; a result's release (an event set, a queue put into) outside the loop that code's
frame is in. A loader thread that fills the driver's queue never steps, so it never takes over; a thread
training beside the driver that takes batches from the driver's queue too (``get``) releases nothing the
driver waits on, and one that puts its outputs into that queue at its steps (a teacher's) puts inside its
loop. It also tells whether an asyncio event loop awaits nothing but this thread's work.
"""

from __future__ import annotations

import dis
import functools
import queue
import sys
import threading
from typing import Any

from npuprof.agent import polling

# (the waiting object's class, its method that waits, the calls of another thread that end the wait, and
# whether that call must come once the thread's loop has ended: a result handed over, not a batch taken)
_RELEASES: tuple[tuple[type, str, frozenset[str], bool], ...] = (
    (queue.Queue, "get", frozenset({"put", "put_nowait"}), True),
    (queue.Queue, "put", frozenset({"get", "get_nowait"}), False),
    (queue.Queue, "join", frozenset({"task_done"}), False),
    (threading.Event, "wait", frozenset({"set"}), True),
    (threading.Barrier, "wait", frozenset({"wait"}), True),
    (threading.Semaphore, "acquire", frozenset({"release"}), True),
    (threading.Condition, "wait", frozenset({"notify", "notify_all"}), True),
    (threading.Condition, "wait_for", frozenset({"notify", "notify_all"}), True),
)
_WAIT_FILES = ("/threading.py", "/queue.py")
_WAIT_FRAMES = 6  # Condition.wait, Condition.wait_for, Barrier._wait, Barrier.wait, Semaphore.__enter__
_OWN_FRAMES = 256  # frames of the calling thread looked at for the executor work items it runs
_UNWRAPS = 8  # partials and bound methods unwrapped around one callable
# A feeder's loop hands the batches over with these calls, its consumer takes them with those.
_HANDS = frozenset({"put", "put_nowait"})
_TAKES = frozenset({"get", "get_nowait"})
_FEEDER_FRAMES = 32  # frames of the feeding thread looked at (its loop, under a data loader's code)
_ATTRIBUTES = 256  # attributes of one object looked at for a queue
_VARIABLE_LOADS = frozenset(
    {"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_NAME", "LOAD_GLOBAL", "LOAD_DEREF", "LOAD_CLOSURE"}
)


def waits_on_what_this_thread_releases(frame: Any) -> bool:
    """Whether the thread whose innermost frame is ``frame`` waits on an object that the calling thread's
    code releases."""
    waited = waited_on(frame)
    if waited is None:
        return False
    return any(_releases(run, *waited) for run in _what_this_thread_runs())


def waited_on(frame: Any) -> tuple[Any, frozenset[str], bool] | None:
    """The object the thread at ``frame`` waits on, the calls that release it and whether they must come
    after the releasing thread's loop (``_RELEASES``): the outermost of the standard library's waits among
    its innermost frames (an ``Event``'s wait, not its condition's)."""
    found = None
    for _ in range(_WAIT_FRAMES):
        if frame is None or not frame.f_code.co_filename.endswith(_WAIT_FILES):
            break
        name, owner = frame.f_code.co_name, frame.f_locals.get("self")
        for kind, waits, releases, after_the_loop in _RELEASES:
            if name == waits and isinstance(owner, kind):
                found = (owner, releases, after_the_loop)
                break
        frame = frame.f_back
    return found


def loop_awaits_only_this_thread(frame: Any) -> bool:
    """Whether the thread whose innermost frame is ``frame`` runs an asyncio event loop that waits in its
    selector while every task of it awaits the work this thread does (``await asyncio.to_thread(train)``,
    ``loop.run_in_executor``), or another task (``gather``) in turn: a loop whose task sleeps, waits for
    its data from another thread or for I/O, or is ready to run, is not waiting for this thread alone."""
    asyncio = sys.modules.get("asyncio")
    caller = frame.f_back if frame.f_code.co_filename.endswith("/selectors.py") else None
    if asyncio is None or caller is None or caller.f_code.co_name != "_run_once":
        return False
    loop = caller.f_locals.get("self")
    ours = [waiter for item in work_items_run_here() for waiter in _awaited(item, asyncio)]
    if not ours or not isinstance(loop, asyncio.AbstractEventLoop):
        return False
    waiters = [getattr(task, "_fut_waiter", None) for task in asyncio.all_tasks(loop)]
    # a task awaiting another task (or a gather of tasks) waits for what that one awaits
    leaves = [waiter for waiter in waiters if not isinstance(waiter, asyncio.Task) and not _gathers(waiter)]
    return bool(leaves) and all(any(waiter is mine for mine in ours) for waiter in leaves)


def _awaited(item: Any, asyncio: Any) -> list[Any]:
    """The asyncio futures that the future of executor work item ``item`` completes (``wrap_future``'s
    chain, a closure of the callback it adds)."""
    callbacks = getattr(getattr(item, "future", None), "_done_callbacks", None) or ()
    return [value for fn in callbacks for value in _closure_values(fn) if isinstance(value, asyncio.Future)]


def _gathers(waiter: Any) -> bool:
    """Whether ``waiter`` is ``asyncio.gather``'s future, done when its children (tasks) are."""
    return waiter is not None and hasattr(waiter, "_children")


def work_items_run_here() -> list[Any]:
    """The executor work items (``concurrent.futures.thread._WorkItem``) the calling thread runs."""
    items = []
    frame = sys._getframe(1)
    for _ in range(_OWN_FRAMES):
        if frame is None:
            break
        code = frame.f_code
        if code.co_name == "run" and code.co_filename.endswith("/concurrent/futures/thread.py"):
            item = frame.f_locals.get("self")
            if item is not None:
                items.append(item)
        frame = frame.f_back
    return items


def _what_this_thread_runs() -> list[tuple[Any, list[Any]]]:
    """Each callable the calling thread runs, with the objects it is given: its thread's target and its
    arguments, a ``Thread`` subclass's own ``run`` and the thread, the executor work items it runs."""
    thread = threading.current_thread()
    runs = []
    target = getattr(thread, "_target", None)
    if target is not None:
        args, kwargs = getattr(thread, "_args", ()), getattr(thread, "_kwargs", None) or {}
        runs.append((target, [*args, *kwargs.values()]))
    run = getattr(type(thread), "run", None)
    if run is not None and run is not threading.Thread.run:
        runs.append((run, [thread]))
    for item in work_items_run_here():
        args, kwargs = getattr(item, "args", ()), getattr(item, "kwargs", None) or {}
        runs.append((getattr(item, "fn", None), [*args, *kwargs.values()]))
    return runs


def _releases(run: tuple[Any, list[Any]], owner: Any, releases: frozenset[str], after_the_loop: bool) -> bool:
    """Whether the code of ``run`` names one of ``releases`` and can reach ``owner`` (``after_the_loop``: a
    call of one that the loop this thread runs in that code does not span, ``_called_once_its_loop_ends``)."""
    code, reached = _code_and_reach(run)
    if code is None or polling.names_of(code).isdisjoint(releases):
        return False
    # "self": an attribute of the value counts too (a thread's self.done, a trainer's self.queue)
    if not any(polling.holds("self", value, owner) for value in reached):
        return False
    return not after_the_loop or _called_once_its_loop_ends(code, releases)


def _code_and_reach(run: tuple[Any, list[Any]]) -> tuple[Any, list[Any]]:
    """The code ``run``'s callable runs (through partials and bound methods) and the values it reaches
    without running: what it is given, its closure's variables, the globals its code names."""
    function, given = run
    for _ in range(_UNWRAPS):
        if isinstance(function, functools.partial):
            given = [*given, *function.args, *function.keywords.values()]
            function = function.func
        elif hasattr(function, "__func__") and hasattr(function, "__self__"):
            given = [*given, function.__self__]
            function = function.__func__
        else:
            break
    code = getattr(function, "__code__", None)
    if code is None:
        return None, []
    known = getattr(function, "__globals__", {})
    named = [known[name] for name in polling.names_of(code) if name in known]
    return code, [*given, *_closure_values(function), *named]


def feeds_this_thread(frame: Any) -> bool:
    """Whether the thread whose innermost frame is ``frame`` runs a loop that puts into a ``queue.Queue``
    the calling thread's code takes from (``get``): a main thread that took a sanity step, then loads the
    batches of the thread that trains, slower than it trains, so that it is seldom blocked in ``put``. Its
    own steps would reset the calling thread's count (a main thread that trains and feeds another trainer
    at each of its steps), so it does not train in that loop. Read from the feeding frame's variables (a
    function's snapshot on Python 3.10-3.12, as a poll's: ``polling``), only once its code puts in a loop
    that spans where it is."""
    taken = _queues_this_thread_takes_from()
    for _ in range(_FEEDER_FRAMES):
        if frame is None or not taken:
            return False
        code = frame.f_code
        if not polling.names_of(code).isdisjoint(_HANDS):
            receivers = _put_receivers_in_its_loop(code, frame.f_lasti)
            fed = [_value_of(path, frame) for path in receivers]
            if any(value is mine for value in fed for mine in taken):
                return True
        frame = frame.f_back
    return False


def _queues_this_thread_takes_from() -> list[Any]:
    """The ``queue.Queue`` objects that what the calling thread runs reaches and whose ``get`` its code
    names (or an attribute of what it reaches: ``self.batches``)."""
    found: list[Any] = []
    for run in _what_this_thread_runs():
        code, reached = _code_and_reach(run)
        if code is None or polling.names_of(code).isdisjoint(_TAKES):
            continue
        for value in reached:
            if isinstance(value, queue.Queue):
                found.append(value)
                continue
            attributes = list(getattr(value, "__dict__", {}).values())[:_ATTRIBUTES]
            found += [item for item in attributes if isinstance(item, queue.Queue)]
    return found


def _put_receivers_in_its_loop(code: Any, at: int) -> list[tuple[str, ...]]:
    """What ``code`` calls ``put`` on inside a loop that spans instruction ``at``: each as a variable's
    name and the attributes taken from it (``self.batches.put``: ``("self", "batches")``)."""
    loops, _calls = _loops_and_calls(code)
    around = [(start, end) for start, end in loops if start <= at <= end]
    return [path for offset, path in _puts(code) if any(start <= offset <= end for start, end in around)]


@polling.by_identity
def _puts(code: Any) -> list[tuple[int, tuple[str, ...]]]:
    """Where ``code`` loads ``put`` (``_HANDS``) and on what: the variable loaded before it and the
    attributes between (none when that is not a plain name: a call's result, an item)."""
    if len(code.co_code) > polling.READ_BYTES:
        return []
    found, path = [], ()  # path: the name and attributes loaded just before, in order
    for instruction in dis.get_instructions(code):
        name, value = instruction.opname, instruction.argval
        if name in ("LOAD_ATTR", "LOAD_METHOD") and value in _HANDS and path:
            found.append((instruction.offset, path))
            path = ()
        elif name in ("LOAD_ATTR", "LOAD_METHOD") and isinstance(value, str) and path:
            path = (*path, value)
        elif name in _VARIABLE_LOADS and isinstance(value, str):
            path = (value,)
        else:
            path = ()
    return found


def _value_of(path: tuple[str, ...], frame: Any) -> Any:
    """The object ``path`` (a variable's name, then attributes) names in ``frame``, read from instance
    dictionaries only (no property of the script's runs); None when not there."""
    variables = frame.f_locals
    value = variables[path[0]] if path[0] in variables else frame.f_globals.get(path[0])
    for attribute in path[1:]:
        value = getattr(value, "__dict__", {}).get(attribute)
    return value


def _called_once_its_loop_ends(code: Any, releases: frozenset[str]) -> bool:
    """Whether ``code``, run by this thread, calls one of ``releases`` outside every loop that spans the
    instruction it is at (``def run(): train(); done.set()``; ``for ...: step(); done.set()`` after the
    loop). A call inside that loop (a teacher's outputs put into the student's queue at each of its steps, a
    barrier met at each step) releases the waiting thread every step or so, which then goes on with its own
    steps: that wait is not for this thread to end. No frame of this thread runs ``code``: not known, no."""
    frame = sys._getframe(1)
    for _ in range(_OWN_FRAMES):
        if frame is None or frame.f_code is code:
            break
        frame = frame.f_back
    if frame is None or frame.f_code is not code:
        return False
    loops, calls = _loops_and_calls(code)
    at = frame.f_lasti
    around = [(start, end) for start, end in loops if start <= at <= end]
    return any(
        not any(start <= offset <= end for start, end in around)
        for name in releases
        for offset in calls.get(name, ())
    )


@polling.by_identity
def _loops_and_calls(code: Any) -> tuple[list[tuple[int, int]], dict[str, list[int]]]:
    """The bytecode spans of ``code``'s loops (a backward jump's), and where it loads each attribute or
    method it calls (``done.set``: at ``set``'s load). Nothing for code of more than
    ``polling.READ_BYTES`` bytes."""
    if len(code.co_code) > polling.READ_BYTES:
        return [], {}
    loops, calls = [], {}
    for instruction in dis.get_instructions(code):
        offset, value = instruction.offset, instruction.argval
        if instruction.opcode in polling.JUMPS and isinstance(value, int) and value <= offset:
            loops.append((value, offset))
        elif instruction.opname in ("LOAD_ATTR", "LOAD_METHOD") and isinstance(value, str):
            calls.setdefault(value, []).append(offset)
    return loops, calls


def _closure_values(function: Any) -> list[Any]:
    values = []
    for cell in getattr(function, "__closure__", None) or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:  # a closure's variable not bound yet
            pass
    return values
