"""`npuprof ARGS` in a fresh process forked from one that has already imported npuprof's report commands.

Each `python -m npuprof analyse` a test starts spends ~0.3 CPU-s before it reads its first byte: the
interpreter's start and the imports of numpy, rich, typer and npuprof's analysis (`python -X importtime -m
npuprof analyse`); a fork of a process that holds them costs ~0.05. A test file that runs such commands
dozens of times (test_odd_traces) spent most of its CPU there. One server process per test process imports
them once, then forks a child for each command. The child takes the command's arguments, environment,
working directory and umask; its stdin is /dev/null, its stdout and stderr pipes read as subprocess.run
reads them; it runs npuprof's own `main()` (npuprof/__main__.py's) to its end, exit code or signal as
`python -m npuprof` gives them. What a fresh `python -m npuprof` decides at the interpreter's start (the
streams' encoding: PYTHON*, LC_*, LANG) is the server's: a command whose environment differs there from
the server's, and every command but FORKED_COMMANDS (`npuprof run` above all), runs as a real subprocess
(conftest.npuprof). test_forked_cli checks that both give the same answers."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from conftest import clean_env
from conftest import npuprof as npuprof_subprocess

# the modules `npuprof analyse` and `npuprof export-stacks` of a small trace import (python -X importtime)
PRELOADED = (
    "numpy",
    "typer",
    "rich.console",
    "rich.table",
    "npuprof.__main__",
    "npuprof.cli.main",
    "npuprof.cli.analyse",
    "npuprof.cli.export_stacks",
    "npuprof.analysis.parse",
    "npuprof.analysis.report",
    "npuprof.analysis.trace_loader",
    "npuprof.reports.terminal",
)

SERVER = """\
import importlib, json, os, socket, sys
for name in sys.argv[1].split(","):
    importlib.import_module(name)
asks = socket.socket(fileno=int(sys.argv[2]))
while True:
    data, fds, _, _ = socket.recv_fds(asks, 1 << 20, 2)
    if not data:
        break
    ask = json.loads(data)
    sys.stdout.flush(); sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        asks.close()
        stdin = os.open(os.devnull, os.O_RDONLY)
        for given, fd in ((stdin, 0), (fds[0], 1), (fds[1], 2)):
            os.dup2(given, fd)
            os.close(given)
        os.chdir(ask["cwd"])
        os.umask(ask["umask"])
        os.environ.clear()
        os.environ.update(ask["env"])
        import npuprof.__main__ as entry
        sys.argv = [entry.__file__, *ask["args"]]
        entry.main()
        sys.exit(0)
    for fd in fds:
        os.close(fd)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    asks.send(json.dumps({"code": code}).encode())
"""

# the commands that only read and report (a run starts a job: signals, process groups, the terminal)
FORKED_COMMANDS = ("analyse", "export-stacks", "memory-timeline", "status", "info")
# what Python reads from the environment at its start, before any of npuprof's code runs
_READ_AT_START = ("PYTHON", "LC_", "LANG")


class _Server:
    """The server (a session of its own: a hung command is killed with it), and the socket that asks it."""

    def __init__(self) -> None:
        self.asks, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", SERVER, ",".join(PRELOADED), str(theirs.fileno())],
                env=clean_env(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                pass_fds=[theirs.fileno()],
                start_new_session=True,
            )
        atexit.register(self.stop)

    def stop(self) -> None:
        self.asks.close()
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def run(self, args: list[str], cwd: str, env: dict[str, str], timeout: float) -> tuple[int, bytes, bytes]:
        """The command's exit code, stdout and stderr: read from pipes, as subprocess.run reads them."""
        ask = {"args": args, "cwd": cwd, "env": env, "umask": _umask()}
        out, err = os.pipe(), os.pipe()
        try:
            socket.send_fds(self.asks, [json.dumps(ask).encode()], [out[1], err[1]])
        finally:
            os.close(out[1])
            os.close(err[1])
        deadline = time.monotonic() + timeout
        try:
            got = _read_to_the_end([out[0], err[0]], deadline)
            if not select.select([self.asks], [], [], max(0.0, deadline - time.monotonic()))[0]:
                raise subprocess.TimeoutExpired(["npuprof", *args], timeout)
        except subprocess.TimeoutExpired:
            self.stop()  # and the command with it, as subprocess.run kills a command that ran too long
            raise
        finally:
            os.close(out[0])
            os.close(err[0])
        reply = self.asks.recv(1 << 16)
        assert reply, "the server of _forked_cli ended"
        return json.loads(reply)["code"], got[out[0]], got[err[0]]


def _read_to_the_end(fds: list[int], deadline: float) -> dict[int, bytes]:
    got = {fd: b"" for fd in fds}
    open_fds = list(fds)
    while open_fds:
        left = deadline - time.monotonic()
        if left <= 0:
            raise subprocess.TimeoutExpired("npuprof", 0)
        for fd in select.select(open_fds, [], [], left)[0]:
            chunk = os.read(fd, 1 << 16)
            if chunk:
                got[fd] += chunk
            else:
                open_fds.remove(fd)
    return got


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_servers: list[_Server] = []


def npuprof(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 120):
    """conftest.npuprof's `python -m npuprof ARGS` -> CompletedProcess (text), run in a child forked from
    this process's server (see the module's doc)."""
    env = env if env is not None else clean_env()
    if not args or args[0] not in FORKED_COMMANDS or _starts_otherwise(env):
        return npuprof_subprocess(*args, cwd=cwd, env=env, timeout=timeout)
    if not _servers or _servers[0].proc.poll() is not None:
        _servers[:] = [_Server()]
    server = _servers[0]
    code, out, err = server.run(list(args), os.path.abspath(cwd or os.getcwd()), env, timeout)
    return subprocess.CompletedProcess(
        [sys.executable, "-m", "npuprof", *args], code, _as_text(out), _as_text(err)
    )


def _starts_otherwise(env: dict[str, str]) -> bool:
    """Whether a Python started in ``env`` would start otherwise than the server (started in clean_env())."""
    server = clean_env()
    return any(key.startswith(_READ_AT_START) and env.get(key) != server.get(key) for key in {*server, *env})


def _as_text(data: bytes) -> str:
    """As subprocess.run(text=True) decodes a pipe's bytes (the locale's encoding, universal newlines)."""
    import io

    return io.TextIOWrapper(io.BytesIO(data)).read()


def npuprof_from_repo(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """stacks_support.cli's `npuprof ARGS` (run from the repository's root), forked from the server, in
    clean_env(): stacks_support's environment puts this tree on PYTHONPATH, which Python reads at its start
    (a command given it runs as a real subprocess); the server imports npuprof as the tests do."""
    return npuprof(*args, cwd=Path(__file__).resolve().parent.parent, env=clean_env(), timeout=timeout)


class _ServerWith(_Server):
    """A server started in an environment of the caller's that has imported ``modules`` besides PRELOADED."""

    def __init__(self, env: dict[str, str], modules: tuple[str, ...]) -> None:
        self.asks, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", SERVER, ",".join((*PRELOADED, *modules)), str(theirs.fileno())],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                pass_fds=[theirs.fileno()],
                start_new_session=True,
            )
        atexit.register(self.stop)


_servers_with: dict[tuple[tuple[str, ...], tuple[tuple[str, str], ...]], _ServerWith] = {}


def npuprof_with(
    *args: str,
    modules: tuple[str, ...],
    env: dict[str, str] | None = None,
    read_later: tuple[str, ...] = (),
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """npuprof()'s command forked from a server that has imported ``modules`` too (``("torch",)``: ~1.7
    CPU-s saved by each command that imports torch, `npuprof info`), one server for each environment. The
    server is started in the command's environment less ``read_later``, the variables only the command's
    own code reads (after the fork: a stand-in torch_npu's, read at its import), and PYTEST_CURRENT_TEST
    (pytest changes it at each test), which the command gets."""
    env = env if env is not None else clean_env()
    if not args or args[0] not in FORKED_COMMANDS:
        return npuprof_subprocess(*args, env=env, timeout=timeout)
    start_env = {k: v for k, v in env.items() if k not in (*read_later, "PYTEST_CURRENT_TEST")}
    key = (modules, tuple(sorted(start_env.items())))
    server = _servers_with.get(key)
    if server is None or server.proc.poll() is not None:
        server = _servers_with[key] = _ServerWith(start_env, modules)
    code, out, err = server.run(list(args), os.getcwd(), env, timeout)
    return subprocess.CompletedProcess(
        [sys.executable, "-m", "npuprof", *args], code, _as_text(out), _as_text(err)
    )
