"""`npuprof run` starts the job's post-processors as its own children (docs/architecture.md, "Process
model"): a post-processor that was the training process's child was waited for by a script that reaps
every child it has (``while True: os.wait()`` until none is left), which it only left when that script
ended: the job hung. Its stop while a capture records (``Postprocessor.hold``) also called the script's
SIGCHLD handler.

The launcher listens on an abstract Unix socket named in the job's environment (``ENV_SPAWN``). A training
process sends one request: the program, its arguments and environment, and descriptors (the job pipe, the
lock, ...), then reads the reply, a pid and a pidfd, whenever it next looks (it never waits for it). The
launcher's thread starts the program (``posix_spawn``, a session of its own), watches the requester's
pidfd and continues (SIGCONT) a child the requester may have left stopped when it dies, and reaps its
children. Only a process of the launcher's own user is served. Where the socket cannot be reached (no
`npuprof run`, another network namespace), the training process starts its post-processor itself."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
from dataclasses import dataclass
from typing import Any

from npuprof.owned_fd import OwnedFd, above_stdio

ENV_SPAWN = "NPUPROF_SPAWN_ADDRESS"
REQUEST_LIMIT = 1 << 20  # bytes of one request (its environment included)
FD_LIMIT = 8
_STDIN_INDEX = 0  # the first descriptor sent becomes the child's stdin; the n-th after it, fd 2 + n


def child_fd(index: int) -> int:
    """The descriptor number in the child of the ``index``-th descriptor sent (0: stdin)."""
    return 0 if index == _STDIN_INDEX else 2 + index


def placed(fds: list[int], targets: list[int]) -> tuple[list[int], list[tuple[Any, ...]]]:
    """posix_spawn file actions that put ``fds`` on ``targets`` in the child, through copies above every
    source and target (a target then never clobbers a source still to be moved): the copies, to close
    after the spawn, and the actions. Raises OSError (EMFILE) with no copy left open when they do not fit
    the process's limit (helper-98: fixed copies above 63 failed under `ulimit -n 64` and leaked under 67,
    a lock copy among them, for which `npuprof run` then waited for ever)."""
    import fcntl

    base = max([*fds, *targets]) + 1
    high: list[int] = []
    try:
        for fd in fds:
            high.append(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, base))
    except OSError as exc:
        for fd in high:
            os.close(fd)
        if exc.errno == errno.EINVAL:  # base at or above the limit: no number left, as EMFILE says
            raise OSError(errno.EMFILE, f"{os.strerror(errno.EMFILE)} (none free from {base} on)") from exc
        raise
    return high, [(os.POSIX_SPAWN_DUP2, fd, target) for fd, target in zip(high, targets, strict=True)]


# ---- the launcher's side ---------------------------------------------------------------------------


# every signal but those a fault of the thread itself raises
_ASYNC_SIGNALS = signal.valid_signals() - {
    signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGTRAP, signal.SIGABRT, signal.SIGSYS
}  # fmt: skip


def start_service(run_id: str) -> str | None:
    """Listen for spawn requests of the job's processes on a thread of its own; the address for
    ``ENV_SPAWN``, or None where that cannot be done (the job's processes then start their own). The
    socket is made here (~0.1 ms: ``_socket``, not ``socket``); the thread imports the rest."""
    try:
        import _socket
        import _thread

        if not hasattr(os, "pidfd_open") or not hasattr(_socket, "SO_PEERCRED"):
            return None
        os.close(os.pidfd_open(os.getpid()))  # the kernel has pidfds (Linux 5.3)
        # its mount namespace last: a process in another (unshare -m) sees other paths, and starts its own
        address = f"npuprof-spawn.{run_id}.{os.getpid()}.{os.urandom(4).hex()}.{_mount_namespace()}"
        listener = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET | _socket.SOCK_CLOEXEC)
        try:
            listener.bind("\0" + address)
            listener.listen(64)
            # the thread starts with the job's signals blocked (it inherits the mask), so that they reach
            # the main thread, waiting for the job: one delivered here would be handled only once the job
            # had ended (helper-90: two signals at once, both lost). Its spawns reset their mask.
            before = signal.pthread_sigmask(signal.SIG_BLOCK, _ASYNC_SIGNALS)
            try:
                _thread.start_new_thread(_serve_forever, (listener,))
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, before)
        except BaseException:
            listener.close()
            raise
    except (OSError, ImportError, AttributeError, RuntimeError):
        return None
    return address


def _mount_namespace() -> int:
    try:
        return os.stat("/proc/self/ns/mnt").st_ino
    except OSError:
        return 0


_service: _Service | None = None


def wait_for_children(timeout_s: float) -> int:
    """Wait (bounded) until every process the service started has ended and been reaped: one that removed
    its lock file is still exiting (at SCHED_IDLE, on a busy machine, for seconds). How many are left."""
    import time

    deadline = time.monotonic() + timeout_s
    while _service is not None and _service.children and time.monotonic() < deadline:
        time.sleep(0.01)
    return len(_service.children) if _service is not None else 0


def children() -> list[int]:
    """The pids of the processes the service started that have not been reaped yet."""
    service = _service
    for _attempt in range(3):  # the service's thread may change the dict meanwhile
        try:
            return list(service.children.values()) if service is not None else []
        except RuntimeError:
            continue
    return []


def _serve_forever(listener: Any) -> None:
    global _service
    service = None
    try:
        service = _service = _Service(listener)
        service.run()
    except Exception:  # a fault here leaves the job's processes to start their own
        with contextlib.suppress(Exception):
            listener.close()
            if service is not None:  # nobody watches their ends now: they must not hold theirs any more
                for conn in service.conns.values():
                    conn.close()


class _Service:
    def __init__(self, listener: Any) -> None:
        import select

        self.listener = listener
        self.poller = select.poll()
        self.poller.register(listener.fileno(), select.POLLIN)
        self.children: dict[int, int] = {}  # a child's pidfd -> its pid
        self.requesters: dict[int, int] = {}  # a requester's pidfd -> the pidfd of the child it asked for
        # a child's pidfd -> the requester's connection, open while it lives: the requester's sign that we
        # live (it holds its post-processor only then: once we are gone, nothing would continue it)
        self.conns: dict[int, Any] = {}

    def run(self) -> None:
        while True:
            for fd, _events in self.poller.poll():
                if fd == self.listener.fileno():
                    self._accept()
                elif fd in self.requesters:
                    self._requester_ended(fd)
                elif fd in self.children:
                    self._child_ended(fd)

    def _accept(self) -> None:
        """(``socket`` is imported at the first request only: ~5 ms of the launcher's start otherwise.)"""
        try:
            fd, _ = self.listener._accept()
        except OSError:
            return
        import socket

        conn = socket.socket(fileno=fd)
        child = None
        try:
            conn.settimeout(2.0)
            with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
                child = self._answer(conn)
        finally:
            if child is None:
                conn.close()
            else:
                self.conns[child] = conn

    def _answer(self, conn: Any) -> int | None:
        """Serve one request; the child's pidfd, or None when none was started."""
        import socket
        import struct

        pid_uid_gid = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _peer, uid, _gid = struct.unpack("3i", pid_uid_gid)
        data, fds, flags, _ = socket.recv_fds(conn, REQUEST_LIMIT, FD_LIMIT, socket.MSG_CMSG_CLOEXEC)
        try:
            if uid != os.getuid():
                raise ValueError("not this user's process")
            if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
                raise ValueError("request too large")
            request = json.loads(data)
            pid, pidfd = self._spawn(request, fds)
        except (OSError, ValueError, TypeError, KeyError) as exc:
            conn.send(json.dumps({"error": repr(exc)}).encode())
            return None
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
        conn.settimeout(None)
        with contextlib.suppress(OSError):
            socket.send_fds(conn, [json.dumps({"pid": pid}).encode()], [pidfd])
        return pidfd

    def _spawn(self, request: dict[str, Any], fds: list[int]) -> tuple[int, int]:
        import fcntl
        import select

        high, moves = placed(fds, [child_fd(i) for i in range(len(fds))])
        try:
            actions: list[tuple[Any, ...]] = [
                (os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0)
                for fd in (0, 1, 2)  # 0: replaced below
            ]
            actions += moves
            env = {str(k): str(v) for k, v in request["env"].items()}
            argv = [str(a) for a in request["argv"]]
            pid = os.posix_spawn(
                str(request["exe"]), argv, env, file_actions=actions, setsid=True, setsigmask=()
            )
        finally:
            for fd in high:
                os.close(fd)
        pidfd = os.pidfd_open(pid)  # our unreaped child: the pid is ours
        self.children[pidfd] = pid
        self.poller.register(pidfd, select.POLLIN)
        watch = request.get("watch")
        if isinstance(watch, int) and 0 <= watch < len(fds):
            requester = fcntl.fcntl(fds[watch], fcntl.F_DUPFD_CLOEXEC, 3)
            self.requesters[requester] = pidfd
            self.poller.register(requester, select.POLLIN)
        return pid, pidfd

    def _requester_ended(self, fd: int) -> None:
        """The training process has died: a stop it left on its post-processor (Postprocessor.hold)
        must not outlive it."""
        import signal

        child = self.requesters.pop(fd)
        self._forget(fd)
        if child in self.children:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(child, signal.SIGCONT)

    def _child_ended(self, fd: int) -> None:
        with contextlib.suppress(OSError):
            os.waitpid(self.children[fd], os.WNOHANG)
        del self.children[fd]  # (after the reap: wait_for_children reads this)
        conn = self.conns.pop(fd, None)
        if conn is not None:
            conn.close()
        for requester in [r for r, child in self.requesters.items() if child == fd]:
            del self.requesters[requester]
            self._forget(requester)
        self._forget(fd)

    def _forget(self, fd: int) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self.poller.unregister(fd)
        with contextlib.suppress(OSError):
            os.close(fd)


# ---- the training process's side --------------------------------------------------------------------


@dataclass
class Spawned:
    """A child started by `npuprof run`: its pid and pidfd, known once the reply has been read."""

    conn: Any
    pid: int | None = None
    pidfd: int | None = None
    failed: bool = False
    owned: OwnedFd | None = None  # the connection's descriptor as we opened it (npuprof.owned_fd)

    def __post_init__(self) -> None:
        if self.conn is not None and self.owned is None:
            self.owned = OwnedFd(self.conn.fileno())

    def _ours(self) -> bool:
        return self.conn is not None and self.owned is not None and self.owned.ours()

    def poll(self) -> bool:
        """Read the reply if it has come (never waits); True once the pid is known."""
        if self.pid is not None or self.failed or self.conn is None:
            return self.pid is not None
        if not self._ours():
            self.failed = True
            self.close()
            return False
        import socket

        try:
            data, fds, _flags, _ = socket.recv_fds(
                self.conn, 4096, 1, socket.MSG_DONTWAIT | socket.MSG_CMSG_CLOEXEC
            )
        except BlockingIOError:
            return False
        except OSError:
            data, fds = b"", []
        try:
            reply = json.loads(data)
            pid = reply["pid"]
        except (ValueError, KeyError, TypeError):
            self.failed = True
            self.close()
            for fd in fds:
                os.close(fd)
            return False
        self.pid = int(pid)
        self.pidfd = None
        if fds:
            with contextlib.suppress(OSError):
                self.pidfd = above_stdio(fds[0])
        return True

    def launcher_lives(self) -> bool:
        """Whether `npuprof run` still holds its end of the connection (closed when it dies, never written
        after the reply): only then would a post-processor we left stopped at our death be continued."""
        if self.conn is None or self.pid is None or not self._ours():
            return False
        import select

        try:
            return not select.select([self.conn], [], [], 0)[0]
        except (OSError, ValueError):
            return False

    def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(OSError):
                if self._ours():
                    self.conn.close()
                else:
                    self.conn.detach()  # the number is the script's now: left open
            self.conn = None


def request_spawn(
    address: str, exe: str, argv: list[str], env: dict[str, str], fds: list[int], watch: int | None = None
) -> Spawned | None:
    """Ask `npuprof run` at ``address`` to start ``argv`` with ``fds`` (see :func:`child_fd`); None when it
    could not be asked (nothing was handed over: the caller starts it itself). ``watch``: the index of the
    requester's pidfd among ``fds`` (its end continues the child)."""
    import socket

    if address.rpartition(".")[2] != str(_mount_namespace()):
        return None  # another mount namespace than the launcher's: paths may differ there
    request = json.dumps({"exe": exe, "argv": argv, "env": env, "watch": watch}).encode()  # ASCII: \u escapes
    if len(request) > REQUEST_LIMIT or len(fds) > FD_LIMIT:
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    try:
        if conn.fileno() <= 2:  # kept for the job's life: never on a closed stdout's number
            conn = socket.socket(fileno=above_stdio(conn.detach()))
        conn.settimeout(1.0)  # a local listener answers at once or not at all
        conn.connect("\0" + address)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, len(request) + 4096)
        if socket.send_fds(conn, [request], fds) != len(request):
            raise OSError("request cut short")
    except OSError:
        conn.close()
        return None
    conn.setblocking(False)
    return Spawned(conn)
