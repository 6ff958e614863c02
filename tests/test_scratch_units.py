"""analyse's scratch directories (npuprof/analysis/scratch.py) in-process: their names, the handlers for
SIGTERM and SIGHUP installed by the first one made and put back after, a signal that removes them and ends
the process by it (in a forked child), and directories gone before they are removed. These are fast tests
of bench/mutation.py's "scratch" group (no subprocess)."""

from __future__ import annotations

import os
import shutil
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from npuprof.analysis import scratch as scratch_module
from npuprof.analysis.scratch import PREFIX, ScratchDirs


@pytest.fixture
def default_handlers() -> Iterator[None]:
    """SIGTERM and SIGHUP at their default action; as they were after the test."""
    before = {signum: signal.signal(signum, signal.SIG_DFL) for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def test_a_directory_is_named_by_its_host_and_pid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The name's fields are split at "-": a host's own dashes are written as underscores."""
    monkeypatch.setattr(scratch_module.os, "uname", lambda: SimpleNamespace(nodename="gpu-node-7"))
    dirs = ScratchDirs()
    try:
        made = dirs.make(str(tmp_path))
        assert made.parent == tmp_path and made.is_dir()
        assert made.name.startswith(f"{PREFIX}gpu_node_7-{os.getpid()}-"), made.name
    finally:
        dirs.remove_all()
    assert not made.exists()


def test_the_first_directory_installs_the_handlers_and_removing_them_all_puts_them_back(
    tmp_path: Path, default_handlers: None
) -> None:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # nohup's: the user's choice, kept
    dirs = ScratchDirs()
    dirs.make(str(tmp_path))
    try:
        assert signal.getsignal(signal.SIGTERM) == dirs._on_signal
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
        dirs.make(str(tmp_path))
        assert signal.getsignal(signal.SIGTERM) == dirs._on_signal
    finally:
        dirs.remove_all()
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    assert list(tmp_path.iterdir()) == []


def test_off_the_main_thread_no_handler_is_installed_or_put_back(
    tmp_path: Path, default_handlers: None
) -> None:
    """signal.signal works in the main thread only: another thread's directories are made and removed with
    no handler, and a removal there of the main thread's directories raises nothing."""
    dirs = ScratchDirs()
    failures: list[BaseException] = []

    def in_a_thread(action: object) -> None:
        def run() -> None:
            try:
                action()  # type: ignore[operator]
            except BaseException as error:  # said by the test
                failures.append(error)

        thread = threading.Thread(target=run)
        thread.start()
        thread.join(10)

    in_a_thread(lambda: dirs.make(str(tmp_path)))
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL and len(dirs.made) == 1
    in_a_thread(dirs.remove_all)
    assert not failures and list(tmp_path.iterdir()) == []
    dirs.make(str(tmp_path))  # in the main thread: installed (a library's caller) ...
    in_a_thread(dirs.remove_all)  # ... and removed by another thread, which cannot put them back: no error
    assert not failures, failures
    assert list(tmp_path.iterdir()) == []


def test_directories_already_gone_are_no_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One removed meanwhile (another analyse removing a dead one's at the same time, the report's own
    directory removed by hand) is no error."""
    dead = tmp_path / f"{PREFIX}{scratch_module._host()}-4999999-abc123"
    dead.mkdir()

    def alive(pid: int) -> bool:  # asked about the dead one while another analyse removes it
        shutil.rmtree(dead)
        return False

    monkeypatch.setattr(scratch_module, "pid_alive", alive)
    dirs = ScratchDirs()
    made = dirs.make(str(tmp_path))
    shutil.rmtree(made)
    dirs.remove_all()
    assert list(tmp_path.iterdir()) == []


def _signalled(tmp_path: Path, signum: int) -> None:
    (tmp_path / "a").mkdir()
    pid = os.fork()
    if pid == 0:  # the analyse
        code = 99
        try:
            dirs = ScratchDirs()
            dirs.make(str(tmp_path / "a"))
            worker = os.fork()
            if worker == 0:
                try:
                    os.kill(os.getpid(), signum)
                finally:
                    os._exit(98)
            _, status = os.waitpid(worker, 0)
            if (
                os.WIFSIGNALED(status)
                and os.WTERMSIG(status) == signum
                and len(os.listdir(tmp_path / "a")) == 1
            ):
                os.kill(os.getpid(), signum)
            code = 97
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signum, status
    assert list((tmp_path / "a").iterdir()) == []


def test_a_signal_removes_the_directories_and_ends_the_process_by_it(
    tmp_path: Path, default_handlers: None
) -> None:
    """In a forked child: its directories removed, then it dies of the signal. A child forked from it while
    the handler is installed (a parse's pool worker, ended by SIGTERM) dies of it and leaves them alone."""
    for signum in (signal.SIGTERM, signal.SIGHUP):
        (tmp_path / signum.name).mkdir()
        _signalled(tmp_path / signum.name, signum)
