"""When os._exit finalises a capture, and when it must not (npuprof/agent/entry.py), and when a spawned
child is still starting (npuprof/agent/window_plan.py): the decisions, on frames made to look like the
code they stand for (a signal handler interrupting it), without exiting the test process."""

from __future__ import annotations

import os
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from npuprof.agent import entry, window_plan
from npuprof.agent.entry import Agent


def _in_file(filename: str, name: str, body: str, **names: Any) -> Any:
    """A function ``name`` whose code says it is in ``filename``, running ``body`` with ``names``."""
    namespace = dict(names)
    exec(compile(f"def {name}():\n    {body}\n", filename, "exec"), namespace)
    return namespace[name]


class _Controller:
    def __init__(self) -> None:
        self.deciding = False

    def inside_a_decision(self) -> bool:
        return self.deciding


@pytest.fixture
def wrapped(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    exits: list[int] = []
    finalised: list[str] = []
    monkeypatch.setattr(os, "_exit", exits.append)  # the "real" os._exit: records, returns
    execs: list[tuple[Any, ...]] = []
    monkeypatch.setattr(os, "execv", lambda *args: execs.append(("execv", *args)))
    monkeypatch.setattr(os, "execve", lambda *args: execs.append(("execve", *args)))
    agent = SimpleNamespace(controller=_Controller(), _at_exit=lambda *_: finalised.append("finalised"))
    Agent._finalise_at_os_exit(agent)  # type: ignore[arg-type]
    assert getattr(os._exit, "npuprof_finalises", False)
    return SimpleNamespace(agent=agent, exits=exits, finalised=finalised, execs=execs)


def test_an_exec_finalises_then_execs_as_asked(wrapped: SimpleNamespace) -> None:
    """os.execv / os.execve (every os.exec* goes through them) replace the process image with no atexit:
    the capture in flight is finalised first, then the exec is made with the arguments given."""
    os.execl("/bin/true", "true", "x")  # through os.execv
    assert wrapped.finalised == ["finalised"] and wrapped.execs == [("execv", "/bin/true", ("true", "x"))]
    os.execve("/bin/true", ["true"], {"A": "1"})
    assert wrapped.execs[-1] == ("execve", "/bin/true", ["true"], {"A": "1"})
    assert os.execv.__name__ == "execv" and wrapped.exits == []


def test_an_exec_that_will_fail_keeps_the_capture(
    wrapped: SimpleNamespace, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exec of a missing or non-executable file raises (the script may catch it and train on): the
    capture in flight is not finalised for it, and the next exec that will run still finalises."""
    plain = tmp_path / "not_executable"
    plain.write_text("")
    bad_interpreter = _executable(tmp_path / "bad_shebang.sh", b"#!/nonexistent/python3\nprint(1)\n")
    no_shebang = _executable(tmp_path / "no_shebang.sh", b"echo hi\n")  # ENOEXEC
    os.execv(str(tmp_path / "missing"), ["missing"])
    os.execve(str(plain), ["x"], {})
    os.execv(str(bad_interpreter), ["bad"])
    os.execv(str(no_shebang), ["x"])
    os.execv("/bin/true", [])  # ValueError: an empty argv
    os.execv("/bin/true", [""])
    assert wrapped.finalised == [] and len(wrapped.execs) == 6
    # a CRLF #! line names "/bin/sh\r"; "#!sh" is looked up in the working directory; a BOM before
    # "#!", escape bytes or junk are no format the kernel runs (without binfmt_misc handlers)
    monkeypatch.setattr(entry, "_binfmt_handlers", lambda: False)
    for name, text in [
        ("crlf.sh", b"#!/bin/sh\r\necho hi\r\n"),
        ("relative.sh", b"#!no_such_interpreter_here\n"),
        ("bom.sh", b"\xef\xbb\xbf#!/bin/sh\necho hi\n"),
        ("junk", bytes(range(256))),
    ]:
        os.execv(str(_executable(tmp_path / name, text)), [name])
    assert wrapped.finalised == [] and len(wrapped.execs) == 10
    good = _executable(tmp_path / "good.sh", b"#!/bin/sh\nexit 0\n")
    os.execv(str(good), ["good"])
    assert wrapped.finalised == ["finalised"]


def test_a_file_of_another_format_may_run_where_binfmt_misc_has_handlers(
    wrapped: SimpleNamespace, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(entry, "_binfmt_handlers", lambda: True)  # qemu, wine...: it may run
    os.execv(str(_executable(tmp_path / "junk", bytes(range(256)))), ["junk"])
    assert wrapped.finalised == ["finalised"]


def _executable(path: Any, text: bytes) -> Any:
    path.write_bytes(text)
    path.chmod(0o755)
    return path


def test_an_exec_that_fails_after_all_lets_a_later_one_finalise(monkeypatch: pytest.MonkeyPatch) -> None:
    """An exec that passed every check and still failed (the script caught it and trained on): the next
    exec finalises the capture recording then, as the first would have."""
    finalised: list[str] = []

    def refused(*args: Any) -> None:
        raise OSError(8, "Exec format error")

    monkeypatch.setattr(os, "_exit", lambda code: None)
    monkeypatch.setattr(os, "execv", refused)
    monkeypatch.setattr(os, "execve", refused)
    Agent._finalise_at_os_exit(
        SimpleNamespace(controller=_Controller(), _at_exit=lambda *_: finalised.append("x"))
    )  # type: ignore[arg-type]
    for _ in range(2):
        with pytest.raises(OSError, match="Exec format error"):
            os.execv("/bin/true", ["true"])
    assert finalised == ["x", "x"]


def test_the_main_thread_finalises_once_then_exits(wrapped: SimpleNamespace) -> None:
    os._exit(3)
    assert wrapped.finalised == ["finalised"] and wrapped.exits == [3]
    os._exit(4)  # a second call (a handler during the first's finalise, say) exits at once
    assert wrapped.finalised == ["finalised"] and wrapped.exits == [3, 4]


def test_a_call_during_the_finalise_exits_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A signal handler calling os._exit while the first call finalises (the export running) exits at
    once: finalising again there, inside torch's export, crashed the process."""
    exits: list[int] = []
    finalised: list[str] = []
    monkeypatch.setattr(os, "_exit", exits.append)
    for name in ("execv", "execve"):  # restored after the test: the wrapper is not left behind
        monkeypatch.setattr(os, name, getattr(os, name))

    def finalise(*_: str) -> None:
        finalised.append("outer")
        os._exit(7)  # the handler's call, during the export
        finalised.append("outer goes on")

    Agent._finalise_at_os_exit(SimpleNamespace(controller=_Controller(), _at_exit=finalise))  # type: ignore[arg-type]
    os._exit(3)
    assert finalised == ["outer", "outer goes on"] and exits == [7, 3]


def test_inside_a_decision_or_torchs_profiler_it_exits_without_finalising(wrapped: SimpleNamespace) -> None:
    wrapped.agent.controller.deciding = True
    os._exit(5)
    wrapped.agent.controller.deciding = False
    for where in (
        "/x/torch/profiler/profiler.py",
        "/x/npuprof/agent/capture.py",
        "<frozen importlib._bootstrap>",
    ):
        _in_file(where, "interrupted", "exit(6)", exit=os._exit)()
    assert wrapped.finalised == [] and wrapped.exits == [5, 6, 6, 6]


def test_another_thread_exits_without_finalising(wrapped: SimpleNamespace) -> None:
    said: list[str] = []
    wrapped.agent.controller.plan = SimpleNamespace(at_exit=lambda: said.append("plan"))
    worker = threading.Thread(target=os._exit, args=(8,))
    worker.start()
    worker.join()
    assert wrapped.finalised == [] and wrapped.exits == [8]
    assert said == ["plan"]  # --dynamic's last log lines are file appends: written from any thread


def test_a_spawned_child_is_starting_until_it_runs_its_process() -> None:
    spawn, process = (
        os.path.join("multiprocessing", "spawn.py"),
        os.path.join("multiprocessing", "process.py"),
    )
    asked: list[bool] = []
    ask = _in_file(
        "/x/job.py",
        "ask",
        "asked.append(starting())",
        asked=asked,
        starting=lambda: window_plan.spawned_child_starting(window_plan._main_thread_code()),
    )
    unpickling = _in_file(f"/py/{spawn}", "_main", "ask()", ask=ask)
    running = _in_file(
        f"/py/{spawn}",
        "_main",
        "bootstrap()",
        bootstrap=_in_file(f"/py/{process}", "_bootstrap", "ask()", ask=ask),
    )
    unpickling()
    running()
    ask()
    assert asked == [True, False, False]


def test_the_plans_last_words_run_and_a_failing_one_still_exits(monkeypatch: pytest.MonkeyPatch) -> None:
    """--dynamic's plan writes its logs' last lines at os._exit too (npuprof status read a job that ended
    by os._exit as killed); whatever it raises, the process exits with the code asked for."""
    exits: list[int] = []
    said: list[str] = []
    monkeypatch.setattr(os, "_exit", exits.append)
    for name in ("execv", "execve"):  # restored after the test: the wrapper is not left behind
        monkeypatch.setattr(os, name, getattr(os, name))

    def broken() -> None:
        said.append("plan")
        raise RuntimeError("disk gone")

    controller = _Controller()
    controller.plan = SimpleNamespace(at_exit=broken)  # type: ignore[attr-defined]
    agent = SimpleNamespace(controller=controller, _at_exit=lambda *_: said.append("capture"))
    Agent._finalise_at_os_exit(agent)  # type: ignore[arg-type]
    os._exit(9)
    assert said == ["capture", "plan"] and exits == [9]


class _FinalisesIntoAFile:
    """An agent whose finalise writes the finalising process's pid into ``marker`` (what the real one
    writes is its capture; here only whether and where it ran counts)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self._mp_after_fork = False

    def _at_exit(self) -> None:
        with open(self.marker, "w") as out:
            out.write(str(os.getpid()))


def _returns() -> None:
    pass


def test_a_fork_started_multiprocessing_worker_that_returns_finalises_its_capture(tmp_path: Any) -> None:
    """multiprocessing ends a forked worker that returns from its target with os._exit (no atexit): its
    capture is finalised by multiprocessing's own exit hook, registered again after the worker's bootstrap
    cleared the ones it inherited. Without it only the os._exit guard finalised it: a worker that returned
    had its capture written as "the process ended by os._exit before the capture's last step", and its
    steps went uncounted in npuprof.log."""
    import multiprocessing
    from multiprocessing import util

    marker = tmp_path / "finalised"
    agent = _FinalisesIntoAFile(str(marker))
    own = set(util._finalizer_registry)
    Agent._finalise_at_multiprocessing_exit(agent)  # type: ignore[arg-type]
    for key in set(util._finalizer_registry) - own:  # this process's own finaliser is not run here
        del util._finalizer_registry[key]
    worker = multiprocessing.get_context("fork").Process(target=_returns)
    worker.start()
    worker.join(60)
    assert worker.exitcode == 0
    assert marker.exists(), "the worker ended without finalising its capture"
    assert marker.read_text() == str(worker.pid)


class _ForkedAgent(_FinalisesIntoAFile):
    """An agent of a job's main process, idle (no capture running) when multiprocessing forks a worker; its
    at-fork hook is the agent's own."""

    _in_forked_child = Agent._in_forked_child
    _finalise_at_multiprocessing_exit = Agent._finalise_at_multiprocessing_exit
    _drop_in_child = Agent._drop_in_child

    def __init__(self, marker: str, output: str) -> None:
        super().__init__(marker)
        forgets = SimpleNamespace(forget=lambda: None, forget_after_fork=lambda: None)
        self.controller = SimpleNamespace(prof=None, reset_after_fork=lambda: None)
        self._native_exit = self.optimizer_steps = None
        self.post, self.disk, self.sigterm = forgets, forgets, forgets
        self.cfg = SimpleNamespace(output=output)
        self.run: dict[str, str] = {}
        self.log = SimpleNamespace(error=self._said, info=self._said)

    def _said(self, message: str) -> None:
        with open(self.marker + ".log", "a") as out:
            out.write(message + "\n")


def test_a_worker_forked_by_the_main_process_finalises_its_capture(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The main process registers nothing with multiprocessing: the agent's at-fork hook does, in the
    worker, before the bootstrap that clears the finalisers the worker inherited. os.fork here runs that
    hook in the child, as os.register_at_fork would (registered for good, it would run in every later
    fork of the test process)."""
    import multiprocessing

    marker = tmp_path / "finalised"
    agent = _ForkedAgent(str(marker), str(tmp_path))
    fork = os.fork

    def fork_running_the_hook() -> int:
        pid = fork()
        if pid == 0:
            agent._in_forked_child()
        return pid

    monkeypatch.setattr(os, "fork", fork_running_the_hook)
    worker = multiprocessing.get_context("fork").Process(target=_returns)
    worker.start()
    monkeypatch.undo()
    worker.join(60)
    assert worker.exitcode == 0
    said = tmp_path / "finalised.log"
    assert marker.exists(), said.read_text() if said.exists() else "the worker ended without finalising"
    assert marker.read_text() == str(worker.pid)
