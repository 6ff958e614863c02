"""Shared helpers: run npuprof as a user would, in a subprocess, and read what it wrote."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
# One OpenMP thread in every process the tests start, clean_env's or not: on 2 cores shared by three xdist
# workers, torch's per-core thread pools only contend (a spinning OpenMP thread burns the CPU another job
# needs)
os.environ["OMP_NUM_THREADS"] = "1"
SCRIPTS = Path(__file__).resolve().parent / "scripts"
# A suite started in the background of a shell without job control (`(pytest &)`, some CI runners) inherits
# SIGINT and SIGQUIT ignored, and every job it starts with them: the tests of Ctrl-C and SIGQUIT would then
# test a job that ignores them (npuprof leaves a signal ignored at its start ignored, as the shell does)
for _signum in (signal.SIGINT, signal.SIGQUIT):
    if signal.getsignal(_signum) == signal.SIG_IGN:
        signal.signal(_signum, signal.default_int_handler if _signum == signal.SIGINT else signal.SIG_DFL)


# pytest-xdist's workers start with COLUMNS=80 and LINES=24 in their environment, which every npuprof a test
# started inherited: a report folded at 80 columns under `-n 3` (an analyse title of a long rank dir split
# in a full run) and not when the same test ran alone. Removed: a test that needs a width sets it itself.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _size in ("COLUMNS", "LINES"):
        os.environ.pop(_size, None)
# The sizes a report is laid out by, as this process started: a test that leaves one set for those after it
# is named by the check below
_SIZES_AT_START = {name: os.environ.get(name) for name in ("COLUMNS", "LINES", "TERMINAL_WIDTH")}


@pytest.fixture(autouse=True)
def _sizes_left_as_found() -> Iterator[None]:
    yield
    left = {k: os.environ.get(k) for k in _SIZES_AT_START if os.environ.get(k) != _SIZES_AT_START[k]}
    assert not left, f"this test left {left} in os.environ (was {_SIZES_AT_START}): later tests inherit it"


def pytest_sessionstart(session: pytest.Session) -> None:
    """npuprof byte-compiled, as `pip install` leaves it: the tests start hundreds of Python processes that
    import it, and from source (an editable install used under PYTHONDONTWRITEBYTECODE=1) each would
    compile it again (~1 minute of the suite on 2 cores). py_compile writes atomically: the xdist workers
    doing it at once is harmless."""
    import compileall

    compileall.compile_dir(str(ROOT / "npuprof"), quiet=1)
    if session.config.pluginmanager.has_plugin("dsession"):  # the controller of xdist's workers
        _rewrite_test_modules_once(session.config)


def _rewrite_test_modules_once(config: pytest.Config) -> None:
    """Every xdist worker collects every test module, and pytest rewrites its asserts each time it finds no
    cached rewrite (~10 CPU-s of this suite): under PYTHONDONTWRITEBYTECODE=1 it writes none, so each worker
    paid it. The controller writes pytest's own cache once, before the workers start (they read it whatever
    PYTHONDONTWRITEBYTECODE says; hash-checked, so an edited file is rewritten), on two processes. The
    rewrite is pytest's own function: where it is gone (another pytest) or fails, the workers rewrite as
    before."""
    import concurrent.futures
    import fnmatch
    import multiprocessing

    from _pytest.assertion import rewrite

    if not all(hasattr(rewrite, name) for name in (*_PYTEST_REWRITE_API, "PYC_TAIL")):
        return
    patterns = [*config.getini("python_files"), "conftest.py"]
    files = sorted(
        {Path(__file__)}
        | {
            path
            for arg in config.args
            for path in _python_files_under(Path(config.invocation_params.dir, arg.split("::", 1)[0]))
            if any(fnmatch.fnmatch(path.name, pattern) for pattern in patterns)
        }
    )
    global _REWRITE_CONFIG
    _REWRITE_CONFIG = config
    fork = multiprocessing.get_context("fork")
    with contextlib.suppress(Exception), concurrent.futures.ProcessPoolExecutor(2, mp_context=fork) as pool:
        list(pool.map(_write_rewritten, files, chunksize=8))


_PYTEST_REWRITE_API = ("_rewrite_test", "_write_pyc", "_read_pyc", "get_cache_dir", "try_makedirs")
_REWRITE_CONFIG: pytest.Config | None = None  # for the forked processes of _rewrite_test_modules_once


def _python_files_under(path: Path) -> list[Path]:
    return sorted(path.rglob("*.py")) if path.is_dir() else [path] if path.suffix == ".py" else []


def _write_rewritten(path: Path) -> None:
    from _pytest.assertion import rewrite

    pyc = rewrite.get_cache_dir(path) / (path.name[:-3] + rewrite.PYC_TAIL)
    state = _REWRITE_CONFIG.stash[rewrite.assertstate_key]
    if rewrite._read_pyc(path, pyc, state.trace) is not None:
        return  # there, and its source's hash unchanged
    source_hash, code = rewrite._rewrite_test(path, _REWRITE_CONFIG)
    if rewrite.try_makedirs(pyc.parent):
        rewrite._write_pyc(state, code, source_hash, pyc)


ANALYSE_CAPTURE = Path(__file__).resolve().parent / "analyse_support" / "capture.py"


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A real tmpfs of ``size`` mounted at ``where`` (made here), unmounted after; the test is skipped where
    mounting is not permitted."""
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)


def clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("NPUPROF_", "PROF_CONFIG_PATH", "MSMONITOR"))
    }
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    # this Python's bin first, as in an activated venv: its `npuprof` is this installation, so the commands
    # npuprof suggests when run as `python -m npuprof` are bare `npuprof` (README; tests/test_invocation.py
    # checks the other case, no such npuprof on PATH)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", os.defpath)])
    env.update(extra)
    return env


def npuprof(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 120):
    """`python -m npuprof ARGS` -> CompletedProcess (text)."""
    return subprocess.run(
        [sys.executable, "-m", "npuprof", *args],
        cwd=cwd,
        env=env if env is not None else clean_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def trainer(*args: str) -> list[str]:
    return [sys.executable, str(SCRIPTS / "trainer.py"), *args]


def trainer_in_process(*args: str) -> str:
    """Python source that runs tests/scripts/trainer.py ARGS as __main__ in the process that executes it
    (a forked_job's scenario): it ends as trainer.py does, by sys.exit."""
    script = str(SCRIPTS / "trainer.py")
    run = f"runpy.run_path({script!r}, run_name='__main__')\n"
    return f"import runpy, sys\nsys.argv = {[script, *args]!r}\n{run}"


def forked_job(
    root: Path,
    scenarios: dict[str, str],
    *,
    codes: dict[str, int] | None = None,
    end: int = 0,
    group_sigterms: bool = False,
    sections: bool = False,
    main_keeps: str | None = None,
) -> tuple[list[str], Path]:
    """A job that imports torch once, then runs each scenario (a script, run as __main__) in a child of its
    own, forked one after the other (a fresh training process to npuprof: it counts its own steps, records
    its own captures, installs its own SIGTERM handler), which ends as a script does (sys.exit: atexit runs;
    or a signal's death). Its command line, and the JSON file that gets each scenario's pid (root/pids.json;
    each one's exit code, as os.waitstatus_to_exitcode gives it, goes to root/exit_codes.json). A child
    whose exit code is not its ``codes`` entry (0 where none) makes the job exit 99, naming each such
    scenario; else the job ends with ``end`` (an exit code, or minus a signal it dies of), so that npuprof's
    exit status still shows it.

    ``group_sigterms``: the test sends SIGTERMs that npuprof passes on to the job's process group, the job's
    own first process among them: it ignores them while its children run, each of which starts with SIGTERM
    at its default, as a fresh process does. ``sections``: before each child, a line '--- scenario NAME ---'
    on stdout and stderr. ``main_keeps`` (for `--step-on __main__:TARGET`, whose placeholder npuprof's
    bootstrap puts in the process's own __main__): each scenario, written to root/NAME.py, runs as the
    __main__ of its child instead of in a fresh namespace, the job's own names taken out of it but
    TARGET's placeholder (a fresh process whose script has not yet bound TARGET); the job never binds
    TARGET, and drops the placeholder before its exit (a name never defined would be reported)."""
    pids, script = root / "pids.json", root / "forked_job.py"
    paths = {name: str(root / f"{name}.py") for name in scenarios}
    if main_keeps is not None:
        for name, source in scenarios.items():
            Path(paths[name]).write_text(source)
    script.write_text(
        "import gc, json, os, signal, sys, threading\n"
        "import torch, torch._dynamo  # torch.optim's first use imports it: once here, not in each child\n"
        "assert threading.active_count() == 1, threading.enumerate()  # nothing of the parent's runs on\n"
        "\n"
        "def run_as_main(path, target, sys=sys):  # the job's own globals are gone once it begins\n"
        "    main = sys.modules['__main__'].__dict__\n"
        "    for name in [n for n in main if n != target and n[:2] != '__']:\n"
        "        del main[name]\n"
        "    main['__file__'], sys.argv = path, [path]\n"
        "    exec(compile(open(path).read(), path, 'exec'), main)\n"
        "    sys.exit(0)\n"
        "\n"
        f"scenarios, paths, codes = {scenarios!r}, {paths!r}, {codes or {}!r}\n"
        f"target, pid_of, code_of, failed = {main_keeps!r}, {{}}, {{}}, []\n"
        f"if {group_sigterms}:\n"
        "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "for scenario, source in scenarios.items():\n"
        f"    if {sections}:\n"
        "        for stream in (sys.stdout, sys.stderr):\n"
        "            print(f'--- scenario {scenario} ---', file=stream, flush=True)\n"
        "    sys.stdout.flush(); sys.stderr.flush()\n"
        # the parent's objects (torch's) out of the child's collections, its exit's above all, which would
        # walk them all and so copy the parent's heap (~0.5 CPU-s a child); its own are collected as before
        "    gc.freeze()\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        f"        if {group_sigterms}:\n"
        "            signal.signal(signal.SIGTERM, signal.SIG_DFL)\n"
        "        if target is not None:\n"
        "            run_as_main(paths[scenario], target)\n"
        "        exec(compile(source, scenario + '.py', 'exec'), {'__name__': '__main__'})\n"
        "        sys.exit(0)\n"
        "    pid_of[scenario] = pid\n"
        "    code_of[scenario] = code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])\n"
        "    if code != codes.get(scenario, 0):\n"
        "        failed.append(f'{scenario} (exit code {code}, not {codes.get(scenario, 0)})')\n"
        "if target is not None:\n"
        "    globals().pop(target, None)\n"
        f"json.dump(code_of, open({str(root / 'exit_codes.json')!r}, 'w'))\n"
        f"json.dump(pid_of, open({str(pids)!r}, 'w'))\n"
        "if failed:\n"
        "    print('scenarios failed: ' + ', '.join(failed), file=sys.stderr, flush=True)\n"
        "    sys.exit(99)\n"
        f"if {end} < 0:\n"
        f"    signal.signal({-end}, signal.SIG_DFL); os.kill(os.getpid(), {-end})\n"
        f"sys.exit({end})\n"
    )
    return [sys.executable, str(script)], pids


def rank_dirs(output: Path) -> list[Path]:
    return sorted(p for p in output.iterdir() if p.is_dir() and p.name.endswith("_ascend_pt"))


def load_trace(rank_dir: Path) -> dict:
    traces = sorted(rank_dir.glob("*.pt.trace.json*"))
    assert traces, f"no raw trace in {rank_dir}: {sorted(p.name for p in rank_dir.iterdir())}"
    path = traces[0]
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as handle:
        return json.load(handle)


def profiler_steps(rank_dir: Path) -> list[int]:
    events = load_trace(rank_dir)["traceEvents"]
    return sorted(
        int(e["name"].split("#", 1)[1])
        for e in events
        if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
    )


def capture_record(rank_dir: Path) -> dict:
    return json.loads((rank_dir / "npuprof_capture.json").read_text())


@pytest.fixture
def out(tmp_path: Path) -> Path:
    return tmp_path / "result"


def run_script(tmp_path: Path, source: str, *flags: str):
    """``npuprof run -o tmp_path/out FLAGS -- python job.py`` for a job written from ``source``; gives the
    completed process and the output directory."""
    script = tmp_path / "job.py"
    script.write_text(source)
    out = tmp_path / "out"
    return npuprof("run", "-o", str(out), *flags, "--", sys.executable, str(script), env=clean_env()), out


def sched(skip_first: int, warmup: int, active: int) -> list[str]:
    """Schedule flags: skip ``skip_first`` steps, warm up, record ``active`` steps, once."""
    return ["--skip-first", str(skip_first), "--warmup", str(warmup), "--active", str(active)]


def run_trainer(out: Path, *flags: str, train: tuple[str, ...] = (), analyse: bool = False, **kwargs):
    """`npuprof run -o OUT [--no-analyse] FLAGS -- python tests/scripts/trainer.py TRAIN...`."""
    return npuprof(
        "run",
        "-o",
        str(out),
        *([] if analyse else ["--no-analyse"]),
        *flags,
        "--",
        *trainer(*train),
        **kwargs,
    )


# what `npuprof run` says once it waits for a post-processor after the job (after a quiet half second)
WAITS_FOR_POST_PROCESSING = "background post-processing job(s) (gzip / analyse) to finish"


def stderr_until(proc: subprocess.Popen[str], text: str, limit_s: float = 60) -> str:
    """``proc``'s stderr (a pipe) read as it comes until ``text`` is in it: what was read, to put before
    what ``proc.communicate()`` then reads. Fails when ``text`` has not come within ``limit_s`` or stderr
    ends without it. (Raw reads of the pipe: communicate() reads it the same way, nothing is lost.)"""
    assert proc.stderr is not None
    fd, got = proc.stderr.fileno(), b""
    deadline = time.monotonic() + limit_s
    while text.encode() not in got:
        left = deadline - time.monotonic()
        assert left > 0, (
            f"{text!r} not on stderr within {limit_s:.0f} s:\n{got.decode(errors='replace')[-3000:]}"
        )
        if select.select([fd], [], [], min(left, 1.0))[0]:
            chunk = os.read(fd, 1 << 16)
            assert chunk, f"stderr ended without {text!r}:\n{got.decode(errors='replace')[-3000:]}"
            got += chunk
    return got.decode(errors="replace")


# gloo's known teardown abort: a torchrun worker can die at interpreter exit after destroy_process_group()
def hold_a_run_lock(output: Path, ready: Path, pids: Path) -> str:
    """Lines of a job script that leave a process holding a post-processor's lock of this run for 60 s
    (RUN_ID.HOST.1.0a0b0c0d.lock in OUTPUT/.npuprof_pending), so that `npuprof run` waits for it after the
    job; ``pids`` gets "HOLDER JOB". The run's id is read where the agent reads it, the payload `npuprof run`
    gives the job: no torch is needed (the launcher's wait for its run's locks is at stake, whoever holds
    them). (A post-processor stopped by the script no longer does: the launcher continues it.)"""
    hold = (
        "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o640); "
        "fcntl.flock(fd, fcntl.LOCK_EX); open(sys.argv[2], 'w').close(); time.sleep(60)"
    )
    return (
        "import os, subprocess, sys, time\n"
        "from npuprof import ENV_CONFIG\n"
        "from npuprof.payload import read_payload\n"
        "run_id = read_payload(os.environ[ENV_CONFIG])[1].run_id\n"
        f"pending = os.path.join({str(output)!r}, '.npuprof_pending')\n"
        "os.makedirs(pending, exist_ok=True)\n"
        "lock = os.path.join(pending, f'{run_id}.{os.uname().nodename}.1.0a0b0c0d.lock')\n"
        f"holder = subprocess.Popen([sys.executable, '-c', {hold!r}, lock, {str(ready)!r}],\n"
        "    start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        f"while not os.path.exists({str(ready)!r}):\n"
        "    time.sleep(0.01)\n"
        f"open({str(pids) + '.part'!r}, 'w').write(f'{{holder.pid}} {{os.getpid()}}')\n"
        f"os.replace({str(pids) + '.part'!r}, {str(pids)!r})\n"  # whole once it exists: the tests poll it
    )


TEARDOWN_ABORT = "terminate called without an active exception"
# glibc's words when it finds the heap corrupt and aborts. Seen in 2-rank gloo jobs under torch's profiler
# inside a capture: once in CI (5 Dec 2026, 3 xdist workers on 2 cores, rank 0 right after its trace was
# exported) and once in 40 runs on Python 3.13; not in 256 runs of such jobs since, with npuprof or a bare
# torch.profiler (README, "A corrupt heap in a gloo rank"). npuprof runs no native code in a rank.
HEAP_ABORTS = re.compile(
    r"^(malloc\(\)|free\(\)|realloc\(\)|munmap_chunk\(\)|double free|corrupted size)", re.MULTILINE
)


def torch_native_abort(stderr: str) -> bool:
    """Whether a job failed of one of torch's own native aborts that CI has met and no run reproduced at
    will (gloo's teardown abort, a corrupt heap): the tests that meet one run the job once more; any other
    failure, one npuprof could cause, fails at once."""
    return TEARDOWN_ABORT in stderr or HEAP_ABORTS.search(stderr) is not None


# A rank of the bare capture (analyse_support/capture.py: torch's profiler and gloo, no npuprof in the
# process) died of SIGSEGV once in a fresh-clone CI run here (6 Dec 2026, rank 1, 3 xdist workers on 2
# cores): torch's own crash, as the heap aborts above.
BARE_CAPTURE_SEGFAULT = "(SIGSEGV)"


def run_capture(cmd: list[str], cwd: Path) -> None:
    """Run a capture command into ``cwd/out`` (a bare torch job: no npuprof in it). One retry, with the
    Python stacks of a crash shown, and only for torch's own aborts (:func:`torch_native_abort`) or a
    segfault (BARE_CAPTURE_SEGFAULT)."""
    import shutil

    env = clean_env()
    for _attempt in range(2):
        proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
        if proc.returncode == 0:
            return
        if not (torch_native_abort(proc.stderr) or BARE_CAPTURE_SEGFAULT in proc.stderr):
            break
        env = {**env, "PYTHONFAULTHANDLER": "1"}
        for d in cwd.glob("out/*_ascend_pt"):
            shutil.rmtree(d)
    raise AssertionError(f"capture failed: {proc.stderr[-2000:]}")


def made_once_for_the_session(tmp_path_factory: pytest.TempPathFactory, name: str, make: Any) -> Path:
    """A directory ``make(dir)`` fills, made once for the whole session, pytest-xdist's workers included
    (each would otherwise make its own: a torchrun capture is ~10 CPU-s). The workers' base temp dirs share
    a parent (pytest-N/): the first worker to take the lock there makes it, the others wait on the lock and
    reuse it. A make that fails leaves nothing behind: the next worker tries again (and fails alike)."""
    import fcntl
    import shutil

    if not os.environ.get("PYTEST_XDIST_WORKER"):
        made = tmp_path_factory.mktemp(name)
        make(made)
        return made
    shared = tmp_path_factory.getbasetemp().parent
    made = shared / f"{name}.made"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not made.is_dir():
            making = shared / f"{name}.making"
            shutil.rmtree(making, ignore_errors=True)
            making.mkdir()
            make(making)
            making.rename(made)
    return made


@pytest.fixture(scope="session", autouse=True)
def _stacks_captures_shared_by_the_workers(tmp_path_factory: pytest.TempPathFactory) -> None:
    """stacks_support's real captures made once for all xdist workers (made_once_for_the_session's way)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import stacks_support

        stacks_support.SHARED_ROOT = tmp_path_factory.getbasetemp().parent


def _make_torchrun_capture(root: Path) -> None:
    (root / "out").mkdir()
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    run_capture([*cmd, str(ANALYSE_CAPTURE), str(root / "out"), "--gzip-rank", "1"], root)
    assert len(list((root / "out").glob("*_ascend_pt"))) == 2


@pytest.fixture(scope="session")
def torchrun_capture(tmp_path_factory) -> Path:
    """One 2-rank torchrun (gloo) capture of analyse_support/capture.py, rank 1's trace gzipped, made once
    for the whole session (all workers): copy it before changing it (parsing writes into it)."""
    return made_once_for_the_session(tmp_path_factory, "torchrun", _make_torchrun_capture) / "out"


def run_on_thread(fn, name: str | None = None, timeout: float | None = None) -> int:
    """Run ``fn`` on a new thread and wait for it; re-raise (as an assertion) what it raised; its ident."""
    import threading

    errors: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, name=name)
    thread.start()
    thread.join(timeout)
    assert not errors, errors
    return thread.ident or 0


def process_state(pid: int) -> str:
    """Process ``pid``'s state letter from /proc (R, S, T, Z, ...), or "gone"."""
    try:
        text = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return "gone"
    return text[text.rfind(b")") + 2 : text.rfind(b")") + 3].decode()


def wait_for_state(pid: int, wanted: set[str], timeout: float = 10.0) -> str:
    """Poll until process ``pid`` is in one of the ``wanted`` states (or ``timeout``); the last state."""
    import time

    deadline = time.monotonic() + timeout
    while (state := process_state(pid)) not in wanted and time.monotonic() < deadline:
        time.sleep(0.02)
    return state


def wait_until_blocked_in_a_futex(pid: int, timeout: float = 20.0) -> None:
    """Until the main thread of ``pid`` has waited in a futex for 0.2 s (a mutex held for good: the GIL's
    waits are shorter); 0.5 s after it first sleeps where the kernel does not say. A fixed sleep after the
    process said it was about to block let a signal come, on a loaded host, while it still ran Python code.
    A running process's wchan reads "0" too: that is waited out, not taken for the kernel's silence."""
    import time

    wchan = Path(f"/proc/{pid}/wchan")
    deadline, since = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try:
            where = wchan.read_text()
        except OSError:
            where = ""
        if where in ("", "0") and process_state(pid) == "R":
            time.sleep(0.02)  # on a CPU now: where it will wait is not known yet
            continue
        if where in ("", "0"):  # asleep, and the kernel hides where (kptr_restrict) or has no such file
            time.sleep(0.5)
            return
        now = time.monotonic()
        since = (since or now) if where.startswith("futex") else None
        if since is not None and now - since >= 0.2:
            return
        time.sleep(0.02)
    raise AssertionError(f"process {pid} never blocked in a mutex")


def post_processor_served(tmp_path: Path, run_id: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, int]:
    """A post-processor started as `npuprof run`'s spawner starts it (a service of this process here, which
    ``hold()`` needs), and its pid."""
    from npuprof.results import postprocess, spawner

    address = spawner.start_service(run_id)
    assert address is not None
    monkeypatch.setenv(spawner.ENV_SPAWN, address)
    post = postprocess.Postprocessor(tmp_path, run_id)
    post.start()
    return post, post_processor_pid(post)


def post_processor_pid(post: Any) -> int:
    """A Postprocessor's pid, once it has said it (on its ready pipe: started through sh, it is not our
    child)."""
    import time

    deadline = time.monotonic() + 20
    while post.pid is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert post.pid is not None
    return post.pid


def wait_for_end(pid: int) -> None:
    """Until process ``pid`` (not our child) has ended, 30 s at most."""
    import select

    try:
        gone = os.pidfd_open(pid)
    except ProcessLookupError:  # it has ended already and its parent has reaped it
        return
    try:
        assert select.select([gone], [], [], 30)[0], f"process {pid} still running"
    finally:
        os.close(gone)


def recursion_depth_of_caller() -> int:
    """The interpreter's recursion depth at the caller, as sys.setrecursionlimit counts it (C calls too,
    not only Python frames): one less than the lowest limit it takes there."""
    limit, low = sys.getrecursionlimit(), 1
    while True:
        try:
            sys.setrecursionlimit(low)
        except RecursionError:
            low += 1
            continue
        sys.setrecursionlimit(limit)
        return low - 2  # this function's own frame is the last one counted
