"""Fault #6 (issue 9): what the user's own sitecustomize does to sys.path must survive npuprof's bootstrap."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from _standin_jobs import standin_torch
from conftest import ROOT, clean_env, npuprof, rank_dirs

BOOTSTRAP = ROOT / "npuprof" / "_bootstrap"
# the last line of the torch job scripts below: what they made (torch's objects above all) is kept out of
# the interpreter's last collection, which walks them all (~0.5 CPU-s a process); atexit, npuprof's
# finalisation, runs before it, as before
FREEZE = "import gc; gc.freeze()\n"


# a user's sitecustomize that fails
FAILING_SITECUSTOMIZE = "raise RuntimeError('user hook broke')\n"


def _user_site(tmp_path: Path, body: str) -> Path:
    site = tmp_path / "usersite"
    site.mkdir()
    (site / "sitecustomize.py").write_text(body)
    return site


def _run_python(out: Path, code: str, pythonpath: str):
    return npuprof(
        "run", "-o", str(out), "--", sys.executable, "-c", code, env=clean_env(PYTHONPATH=pythonpath)
    )


def test_path_appended_by_user_sitecustomize_survives(out: Path, tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "mymod.py").write_text("VALUE = 42\n")
    site = _user_site(tmp_path, f"import sys\nsys.path.append({str(extra)!r})\n")
    result = _run_python(out, "import mymod; print(mymod.VALUE)", str(site))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "42\n"
    assert "Traceback" not in result.stderr


def test_path_inserted_first_by_user_sitecustomize_stays_first(out: Path, tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    site = _user_site(tmp_path, f"import sys\nsys.path.insert(0, {str(extra)!r})\n")
    result = _run_python(out, "import json, sys; print(json.dumps(sys.path))", str(site))
    assert result.returncode == 0, result.stderr
    path = json.loads(result.stdout)
    # `-c` puts "" first once site has run; the user's entry comes right after it.
    assert path[:2] == ["", str(extra)]


def test_path_removed_by_user_sitecustomize_stays_removed(out: Path, tmp_path: Path) -> None:
    doomed = tmp_path / "doomed"
    doomed.mkdir()
    (doomed / "shadowing.py").write_text("VALUE = 'must not be importable'\n")
    site = _user_site(tmp_path, f"import sys\nsys.path.remove({str(doomed)!r})\n")
    code = (
        "import importlib.util, json, sys\n"
        "print(json.dumps(sys.path))\n"
        "print(importlib.util.find_spec('shadowing') is None)\n"
    )
    result = _run_python(out, code, os.pathsep.join([str(site), str(doomed)]))
    assert result.returncode == 0, result.stderr
    path_line, missing = result.stdout.splitlines()
    assert str(doomed) not in json.loads(path_line)
    assert missing == "True"


def test_sys_path_matches_a_run_without_npuprof(out: Path, tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    site = _user_site(tmp_path, f"import sys\nsys.path.append({str(extra)!r})\nsys.path.pop(0)\n")
    code = "import json, sys; print(json.dumps(sys.path))"
    env = clean_env(PYTHONPATH=os.pathsep.join([str(site), str(tmp_path)]))
    plain = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert plain.returncode == 0, plain.stderr
    profiled = npuprof("run", "-o", str(out), "--", sys.executable, "-c", code, env=env)
    assert profiled.returncode == 0, profiled.stderr
    assert json.loads(profiled.stdout) == json.loads(plain.stdout)
    assert str(BOOTSTRAP) not in json.loads(profiled.stdout)


def test_failing_user_sitecustomize_is_reported_as_python_reports_it_and_the_job_is_profiled(
    tmp_path: Path,
    failing_sitecustomize_beside_a_npuprof_folder: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    """helper-124: the job printed "Error in sitecustomize ... KeyError: 'sitecustomize'" (npuprof's module
    gone from sys.modules) in place of the user's own error, which Python reports bare. (The run is
    failing_sitecustomize_beside_a_npuprof_folder's, a folder named npuprof beside its script too.)"""
    site = _user_site(tmp_path, FAILING_SITECUSTOMIZE)
    bare = subprocess.run([sys.executable, "-c", "pass"], env=clean_env(PYTHONPATH=str(site)),
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    said = "Error in sitecustomize; set PYTHONVERBOSE for traceback:\nRuntimeError: user hook broke\n"
    assert bare.stderr == said, bare.stderr
    result, root = failing_sitecustomize_beside_a_npuprof_folder
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ran\n"
    assert said in result.stderr and "KeyError" not in result.stderr and "Traceback" not in result.stderr
    assert len(rank_dirs(root / "npuprof")) == 1  # npuprof's hook was installed all the same


def test_a_user_sitecustomize_whose_own_import_fails_is_reported_as_python_reports_it(
    out: Path, tmp_path: Path
) -> None:
    """A user hook that imports a module no one has raises ImportError of another name than sitecustomize:
    Python reports it ("Error in sitecustomize") and goes on; only a missing hook is silent. Under npuprof
    the same (a chaining that took every ImportError for "no user hook" said nothing). The hook fails only
    where NPUPROF_CONFIG is set: in the job, not in the launcher's own Python, which runs it too."""
    site = _user_site(
        tmp_path, "import os\nif os.environ.get('NPUPROF_CONFIG'):\n    import a_module_no_one_has\n"
    )
    env = clean_env(PYTHONPATH=str(site), NPUPROF_CONFIG="x")  # (meaningless to Python without npuprof)
    bare = subprocess.run(
        [sys.executable, "-c", "print('ran')"], env=env, capture_output=True, text=True, timeout=60
    )
    said = (
        "Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
        "ModuleNotFoundError: No module named 'a_module_no_one_has'\n"
    )
    assert (bare.stdout, bare.stderr) == ("ran\n", said)
    result = _run_python(out, "print('ran')", str(site))
    assert (result.returncode, result.stdout) == (0, "ran\n"), result.stderr
    assert said in result.stderr and "Traceback" not in result.stderr


def test_a_step_on_module_the_users_sitecustomize_imported_first_is_watched(
    out: Path, tmp_path: Path
) -> None:
    """--step-on MODULE:NAME whose module the user's sitecustomize imported before npuprof's finder was
    installed: no import is left for the finder to see, so the agent wakes on the module already loaded
    and counts its steps (plain Python: the agent needs torch only at a capture, none here)."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "trainlib.py").write_text("def train_step(i):\n    return i\n")
    site = _user_site(tmp_path, "import trainlib\n")
    script = tmp_path / "job.py"
    script.write_text("import trainlib\nfor i in range(5):\n    trainlib.train_step(i)\n")
    result = npuprof(
        "run", "-o", str(out), "--skip-first", "50", "--step-on", "trainlib:train_step", "--",
        sys.executable, str(script), env=clean_env(PYTHONPATH=os.pathsep.join([str(site), str(lib)])),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    log = (out / "npuprof.log").read_text()
    assert re.findall(r"\[agent pid=\d+ run=\w+\] steps counted in this process: (\d+)", log) == ["5"], log


def test_a_script_importing_a_user_sitecustomize_that_raised_gets_the_users_again(
    out: Path, tmp_path: Path
) -> None:
    """helper-90: after the user's hook raised, `import sitecustomize` in the script gave npuprof's module,
    silently; without npuprof Python runs the user's again (it raises again). Both the same now."""
    site = _user_site(tmp_path, FAILING_SITECUSTOMIZE)
    code = (
        "try:\n    import sitecustomize\nexcept RuntimeError as exc:\n    print('raised again:', exc)\n"
        "else:\n    print('imported', sitecustomize.__file__)\n"
    )
    bare = subprocess.run([sys.executable, "-c", code], env=clean_env(PYTHONPATH=str(site)),
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert bare.stdout == "raised again: user hook broke\n", bare.stdout
    result = _run_python(out, code, str(site))
    assert result.returncode == 0, result.stderr
    assert result.stdout == bare.stdout


def test_agent_imported_from_the_bootstrap_leaves_sys_path_alone(tmp_path: Path) -> None:
    """Where the job's Python lacks npuprof, the agent comes from the bootstrap's own tree, and sys.path
    keeps no trace of it (python -S: no site-packages, so no installed npuprof)."""
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('boot', {str(BOOTSTRAP / 'sitecustomize.py')!r})\n"
        "boot = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(boot)\n"
        "assert importlib.util.find_spec('npuprof') is None\n"
        "before = list(sys.path)\n"
        "entry = boot._import_entry_from_here()\n"
        "import npuprof.config\n"
        "print(entry.__name__, sys.path == before)\n"
    )
    result = subprocess.run(
        [sys.executable, "-S", "-c", code],
        cwd=tmp_path,  # not the repository, where npuprof would be importable
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "npuprof.agent.entry True\n"


def _beside_a_folder_named_npuprof(
    root: Path, launcher: list[str], own_helper: bool, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``LAUNCHER run -o npuprof`` (skip 2, warm up 1, record 2) of ``python train.py`` (8 steps) in
    ``root``, beside a folder npuprof that is a namespace package for Python, as the first run's `-o npuprof`
    left it for every run after it; in ``env`` (clean_env() when not given). With ``own_helper`` the folder
    also holds the script's own module npuprof/helper.py (no __init__.py), which train.py imports after its
    steps (after torch.optim, where the agent starts) and prints its X: run bare, the script prints "mine"
    and exits 0; without, train.py prints "ran" after its steps."""
    script = root / "train.py"
    script.write_text(
        "import torch\n"
        "model = torch.nn.Linear(8, 8); opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for _ in range(8):\n"
        "    opt.zero_grad(); model(torch.randn(4, 8)).sum().backward(); opt.step()\n"
        + ("import npuprof.helper\nprint(npuprof.helper.X)\n" if own_helper else "print('ran')\n")
        + FREEZE
    )
    (root / "npuprof" / "not_a_package").mkdir(parents=True)
    if own_helper:
        (root / "npuprof" / "helper.py").write_text("X = 'mine'\n")
    return subprocess.run(
        [*launcher, "run", "-o", "npuprof", "--skip-first", "2", "--warmup", "1", "--active", "2", "--",
         sys.executable, str(script)],
        cwd=root, env=env or clean_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.fixture(scope="module")
def failing_sitecustomize_beside_a_npuprof_folder(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """One run by `python -m npuprof` of _beside_a_folder_named_npuprof (train.py prints "ran") whose user
    sitecustomize (on PYTHONPATH) raises: a folder named npuprof beside the script (the test of the agent's
    import) and a failing user hook (the test of its report). Its result and the folder it ran in."""
    root = tmp_path_factory.mktemp("failing_sitecustomize")
    env = clean_env(PYTHONPATH=str(_user_site(root, FAILING_SITECUSTOMIZE)))
    return _beside_a_folder_named_npuprof(root, [sys.executable, "-m", "npuprof"], False, env), root


def _npuprof_script() -> Path:
    """The npuprof script beside this Python (the test is skipped where there is none)."""
    console = Path(sys.executable).with_name("npuprof")
    if not console.is_file():
        pytest.skip(f"no npuprof script beside {sys.executable}")
    return console


@pytest.fixture(scope="module")
def script_beside_its_own_npuprof_folder(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """One run by the npuprof script of _beside_a_folder_named_npuprof with the script's own
    npuprof/helper.py: a folder named npuprof beside the script (the test of the agent's import below) that
    holds the script's own code (the test of a script's own npuprof after it). Its result and the folder it
    ran in."""
    console = _npuprof_script()
    root = tmp_path_factory.mktemp("npuprof_folder")
    return _beside_a_folder_named_npuprof(root, [str(console)], own_helper=True), root


@pytest.mark.parametrize("launcher", ["python -m npuprof", "the npuprof script"])
def test_a_folder_named_npuprof_beside_the_script_does_not_hide_the_agent(
    launcher: str, request: pytest.FixtureRequest
) -> None:
    """helper-101: `-o npuprof` (or a clone of npuprof) beside the script: Python took the folder for a
    namespace package `npuprof`, found before an editable install's finder, and profiling was off in the job
    ("cannot import name 'ENV_CONFIG' from 'npuprof'"), every run after the first. The agent comes from the
    bootstrap's own package then. (`python -m npuprof`'s run is
    failing_sitecustomize_beside_a_npuprof_folder's, its user sitecustomize raising; the npuprof script's is
    script_beside_its_own_npuprof_folder's, its folder holding the script's own npuprof/helper.py too.)"""
    fixture = {
        "python -m npuprof": "failing_sitecustomize_beside_a_npuprof_folder",
        "the npuprof script": "script_beside_its_own_npuprof_folder",
    }[launcher]
    result, root = request.getfixturevalue(fixture)
    assert result.returncode == 0, result.stderr
    assert "profiling is off" not in result.stderr and "agent failed" not in result.stderr, result.stderr
    done = sorted((root / "npuprof").glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/analyse.done"))
    assert len(done) == 1, result.stderr


@pytest.mark.parametrize("form", ["npuprof/helper.py in a folder", "npuprof.py"])
def test_a_script_of_its_own_named_npuprof_keeps_working(
    tmp_path: Path, form: str, request: pytest.FixtureRequest
) -> None:
    """The script's own code named npuprof, imported after torch.optim (where the agent starts): a folder
    of modules without __init__.py stays importable through npuprof's package (its folder follows npuprof's
    own on the package's path), and a module npuprof.py is never replaced: profiling is then off in the
    job, said in one line naming the file (helper-102: it was an obscure 'npuprof.agent' error). (The
    folder's run is script_beside_its_own_npuprof_folder's, its output in that folder.)"""
    if form == "npuprof/helper.py in a folder":
        result, root = request.getfixturevalue("script_beside_its_own_npuprof_folder")
        # (run bare, the script prints "mine" and exits 0: under npuprof it must do the same)
        assert result.returncode == 0 and result.stdout == "mine\n", result.stderr
        assert list((root / "npuprof").glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/analyse.done")), result.stderr
        return
    (tmp_path / "npuprof.py").write_text("X = 'mine'\n")
    # the agent fails at its start, before any capture: plain Python will do
    env = clean_env(PYTHONPATH=str(standin_torch(tmp_path)))
    steps = "import torch.optim.optimizer\nassert 'standin' in torch.optim.optimizer.__file__\n"
    script = tmp_path / "train.py"
    script.write_text(steps + "import npuprof\nprint(npuprof.X)\n" + FREEZE)
    # (run bare, the script prints "mine" and exits 0: under npuprof it must do the same, checked below)
    console = _npuprof_script()  # `python -m npuprof` here would run npuprof.py
    schedule = ("--skip-first", "1", "--warmup", "1", "--active", "2")
    result = subprocess.run(
        [str(console), "run", "-o", str(tmp_path / "out"), *schedule, "--", sys.executable, str(script)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0 and result.stdout == "mine\n", result.stderr
    why = f"a module named npuprof (['{tmp_path / 'npuprof.py'}']) hides npuprof's package"
    assert why in result.stderr
    # the last line says what failed, not that the script imported no torch.optim (helper-101, -102)
    last = " ".join(result.stderr.split("npuprof: no capture was written")[-1].split())
    assert last.startswith("(exit code 0): npuprof's agent failed to start in the job: ImportError"), last
    assert last.endswith(
        "hides npuprof's package: rename it\"). See " + str(tmp_path / "out" / "npuprof.log.")
    ), last


@pytest.mark.parametrize("closed", ["1", "2", "1 2"])
def test_a_job_started_with_stdout_or_stderr_closed_gets_no_npuprof_descriptor_there(
    tmp_path: Path, closed: str
) -> None:
    """helper-124: with `>&-` (or `2>&-`) the agent's kept log descriptor took the number: the job's own
    writes to fd 1 (C's printf, os.write) landed in npuprof.log. The job must find the numbers as it would
    bare: closed until it opens something itself."""
    script = tmp_path / "fds.py"
    script.write_text(
        "import json, os, sys, torch\n"
        "m = torch.nn.Linear(4, 4); o = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(10):\n"
        "    m(torch.randn(2, 4)).sum().backward(); o.step()\n"
        "found = []\n"
        "for fd in (1, 2):\n"
        "    try:\n"
        "        found.append(os.readlink(f'/proc/self/fd/{fd}'))\n"
        "    except OSError:\n"
        "        found.append('closed')\n"
        "with open(sys.argv[1], 'w') as report:\n"
        "    report.write(json.dumps(found))\n" + FREEZE
    )
    report, out = tmp_path / "report.txt", tmp_path / "out"
    closing = " ".join(f"{fd}>&-" for fd in closed.split())
    command = f'exec "$@" {closing}'
    job = [sys.executable, str(script), str(report)]
    args = [sys.executable, "-m", "npuprof", "run", "-o", str(out), "--", *job]
    proc = subprocess.run(
        ["sh", "-c", command, "sh", *args], env=clean_env(), timeout=180, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = dict(zip(("1", "2"), json.loads(report.read_text()), strict=True))
    for fd in closed.split():
        assert found[fd] == "closed", found
    assert (out / "npuprof.log").is_file() and len(list(out.glob("*_ascend_pt"))) == 1


FOLLOW = """
import types
from npuprof.agent.entry import Agent
from npuprof.agent.log import AgentLog
Agent._follow_the_launcher(types.SimpleNamespace(run={{"launcher_pid": {dead}}}, log=AgentLog(None, "t")))
print("alive", flush=True)
"""


def test_only_the_jobs_first_process_ends_when_its_agent_finds_the_launcher_dead() -> None:
    """An agent that wakes after `npuprof run` has died ends its process with SIGTERM, as the launcher's
    death would have (PR_SET_PDEATHSIG), but only in the job's first process. A trainer the job started in
    a process group of its own (`subprocess.Popen(process_group=0)`) and left to run, importing torch once
    the job's first process and npuprof run had ended, took that for the launcher's death and ended with
    SIGTERM, where without npuprof it trained to its end (helper-158). The first process is told by its
    bootstrap: its parent was the launcher as it started. Plain Python: the agent's check alone."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    code = FOLLOW.format(dead=dead.pid)  # the agent finds the launcher, pid `dead`, gone

    def follow(launcher_for_the_bootstrap: int, **env: str) -> subprocess.CompletedProcess[str]:
        environ = {**clean_env(), "PYTHONPATH": f"{BOOTSTRAP}{os.pathsep}{ROOT}", **env}
        environ["NPUPROF_LAUNCHER_PID"] = str(launcher_for_the_bootstrap)
        return subprocess.run(
            [sys.executable, "-c", code], env=environ, process_group=0, capture_output=True, text=True,
            timeout=60,
        )  # fmt: skip

    # a trainer of the job in a group of its own: the first process (this test) named itself
    late = follow(dead.pid, NPUPROF_JOB_PID=str(os.getpid()))
    assert (late.returncode, late.stdout) == (0, "alive\n"), late.stderr
    # the job's first process: its bootstrap found the launcher (this test, then) its parent
    first = follow(os.getpid())
    assert first.returncode == -signal.SIGTERM, (first.returncode, first.stdout, first.stderr)


FOLLOW_BY_RECORD = """
import json, os, sys, types
from npuprof.agent.entry import Agent
from npuprof.agent.log import AgentLog
output, dead, named = sys.argv[1], int(sys.argv[2]), sys.argv[3]
job_pid = os.getpid() if named == "self" else int(named)
t = open(f"/proc/{job_pid}/stat").read()
started = int(t[t.rindex(")") + 2 :].split()[19])  # as the launcher reads it (helper-165)
with open(os.path.join(output, "npuprof_run.json"), "w") as f:
    json.dump({"run_id": "r1", "launcher_pid": dead, "job_pid": job_pid, "job_start_ticks": started}, f)
run = {"launcher_pid": dead, "output": output, "run_id": "r1"}
Agent._follow_the_launcher(types.SimpleNamespace(run=run, log=AgentLog(None, "t")))
print("alive", flush=True)
"""


def test_the_jobs_first_process_started_after_the_launcher_died_ends_by_the_run_record(
    tmp_path: Path,
) -> None:
    """`npuprof run -- bash -c 'setup; exec python train.py'` with npuprof run killed (kill -9) during the
    setup: the Python's bootstrap found its parent gone, so it was never told it is the job's first
    process, and the job trained on with no launcher where before helper-158's change it ended at its
    `import torch`. The launcher names the job's first process in the run record (`job_pid`, checked by
    a plain `npuprof run` below); an agent that finds the launcher dead ends its process when it is that
    one, and only then (helper-160)."""
    dead = subprocess.Popen(["true"])
    dead.wait()

    def follow(named: str) -> subprocess.CompletedProcess[str]:
        environ = {**clean_env(), "PYTHONPATH": f"{BOOTSTRAP}{os.pathsep}{ROOT}"}
        environ["NPUPROF_LAUNCHER_PID"] = str(dead.pid)  # the bootstrap finds its parent another process
        return subprocess.run(
            [sys.executable, "-c", FOLLOW_BY_RECORD, str(tmp_path), str(dead.pid), named], env=environ,
            process_group=0, capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    other = follow(str(os.getpid()))  # the record names another process: a trainer of the job
    assert (other.returncode, other.stdout) == (0, "alive\n"), other.stderr
    first = follow("self")
    assert first.returncode == -signal.SIGTERM, (first.returncode, first.stdout, first.stderr)

    out = tmp_path / "out"
    said = (
        "import os; t = open('/proc/self/stat').read(); print(os.getpid(), t.rpartition(')')[2].split()[19])"
    )
    result = npuprof("run", "-o", str(out), "--", sys.executable, "-c", said)
    assert result.returncode == 0, result.stderr
    record = json.loads((out / "npuprof_run.json").read_text())
    pid, started = map(int, result.stdout.split()[-2:])
    assert (record["job_pid"], record["job_start_ticks"]) == (pid, started), record


FOLLOW_A_REUSED_PID = """
import json, os, sys, types
from npuprof.agent.entry import Agent
from npuprof.agent.log import AgentLog
output, dead, mark, in_record = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "record"
t = open("/proc/self/stat").read()
started = int(t[t.rindex(")") + 2 :].split()[19])
pid, start = str(os.getpid()), {"own": str(started), "earlier": str(started - 1), "none": ""}[mark]
if in_record:
    with open(os.path.join(output, "npuprof_run.json"), "w") as f:
        record = {"run_id": "r1", "launcher_pid": dead, "job_pid": int(pid), "job_start_ticks": int(start)}
        json.dump(record, f)
else:
    os.environ["NPUPROF_JOB_PID"] = f"{pid}:{start}" if start else pid
run = {"launcher_pid": dead, "output": output, "run_id": "r1"}
Agent._follow_the_launcher(types.SimpleNamespace(run=run, log=AgentLog(None, "t")))
print("alive", flush=True)
"""


def test_a_process_given_the_first_ones_pid_later_is_not_the_first_process(tmp_path: Path) -> None:
    """The job's first process was known by its pid alone (NPUPROF_JOB_PID, which its children inherit, and
    the run record's job_pid): a process of the run given that pid after the first one died (the pids
    wrapped round), leading a group of its own, took itself for the first process and ended with SIGTERM
    when its agent found npuprof run dead, where without npuprof it trained on. The mark holds the
    process's start too (/proc/self/stat's starttime, kept across exec), which a later process with the
    same pid cannot have: here a process finds its own pid with an earlier start (or none: the pid-only
    mark) named, in its environment or in the record, and trains on; with its own start, it ends
    (helper-165)."""
    dead = subprocess.Popen(["true"])
    dead.wait()

    def follow(mark: str, where: str) -> subprocess.CompletedProcess[str]:
        environ = {**clean_env(), "PYTHONPATH": f"{BOOTSTRAP}{os.pathsep}{ROOT}"}
        environ["NPUPROF_LAUNCHER_PID"] = str(dead.pid)  # the bootstrap finds its parent another process
        return subprocess.run(
            [sys.executable, "-c", FOLLOW_A_REUSED_PID, str(tmp_path), str(dead.pid), mark, where],
            env=environ, process_group=0, capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    for mark, where in (("none", "env"), ("earlier", "env"), ("earlier", "record")):
        reused = follow(mark, where)
        assert (reused.returncode, reused.stdout) == (0, "alive\n"), (mark, where, reused.stderr)
    for where in ("env", "record"):
        first = follow("own", where)
        assert first.returncode == -signal.SIGTERM, (where, first.returncode, first.stdout, first.stderr)
