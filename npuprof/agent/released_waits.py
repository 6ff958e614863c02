"""Whether a thread waits on an object that the calling thread releases: an ``Event`` it sets, a ``Queue``
it puts into (or takes from, or marks ``task_done``), a ``Condition`` it notifies, a ``Semaphore`` it
releases, a ``Barrier`` it waits at too (docs/architecture.md, "Step boundaries": a thread the driving one
waits for takes over counting).

The waiting thread's side is read from its frames: the outermost of the standard library's waits among its
innermost frames, and the object that wait is a method of. The calling thread's side is read from what it
runs, not from its frames' variables (reading those keeps a snapshot of them, a batch's tensors, alive until
the frame ends on Python 3.10-3.12): its ``Thread``'s target and arguments, or its subclass's ``run`` and
attributes, and the executor work items on its stack. The object must be reachable from there (an argument,
a closure's variable, a global the code names, or an attribute of one of those) and that code, or a function
it calls, must name the call that releases it; a result's release (an event set, a queue put into) once the
loop this thread is in ends. A loader thread that fills the driver's queue never steps, so it never takes
over; a thread training beside the driver that takes batches from the driver's queue too (``get``) releases
nothing the driver waits on, and one that puts its outputs into that queue at its steps (a teacher's) puts
inside its loop. It also tells whether an asyncio event loop awaits nothing but this thread's work.
"""

from __future__ import annotations

import bisect
import contextvars
import dis
import functools
import os
import queue
import sys
import threading
import types
from collections.abc import Callable
from typing import Any, NamedTuple

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
# A thread waiting for a signal calls one of these; the other sends it to the process with one of those.
_PAUSES = frozenset({"pause", "sigwait", "sigwaitinfo", "sigtimedwait"})
_SIGNALS = frozenset({"kill", "pthread_kill"})  # (raise_signal's is the sending thread's: no pause ends)
_THIS_PROCESS = object()  # what a signal's sender releases (``_reaches``)
_SCOPES = {
    "LOAD_GLOBAL": "global",
    "LOAD_NAME": "global",  # a module's code: its globals
    "LOAD_FAST": "local",
    "LOAD_FAST_CHECK": "local",
    "LOAD_DEREF": "local",
}
_NONLOCAL = "nonlocal "  # a closure's variable stored, told from a global of the same name
_FLAGS = 16  # variables (and their keys) read in one polling loop, looked at
# what a global the polling loop reads holds when it is no flag: a module (``time``), a function, a class
_NO_FLAG = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type)
_HELPER_DEPTH = 3  # calls followed from a function the thread's code calls into the functions it calls
_HELPERS = 32  # functions looked into for one wait
_REACHED = 2048  # values looked at for the waited object, from those of the outermost frame on
_CALLABLE_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF"})  # a function called by its name
_CALLED_LOADS = _CALLABLE_LOADS | {"LOAD_ATTR", "LOAD_METHOD", "LOAD_FAST"}  # ... or as a method, a local
# instructions after which a function does not run on to the next one: it returns or raises, or jumps
_ENDS = frozenset({"RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE"})
_GOES_TO = frozenset(
    {
        "JUMP_FORWARD",
        "JUMP_ABSOLUTE",
        "JUMP_BACKWARD",
        "JUMP_BACKWARD_NO_INTERRUPT",
        "JUMP",
        "JUMP_NO_INTERRUPT",
    }
)
_NPUPROF = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # npuprof's own frames
# what _reachable_after found, by code object (its identity: hashing one hashes its nested code) and place
_REACHABLE: dict[tuple[int, int], tuple[Any, set[int]]] = {}
_KEPT_PLACES = 256
_VARIABLE_LOADS = frozenset(
    {"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_NAME", "LOAD_GLOBAL", "LOAD_DEREF", "LOAD_CLOSURE"}
)


def waits_on_what_this_thread_releases(frame: Any) -> bool:
    """Whether the thread whose innermost frame is ``frame`` waits on an object that the calling thread's
    code releases."""
    waited = waited_on(frame)
    if waited is None:
        return False
    owner, releases, after_the_loop = waited
    return any(_releases(run, owner, _calling(releases), after_the_loop) for run in _what_this_thread_runs())


def pauses_for_a_signal_this_thread_sends(frame: Any) -> bool:
    """Whether the thread whose innermost frame is ``frame`` waits for a signal (``signal.pause()``,
    ``sigwait``: its current line calls one) that the calling thread's code sends to this process once its
    loop ends (``os.kill(os.getpid(), signal.SIGUSR1)``, ``signal.pthread_kill``)."""
    if frame is None or polling.names_of(frame.f_code).isdisjoint(_PAUSES):  # (the cheap look first)
        return False
    if polling.names_on_line(frame).isdisjoint(_PAUSES):
        return False
    return any(_releases(run, _THIS_PROCESS, _calling(_SIGNALS), True) for run in _what_this_thread_runs())


class _Globals(NamedTuple):
    """A module's globals, one of which (a flag) a polling loop reads."""

    namespace: dict[str, Any]


_ANY_OWNER = object()  # a flag whose owner is not read: only the code that stores it is (``unread_flag``)


def polls_a_flag_this_thread_sets(frame: Any) -> bool:
    """Whether the thread whose innermost frame is ``frame`` sleeps in a loop that reads a flag the calling
    thread's code stores once its loop ends: ``while not state["done"]: time.sleep(0.1)``, ``state["done"]
    = True`` after the training loop (or ``.done`` of an object, or a global ``done``). Only a flag that a
    module's global holds is read (from the module's globals): one a function's variable holds would be
    read from that frame's variables (``unread_flag``)."""
    for scope, root, key, globals_ in _flags_polled(frame):
        if scope != "global" or root not in globals_ or isinstance(globals_[root], _NO_FLAG):
            continue
        owner = globals_[root] if key else _Globals(globals_)
        sought = _storing(frozenset({key or root}))
        if any(_releases(run, owner, sought, True) for run in _what_this_thread_runs()):
            return True
    return False


def unread_flag(frame: Any) -> str:
    """The flag (``state["done"]``, a ``done`` the thread's code stores as ``nonlocal``), a variable of the
    function that the thread whose innermost frame is ``frame`` polls in a sleeping loop, whose key the
    calling thread's code stores once its loop ends: the wait ``polls_a_flag_this_thread_sets`` does not
    read; "" when there is none."""
    for scope, root, key, _globals in _flags_polled(frame):
        sought = _storing(frozenset({key or f"{_NONLOCAL}{root}"}))
        if scope == "local" and any(
            _releases(run, _ANY_OWNER, sought, True) for run in _what_this_thread_runs()
        ):
            return f"{root}{key}"
    return ""


def _flags_polled(frame: Any) -> list[tuple[str, str, str, dict[str, Any]]]:
    """The flags a loop of the first frame outside threading's and queue's code (an ``Event.wait``'s)
    reads, when that frame's line calls a sleep or a wait inside that loop, or reads them inside a loop
    that sleeps (caught asking between two sleeps, as ``polling`` takes a poll: then only the flags its
    line reads): each as its variable's scope ("global" or "local"), name and key (``["done"]``,
    ``.done``, "" for the variable itself), with the frame's globals."""
    frame = outside_the_waits(frame)
    if frame is None or polling.names_of(frame.f_code).isdisjoint(polling.WAIT_CALLS):
        return []  # (the cheap look first: a driver in any code of the job's)
    on_line = polling.names_on_line(frame)
    sleeping = not on_line.isdisjoint(polling.WAIT_CALLS)
    code, at = frame.f_code, frame.f_lasti
    loops, _calls = _loops_and_calls(code)
    waits = _waits_at(code)
    around = [
        (start, end)
        for start, end in loops
        if start <= at <= end and (sleeping or any(start <= offset <= end for offset in waits))
    ]
    read = [
        flag for offset, *flag in _flags_read(code) if any(start <= offset <= end for start, end in around)
    ]
    if not sleeping:  # a loop that trains between its reads of the flag is no poll: it sleeps nowhere
        read = [flag for flag in read if flag[1] in on_line]
    unique = list(dict.fromkeys(tuple(flag) for flag in read))[:_FLAGS]
    return [(scope, root, key, frame.f_globals) for scope, root, key in unique]


def outside_the_waits(frame: Any) -> Any:
    """The first frame from ``frame`` outward that is not threading's or queue's code (an ``Event.wait``'s
    caller), or None."""
    for _ in range(_WAIT_FRAMES):
        if frame is None or not frame.f_code.co_filename.endswith(_WAIT_FILES):
            break
        frame = frame.f_back
    return frame


def work_run_here() -> str:
    """The name of the function the first executor work item the calling thread runs calls (``train``
    of ``asyncio.to_thread(train)``, which runs it through a context's ``run``), or ""."""
    for item in work_items_run_here():
        function = getattr(item, "fn", None)
        if isinstance(function, functools.partial) and _runs_in_a_context(function.func) and function.args:
            function = function.args[0]
        function, _given = _unwrapped((function, []))
        return str(getattr(function, "__qualname__", "")).rsplit("<locals>.", 1)[-1]  # Trainer.fit, train
    return ""


def _runs_in_a_context(function: Any) -> bool:
    return getattr(function, "__name__", "") == "run" and isinstance(
        getattr(function, "__self__", None), contextvars.Context
    )


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
    waiting = _loop_waiting(frame)
    if waiting is None:
        return False
    _loop, ours, leaves = waiting
    return all(any(waiter is mine for mine in ours) for waiter in leaves)


def loop_ticks_beside_this_thread(frame: Any) -> bool:
    """Whether the thread whose innermost frame is ``frame`` runs an asyncio event loop that waits in its
    selector while a task awaits the work this thread does and every other one sleeps (``await
    asyncio.sleep``: a progress ticker), which ``loop_awaits_only_this_thread`` does not take for a wait:
    the ticker's code may step between its sleeps, and nothing but its coroutine's variables ties its
    loop to this thread's work."""
    waiting = _loop_waiting(frame)
    if waiting is None:
        return False
    loop, ours, leaves = waiting
    others = [waiter for waiter in leaves if not any(waiter is mine for mine in ours)]
    if len(others) == len(leaves) or not others:
        return False
    sleeps = _sleeps_of(loop)
    return all(any(waiter is sleep for sleep in sleeps) for waiter in others)


def _loop_waiting(frame: Any) -> tuple[Any, list[Any], list[Any]] | None:
    """The asyncio event loop of the thread whose innermost frame is ``frame`` when it waits in its
    selector, the futures of its that this thread's work completes, and the futures its tasks await (a
    task awaiting another task, or a gather of tasks, waits for what that one awaits); None when it does
    not wait there or awaits no work of this thread."""
    asyncio = sys.modules.get("asyncio")
    caller = frame.f_back if frame.f_code.co_filename.endswith("/selectors.py") else None
    if asyncio is None or caller is None or caller.f_code.co_name != "_run_once":
        return None
    loop = caller.f_locals.get("self")
    ours = [waiter for item in work_items_run_here() for waiter in _awaited(item, asyncio)]
    if not ours or not isinstance(loop, asyncio.AbstractEventLoop):
        return None
    waiters = [getattr(task, "_fut_waiter", None) for task in asyncio.all_tasks(loop)]
    leaves = [waiter for waiter in waiters if not isinstance(waiter, asyncio.Task) and not _gathers(waiter)]
    return (loop, ours, leaves) if leaves else None


def _sleeps_of(loop: Any) -> list[Any]:
    """The futures ``asyncio.sleep`` awaits in ``loop``: those its timers (the first ``_ATTRIBUTES``) will
    complete."""
    futures = sys.modules.get("asyncio.futures")
    complete = getattr(futures, "_set_result_unless_cancelled", None)
    timers = list(getattr(loop, "_scheduled", ()))[:_ATTRIBUTES]
    found = []
    for timer in timers:
        args = getattr(timer, "_args", None) or ()
        if complete is not None and getattr(timer, "_callback", None) is complete and args:
            found.append(args[0])
    return found


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
    return work_items_from(sys._getframe(1), _OWN_FRAMES)


def work_items_from(frame: Any, frames: int) -> list[Any]:
    """The executor work items run by ``frame`` and up to ``frames`` frames outward from it (any thread's)."""
    items = []
    for _ in range(frames):
        if frame is None:
            break
        code = frame.f_code
        if code.co_name == "run" and code.co_filename.endswith("/concurrent/futures/thread.py"):
            item = frame.f_locals.get("self")
            if hasattr(item, "future"):
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


class _Sought(NamedTuple):
    """What a thread's code does that ends another thread's wait: calls of these methods (``set``), or
    stores into these keys (``["done"]``, ``.done``, a global ``done``), and where its code does each."""

    names: frozenset[str]
    where: Callable[[Any], dict[str, list[int]]]  # offsets by name, in the code itself
    named: Callable[[Any], Any]  # the names the code and the expressions nested in it do


def _calling(releases: frozenset[str]) -> _Sought:
    return _Sought(releases, _calls, polling.names_of)


def _storing(keys: frozenset[str]) -> _Sought:
    return _Sought(keys, _stores, _stored)


def _stored(code: Any) -> Any:
    return _stores(code).keys()


def _calls(code: Any) -> dict[str, list[int]]:
    return _loops_and_calls(code)[1]


def _releases(run: tuple[Any, list[Any]], owner: Any, releases: _Sought, after_the_loop: bool) -> bool:
    """Whether the code of ``run``, or of a function it calls (``_helpers``), does one of ``releases`` and
    can reach ``owner`` (``after_the_loop``: once the loop this thread runs in ends,
    ``_released_once_its_loop_ends``)."""
    function, given = _unwrapped(run)
    code = getattr(function, "__code__", None)
    if code is None:
        return False
    reach = [*given, *_closure_values(function), *_named_globals(code, function.__globals__)]
    if after_the_loop:
        return _released_once_its_loop_ends(function, reach, owner, releases)
    return _releases_in(function, reach, owner, releases, set())


def _unwrapped(run: tuple[Any, list[Any]]) -> tuple[Any, list[Any]]:
    """The function ``run``'s callable runs (through partials and bound methods) and what it is given."""
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
    return function, given


def _code_and_reach(run: tuple[Any, list[Any]]) -> tuple[Any, list[Any]]:
    """The code ``run``'s callable runs (through partials and bound methods) and the values it reaches
    without running: what it is given, its closure's variables, the globals its code names."""
    function, given = _unwrapped(run)
    code = getattr(function, "__code__", None)
    if code is None:
        return None, []
    named = _named_globals(code, getattr(function, "__globals__", {}))
    return code, [*given, *_closure_values(function), *named]


def _named_globals(code: Any, known: dict[str, Any]) -> list[Any]:
    return [known[name] for name in polling.names_of(code) if name in known]


def _reaches(reach: list[Any], owner: Any, code: Any, known: dict[str, Any]) -> bool:
    """Whether ``code``, reaching ``reach`` and globals ``known``, releases ``owner``: reaches it, or sends
    its signal to this process when ``owner`` is ``_THIS_PROCESS`` (``os.kill`` of ``os.getpid()``, not of
    a child's pid), or has those globals when ``owner`` is a module's (a global flag it stores)."""
    if isinstance(owner, _Globals):
        return known is owner.namespace
    if owner is _ANY_OWNER:
        return True
    if owner is _THIS_PROCESS:
        names = polling.names_of(code)
        return "kill" not in names or "getpid" in names
    # "self": an attribute of the value counts too (a thread's self.done, a trainer's self.queue)
    return any(polling.holds("self", value, owner) for value in reach[:_REACHED])


def _releases_in(
    function: Any, reach: list[Any], owner: Any, releases: _Sought, seen: set[int], depth: int = 0
) -> bool:
    """Whether ``function``'s code, or a function it calls, does one of ``releases`` and reaches ``owner``:
    a helper run whole (``def finish(): done.set()``). ``depth``: the calls that lead to ``function`` from
    the thread's code, ``_HELPER_DEPTH`` at most."""
    code = function.__code__
    if id(code) in seen or len(seen) >= _HELPERS:
        return False
    seen.add(id(code))  # (by identity: hashing a code object hashes the code nested in it)
    reach = [*reach, *_closure_values(function), *_named_globals(code, function.__globals__)]
    known = function.__globals__
    if not releases.names.isdisjoint(releases.named(code)) and _reaches(reach, owner, code, known):
        return True
    if depth >= _HELPER_DEPTH:
        return False
    helpers = _helpers(code, _anywhere, known, function, reach)
    return any(_releases_in(fn, its_reach, owner, releases, seen, depth + 1) for fn, its_reach in helpers)


def _anywhere(_offset: int) -> bool:
    return True


def _released_once_its_loop_ends(function: Any, reach: list[Any], owner: Any, releases: _Sought) -> bool:
    """Whether this thread, running ``function`` (its thread's target), does one of ``releases`` on
    ``owner`` once the loop it is in ends: in a frame of its own from ``function``'s inward, after where
    that frame is and outside every loop that spans it, or in a function called there (``def run():
    train(); finish()``, ``def train(done): for ...: step()`` then ``done.set()``). The frames are looked at
    inward until the first one in a loop: what runs deeper (a teacher's outputs put into the student's
    queue at each of its steps, a barrier met at each step) releases the waiting thread every step or so,
    which then goes on with its own steps: that wait is not for this thread to end. No frame of this
    thread runs ``function``: not known, no. Read from the frames' code and place, never their variables."""
    frames = _own_frames_from(function.__code__)
    seen: set[int] = set()
    for index, frame in enumerate(frames):
        code, at = frame.f_code, frame.f_lasti
        if index:
            reach = [*reach, *_named_globals(code, frame.f_globals)]
        loops, _calls = _loops_and_calls(code)
        done = releases.where(code)
        around = [(start, end) for start, end in loops if start <= at <= end]
        ahead = _reachable_after(code, at)

        def later(offset: int, ahead: set[int] = ahead, around: list[tuple[int, int]] = around) -> bool:
            return offset in ahead and not any(start <= offset <= end for start, end in around)

        released = any(later(offset) for name in releases.names for offset in done.get(name, ()))
        if released and _reaches(reach, owner, code, frame.f_globals):
            return True
        running = frames[index + 1].f_code if index + 1 < len(frames) else None
        its_function = function if index == 0 else None  # an inner frame's is not known (its globals are)
        for helper, its_reach in _helpers(code, later, frame.f_globals, its_function, reach):
            if helper.__code__ is not running and _releases_in(helper, its_reach, owner, releases, seen, 1):
                return True
        if around:
            return False
    return False


def _reachable_after(code: Any, at: int) -> set[int]:
    """The offsets of ``code`` that running on from instruction ``at`` can reach, by its jumps: not what
    follows a ``return`` (an exception's handler neither, but for the inline copy of a ``finally``).
    ``at`` may lie in the instruction's inline cache (a call's, on Python 3.11+)."""
    kept = _REACHABLE.get((id(code), at))
    if kept is not None and kept[0] is code:
        return kept[1]
    starts, successors = _successors(code)
    found = bisect.bisect_right(starts, at) - 1
    seen: set[int] = set()
    todo = list(successors[starts[found]]) if found >= 0 else []
    while todo:
        offset = todo.pop()
        if offset not in seen:
            seen.add(offset)
            todo += successors.get(offset, ())
    if len(_REACHABLE) >= _KEPT_PLACES:
        _REACHABLE.clear()
    _REACHABLE[(id(code), at)] = (code, seen)
    return seen


@polling.by_identity
def _successors(code: Any) -> tuple[list[int], dict[int, tuple[int, ...]]]:
    """Where each instruction of ``code`` starts, and where it may go next. Nothing for code of more than
    ``polling.READ_BYTES`` bytes."""
    if len(code.co_code) > polling.READ_BYTES:
        return [], {}
    instructions = list(dis.get_instructions(code))
    successors = {}
    for index, instruction in enumerate(instructions):
        name, target = instruction.opname, instruction.argval
        after = (instructions[index + 1].offset,) if index + 1 < len(instructions) else ()
        if name in _ENDS:
            successors[instruction.offset] = ()
        elif instruction.opcode in polling.JUMPS and isinstance(target, int):
            successors[instruction.offset] = (target,) if name in _GOES_TO else (*after, target)
        else:
            successors[instruction.offset] = after
    return [instruction.offset for instruction in instructions], successors


def _own_frames_from(code: Any) -> list[Any]:
    """The calling thread's frames from the one that runs ``code`` inward, up to npuprof's own; none when
    no frame of ``_OWN_FRAMES`` runs it."""
    outward = []
    frame = sys._getframe(1)
    for _ in range(_OWN_FRAMES):
        if frame is None:
            return []
        outward.append(frame)
        if frame.f_code is code:
            break
        frame = frame.f_back
    else:
        return []
    inward = outward[::-1]
    for index, frame in enumerate(inward):
        if frame.f_code.co_filename.startswith(_NPUPROF):
            return inward[:index]
    return inward


def _helpers(
    code: Any, wanted: Callable[[int], bool], known: dict[str, Any], function: Any, reach: list[Any]
) -> list[tuple[Any, list[Any]]]:
    """The Python functions ``code`` calls at an offset ``wanted`` accepts, each with the values it
    reaches: a global's (``known``), a closure's variable (of ``function``, when known), a method of a
    value reached (``self.finish()``) or a module's function (``utils.finish()``)."""
    closure = _closure_by_name(function) if function is not None else {}
    found = []
    for name, offsets in _variables_loaded(code).items():
        value = closure[name] if name in closure else known.get(name)
        if isinstance(value, types.FunctionType) and any(wanted(offset) for offset in offsets):
            found.append((value, reach))
    _loops, calls = _loops_and_calls(code)
    for name, offsets in calls.items():
        if not any(wanted(offset) for offset in offsets):
            continue
        for value in reach[:_ATTRIBUTES]:
            method = _function_of(value, name)
            if method is not None:
                found.append((method, [*reach, value]))
    return found[:_HELPERS]


def _function_of(value: Any, name: str) -> Any:
    """The Python function ``value.name`` would call, read from its class's (or module's) dictionaries,
    never running a property or ``__getattr__`` of the script's; None if not one."""
    if isinstance(value, types.ModuleType):
        found = vars(value).get(name)
    else:
        found = next((vars(kind)[name] for kind in type(value).__mro__ if name in vars(kind)), None)
    return found if isinstance(found, types.FunctionType) else None


@polling.by_identity
def _variables_loaded(code: Any) -> dict[str, list[int]]:
    """Where ``code`` loads each global or closure's variable (a function it may call). Nothing for code of
    more than ``polling.READ_BYTES`` bytes."""
    if len(code.co_code) > polling.READ_BYTES:
        return {}
    loaded: dict[str, list[int]] = {}
    for instruction in dis.get_instructions(code):
        if instruction.opname in _CALLABLE_LOADS and isinstance(instruction.argval, str):
            loaded.setdefault(instruction.argval, []).append(instruction.offset)
    return loaded


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


@polling.by_identity
def _flags_read(code: Any) -> list[tuple[int, str, str, str]]:
    """Where ``code`` reads a variable, an item of it by a constant key or an attribute of it: each as the
    offset, the variable's scope ("global", "local"), its name and the key (``["done"]``, ``.done``, "").
    Nothing for code of more than ``polling.READ_BYTES`` bytes."""
    if len(code.co_code) > polling.READ_BYTES:
        return []
    instructions = list(dis.get_instructions(code))
    found = []
    for index, instruction in enumerate(instructions):
        scope = _SCOPES.get(instruction.opname)
        if scope is None or not isinstance(instruction.argval, str):
            continue
        following = [(i.opname, i.argval) for i in instructions[index + 1 : index + 3]]
        key = ""
        if following and following[0][0] == "LOAD_ATTR" and isinstance(following[0][1], str):
            key = f".{following[0][1]}"
        elif len(following) == 2 and following[0][0] == "LOAD_CONST" and following[1][0] == "BINARY_SUBSCR":
            key = f"[{following[0][1]!r}]"
        found.append((instruction.offset, scope, instruction.argval, key))
    return found


@polling.by_identity
def _waits_at(code: Any) -> list[int]:
    """Where ``code`` loads a sleep or a wait (``polling.WAIT_CALLS``: ``time.sleep``, ``sleep``,
    ``event.wait``). Nothing for code of more than ``polling.READ_BYTES`` bytes."""
    if len(code.co_code) > polling.READ_BYTES:
        return []
    return [
        instruction.offset
        for instruction in dis.get_instructions(code)
        if instruction.opname in _CALLED_LOADS and instruction.argval in polling.WAIT_CALLS
    ]


@polling.by_identity
def _stores(code: Any) -> dict[str, list[int]]:
    """Where ``code`` stores a flag: an item by a constant key (``["done"]``) or an attribute (``.done``)
    of a variable, a global (``done``) or a closure's variable (``nonlocal done``). Nothing for code of
    more than ``polling.READ_BYTES`` bytes."""
    if len(code.co_code) > polling.READ_BYTES:
        return {}
    instructions = list(dis.get_instructions(code))
    found: dict[str, list[int]] = {}
    for index, instruction in enumerate(instructions):
        name, value = instruction.opname, instruction.argval
        before = [(i.opname, i.argval) for i in instructions[max(index - 2, 0) : index]]
        key = None
        if name == "STORE_GLOBAL":
            key = value
        elif name == "STORE_DEREF":
            key = f"{_NONLOCAL}{value}"
        elif name == "STORE_ATTR" and before and before[-1][0] in _VARIABLE_LOADS | {"LOAD_FAST_LOAD_FAST"}:
            key = f".{value}"
        elif name == "STORE_SUBSCR" and len(before) == 2 and before[1][0] == "LOAD_CONST":
            key = f"[{before[1][1]!r}]" if before[0][0] in _VARIABLE_LOADS else None
        if isinstance(key, str):
            found.setdefault(key, []).append(instruction.offset)
    return found


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


def _closure_by_name(function: Any) -> dict[str, Any]:
    cells = getattr(function, "__closure__", None) or ()
    named = {}
    for name, cell in zip(function.__code__.co_freevars, cells, strict=False):
        try:
            named[name] = cell.cell_contents
        except ValueError:  # a closure's variable not bound yet
            pass
    return named


def _closure_values(function: Any) -> list[Any]:
    values = []
    for cell in getattr(function, "__closure__", None) or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:  # a closure's variable not bound yet
            pass
    return values
