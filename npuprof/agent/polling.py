"""Whether a thread polls another one until it ends: ``while t.is_alive(): time.sleep(0.1)``, the wait of
a script that keeps its main thread able to take Ctrl-C or print progress, instead of ``t.join()``
(docs/architecture.md, "Step boundaries": a thread the driving one waits for takes over counting).

Read from the polling thread's frames (by another thread, at a step boundary that thread takes): the
first frame outside ``threading`` (its caller, for a generator expression asking ``is_alive()``) must be,
on its current line, calling a sleep or a wait (``time.sleep``, ``Event.wait``, ``join`` with a timeout),
or asking, inside a loop (the bytecode a backward jump spans) that
asks ``is_alive()`` (``active_count()``: every thread) and sleeps, and the thread it asks about (a variable
on that loop's line that asks) must be the caller: that variable (a local, a global), an element of it (a
list of threads), or an attribute of it when it is ``self``. A loop that trains and asks ``is_alive()`` of
a thread beside it is at a training call, or asking in a loop with no sleep, not a poll; a ``join()`` of
another thread after a poll loop (in another branch of the script) is outside that loop.
"""

from __future__ import annotations

import dis
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

# The calls a polling loop waits in, and the ones that ask whether the thread is still there.
WAIT_CALLS = frozenset({"sleep", "wait", "join"})
ASKS_ALIVE = frozenset({"is_alive"})
ASKS_ALL = frozenset({"active_count"})
_FRAMES = 6  # frames looked at from the innermost (Condition.wait, Event.wait, then the script's loop)
_ELEMENTS = 256  # elements of one variable (a list of threads) looked at
_THROUGH = 8  # threads polled whose own wait is looked at (polls_this_thread's ``through``)
_KEPT = 64  # code objects whose names are kept (see by_identity)
# Bytecode read at most in one code object (~25 ms, once, on a training step): beyond, not a poll.
READ_BYTES = 16384
JUMPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs) | frozenset(getattr(dis, "hasjump", ()))
_INLINE = 64  # expressions nested in one code object read (a module of thousands: read once, on a step)


def polls_this_thread(frame: Any, through: Callable[[threading.Thread], bool] | None = None) -> bool:
    """Whether the thread whose innermost frame is ``frame`` polls the calling thread until it ends, or,
    with ``through``, polls a thread ``through`` accepts (one that waits for the caller in turn: a
    supervisor that joins it, ``while supervisor.is_alive(): time.sleep(1)``)."""
    for _ in range(_FRAMES):
        if frame is None:
            return False
        if not frame.f_code.co_filename.endswith("/threading.py"):
            break
        frame = frame.f_back
    else:
        return False
    frame = _outside_its_expression(frame)
    if frame is None or names_of(frame.f_code).isdisjoint(ASKS_ALIVE | ASKS_ALL):
        return False  # (the cheap look first: a driver in any code of the job's)
    lines, loops = _read(frame.f_code)
    on_line = lines.get(frame.f_lineno, frozenset())
    sleeping = not on_line.isdisjoint(WAIT_CALLS)
    if not sleeping and on_line.isdisjoint(ASKS_ALIVE | ASKS_ALL):
        return False
    me, at = threading.current_thread(), frame.f_lasti
    variables, globals_ = frame.f_locals, frame.f_globals
    polled: list[threading.Thread] = []
    for start, end, asked, sleeps in loops:
        # Caught asking (inside is_alive(), between two sleeps: a look on a loaded machine lands there
        # now and then), the loop must sleep elsewhere; one that trains between its asks is no poll.
        if not start <= at <= end or not (sleeping or sleeps):
            continue
        if not asked.isdisjoint(ASKS_ALL) and not me.daemon:
            return True  # active_count() > 1 counts this thread until it ends
        for name in asked:
            value = variables[name] if name in variables else globals_.get(name)
            if holds(name, value, me):
                return True
            polled += [item for item in _held(name, value) if isinstance(item, threading.Thread)]
    return through is not None and any(through(thread) for thread in polled[:_THROUGH])


def _outside_its_expression(frame: Any) -> Any:
    """The caller of ``frame`` when ``frame`` runs an expression written on the caller's line (``while
    any(t.is_alive() for t in threads)``, caught inside the generator expression, asking), else ``frame``:
    that line is the loop's, and the expression's own code neither sleeps nor holds the threads."""
    caller = getattr(frame, "f_back", None)
    if caller is None or not frame.f_code.co_name.startswith("<"):
        return frame
    return caller if any(code is frame.f_code for code in _inline_code(caller.f_code)) else frame


def names_on_line(frame: Any) -> frozenset[str]:
    """The names the line ``frame`` is at loads (a call it is in: ``signal.pause()``)."""
    lines, _loops = _read(frame.f_code)
    return lines.get(frame.f_lineno, frozenset())


def holds(name: str, value: Any, me: object) -> bool:
    """Whether ``value`` is ``me``, holds it (a list, a dict's values), or has it as an attribute
    (``self``)."""
    return any(item is me for item in _held(name, value))


def _held(name: str, value: Any) -> list[Any]:
    """``value`` and what it holds: the first ``_ELEMENTS`` elements of a list, a dict's values, or the
    attributes of ``self``."""
    if isinstance(value, (list, tuple, set, frozenset)):
        items: Any = value
    elif isinstance(value, dict):
        items = value.values()
    elif name == "self":
        items = getattr(value, "__dict__", {}).values()
    else:
        return [value]
    return [value, *list(items)[:_ELEMENTS]]


def by_identity(read: Callable[[Any], T]) -> Callable[[Any], T]:
    """``read(code)`` kept for the last ``_KEPT`` code objects, found by identity: hashing a code object
    hashes all the code nested in it (a module's: its functions), at each look."""
    kept: dict[int, tuple[Any, T]] = {}

    def cached(code: Any) -> T:
        found = kept.get(id(code))
        if found is not None and found[0] is code:
            return found[1]
        value = read(code)
        if len(kept) >= _KEPT:
            kept.clear()
        kept[id(code)] = (code, value)
        return value

    return cached


@by_identity
def names_of(code: Any) -> frozenset[str]:
    """The names ``code`` and the expressions nested in it (``_inline_code``) use."""
    names = set(code.co_names)
    for const in _inline_code(code):
        names |= names_of(const)
    return frozenset(names)


@by_identity
def _read(code: Any) -> tuple[dict[int, frozenset[str]], list[tuple[int, int, frozenset[str], bool]]]:
    """The names each line of ``code`` and of the expressions nested in it (``_inline_code``) loads
    (variables, attributes, methods), and its loops that ask ``is_alive()`` or ``active_count()``: the
    bytecode a backward jump spans, with the names of its lines that ask (the thread asked about among
    them) and whether a line of it calls a wait (``WAIT_CALLS``). Nothing for code of more than
    ``READ_BYTES`` bytes."""
    if len(code.co_code) > READ_BYTES:
        return {}, []
    line_at: dict[int, int] = {}
    for start, end, line in code.co_lines():
        if line is not None:
            line_at.update(dict.fromkeys(range(start, end, 2), line))
    inline = {id(const): const for const in _inline_code(code)}
    loaded: list[tuple[int, int, frozenset[str]]] = []  # (offset, line, names) of each load
    jumps: list[tuple[int, int]] = []
    for instruction in dis.get_instructions(code):
        offset, value = instruction.offset, instruction.argval
        line = line_at.get(offset)
        if instruction.opcode in JUMPS and isinstance(value, int) and value <= offset:
            jumps.append((value, offset))
        if line is None or not instruction.opname.startswith("LOAD_"):
            continue
        if isinstance(value, str):
            loaded.append((offset, line, frozenset((value,))))
        elif id(value) in inline:
            loaded.append((offset, line, names_of(value)))
    lines: dict[int, set[str]] = {}
    for _, line, names in loaded:
        lines.setdefault(line, set()).update(names)
    loops = []
    for start, end in jumps:
        spanned: dict[int, set[str]] = {}
        for offset, line, names in loaded:
            if start <= offset <= end:
                spanned.setdefault(line, set()).update(names)
        asked = [names for names in spanned.values() if not names.isdisjoint(ASKS_ALIVE | ASKS_ALL)]
        if asked:
            sleeps = any(not names.isdisjoint(WAIT_CALLS) for names in spanned.values())
            loops.append((start, end, frozenset().union(*asked), sleeps))
    return {line: frozenset(names) for line, names in lines.items()}, loops


def _inline_code(code: Any) -> list[Any]:
    """The code of the expressions written inside ``code``'s lines (a generator expression, a
    comprehension, a lambda), not of the functions and classes it defines (a module's would be all of
    them: slower to read, and their names are not its lines'); the first ``_INLINE``."""
    inline = [
        const for const in code.co_consts if hasattr(const, "co_lines") and const.co_name.startswith("<")
    ]
    return inline[:_INLINE]
