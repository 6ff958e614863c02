"""The `npuprof` command: a thin typer app; each subcommand lives in its own module.

Importing this module is cheap: typer (and the command modules) load only when the app is needed.
`npuprof run` with simple flags skips typer altogether (npuprof.cli.run_flags), so the launcher starts
in tens of milliseconds.
"""

from __future__ import annotations

import errno
import io
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    import typer

COMMAND_MODULES = ("run", "trigger", "status", "analyse", "export_stacks", "memory_timeline", "info")
# as typed: `npuprof memory_timeline` is no command (its error named `npuprof memory_timeline --help`)
COMMAND_NAMES = tuple(name.replace("_", "-") for name in COMMAND_MODULES)
# other spellings of a command, read as the command itself: a hidden command of typer's was suggested
# beside it ("No such command 'anaylse'. Did you mean 'analyse', 'analyze'?")
ALIASES = {"analyze": "analyse"}
_app: list[typer.Typer] = []


def get_app() -> typer.Typer:
    """The typer app with every command registered (built once)."""
    if not _app:
        import typer

        app = typer.Typer(
            name="npuprof",
            help="Profile PyTorch training (Ascend NPU, CUDA, CPU) without editing the training script.",
            no_args_is_help=True,
            add_completion=True,
            pretty_exceptions_enable=False,
            context_settings={"help_option_names": ["-h", "--help"]},
        )
        app.callback()(_root_callback())
        _register(app)
        _no_type_for_flags()
        _app.append(app)
    return _app[0]


def _no_type_for_flags() -> None:
    """Help shows no type for an option that takes no value: typer 0.2x shows ``--force <bool>``, which
    reads as if it took one (``--force true`` is then refused)."""
    from typer import core

    shown = getattr(core.TyperOption, "display_type_rich", None)
    if shown is None or getattr(shown, "npuprof_flags", False):
        return

    def display_type_rich(self: Any, ctx: Any) -> str | None:
        return None if getattr(self, "is_flag", False) else shown(self, ctx)

    display_type_rich.npuprof_flags = True  # type: ignore[attr-defined]
    core.TyperOption.display_type_rich = display_type_rich


def _root_callback() -> Any:
    """The app's own options (``--version``), ahead of any command."""
    import typer

    def show_version(value: bool) -> None:
        if value:
            from npuprof import __version__

            sys.stdout.write(f"npuprof {__version__}\n")
            raise typer.Exit(0)

    def root(
        version: bool = typer.Option(
            False, "--version", is_eager=True, callback=show_version, help="Show npuprof's version and exit."
        ),
    ) -> None:
        """Profile PyTorch training (Ascend NPU, CUDA, CPU) without editing the training script."""

    return root


def __getattr__(name: str) -> Any:
    if name == "app":
        return get_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _register(app: typer.Typer) -> None:
    import importlib

    for name in COMMAND_MODULES:
        importlib.import_module(f"npuprof.cli.{name}").register(app)


class GuardedStream:
    """What npuprof's own commands write to (``sys.stdout``, ``sys.stderr``): the stream itself, except that a
    write or flush that fails (a closed descriptor, a reader gone: EPIPE, a full disk) is dropped and
    remembered in ``error``, never raised. The launcher's terminal lines can never stop it from reaping
    the job or change the job's exit code; ``npuprof analyse`` asks ``error`` whether its report got out."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream  # None when the descriptor was closed when Python started
        self.error: OSError | None = None

    def write(self, text: str) -> int:
        if self.error is None:
            try:
                if self.stream is None:
                    raise OSError(errno.EBADF, "closed")
                raw = _unbuffered_file_under(self.stream)
                if raw is None:
                    return self.stream.write(text)
                _write_whole(raw, self.stream, text)
            except (OSError, ValueError) as exc:
                self._failed(exc)
        return len(text)

    def flush(self) -> None:
        if self.error is None and self.stream is not None:
            try:
                self.stream.flush()
            except (OSError, ValueError) as exc:
                self._failed(exc)

    def _failed(self, exc: OSError | ValueError) -> None:
        self.error = exc if isinstance(exc, OSError) else OSError(errno.EBADF, str(exc))

    def isatty(self) -> bool:
        try:
            return self.stream is not None and self.error is None and bool(self.stream.isatty())
        except (OSError, ValueError):
            return False

    def fileno(self) -> int:
        if self.stream is None:
            raise io.UnsupportedOperation("closed")
        return self.stream.fileno()

    def writable(self) -> bool:
        return True

    def __getattr__(self, name: str) -> Any:
        if self.stream is None:
            raise AttributeError(name)
        return getattr(self.stream, name)


def _unbuffered_file_under(stream: Any) -> io.RawIOBase | None:
    """The bare file under a text stream Python opened unbuffered (``python -u``, ``PYTHONUNBUFFERED=1``,
    set in many containers: ``sys.stdout.buffer`` is then a FileIO), else None. Such a TextIOWrapper
    hands each write to the file once and drops what a short write left: ``export-stacks > file`` on a
    disk that filled kept the first 64 KiB and exited 0, and ``| head`` exited 0, not 141."""
    under = getattr(stream, "buffer", None)
    return under if isinstance(under, io.RawIOBase) else None


def _write_whole(raw: io.RawIOBase, stream: Any, text: str) -> None:
    """``text`` encoded as ``stream`` encodes it, written to ``raw`` until every byte is out: a short
    write goes on from where it stopped, so the write that cannot go on raises (EPIPE, ENOSPC)."""
    stream.flush()
    data = memoryview(text.encode(stream.encoding or "utf-8", stream.errors or "strict"))
    while data:
        written = raw.write(data)
        if written is None:  # a non-blocking descriptor that is full
            raise BlockingIOError(errno.EAGAIN, "the output would block")
        if written == 0:  # a file that takes nothing would be written to for ever
            raise OSError(errno.EIO, "the output took no byte")
        data = data[written:]


def guard_streams() -> None:
    """Make sys.stdout and sys.stderr GuardedStreams (once): every terminal write of the launcher and of
    the report commands goes through them, rich's and typer's included."""
    _file_names_as_their_bytes(sys.stdout)
    for name in ("stdout", "stderr"):
        if not isinstance(getattr(sys, name), GuardedStream):
            setattr(sys, name, GuardedStream(getattr(sys, name)))


def _file_names_as_their_bytes(stream: Any) -> None:
    """A path's bytes that are not UTF-8 (``os.fsdecode``'s surrogates, ``\udcff``) written to stdout as
    those bytes, as Python already does in the C locale: where the locale's stdout is strict (en_US.UTF-8),
    ``npuprof analyse`` of such a directory wrote no report ("cannot write the report to stdout: ...
    surrogates not allowed", exit 1), and ``npuprof status`` none."""
    if getattr(stream, "errors", None) != "strict":
        return
    try:
        stream.reconfigure(errors="surrogateescape")
    except (AttributeError, ValueError, OSError):
        pass


def stream_error(name: str) -> OSError | None:
    """The first write error of ``sys.<name>`` (a GuardedStream), or None."""
    stream = getattr(sys, name, None)
    return stream.error if isinstance(stream, GuardedStream) else None


def check_stdout(command: str, what: str) -> None:
    """``what`` must not be lost without a word: stdout that could not be written (a full disk, a closed
    descriptor) is an error (exit 1); a reader that stopped reading (``| head``) ends the command as
    SIGPIPE would (exit 141), quietly."""
    import typer

    try:
        sys.stdout.flush()
        error = stream_error("stdout")  # a GuardedStream keeps the error of its writes
    except OSError as exc:
        error = exc
    if error is None:
        return
    exit_if_reader_gone(error)
    print(f"{command}: cannot write {what} to stdout: {error.strerror or error}", file=sys.stderr)
    raise typer.Exit(1)


def exit_if_reader_gone(error: OSError) -> None:
    """A pipe whose reader stopped reading (``| head``, ``-o >(head)``, a named pipe's reader gone) ends the
    command as SIGPIPE would (exit 141), quietly: ``-o >(head)`` said "cannot write ...: Broken pipe" and
    exited 1 where ``| head`` exited 141."""
    import signal

    import typer

    if error.errno == errno.EPIPE:
        raise typer.Exit(128 + signal.SIGPIPE)


def warn_flags_given_twice(command: str) -> None:
    """One warning line on stderr for each flag of this command given two values (the last wins), in
    `npuprof run`'s words (run_flags.given_twice; README, "`npuprof run` flags"): analyse, status and the
    rest took the last without a word. Called once the command's flags are found good."""
    for line in flags_given_twice():
        sys.stderr.write(f"npuprof {command}: warning: {line}\n")


def flags_given_twice() -> list[str]:
    """given_twice's lines for the words after ``npuprof COMMAND``, the command's flags read from its
    typer parameters."""
    argv = sys.argv[2:]
    if sum(word.startswith("-") for word in argv) < 2:
        return []  # nothing given twice: typer's command not built again
    import typer

    commands = getattr(typer.main.get_command(get_app()), "commands", {})
    if sys.argv[1] not in commands:  # (a test calling the command's function)
        return []
    from npuprof.cli.run_flags import given_twice

    options, names = _flags_of(commands[sys.argv[1]].params)
    return given_twice(argv, options, command_follows=False, names=names)[0]


def _flags_of(params: list[Any]) -> tuple[dict[str, tuple[str, object]], dict[str, str]]:
    """click's parameters as given_twice reads flags: flag -> (key, kind or a bool flag's value), and the
    flag that names each key (its long form)."""
    options: dict[str, tuple[str, object]] = {}
    names: dict[str, str] = {}
    for param in params:
        opts = [o for o in param.opts if o.startswith("-")]
        if not opts:
            continue  # an argument
        names[param.name] = max(opts, key=len)
        if getattr(param, "is_flag", False):
            options |= {o: (param.name, True) for o in opts}
            options |= {o: (param.name, False) for o in param.secondary_opts}
            continue
        kind = "list" if getattr(param, "multiple", False) else _kind_of(param.type.name)
        options |= {o: (param.name, _MEANINGS.get(param.name, kind)) for o in opts}
    return options, names


def _steps_meant(text: str) -> object:
    from npuprof.analysis.step_selection import parse_steps

    return parse_steps(text)


# a flag whose values agree when they mean the same, however written: analyse's --steps 3 and 3,3
_MEANINGS: dict[str, Callable[[str], object]] = {"steps": _steps_meant}


def _kind_of(type_name: str) -> str:
    """A click type's name as given_twice's kind: click says "integer", "integer range", "float", "text",
    the click typer 0.28 carries "int", "int range", "str"."""
    return "int" if type_name.startswith("int") else "float" if type_name.startswith("float") else "str"


def main() -> None:
    try:
        _main()
    except KeyboardInterrupt:  # Ctrl-C while npuprof starts (its imports): no traceback; it dies of SIGINT,
        try:  # as after the job's start, so that a shell loop around it stops
            sys.stderr.write("npuprof: aborted\n")
            sys.stderr.flush()
        except Exception:
            pass
        import os
        import signal

        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        _leave(130)


def _main() -> None:
    guard_streams()
    from npuprof.invocation import remember

    remember(sys.argv[0])  # the command its messages suggest (`next: .venv/bin/npuprof analyse DIR`)
    sys.argv[1:2] = [ALIASES.get(word, word) for word in sys.argv[1:2]]
    sys.argv[1:] = short_option_values(sys.argv[1:])
    if sys.argv[1:2] != ["run"]:  # run's job keeps the user's environment; its summary's console copes
        import os

        from npuprof.reports.line_width import drop_unusable_sizes

        drop_unusable_sizes(os.environ)  # COLUMNS=0: typer's help and any rich console printed nothing
    if _asks_for_help(sys.argv[1:]):
        _help_in_any_locale()
    if sys.argv[1:2] == ["trigger"] and _asks_for_help(sys.argv[1:]):
        from npuprof.cli.trigger import print_help

        print_help()  # laid out for 80 columns, never cutting a flag
        _leave(0)
    if sys.argv[1:] == ["--version"]:
        from npuprof import __version__

        sys.stdout.write(f"npuprof {__version__}\n")
        _leave(0)
    if sys.argv[1:2] == ["run"]:
        from npuprof.cli.run_help import asks_for_help, print_help

        if asks_for_help(sys.argv[2:]):  # laid out for 80 columns, never cutting a flag (cli/run_help.py)
            print_help()
            _leave(0)
        from npuprof.cli.run_flags import fast_run

        code = fast_run(sys.argv[2:])
        if code is not None:
            _leave(code)
    _leave(_run_typer())


def short_option_values(argv: list[str]) -> list[str]:
    """``-o=rr`` as argparse reads it (torchrun, memray; ``--output=rr``): the value ``rr``. click reads
    ``-o=rr`` as ``-o`` given ``=rr``, and ``npuprof run -o=rr`` made a directory named ``=rr``. Only
    npuprof's own flags change: nothing after ``--``, nor from the first word of ``run``'s command on."""
    if not argv:
        return argv
    from npuprof.cli.run_flags import OPTIONS

    out = argv[:1]
    takes_value = False  # the word before is a flag that takes a value: this word is that value
    for i, word in enumerate(argv[1:], start=1):
        if word == "--" or (argv[0] == "run" and not takes_value and not word.startswith("-")):
            return out + argv[i:]
        if not takes_value and len(word) > 2 and word[0] == "-" and word[1].isalpha() and word[2] == "=":
            if word[1] == "h":  # -h takes no value: click's message, as before
                out.append(word)
                continue
            out += [word[:2] + word[3:]] if len(word) > 3 else [word[:2], ""]  # -o= : empty, refused so
            continue
        out.append(word)
        if takes_value:
            takes_value = False
            continue
        spec = OPTIONS.get(word) if argv[0] == "run" else None
        short = len(word) == 2 and word[0] == "-" and word[1].isalpha() and word != "-h"
        takes_value = short or (spec is not None and not isinstance(spec[1], bool))
    return out


def _asks_for_help(argv: list[str]) -> bool:
    """-h/--help before ``--``, or a command line that typer answers with the help (no arguments)."""
    before = argv[: argv.index("--")] if "--" in argv else argv
    return any(a in ("-h", "--help") for a in before) or argv == []


def _help_in_any_locale() -> None:
    """Help is text for a reader: a character the locale cannot encode (export-stacks' 'µs' in an ASCII
    locale) is written escaped. Its UnicodeEncodeError stopped stdout (GuardedStream), and the help ended
    at its Usage line, exit 0 (helper-211)."""
    stream = getattr(sys.stdout, "stream", sys.stdout)
    try:
        stream.reconfigure(errors="backslashreplace")
    except (AttributeError, ValueError, OSError):
        pass


def _run_typer() -> int:
    """Run the typer app; a usage error (unknown option, bad value) becomes one line and exit 2."""
    import typer

    # click's UsageError (typer vendors click in recent releases, so reach it through a public class)
    usage_error = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
    try:
        result = get_app()(prog_name="npuprof", standalone_mode=False)
    except usage_error as exc:
        from npuprof.invocation import npuprof_cmd

        where = exc.ctx.command_path if exc.ctx is not None else "npuprof"
        command = sys.argv[1] if len(sys.argv) > 1 else ""
        if where == "npuprof" and command in COMMAND_NAMES:
            where = f"npuprof {command}"  # an option the command's parser refused: its help is the one
        helped = npuprof_cmd(" ".join([*where.split()[1:], "--help"]))  # as the user can run it
        message = " ".join(exc.format_message().split()).rstrip(".")
        message = _in_our_words(message)
        launcher = _launchers_flag(message) if where == "npuprof run" else None
        if where == "npuprof analyse" and _no_such_option(message) == "--rank":
            # click suggests --run (a run id) for it: the rank is chosen by its directory
            sys.stderr.write(
                f"{where}: error: --rank is not a flag of analyse: give that rank's directory "
                "(the *_ascend_pt under the result dir, which npuprof run's summary lists) to report it "
                "alone; export-stacks and memory-timeline take --rank N\n"
            )
        elif where == "npuprof analyse" and _no_such_option(message) in _OUTPUT_FLAGS:
            # export-stacks and memory-timeline take -o: analyse's refusal named no way to save its report
            flag = _no_such_option(message)
            sys.stderr.write(
                f"{where}: error: {flag} is not a flag of analyse, which writes its report to stdout: "
                f"{npuprof_cmd('analyse DIR > report.txt')} (--format json or csv for a file to read back)\n"
            )
        elif where == "npuprof trigger" and (why := _runs_flag_given_to_trigger(message)) is not None:
            sys.stderr.write(f"{where}: error: {why}; see {helped}\n")
        elif where == "npuprof run" and (steps := _steps_flag(message)) is not None:
            # click offered --step-on for --steps and --num-steps (a function to count steps at), nothing
            # for --start-step (torch_npu's start_step, trigger's --start-step), and --help for --schedule
            whose = (
                "torch.profiler.schedule's arguments are flags of their own, --wait N and --repeat R too"
                if _is_schedule_flag(steps)
                else "torch_npu's start_step is --skip-first"
            )
            sys.stderr.write(
                f"{where}: error: {steps} is not a flag of run: --skip-first N --warmup W --active M "
                f"choose the steps recorded, N+W to N+W+M-1 ({whose}; the default 5, 1, 3 records steps "
                f"6-8); see {helped}\n"
            )
        elif launcher is not None:  # `npuprof run --nproc-per-node 8 train.py`: torchrun itself was left out
            sys.stderr.write(
                f"{where}: error: {launcher} is torchrun's flag, not npuprof's; start torchrun after --: "
                f"npuprof run [flags] -- torchrun {launcher} ... train.py\n"
            )
        elif message:  # (no_args_is_help shows the help, then raises with no message)
            give = _GIVE_FOR_MISSING.get(where, "") if message.startswith("Missing argument") else ""
            if message.startswith("Missing option") and where == "npuprof memory-timeline":
                give = _GIVE_TIMELINE_OUTPUT
            sys.stderr.write(f"{where}: error: {message}{give}; see {helped}\n")
        return 2
    except (typer.Abort, KeyboardInterrupt):
        sys.stderr.write("npuprof: aborted\n")
        return 130
    except OSError as exc:  # a path the command could not look at (no permission, a name too long, ...)
        where = f"npuprof {sys.argv[1]}" if len(sys.argv) > 1 else "npuprof"
        what = f"{exc.filename}: " if exc.filename else ""
        sys.stderr.write(f"{where}: error: {what}{exc.strerror or exc}\n")
        return 1
    if result == 130:  # typer turns a KeyboardInterrupt (Ctrl-C) into a silent Exit(130)
        command = f"npuprof {sys.argv[1]}" if len(sys.argv) > 1 else "npuprof"
        sys.stderr.write(f"{command}: interrupted (Ctrl-C); run it again\n")
    return result if isinstance(result, int) else 0


# torchrun's own flags (as it reads them, `-` or `_`): given to `npuprof run`, torchrun was left out
_TORCHRUN_FLAGS = frozenset(
    {
        "nproc-per-node",
        "nnodes",
        "node-rank",
        "master-addr",
        "master-port",
        "rdzv-backend",
        "rdzv-endpoint",
        "rdzv-id",
        "rdzv-conf",
        "standalone",
        "max-restarts",
        "monitor-interval",
        "local-ranks-filter",
        "redirects",
        "tee",
        "log-dir",
        "no-python",
        "run-path",
        "role",
        "local-addr",
    }
)


def _no_such_option(message: str) -> str | None:
    """The flag of ``No such option: --rank ...`` (its ``=value`` left out), else None."""
    words = message.split()
    if message.startswith("No such option: ") and len(words) > 3:
        return words[3].split("=")[0]
    return None


# memory-timeline's -o is required: its format follows the name's suffix, which the bare refusal never said
_GIVE_TIMELINE_OUTPUT = ": give e.g. -o memory.html (a plot), or a .json, .json.gz or .raw.json.gz name"

_ONE_CAPTURE = (
    ": give a capture's directory (a *_ascend_pt that npuprof run's summary lists; or npuprof run's output "
    "directory, with --rank N where it holds several ranks) or a trace file"
)

# what to give where a command's argument is missing (status and trigger once printed their whole help)
_GIVE_FOR_MISSING = {
    "npuprof status": ": give the directory of npuprof run --dynamic DIR",
    "npuprof trigger": ": give the directory of npuprof run --dynamic DIR",
    # (a new user's first `npuprof analyse`, the run's output not named)
    "npuprof analyse": ": give npuprof run's output directory (-o; ./npuprof_result without it)",
    "npuprof export-stacks": _ONE_CAPTURE,
    "npuprof memory-timeline": _ONE_CAPTURE,
}


# what a flag of run's that trigger has not (a capture's own flags are both's) means for a request
_FOR_A_REQUEST = {
    "export_stacks": "give it to npuprof run --dynamic DIR, and --with-stack to each trigger",
    "memory_timeline": (
        "give it to npuprof run --dynamic DIR, and --profile-memory --record-shapes --with-stack to each "
        "trigger"
    ),
    "metadata_json": "each trigger takes --metadata KEY=VALUE (text), or set the file's metadata key",
    "dynamic": "give its DIR as trigger's argument: npuprof trigger DIR [flags]",
    "config": "trigger writes DIR/profiler_config.json itself; or edit that file by hand",
    "delay": "a trigger asks for steps: --start-step N --warmup W --active M",
    "duration": "a trigger asks for steps: --start-step N --warmup W --active M",
}


def _runs_flag_given_to_trigger(message: str) -> str | None:
    """Why ``No such option: --export-stacks ...`` of `npuprof trigger` is a flag of run's, and what a
    request takes instead; None for any other flag. click's "Possible options" named neither (helper-286)."""
    from npuprof.cli.run_flags import OPTIONS
    from npuprof.options import BY_KEY

    flag = _no_such_option(message)
    spec = OPTIONS.get(flag or "")
    if spec is None:
        return None
    key = spec[0]
    if BY_KEY[key].in_schedule:
        instead = "a trigger asks for one window: --start-step N --warmup W --active M"
    else:
        instead = _FOR_A_REQUEST.get(key, "it is the job's, set as npuprof run starts, for every capture")
    return f"{flag} is a flag of npuprof run, not of trigger: {instead}"


_OUTPUT_FLAGS = ("-o", "--output", "--out")  # analyse's report goes to stdout

# what a user new to npuprof tries for "which steps, how many" (torch_npu's config has start_step)
_STEP_COUNT_WORDS = frozenset(
    {
        "steps",
        "step",
        "num-steps",
        "nsteps",
        "start-step",
        "start",
        "max-steps",
        "profile-steps",
        "record-steps",
        "schedule",  # torch.profiler.schedule(...)'s name
        "profile-schedule",
    }
)


def _is_schedule_flag(flag: str) -> bool:
    return flag[2:].lower().replace("_", "-").endswith("schedule")


def _steps_flag(message: str) -> str | None:
    """The flag of ``No such option: --steps ...`` when it asks which steps to record, else None."""
    flag = _no_such_option(message)
    if flag is not None and flag.startswith("--") and flag[2:].lower().replace("_", "-") in _STEP_COUNT_WORDS:
        return flag
    return None


def _launchers_flag(message: str) -> str | None:
    """The flag of ``No such option: --nproc-per-node ...`` when it is torchrun's, else None."""
    flag = _no_such_option(message)
    if flag is not None and flag.startswith("--") and flag[2:].replace("_", "-") in _TORCHRUN_FLAGS:
        return flag
    return None


def _in_our_words(message: str) -> str:
    """A number flag given text or a fraction: click (typer < 0.29) and pydantic (typer >= 0.29) wording.
    Click's names the value (as repr: a quote, a byte that is not UTF-8 read in a C locale stay readable),
    and so does ours: ``--repeat 0x10`` was said as "must be a whole number", leaving the user to find which
    word was meant."""
    import re

    quoted = r"""('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")"""
    message = re.sub(quoted + r" is not a valid int(?:eger)?", r"\1 is not a whole number", message)
    message = re.sub(quoted + r" is not a valid float", r"\1 is not a number", message)
    return re.sub(
        r"Input should be a valid integer, "
        r"(?:unable to parse string as an integer|got a number with a fractional part)",
        "must be a whole number",
        message,
    )


def _leave(code: int) -> None:
    """Exit at once: the job is over and nothing of ours needs finalising; tearing the interpreter down
    would add ~15-25 ms to every run."""
    import os

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)
