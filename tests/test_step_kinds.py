"""--step-on on functions of every kind (in-process, with a controller that records what it is told):
an ``async def`` stays a coroutine function and its boundary comes when the awaited call returns, a
generator's at each item it yields; a class or an object called (an nn.Module) is refused with one line
and left as it is, since a function in its place would break ``isinstance``, subclassing, attributes."""

from __future__ import annotations

import asyncio
import inspect
import types
from typing import Any

import pytest

from npuprof.agent.steps import wrap_step_function
from npuprof.config import ProfileConfig
from npuprof.reports.run_summary import why_no_capture


class Recorder:
    """The controller's part that a wrapped step function calls; ``armed`` so that nothing is installed."""

    armed = True

    def __init__(self, events: list[str]) -> None:
        self.events = events

    def on_boundary(self) -> None:
        self.events.append("boundary")

    def inside_a_decision(self) -> bool:
        return "deciding" in self.events


class Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, message: str) -> None:
        pass

    def warning(self, message: str) -> None:
        self.lines.append(message)

    def warn_once(self, key: str, message: str) -> None:
        self.lines.append(f"[{key}] {message}")


def _module(**names: Any) -> types.ModuleType:
    module = types.ModuleType("job")
    for name, value in names.items():
        setattr(module, name, value)
    return module


def test_an_async_step_stays_a_coroutine_function_and_ends_after_its_body() -> None:
    events: list[str] = []

    async def train_step(x: int) -> int:
        events.append("body starts")
        await asyncio.sleep(0)
        events.append("body ends")
        return x * 2

    module = _module(train_step=train_step)
    assert wrap_step_function(module, "train_step", Recorder(events), Log())  # type: ignore[arg-type]
    assert inspect.iscoroutinefunction(module.train_step)

    async def loop() -> list[int]:
        # dispatch as asyncio frameworks do: await only what says it is a coroutine function
        fn = module.train_step
        return [await fn(i) if inspect.iscoroutinefunction(fn) else fn(i) for i in range(2)]

    assert asyncio.run(loop()) == [0, 2]
    assert events == ["body starts", "body ends", "boundary"] * 2


def test_a_generator_step_is_each_item_with_the_loops_body() -> None:
    """A loop ``for loss in train_steps(n): ...`` whose generator makes a step and yields: one step an
    item, ending as the loop comes back for the next (counted once a generator, at its end, the 20 steps
    of the loop were one), so that each holds the generator's work for the item and the body's; the
    generator's end adds none. Its return value reaches ``yield from`` as without npuprof."""
    events: list[str] = []

    def train_steps(n: int):
        for i in range(n):
            events.append(f"step {i}")
            yield i
        events.append("after the last")
        return "done"

    module = _module(train_steps=train_steps)
    assert wrap_step_function(module, "train_steps", Recorder(events), Log())  # type: ignore[arg-type]
    assert inspect.isgeneratorfunction(module.train_steps)
    for loss in module.train_steps(20):
        events.append(f"body {loss}")
    expected = [e for i in range(20) for e in (f"step {i}", f"body {i}", "boundary")] + ["after the last"]
    assert events == expected

    def whole():
        result = yield from module.train_steps(1)
        events.append(f"returned {result}")

    events.clear()
    list(whole())
    assert events == ["step 0", "boundary", "after the last", "returned done"]


def test_a_generators_send_throw_close_and_raise_reach_it_and_count_as_its_resumptions_do() -> None:
    """What the consumer sends or throws reaches the generator, each ending the item before as a ``next``
    does; a ``break`` ends the item it leaves, then closes the generator (its ``finally`` run); a
    resumption that raises ends a step too, as a call that raises; a generator that yields nothing is one
    step, at its end."""
    events: list[str] = []

    def train_steps():
        received = []
        try:
            while True:
                try:
                    got = yield len(received)
                    received.append(got)
                    events.append(f"got {got}")
                except ValueError as exc:
                    events.append(f"handled {exc}")
                    if str(exc) == "fatal":
                        raise RuntimeError("gave up") from exc
        finally:
            events.append("closed")

    def nothing():
        events.append("ran")
        return
        yield

    module = _module(train_steps=train_steps, nothing=nothing)
    for name in ("train_steps", "nothing"):
        assert wrap_step_function(module, name, Recorder(events), Log())  # type: ignore[arg-type]
    gen = module.train_steps()
    assert next(gen) == 0 and gen.send("a") == 1
    assert gen.throw(ValueError("skip")) == 1
    with pytest.raises(RuntimeError, match="gave up"):
        gen.throw(ValueError("fatal"))
    assert events == [
        "boundary",
        "got a",
        "boundary",
        "handled skip",
        "boundary",
        "handled fatal",
        "closed",
        "boundary",
    ]
    events.clear()
    for count in module.train_steps():
        if count == 0:
            break
    assert events == ["boundary", "closed"]
    events.clear()
    assert list(module.nothing()) == []
    assert events == ["ran", "boundary"]
    # closed by the collector inside one of npuprof's decisions: no boundary nested in it
    gen = module.train_steps()
    next(gen)
    events[:] = ["deciding"]
    gen.close()
    assert events == ["deciding", "closed"]


def test_a_plain_function_keeps_its_result_and_its_name() -> None:
    events: list[str] = []

    def train_step(x: int) -> int:
        events.append("body")
        return x + 1

    module = _module(train_step=train_step)
    assert wrap_step_function(module, "train_step", Recorder(events), Log())  # type: ignore[arg-type]
    assert module.train_step(1) == 2 and module.train_step.__name__ == "train_step"
    assert events == ["body", "boundary"]


class Net:
    def forward(self) -> int:
        return 1


class Callable_:
    def __call__(self) -> int:
        return 1


async def _batches():  # an async generator function
    yield 1


CLASS = "names a class, not a function: name the method that makes one step (e.g. Class.train_step)"
OBJECT = "names a Callable_ object, not a function: name the function or method that makes one step"
ASYNC_GENERATOR = "names an async generator function, which npuprof cannot count steps on"


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [("Net", Net, CLASS), ("model", Callable_(), OBJECT), ("batches", _batches, ASYNC_GENERATOR)],
)
def test_a_class_an_object_or_an_async_generator_is_refused_and_left_as_it_is(
    name: str, value: Any, said: str
) -> None:
    events: list[str] = []
    log = Log()
    module = _module(**{name: value})
    assert wrap_step_function(module, name, Recorder(events), log)  # type: ignore[arg-type]
    assert getattr(module, name) is value
    assert log.lines == [f"[step-on-kind] --step-on job:{name}: {said}; no steps counted"]
    assert events == []
    # the launcher's end-of-run reason repeats the refusal (not "the job ended before the first capture")
    logged = log.lines[0].removeprefix("[step-on-kind] ")
    agent = "2026-12-02 07:00:00 [{}] [agent pid=7] {}"
    lines = [agent.format("INFO", "agent ready in /w/job.py (rank None)"), agent.format("WARNING", logged)]
    assert why_no_capture(ProfileConfig(step_on=f"job:{name}"), 0, lines) == logged


def test_the_range_decorator_keeps_an_async_function_awaitable() -> None:
    import npuprof

    @npuprof.range("fetch")
    async def fetch(x: int) -> int:
        await asyncio.sleep(0)
        return x + 1

    assert inspect.iscoroutinefunction(fetch) and fetch.__name__ == "fetch"
    assert asyncio.run(fetch(1)) == 2


def _globals_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    """npuprof.agent.steps as the interpreter's teardown leaves it: every global set to None (Python clears
    a module's dict so), while the objects it made are still being freed."""
    from npuprof.agent import steps

    for name in [n for n in vars(steps) if not n.startswith("__")]:
        monkeypatch.setattr(steps, name, None)


def test_a_step_function_freed_at_the_interpreters_teardown_prints_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """helper-267: `--step-on __main__:handle` with a script ending in gc.freeze() (as inference servers
    do) printed "Exception ignored in: <function _Rebound.__del__ ...> AttributeError: 'NoneType' object
    has no attribute 'suppress'" at exit: the wrapper was freed after npuprof's module had been cleared;
    a --step-on generator or coroutine left open so printed "Exception ignored in: <generator object ...>"
    ("<coroutine object ...>")."""
    events: list[str] = []

    def handle(x: int) -> int:
        return x

    def batches():
        while True:
            yield len(events)

    class Pending:
        def __await__(self):
            yield

    async def serve() -> None:
        await Pending()

    module = _module(handle=handle, batches=batches, serve=serve)
    for name in ("handle", "batches", "serve"):
        assert wrap_step_function(module, name, Recorder(events), Log())  # type: ignore[arg-type]
    rebound = module.handle.__npuprof_rebound__
    left_open = module.batches()
    next(left_open)
    awaiting = module.serve()
    awaiting.send(None)
    _globals_gone(monkeypatch)
    rebound.__del__()  # nothing escapes it (what escapes a __del__ Python prints as "Exception ignored")
    left_open.close()  # nor the generator's close by the collector
    awaiting.close()  # nor the coroutine's
    assert events == ["boundary", "boundary"]  # each ended as a break (a cancel) ends it
