"""User marks and ranges: ``npuprof.mark``, ``range_start`` / ``range_end`` and ``npuprof.range``.

They land where the profiler of the process records them (README, "Marks, communication ranges and GC"):

- NPU (torch_npu imported and an NPU present): torch_npu's ``torch_npu.npu.mstx`` (``mark``,
  ``range_start``, ``range_end``; the stream when one is given). torch_npu records them when its profiler
  runs with ``msprof_tx`` (``--msprof-tx``).
- CUDA: an NVTX mark or range (``torch.cuda.nvtx``, for Nsight) once CUDA is initialised, plus a
  ``record_function`` span while a torch profiler runs.
- CPU: a ``record_function`` span while a torch profiler runs (npuprof's capture, or the script's own).

Outside a capture a call costs a few hundred nanoseconds (bench/marks.py) and nothing here ever raises:
a script using them runs unchanged under plain ``python``. Importing this module imports nothing heavy;
torch is looked up in ``sys.modules`` at the first call (no profiler can run before torch is imported).
"""

from __future__ import annotations

import builtins
import functools
import inspect
import itertools
import sys
from _thread import get_ident
from collections.abc import Callable
from sys import _getframe
from time import time_ns
from typing import Any

__all__ = ["mark", "range", "range_end", "range_start"]

# Names of the marks and ranges recorded while a torch profiler ran (name -> "mark" or "range"), handed to
# npuprof's capture at its end (npuprof_marks.json, docs/formats.md); bounded, the rest is counted.
NAMES_LIMIT = 10_000
_names: dict[str, str] = {}
# The names a trace could not hold as they are (``_traced``): the name in the trace -> the name called
_shown: dict[str, str] = {}
# Who each name in the trace is (the name called, "mark" or "range"): a mark and a range of one name, or two
# names traced alike (``ü`` and ``%C3%BC``), get a name of their own each (``_listed``)
_owners: dict[str, tuple[str, str]] = {}
_names_over = 0
# (name in the trace, epoch ns) of the ranges of the capture in flight ended by a thread torch's profiler does
# not record, whose span torch ends with the capture (``_ended_elsewhere``); bounded as the names
_ends: list[tuple[str, int]] = []
_capturing = False  # an npuprof capture records in this process (set by npuprof's agent)
_capture_serial = 0  # counts the captures begun: a range open at a capture's end was opened in it or before
_impl: Any = None  # the implementation, chosen at the first call once torch is imported
# The fast path: an object whose ``_is_profiler_enabled`` is False while nothing would be recorded
# (torch.autograd.profiler on a CPU build of torch); None where every call must go to the implementation.
_gate: Any = None


def mark(message: str, stream: Any = None) -> None:
    """An instant mark named ``message`` (on NPU on ``stream`` too, when given)."""
    gate = _gate
    if gate is not None and not gate._is_profiler_enabled:
        return
    impl = _impl or _resolve()
    if impl is not None:
        impl.mark(message, stream)


def range_start(message: str, stream: Any = None) -> int:
    """Open a range named ``message``; returns its id for ``range_end`` (0 when nothing was recorded)."""
    gate = _gate
    if gate is not None and not gate._is_profiler_enabled:
        return 0
    impl = _impl or _resolve()
    if impl is None:
        return 0
    return impl.range_start(message, stream)


def range_end(range_id: int) -> None:
    """Close the range ``range_start`` opened (an id of 0 or an unknown id is ignored)."""
    if range_id:
        impl = _impl
        if impl is not None:
            impl.range_end(range_id)


_new = object.__new__


class range:  # the public name: npuprof.range, a context manager and a decorator
    """``with npuprof.range("name"):`` or ``@npuprof.range("name")``: a range around the block or call.
    With no name (``@npuprof.range``, ``@npuprof.range()``, ``with npuprof.range():``) the range is named by
    the qualified name of the function it ranges, or of the one whose ``with`` enters it."""

    __slots__ = ("_open", "name", "stream")

    def __new__(cls, name: Any = None, stream: Any = None) -> Any:
        if name.__class__ is str or not (callable(name) or isinstance(name, (staticmethod, classmethod))):
            return _new(cls)
        # ``@npuprof.range`` with no name: the function, ranged under its qualified name. It made a range
        # named "<function f at 0x...>" whose call by the script (``f(batch)``) wrapped its first argument
        # and returned that wrapper: f's body never ran, without a word (helper-183); so it did of a class,
        # a staticmethod or classmethod, a functools.partial, any other callable (helper-186)
        return cls(_qualname(name), stream)(name)

    def __init__(self, name: Any = None, stream: Any = None) -> None:
        # None: named by what it ranges (``__call__``) or by the code of its ``with`` (``__enter__``).
        # ``@npuprof.range()`` raised TypeError (no name given), a call that "never raises" (helper-205)
        self.name = name
        self.stream = stream
        # the ranges this object opened and has not ended, innermost last, per thread or asyncio task that
        # entered it: one object shared by threads or tasks (a module's ``LOAD = npuprof.range("load")``)
        # ended each one's range with the other's end (helper-173); each with the frame whose ``with``
        # entered it (its id), for a block left by another thread or task (helper-176). A block that
        # recorded nothing keeps none: a capture's end has ended the spans of those it left open, so one
        # outside captures that ends such a range early ends nothing more.
        self._open: dict[int, list[tuple[int, int]]] = {}

    def __enter__(self) -> range:
        gate = _gate
        if gate is not None and not gate._is_profiler_enabled:
            return self  # nothing recorded, nothing to end (outside captures: the cost of a call, bench/)
        name = self.name
        if name is None:
            try:
                code = _getframe(1).f_code
                name = getattr(code, "co_qualname", code.co_name)
            except ValueError:  # entered from C with no Python frame above
                name = "range"
        range_id = range_start(name, self.stream)
        if range_id <= 0:
            return self
        owner = _owner()
        try:
            entry = (range_id, id(_getframe(1)))
        except ValueError:  # called from C with no Python frame above (a callback): found by owner alone
            entry = (range_id, 0)
        opened = self._open.get(owner)
        if opened is None:
            self._open[owner] = [entry]
        else:
            opened.append(entry)
        return self

    def __exit__(self, exc_type: object, exc: object, traceback: object) -> None:
        if not self._open:  # none open: this block recorded nothing
            return
        try:
            frame = id(_getframe(1))
        except ValueError:  # called from C with no Python frame above: found by owner alone
            frame = 0
        range_id = self._take(_owner(), frame)
        if range_id > 0:
            range_end(range_id)

    def _take(self, owner: int, frame: int) -> int:
        """The range of the block that ``frame`` leaves, taken off its list (-1: none is open). Most often
        the one its thread or task entered last. Else the one whose ``with`` is in ``frame``, whoever
        entered it: a generator or coroutine suspended inside the block and resumed elsewhere (a generator
        a thread pool shares, an async generator that asyncio's finaliser closes in a task of its own) left
        its range open for good, and the thread resuming it inside a block of its own ended that one
        instead (helper-176). Else, entered and left from two frames (``contextlib.ExitStack``), the owner's
        last."""
        opened = self._open.get(owner)
        if opened and opened[-1][1] == frame:
            found: tuple[int, list[tuple[int, int]]] | None = (len(opened) - 1, opened)
        else:
            found = self._entered_in(frame)
            if found is None and opened:
                found = (len(opened) - 1, opened)
        if found is None:
            return -1
        at, entries = found
        range_id = entries.pop(at)[0]
        if not entries:
            for key, value in list(self._open.items()):
                if value is entries and not value:
                    self._open.pop(key, None)
        return range_id

    def _entered_in(self, frame: int) -> tuple[int, list[tuple[int, int]]] | None:
        """Where the innermost range opened by a ``with`` in ``frame`` is kept (index, list), if any."""
        for opened in list(self._open.values()):
            for k in builtins.range(len(opened) - 1, -1, -1):
                if opened[k][1] == frame:
                    return k, opened
        return None

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        name, stream = self.name, self.stream
        if name is None:  # ``@npuprof.range()``: as ``@npuprof.range``
            name = _qualname(func)
        if isinstance(func, (staticmethod, classmethod)):  # above it in a class body: the function ranged
            return type(func)(self(func.__func__))  # in it (a function alone took the instance as argument)
        if inspect.isgeneratorfunction(func):
            return _ranged_generator(func, name, stream)
        if inspect.isasyncgenfunction(func):
            return _ranged_async_generator(func, name, stream)
        if inspect.iscoroutinefunction(func):  # the range covers the awaited call, and it stays awaitable

            @functools.wraps(func)
            async def ranged_async(*args: Any, **kwargs: Any) -> Any:
                range_id = range_start(name, stream)
                try:
                    return await func(*args, **kwargs)
                finally:
                    range_end(range_id)

            return ranged_async

        @functools.wraps(func)
        def ranged(*args: Any, **kwargs: Any) -> Any:
            range_id = range_start(name, stream)
            try:
                return func(*args, **kwargs)
            finally:
                range_end(range_id)

        return ranged


def _qualname(target: Any) -> str:
    """The name of a range ``@npuprof.range`` with no name makes: the qualified name of what it ranges (of
    the function a staticmethod, classmethod or functools.partial holds; of an object's class)."""
    while isinstance(target, (staticmethod, classmethod, functools.partial)):
        target = target.func if isinstance(target, functools.partial) else target.__func__
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None)
    return name if isinstance(name, str) else type(target).__qualname__


def _ranged_generator(func: Callable[..., Any], name: str, stream: Any) -> Callable[..., Any]:
    """``@npuprof.range`` on a generator function: a range around each step of the generator (its first
    ``next``, each ``send`` or ``throw``, its ``close``), each from its resumption to its next ``yield``, so
    that the ranges hold the time its body runs, not the caller's between two steps, and one abandoned
    midway leaves none open. Wrapping the call alone covered only the generator's creation (~1 µs, whatever
    the body took). It stays a generator function (README, "Marks, communication ranges and GC")."""
    start, end = range_start, range_end  # (kept: a generator closed as the interpreter exits still has them)

    @functools.wraps(func)
    def ranged_generator(*args: Any, **kwargs: Any) -> Any:
        gen = func(*args, **kwargs)  # (no line of its body runs until its first step)
        step: Any = gen.send
        arg: Any = None
        while True:
            range_id = start(name, stream)
            try:
                value = step(arg)
            except StopIteration as stop:
                return stop.value
            finally:
                end(range_id)
            try:
                arg = yield value
                step = gen.send
            except GeneratorExit:
                range_id = start(name, stream)
                try:
                    gen.close()
                finally:
                    end(range_id)
                raise
            except BaseException as exc:  # thrown in by the caller: into the generator, in a range
                step, arg = gen.throw, exc

    return ranged_generator


def _ranged_async_generator(func: Callable[..., Any], name: str, stream: Any) -> Callable[..., Any]:
    """``@npuprof.range`` on an async generator function: as on a generator (``_ranged_generator``), a range
    around each step, from its resumption to its next ``yield``, the awaits inside it included (as for a
    coroutine function); it stays an async generator function."""
    start, end = range_start, range_end

    @functools.wraps(func)
    async def ranged_async_generator(*args: Any, **kwargs: Any) -> Any:
        agen = func(*args, **kwargs)
        step: Any = agen.asend
        arg: Any = None
        while True:
            range_id = start(name, stream)
            try:
                value = await step(arg)
            except StopAsyncIteration:
                return
            finally:
                end(range_id)
            try:
                arg = yield value
                step = agen.asend
            except GeneratorExit:
                range_id = start(name, stream)
                try:
                    await agen.aclose()
                finally:
                    end(range_id)
                raise
            except BaseException as exc:
                step, arg = agen.athrow, exc

    return ranged_async_generator


def _owner() -> int:
    """Who enters a range object now: the asyncio task running on this thread, else the thread."""
    asyncio = sys.modules.get("asyncio")
    if asyncio is not None and asyncio._get_running_loop() is not None:
        task = asyncio.current_task()
        if task is not None:
            return id(task)
    return get_ident()


# ---- npuprof's agent ---------------------------------------------------------------------------------
def use_backend(name: str) -> None:
    """The agent's backend decides where marks go from now on ("torch_npu", "torch-cuda", "torch-cpu")."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    try:
        if name == "torch_npu":
            if not isinstance(_impl, _NpuMarks):
                import torch_npu

                _use(_NpuMarks(torch_npu.npu.mstx))
        elif not isinstance(_impl, _TorchMarks) or _impl.nvtx != (name == "torch-cuda"):
            _use(_TorchMarks(torch, nvtx=name == "torch-cuda"))  # (ranges open in the one replaced stay so)
    except Exception:
        _use(_impl or _Off())


def _use(impl: Any) -> Any:
    global _impl, _gate
    _impl = impl
    _gate = getattr(impl, "gate", None)
    return impl


def unlisted_range_start(name: str) -> int:
    """A range npuprof opens itself (``comm:...``): recorded as the user's are, not listed with them."""
    impl = _impl or _resolve()
    return impl.range_start(name, None, "") if impl is not None else 0


def capture_began() -> None:
    global _capturing, _names_over, _capture_serial
    _names.clear()
    _shown.clear()
    _owners.clear()
    _names_over = 0
    _ends.clear()
    _capture_serial += 1
    _capturing = True


def capture_ended() -> dict[str, Any]:
    """The names recorded since ``capture_began`` (npuprof_marks.json's content), and the capture is over."""
    global _capturing
    _capturing = False
    names = dict(_names)
    _names.clear()
    _owners.clear()
    ended: dict[str, Any] = {"names": names, "names_not_listed": _names_over}
    if _shown:
        ended["shown"] = {name: _shown[name] for name in names if name in _shown}
        _shown.clear()
    open_names = getattr(_impl, "open_names", None)
    if open_names is not None and (still_open := open_names(_capture_serial)):
        ended["open_at_end"] = still_open  # torch ends their spans with the capture (docs/formats.md)
    if _ends:  # ended by a thread torch does not record: the parser ends their spans there
        ended["ended_elsewhere"] = [{"name": name, "end_ns": at} for name, at in _ends]
        _ends.clear()
    end_spans = getattr(_impl, "end_spans", None)
    if end_spans is not None:
        end_spans()
    return ended


def recording() -> bool:
    """Whether a range opened now lands in a capture (the communication ranges ask before naming one)."""
    gate = _gate
    if gate is not None and not gate._is_profiler_enabled:
        return False
    impl = _impl or _resolve()
    return impl is not None and impl.recording()


def _after_fork_in_child() -> None:
    global _capturing
    _capturing = False  # the parent's capture is not the child's
    _names.clear()
    _ends.clear()
    _shown.clear()
    _owners.clear()


def _listed(called: str, kind: str) -> str:
    """The name in the trace of a mark or range ``called`` of ``kind`` (``_traced``), listed in the capture's
    names. npuprof_marks.json tells a mark from a range by the name alone, so a name the trace already holds
    for another mark or range (``npuprof.mark("x")`` and ``npuprof.range("x")``; ``ü`` and a literal
    ``%C3%BC``) gets `` #2`` (``#3``...) after it: under one name the ranges were all taken for marks (left
    out of analyse, of no length in trace_view.json) or the marks for ranges (counted among them), as the
    first call's kind said (docs/formats.md, "npuprof_marks.json")."""
    global _names_over
    traced = _traced(called)
    key = (called, kind)
    name, n = traced, 1
    while True:
        owner = _owners.get(name)
        if owner is None:
            if len(_owners) >= NAMES_LIMIT:
                _names_over += 1
                return name
            owner = _owners.setdefault(name, key)  # (atomic: two threads claiming one name get one owner)
            if owner == key:
                _names[name] = kind
                if name == called:
                    pass
                elif called.isprintable() and not _has_surrogates(called):
                    _shown[name] = called
                elif name != traced:  # (a name no file can hold, or that prints oddly, is shown as traced)
                    _shown[name] = traced
                return name
        if owner == key:
            return name
        n += 1
        name = f"{traced} #{n}"


def _has_surrogates(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _traced(name: str) -> str:
    """``name`` as the torch profiler's Chrome trace can hold it: torch 2.13 writes a ``record_function``
    name unescaped, so a ``"`` made the whole trace invalid JSON (the capture unreadable); a name with any
    character outside printable ASCII (``ü``, CJK, a tab) became ``unknown``, and a ``\\`` a ``/``, so
    that the analysis never found it. Those characters go in as ``%XX`` (their UTF-8 bytes); the capture
    names the original in ``npuprof_marks.json`` (``shown``, docs/formats.md)."""
    if name.isascii() and name.isprintable() and '"' not in name and "\\" not in name:
        return name
    return "".join(
        c
        if " " <= c <= "~" and c not in '"\\'
        else "".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass"))
        for c in name
    )


# ---- implementations ---------------------------------------------------------------------------------
def _resolve() -> Any:
    """Pick the implementation once torch is imported; None before (nothing can record yet)."""
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "autograd"):  # absent, or still importing
        return None
    try:
        impl: Any = None
        torch_npu = sys.modules.get("torch_npu")
        if torch_npu is not None and torch_npu.npu.is_available():
            impl = _NpuMarks(torch_npu.npu.mstx)
        if impl is None:
            impl = _TorchMarks(torch, nvtx=bool(getattr(torch.version, "cuda", None)))
    except Exception:
        impl = _Off()
    return _use(impl)


class _Off:
    """Nothing can be recorded (an implementation failed to set up): every call is a no-op."""

    def mark(self, message: str, stream: Any) -> None:
        return None

    def range_start(self, message: str, stream: Any, kind: str = "range") -> int:
        return 0

    def range_end(self, range_id: int) -> None:
        return None

    def recording(self) -> bool:
        return False

    def marks_group(self, group: Any) -> bool:
        return False


class _TorchMarks:
    """torch.profiler: a ``record_function`` span while a profiler runs; on CUDA an NVTX mark or range."""

    def __init__(self, torch: Any, nvtx: bool) -> None:
        state = torch.autograd.profiler
        if not hasattr(state, "_is_profiler_enabled"):  # torch >= 2.1 keeps a Python flag for fast checks
            state = _AskTorch(torch._C._autograd._profiler_enabled)
        self._state = state
        # NVTX goes to Nsight whether or not a torch profiler runs: no fast path on CUDA builds
        self.gate = None if nvtx else state
        # torch's own record_function (its span, and what else it does on this release: CUPTI's monitor)
        self._span = torch.autograd.profiler.record_function
        # whether torch's profiler records this thread: its flag above is the process's, but torch records
        # the thread that started it (and those it hands its state to), not threads already running nor
        # those started since (helper-207: their marks were listed in npuprof_marks.json as recorded, and a
        # range of theirs said "still open when the capture ended", none of them in the trace)
        autograd = getattr(getattr(torch, "_C", None), "_autograd", None)
        self._here = getattr(autograd, "_profiler_enabled", None)
        self.nvtx = nvtx
        self._cuda = torch.cuda if nvtx else None
        self._nvtx: Any = None  # torch.cuda.nvtx once CUDA is initialised
        # (span, nvtx id, name, capture); the span in a list that whoever ends it pops first (list.pop is
        # atomic): a range_end in another thread and a capture's end_spans never both exit it
        self._open: dict[int, tuple[list[Any], int | None, str, int]] = {}
        self._ids = itertools.count(1)

    def recording(self) -> bool:
        return bool(self._state._is_profiler_enabled)

    def _nvtx_now(self) -> Any:
        if self._nvtx is None and self._cuda is not None:
            try:
                if self._cuda.is_initialized():
                    self._nvtx = self._cuda.nvtx
            except Exception:
                self._cuda = None
        return self._nvtx

    def _nvtx_call(self, name: str, *args: Any) -> Any:
        """``torch.cuda.nvtx.<name>(*args)``, or None where NVTX is not there (it is then left alone)."""
        nvtx = self._nvtx if self._cuda is None else self._nvtx_now()
        if nvtx is None:
            return None
        try:
            return getattr(nvtx, name)(*args)
        except Exception:
            self._cuda = self._nvtx = None
            return None

    def mark(self, message: str, stream: Any) -> None:
        try:
            name = str(message)
            if self._cuda is not None:
                self._nvtx_call("mark", name)
            if not self._state._is_profiler_enabled or not self._records_here():
                return
            span = self._span(_listed(name, "mark"))
            span.__enter__()
            span.__exit__(None, None, None)
        except Exception:
            return

    def range_start(self, message: str, stream: Any, kind: str = "range") -> int:
        try:
            name = str(message)
            nvtx_id = self._nvtx_call("range_start", name) if self._cuda is not None else None
            span = None
            if self._state._is_profiler_enabled and self._records_here():
                span = self._span(_listed(name, kind) if kind else _traced(name))
                span.__enter__()
            if span is None and nvtx_id is None:
                return 0
            range_id = next(self._ids)
            self._open[range_id] = ([] if span is None else [span], nvtx_id, name, _capture_serial)
            return range_id
        except Exception:
            return 0

    def _records_here(self) -> bool:
        """Whether the profiler running records this thread (asked only while one runs: ~40 ns)."""
        here = self._here
        if here is None:
            return True
        try:
            return bool(here())
        except Exception:
            return True

    def range_end(self, range_id: int) -> None:
        try:
            opened = self._open.pop(range_id, None)
        except TypeError:  # an id that is no id (unhashable: a list) is ignored, as an unknown one
            return
        if opened is None:
            return
        box, nvtx_id, _name, serial = opened
        if (
            box
            and _capturing
            and serial == _capture_serial
            and self._state._is_profiler_enabled
            and not self._records_here()
        ):
            _ended_elsewhere(box)
        _end(box)
        if nvtx_id is not None:
            self._nvtx_call("range_end", nvtx_id)

    def marks_group(self, group: Any) -> bool:
        return True

    def end_spans(self) -> None:
        """End the spans of the ranges still open, now that the profiler that recorded them has stopped
        (a capture's end). Ended later, in the next capture, torch's end callback wrote the end time into
        the event of the stopped profiler, whose memory is freed: a range open across two captures (an
        epoch's, a decorated function's) corrupted the heap, 200 of them crashed the job with SIGSEGV
        (helper-173). Ended now, with no profiler running, the callback does nothing: torch has already
        ended their events at the capture's end (README, "Marks, communication ranges and GC");
        ``range_end`` still ends their NVTX ranges."""
        if self._state._is_profiler_enabled:  # not this capture's end: the spans belong to the one running
            return
        for range_id, (box, nvtx_id, _name, _serial) in list(self._open.items()):
            if nvtx_id is None:
                self._open.pop(range_id, None)
            _end(box)

    def open_names(self, serial: int) -> list[str]:
        """The names of the ranges opened in capture ``serial`` whose end has not come."""
        return sorted({name for box, _n, name, at in list(self._open.values()) if box and at == serial})


def _ended_elsewhere(box: list[Any]) -> None:
    """A range of the capture in flight ended by a thread torch's profiler does not record (a thread that
    a range opened by the training thread is handed to, a generator resumed in a thread pool): torch does
    not see that end and ends the span with the capture. Its time is noted, for the parser to end the span
    there (docs/formats.md, "npuprof_marks.json"; helper-207: a range of 20 ms was 175 ms in analyse)."""
    if len(_ends) >= NAMES_LIMIT:
        return
    try:
        name = box[0].name
    except (IndexError, AttributeError):
        return
    if isinstance(name, str):
        _ends.append((name, time_ns()))


def _end(box: list[Any]) -> None:
    """Exit the span in ``box`` unless another caller has taken it (see ``_TorchMarks._open``)."""
    try:
        span = box.pop()
    except IndexError:
        return
    try:
        span.__exit__(None, None, None)
    except Exception:
        pass


class _AskTorch:
    """torch.autograd.profiler's flag on a torch that has none (before 2.1): asked of libtorch."""

    def __init__(self, enabled: Any) -> None:
        self._enabled = enabled

    @property
    def _is_profiler_enabled(self) -> bool:
        return bool(self._enabled())


class _NpuMarks:
    """torch_npu's mstx: it records while its profiler runs with ``msprof_tx`` (its own check)."""

    def __init__(self, mstx: Any) -> None:
        self._mstx = mstx
        self._hccl: dict[int, bool] = {}

    def mark(self, message: str, stream: Any) -> None:
        try:
            if stream is None:
                self._mstx.mark(str(message))
            else:
                self._mstx.mark(str(message), stream)
        except Exception:
            return

    def range_start(self, message: str, stream: Any, kind: str = "range") -> int:
        try:
            if stream is None:
                range_id = self._mstx.range_start(str(message))
            else:
                range_id = self._mstx.range_start(str(message), stream)
        except Exception:
            return 0
        return range_id if isinstance(range_id, int) and range_id > 0 else 0

    def range_end(self, range_id: int) -> None:
        try:
            self._mstx.range_end(range_id)
        except Exception:
            return

    def recording(self) -> bool:
        return _capturing

    def marks_group(self, group: Any) -> bool:
        """torch_npu's HCCL process groups mark their own collectives (``comm:`` in the communication
        domain) when mstx is on: npuprof marks only the others (gloo on the host)."""
        key = id(group)
        known = self._hccl.get(key)
        if known is None:
            try:
                import torch.distributed as dist

                known = str(dist.get_backend(group)).lower() == "hccl"
            except Exception:
                known = False
            self._hccl[key] = known
        return not known


try:
    import os as _os

    _os.register_at_fork(after_in_child=_after_fork_in_child)
except (AttributeError, ImportError):  # not POSIX
    pass
