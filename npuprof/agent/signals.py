"""Signals inside the training process (docs/architecture.md, "Safety").

SIGTERM while a capture records: the capture is finalised, then the process dies of SIGTERM as it would
have without npuprof. Python runs a signal handler only between bytecodes of the main thread, so a rank
blocked in C++ (a gloo collective whose peer never comes) would never run it and never die. A watcher
thread, woken through ``signal.set_wakeup_fd``, gives the handler ``HANDLER_GRACE_S`` to start
(``PEER_GRACE_S`` in one rank of several: see there); when it has not, the C-level disposition is put
back to the default and the signal raised again: the process dies as without npuprof (the capture stays
marked "capturing", read as interrupted).

The guard is installed for one or more duties (``Duties``): a capture that records, an ended capture's
memory snapshot still being copied, a --dynamic session between captures. They say what a SIGTERM must
finish before the process dies of it, and how long the watcher waits for a main thread that does not start
the handler; the handler goes when none is left.

A trace export (the profiler's stop or step that collects and writes the trace: seconds for a big one)
holds SIGTERM back, at most ``HANDLER_LIMIT_S``: the watcher waits for it rather than killing the process
after ``HANDLER_GRACE_S``, and the handler only notes the signal. Once the block ends the signal is
delivered: the trace just written is handed over and the process dies of SIGTERM as it would have.
SIGINT during a trace export is held back until the export is done, so that a Ctrl-C never turns a
finished trace into a lost one; the KeyboardInterrupt then comes as usual.

The handler stays npuprof's only while it is SIGTERM's installed handler and the guard is installed. Called
any other way (the script re-installed it after the capture, or a handler of the script's keeps it as
"the previous handler" and chains to it), it does what the handler it replaced would: SIG_DFL's action
when it is still SIGTERM's handler, nothing when chained to (SIG_DFL cannot be called), SIG_IGN nothing,
a Python handler is called.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from npuprof.agent import child_signal, sigterm_clock, threads
from npuprof.agent.child_signal import ChildSignalWrap
from npuprof.agent.ranks import one_rank_of_several
from npuprof.owned_fd import OwnedFd, moved_high, room_for

try:  # signal's C module: handlers as they are; signal's wrappers make an enum of each (a ValueError raised
    # and caught a callable), ~7 us of a recorded step's 10 in sigint_held_back alone (helper-378)
    import _signal as raw_signal
except ImportError:  # (an interpreter without it: the public module, slower)
    raw_signal = signal  # type: ignore[assignment]

HANDLER_GRACE_S = 1.0  # time for the main thread to start the handler before the watcher acts
# The same in one rank of several. Its main thread is most likely blocked in a collective, which ends when a
# peer dies; the peers got the same SIGTERM (torchrun, a scheduler) and die once they have finalised their own
# captures, seconds for a big one: 1 s lost a blocked rank's capture whenever a peer took longer (helper-134:
# 44 steps with stacks, ~3 s). A peer that never dies (hung) makes the rank die this much later.
PEER_GRACE_S = 5.0
# a script's handlers of other signals raising inside SIGTERM's before it quieted them (_quieted_for_term):
# each raise is one signal's; a few in a row are all a dying job sends
QUIET_TRIES = 8
# what a SIGTERM held back waits for (export_hold), as the watcher names it past HANDLER_LIMIT_S
TRACE_EXPORT = "a trace export"
PROFILER_START = "the profiler's start"
CAPTURE_FILES = "the making of the capture's directory"
HANDLER_LIMIT_S = 20.0  # the most a started handler may take to finalise the capture, or an export to end
# ... and the most from the signal's arrival to the process's death, a hold (an export, torch's start) and
# the handler after it together: torchrun's and Slurm's SIGKILL comes 30 s after their SIGTERM
SIGTERM_LIMIT_S = 28.0
# ... of which a finish on SIGTERM (the controller's waits for the thread that records) leaves this much to
# the hand-over after it: they end SIGTERM_LIMIT_S - HAND_OVER_S after the signal (SigtermGuard.finish_by)
HAND_OVER_S = 2.0
# HANDLER_GRACE_S for a --dynamic session's duty alone (between captures): nothing is finalised there, so a
# main thread that has not started the handler by then (blocked in C++) is not waited for; the watcher logs
# the SIGTERM itself and the process dies of it, as without npuprof.
IDLE_GRACE_S = 0.05

# Free descriptors the guard leaves to the job and to the trace writes beside its own pipe: in a job that
# holds nearly all of its descriptors the capture's files come first (the guard is then not installed).
SPARE_DESCRIPTORS = 4
_current: SigtermGuard | None = None  # the guard installed now, if any (export_hold finds it here)
# The log's lines of a handler a training thread's capture asked of the main thread, and of what the main
# thread did: a capture left "capturing" after the first with neither other after it is named in the run's
# summary (reports/run_summary._why_not_finalised)
HANDLER_ASKED = "SIGTERM handler asked of the main thread"
HANDLER_INSTALLED_THERE = "SIGTERM handler installed by the main thread"
HANDLER_LEFT_OUT_THERE = "SIGTERM handler left out by the main thread"
# The log's line of a capture lost to a SIGTERM while the main thread was blocked outside Python (named in the
# run's summary too: reports/run_summary._why_not_finalised)
LOST_WHILE_BLOCKED = (
    "SIGTERM while the main thread is blocked outside Python (e.g. in a collective): "
    "the process dies now, as without npuprof; the capture in flight is lost"
)


def _quiet_other_handlers() -> None:
    """Before the finalise of a process about to die of SIGTERM: the script's Python handlers of other
    signals must not raise inside it. A SIGTERM sent to the job's process group ends its DataLoader workers
    too, and torch's SIGCHLD handler then raises "DataLoader worker ... is killed" in the main thread,
    where it cut the finalise short (helper-105: 6 captures of 6 lost). Each Python handler (SIGCHLD's, a
    SIGALRM watchdog's) is replaced by one that does nothing, not by SIG_DFL or SIG_IGN: a signal already
    received runs it, where Python printed "Signal 17 ignored due to race condition" for a handler gone
    (helper-107). Children are not reaped either way."""
    for signum, _handler in _python_handlers(signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(OSError, ValueError, TypeError):
            signal.signal(signum, _do_nothing)


def _python_handlers(*left_alone: int) -> Iterator[tuple[int, Any]]:
    """Each signal (but ``left_alone``, SIGKILL, SIGSTOP) whose handler now is a Python callable, with it."""
    for signum in raw_signal.valid_signals():
        if signum in (*left_alone, signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            handler = raw_signal.getsignal(signum)
        except (OSError, ValueError):
            continue
        if callable(handler):
            yield signum, handler


_deferring = False  # script_handlers_deferred is in force (nested blocks are part of the outer one)


@contextlib.contextmanager
def script_handlers_deferred(redeliver: Callable[[list[int]], None] | None = None) -> Iterator[None]:
    """During a trace export on the main thread, the script's Python signal handlers (its own SIGTERM
    handler, torch's DataLoader SIGCHLD check, a SIGALRM watchdog) run after the block, not inside it: one
    that raises there (``sys.exit`` on SIGTERM; "DataLoader worker ... is killed" once a group SIGTERM ended
    the workers) cut the export short and lost the capture (helper-107). Each signal that came is raised
    again at the end, where its handler runs as it would have, a few seconds late. SIGINT has its own hold
    (sigint_held_back); npuprof's own handlers are left alone.

    ``redeliver``: given the signals that came, in order, instead (a call the main thread makes for another
    thread, where what a handler raises would reach no code of the script's: agent/main_thread.py)."""
    global _deferring
    if _deferring or not threads.on_main_thread():
        yield
        return
    came: list[int] = []

    def note(signum: int, frame: Any) -> None:
        came.append(signum)

    replaced: dict[int, Any] = {}
    for signum, handler in _python_handlers(signal.SIGINT):
        module = getattr(handler, "__module__", None)  # None, or not a str, for some C callables
        ours = isinstance(module, str) and module.startswith("npuprof.")
        if ours and not isinstance(handler, ChildSignalWrap):  # a wrap runs the script's handler
            continue
        try:
            raw_signal.signal(signum, note)
        except (OSError, ValueError, TypeError):
            continue
        replaced[signum] = handler
    _deferring = True
    try:
        yield
    finally:
        _deferring = False
        again = []
        for signum, handler in replaced.items():
            if raw_signal.getsignal(signum) is note:  # else quieted since (a SIGTERM the process dies of)
                raw_signal.signal(signum, handler)
                if signum in came:
                    again.append(signum)
        if redeliver is not None:
            redeliver(sorted(again))
        else:
            _queued.extend(sorted(again))  # in the order Python runs handlers of signals pending at once
            if not _decisions:
                deliver_queued()


_decisions = 0  # the main thread's step-boundary decisions in progress (CaptureController._decide)
_queued: list[int] = []  # signals that came during an export, raised once the decision is over


def decision_begins() -> None:
    """A step-boundary decision begins: the script's handlers of signals deferred during an export in it
    run at its end (decision_ends), once npuprof's state is whole, not where the export returns."""
    global _decisions
    if threads.on_main_thread():
        _decisions += 1


def decision_ends(exiting: bool = False) -> None:
    """``exiting``: the decision was the finalise at the process's exit (see deliver_queued)."""
    global _decisions
    if threads.on_main_thread() and _decisions:
        _decisions -= 1
        if not _decisions:
            deliver_queued(exiting)


def deliver_queued(exiting: bool = False) -> None:
    """Raise the signals deferred during an export: their Python handlers run inside ``raise_signal``,
    which passes on what they raise (``SystemExit``, torch's DataLoader error) to the script.

    ``exiting``: the export was the finalise at the process's exit, after the script's code has ended.
    Its handlers still run (a graceful stop's marker is written), but what they raise reaches no code of
    the script: a ``sys.exit`` there is what the process does already, and its exit code stays the job's,
    as Python leaves it for an exception in an exit callback. It was printed as "Exception ignored in
    atexit callback" with npuprof's frames."""
    while _queued:
        signum = _queued.pop(0)
        if not exiting:
            signal.raise_signal(signum)
            continue
        try:
            signal.raise_signal(signum)
        except SystemExit:
            pass
        except BaseException as exc:  # shown as Python shows an exit callback's (helper-113: it was unsaid)
            import sys
            import traceback

            from npuprof.agent.log import get_log

            get_log().info(f"the script's handler of signal {signum} raised {exc!r} as the process ended")
            with contextlib.suppress(Exception):
                sys.stderr.write(f"Exception ignored in the script's handler of signal {signum} at exit:\n")
                tb = exc.__traceback__
                while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
                    tb = tb.tb_next  # the script's frames only, as in its own traceback
                traceback.print_exception(type(exc), exc, tb, file=sys.stderr)


def _do_nothing(signum: int, frame: Any) -> None:
    """The handler of the script's signals while a process about to die of SIGTERM finalises."""


@dataclass(frozen=True)
class KeptWork:
    """Work of an ended capture that a SIGTERM would lose: its memory snapshot's copy."""

    pending: Callable[[], bool]
    finish: Callable[[float], bool]  # hurry it and wait at most that many seconds (from any thread): done?
    within_s: float  # the most a SIGTERM waits for it, from its arrival (the exit's own bound)

    def done(self) -> bool:
        """Nothing pending (a check that fails leaves nothing to wait for)."""
        try:
            return not self.pending()
        except Exception:
            return True


@dataclass(frozen=True)
class Duties:
    """Why npuprof's SIGTERM handler is installed, and so what a SIGTERM must finish before the process dies
    of it (docs/architecture.md, "Signals"). Whatever the duty, a handler the main thread runs calls
    ``on_term``, and the watcher that finds it never started calls ``on_term_unhandled``; the duty decides
    the rest:

    - ``capture``: a profiler of ours runs. ``on_term`` finalises the capture and hands it over; the main
      thread gets the handler's grace (HANDLER_GRACE_S; PEER_GRACE_S in one rank of several) and, blocked
      outside Python past it, the capture is said lost.
    - ``copy``: an ended capture's memory snapshot is still being copied (paced). The watcher hurries the
      copy as the signal comes, ``on_term`` hands it over; a main thread that never starts the handler has
      the copy waited for by the watcher, within ``copy.within_s`` of the signal. Once it is done nothing
      is left: the process dies at once, as without npuprof. A capture that begins takes the copy into
      its own hand-over (never both).
    - ``session``: --dynamic, between captures. ``on_term`` writes the dynamic logs' last lines; a main
      thread that has not started the handler within IDLE_GRACE_S is not waited for.

    Each change replaces the whole value; the watcher reads it once, as the signal comes."""

    capture: bool = False
    copy: KeptWork | None = None
    session: bool = False

    def any(self) -> bool:
        return self.capture or self.copy is not None or self.session

    def nothing_left(self) -> bool:
        """Held for a copy alone, and it is done: a SIGTERM finds nothing to finish."""
        return self.copy is not None and not (self.capture or self.session) and self.copy.done()

    def nothing_to_finish(self) -> bool:
        """``nothing_left``, or no duty at all: a capture on a training thread ended and the main thread
        has yet to put the handler down (``SigtermGuard._settle``). A SIGTERM ends the process at once."""
        return not self.any() or self.nothing_left()

    def pending_copy(self) -> KeptWork | None:
        """The copy, while some of it is left."""
        return self.copy if self.copy is not None and not self.copy.done() else None

    def grace_s(self, handler_grace_s: float) -> float:
        """How long the watcher waits for the main thread to start the handler."""
        return handler_grace_s if self.capture or self.pending_copy() is not None else IDLE_GRACE_S


class SigtermGuard:
    """npuprof's SIGTERM handler, installed while it has a duty (``Duties``) and removed after.

    ``on_term`` finishes what the duties hold (finalises a capture in flight, hands the rest over, writes
    --dynamic's last lines); ``on_term_after_export`` (default: nothing) runs instead when the SIGTERM was
    held during an export that wrote a trace: only the hand-over is left to do. ``on_term_unhandled`` runs
    on the watcher thread when the process dies of a SIGTERM the main thread did not handle (blocked
    outside Python), just before it does.

    The duties change through ``install`` (a capture), ``install_for_session`` (--dynamic),
    ``capture_ended`` (its copy, if any, kept) and ``put_down_if_copied``."""

    def __init__(
        self,
        on_term: Callable[[], None],
        log: Any,
        on_term_after_export: Callable[[], None] | None = None,
        on_term_unhandled: Callable[[], None] | None = None,
        recorded_off_main: Callable[[], bool] | None = None,
    ) -> None:
        self._on_term = on_term
        self._on_term_after_export = on_term_after_export
        self._on_term_unhandled = on_term_unhandled
        self._recorded_off_main = recorded_off_main  # the capture in flight belongs to another thread
        self._claim = threading.Lock()  # taken by whoever finishes on a SIGTERM: the handler, or the watcher
        self._duties = Duties()  # why it is (or is to be) installed: kept while the script takes SIGTERM
        self._log = log
        self._read_fd: int | None = None
        self._write_fd: int | None = None
        self._owned_pair: tuple[OwnedFd, ...] = ()  # read and write ends as we opened them (npuprof.owned_fd)
        self._handler_started = threading.Event()
        self._installed = False
        self._previous: Any = signal.SIG_DFL  # SIGTERM's handler before ours
        self._grace = HANDLER_GRACE_S  # what the watcher gives the handler to start (install)
        # An export in progress (export_hold): until when SIGTERM may wait, whether one came, whether a
        # trace was written meanwhile.
        self._exporting = False
        self._export_done = threading.Event()
        self._export_done.set()
        self._export_deadline = 0.0
        self._holding = TRACE_EXPORT  # what the hold is for, as the watcher names it
        self._held = False
        self._exported = False
        # finalising on a SIGTERM: another one is dropped (the process dies of the first once done; the
        # watcher bounds the wait), where SIG_DFL would kill the export that keeps the capture
        self._finalising = False
        self._renewing = threading.Lock()  # check_pipe's new pipe against the watcher leaving its old one
        self._renewed_said = False
        self._pipe_was_lost = False  # the watcher left its pipe, closed or taken by the script
        self._child_wrap: ChildSignalWrap | None = None  # SIGCHLD's handler kept out of ours (child_signal)
        self._settle_asked = False  # the main thread is to install or put down the handler (_settle)
        self._term_arrived: float | None = None  # when the SIGTERM the process dies of came (_note_arrival)

    def install(self) -> bool:
        """A profiler of ours starts (the ``capture`` duty): whether the handler is installed."""
        self._duties = replace(self._duties, capture=True, copy=None)
        return self._install()

    def install_for_session(self) -> bool:
        """--dynamic's training starts (the ``session`` duty): whether the handler is installed. The duty
        stays even when it is not: a handler installed for a later capture then stays after it."""
        self._duties = replace(self._duties, session=True)
        return self._install()

    def capture_ended(self, left: KeptWork | None = None) -> None:
        """The capture's profiler has stopped; ``left``: its memory snapshot's copy, still to be done. The
        handler stays for the copy and for a --dynamic session, else goes (from the main thread)."""
        copy = left if self._installed else None
        self._duties = replace(self._duties, capture=False, copy=copy)
        if not self._duties.any():
            self.uninstall()

    def put_down_if_copied(self) -> None:
        """At a step boundary with no profiler of ours (the copier asks for one once done): a handler
        kept for a copy now done goes."""
        copy = self._duties.copy
        if copy is None or not copy.done():
            return
        self._duties = replace(self._duties, copy=None)
        if not self._duties.any():
            self.uninstall()

    def _install(self) -> bool:
        """From the main thread, when SIGTERM has its default action and no wakeup fd is taken. From
        another (a capture recorded by a training thread), the main thread installs it at its next bytecode
        boundary (``_settle``); True once that is asked for."""
        if self._installed:
            return True
        if not threads.on_main_thread():
            return self._settle_on_main_thread()
        previous = signal.getsignal(signal.SIGTERM)
        if previous == self._handle:  # put back by the script after an earlier capture: ours again
            previous = self._previous
        if previous is not signal.SIG_DFL:
            return False  # the script handles SIGTERM itself: it decides
        lost = self._pipe_was_lost or not self._owned_pair or not self._owned_pair[1].ours()
        if lost:
            for owned in self._owned_pair:
                owned.close()  # an end still ours (its watcher has left); never a number of the script's
            if not self._new_pipe():
                return False
        wakeup = signal.set_wakeup_fd(self._write_fd, warn_on_full_buffer=False)
        if wakeup != -1:  # asyncio or the script owns the wakeup fd: leave SIGTERM alone
            signal.set_wakeup_fd(wakeup)
            return False
        self._previous = previous
        self._grace = PEER_GRACE_S if one_rank_of_several() else HANDLER_GRACE_S
        signal.signal(signal.SIGTERM, self._handle)
        self._installed = True
        self._wrap_child_signal()
        global _current
        _current = self
        return True

    def _settle_on_main_thread(self) -> bool:
        """Ask the main thread to install or put down the handler as the duties then say (only it may set
        a signal's handler): whether it was asked (agent/main_thread.py)."""
        from npuprof.agent import main_thread

        if self._settle_asked:
            return True
        self._settle_asked = True
        if self._duties.any() and not self._installed:
            self._log.info(f"{HANDLER_ASKED}: training runs on another thread")
        if not main_thread.call_soon(self._settle):
            self._settle_asked = False
            return False
        return True

    def _settle(self) -> None:
        """On the main thread: the handler installed while a duty is left, else put down."""
        from npuprof.agent import main_thread

        self._settle_asked = False
        if not threading.main_thread().is_alive() and not main_thread.waits_for_threads_at_exit():
            return  # the interpreter exits: its own finalise ends the capture (entry, finish_at_exit)
        if self._duties.any():
            if self._installed:
                return
            if self._install():
                self._log.info(HANDLER_INSTALLED_THERE)
            else:
                self._log.info(f"{HANDLER_LEFT_OUT_THERE}: the script handles SIGTERM or holds the wakeup fd")
        else:
            self.uninstall()

    def _wrap_child_signal(self) -> None:
        """SIGCHLD's Python handler (a DataLoader's, set at its first iterator: maybe after the capture
        began) wrapped, so that it does not run inside ours (agent/child_signal.py)."""
        if _deferring or child_signal.wrapped_now(self._child_wrap):
            return
        self._child_wrap = child_signal.wrap(SigtermGuard._handle.__code__, self._owns_sigterm)

    def child_signal_unwrapped(self) -> Any:
        """SIGCHLD's Python handler when it runs unwrapped while the guard is installed (set after it: a
        DataLoader's first iterator after training began), else None. Any thread may ask: --dynamic's
        watcher does, between captures (no recorded step boundary wraps it there)."""
        if not self._installed:
            return None
        try:
            handler = child_signal.handler_now()
        except (OSError, ValueError, AttributeError):
            return None
        return handler if callable(handler) and not isinstance(handler, ChildSignalWrap) else None

    def _new_pipe(self) -> bool:
        """A new wakeup pipe and its watcher: none yet, or the last closed by the script, its numbers maybe
        the script's files now (the old watcher sees EOF once both ends are closed, or its read end is no
        longer ours, and leaves). False, and said once, when the job leaves too few descriptors."""
        if not room_for(2 + SPARE_DESCRIPTORS):
            self._log.warn_once(
                "sigterm-no-fds",
                "too few file descriptors left to the job for npuprof's SIGTERM handler: a SIGTERM ends "
                "the job without finalising the capture in flight (raise `ulimit -n`)",
            )
            return False
        read_fd, write_fd = os.pipe()
        self._pipe_was_lost = False
        self._read_fd, self._write_fd = moved_high(read_fd), moved_high(write_fd)
        os.set_blocking(self._write_fd, False)
        self._owned_pair = (OwnedFd(self._read_fd), OwnedFd(self._write_fd))
        threads.start(self._watch, "npuprof-sigterm")
        return True

    def _finish_kept(self, kept: KeptWork, within_s: float) -> bool:
        """The kept work hurried and waited for, at most ``within_s`` (0: only hurried); whether done."""
        try:
            return kept.finish(max(0.0, within_s))
        except Exception as exc:
            self._log.error(f"finishing the memory snapshot's copy on SIGTERM failed: {exc!r}")
            return False

    def uninstall(self) -> None:
        """SIGTERM's default action back (its duties stay, for a later install); asked of the main thread
        from another. Until it acts, a SIGTERM with no duty left ends the process at once
        (``Duties.nothing_to_finish``)."""
        if not self._installed:
            return
        if not threads.on_main_thread():
            self._settle_on_main_thread()
            return
        if self._finalising:  # the capture ends inside the handler: it puts SIG_DFL back itself
            return
        if signal.getsignal(signal.SIGTERM) == self._handle:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        child_signal.unwrap(self._child_wrap)
        self._child_wrap = None
        with contextlib.suppress(ValueError):
            previous = signal.set_wakeup_fd(-1)
            if previous not in (self._write_fd, -1):
                signal.set_wakeup_fd(previous)  # set by someone after ours: theirs stays
        self._installed = False
        self._forget_current()

    def check_pipe(self) -> None:
        """At each recorded step boundary (and, with --dynamic, a minute apart between captures:
        DynamicPlan.keep_up), whether the wakeup pipe still wakes the watcher.

        A script that closed every descriptor (``os.closerange``) closed its write end too, which Python's C
        signal handler writes to at each signal (into whatever file the number holds now, or an "Exception
        ignored ... signal wakeup fd" at each signal: helper-110): a new pipe replaces it, and npuprof's
        handler is armed again (the watcher gave SIGTERM its default action meanwhile: a SIGTERM while the
        main thread was blocked in C++ hung the job, helper-114). The old numbers, maybe the script's now,
        are never closed by npuprof. A script that took the wakeup fd itself (``signal.set_wakeup_fd``,
        asyncio) leaves no watcher: SIGTERM gets its default action back, as at a capture's start
        (helper-114: blocked in C++, the job ignored SIGTERM). Without descriptors for a new pipe,
        likewise."""
        if not self._installed or not threads.on_main_thread() or self._finalising:
            return
        self._wrap_child_signal()  # ~0.1 µs when wrapped already
        # one fstat and two calls into Python's signal module: ~1.5 µs a recorded step, measured
        if not self._pipe_was_lost and self._owned_pair and self._owned_pair[1].ours():
            if self._wakeup_is_ours():
                return
            self._log.info(
                "the script took the signal wakeup fd (asyncio?): SIGTERM acts as it did before npuprof, "
                "without finalising the capture in flight"
            )
            self.uninstall()
            return
        if not self._renewing.acquire(blocking=False):
            return  # the watcher is leaving this very moment: the next step boundary does it
        try:
            with contextlib.suppress(ValueError):
                wakeup = signal.set_wakeup_fd(-1)
                if wakeup not in (self._write_fd, -1):
                    signal.set_wakeup_fd(wakeup)  # the script's own since: it decides, as above
                    self._owned_pair, self._read_fd, self._write_fd = (), None, None
                    self.uninstall()
                    return
            for owned in self._owned_pair:
                owned.close()  # only an end still ours: the script may have closed one and not the other
            self._owned_pair, self._read_fd, self._write_fd = (), None, None
            self._pipe_was_lost = False
            if self._new_pipe():  # SIGTERM still finalises the capture (helper-113: SIG_DFL back lost it)
                signal.set_wakeup_fd(self._write_fd, warn_on_full_buffer=False)
                signal.signal(signal.SIGTERM, self._handle)  # armed again at the C level
                if not self._renewed_said:
                    self._renewed_said = True
                    self._log.info(
                        "the script closed npuprof's SIGTERM pipe (os.closerange?): a new one replaces it "
                        "(said once)"
                    )
                return
            self.uninstall()
        finally:
            self._renewing.release()

    def _wakeup_is_ours(self) -> bool:
        try:
            wakeup = signal.set_wakeup_fd(-1)
        except ValueError:
            return True
        signal.set_wakeup_fd(wakeup, warn_on_full_buffer=False)
        return wakeup == self._write_fd

    def _forget_current(self) -> None:
        global _current
        if _current is self:
            _current = None

    def forget_after_fork(self) -> None:
        """A forked child (a DataLoader worker) gets SIGTERM's default back and no wakeup fd of ours."""
        if self._installed:
            with contextlib.suppress(ValueError, OSError):
                if signal.getsignal(signal.SIGTERM) == self._handle:
                    signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.set_wakeup_fd(-1)
            child_signal.unwrap(self._child_wrap)
        self._child_wrap = None
        self._installed = False
        self._settle_asked = False
        self._duties = Duties()
        self._forget_current()
        self._exporting = self._held = self._finalising = False
        self._term_arrived = None
        self._claim = threading.Lock()  # the parent's handler or watcher may have held it at the fork
        self._renewing = threading.Lock()  # the parent's watcher may have held it at the fork
        self._pipe_was_lost = False
        self._export_done = threading.Event()  # the parent's may be waited on by a thread not here
        self._export_done.set()
        self._handler_started = threading.Event()
        for owned in self._owned_pair:
            owned.close()  # only where the number is still ours
        self._owned_pair = ()
        self._read_fd = self._write_fd = None

    def _owns_sigterm(self) -> bool:
        return self._installed and raw_signal.getsignal(signal.SIGTERM) == self._handle

    def _note_arrival(self) -> float:
        """When the SIGTERM npuprof handles came: the first to see it notes it (the watcher, woken as it
        comes; the handler, maybe after a hold), and every wait on its way to the process's death counts
        from it."""
        if self._term_arrived is None:
            self._term_arrived = sigterm_clock.CLOCK.monotonic()
        return self._term_arrived

    def finish_by(self) -> float:
        """When (``sigterm_clock.CLOCK``) the finish of this SIGTERM's capture must be done, or given up:
        SIGTERM_LIMIT_S from the signal's arrival, less the hand-over's HAND_OVER_S. A finish begun after a
        hold (up to 20 s) and the watcher's grace waited its own 18 s after them: the process died up to
        43 s after the signal, torchrun's or Slurm's SIGKILL at 30 s first."""
        return self._note_arrival() + SIGTERM_LIMIT_S - HAND_OVER_S

    def hand_over_by(self) -> float:
        """When the hand-over after that finish stops waiting for the post-processor's pipe (the rest is
        spooled): half of HAND_OVER_S left to spool it and die. Its own 5 s after a finish given up at 26 s
        let the process live to 31 s, past the SIGKILL (or the watcher's cut at 28 s, the jobs unspooled)."""
        return self._note_arrival() + SIGTERM_LIMIT_S - HAND_OVER_S / 2

    def _handle(self, signum: int, frame: Any) -> None:
        if not self._quieted_for_term():
            self._act_as_previous(signum, frame)
            return
        self._note_arrival()
        if self._finalising:
            return  # a second SIGTERM (scancel, systemd, pkill send more than one): the first ends us
        if self._exporting:
            # delivered when the export ends (export_hold); the process dies of it then, so the other
            # handlers were quieted: a dying DataLoader worker's SIGCHLD raised in the export (helper-106)
            self._held = True
            return
        if not self._claim.acquire(blocking=False):
            return  # the watcher finishes the capture: this main thread came back too late
        self._handler_started.set()
        self._finalising = True
        try:
            if not self._duties.nothing_to_finish():
                with sigint_held_back(deliver=False):  # the process dies of SIGTERM: see sigint_held_back
                    self._on_term()
        finally:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    def _quieted_for_term(self) -> bool:
        """Whether this SIGTERM is npuprof's to handle (the process then dies of it); if so the script's
        other handlers are quieted first of all. One that ran inside this handler before that, at any call
        it makes, and raised is dropped and the quieting done again: torch's SIGCHLD check raised "DataLoader
        worker ... is killed" when the SIGTERM sent to the job's group ended the workers within microseconds;
        the raise left the handler unrun, and the job died of that RuntimeError instead of SIGTERM (or of the
        watcher a second later, "blocked outside Python" said), its capture finalised at exit if at all. At
        the handler's own first instruction no code of ours can catch it: SIGCHLD's handler is kept out of
        there (agent/child_signal.py). A SIGTERM not npuprof's passes the raise on."""
        raised: Exception | None = None
        for _ in range(QUIET_TRIES):
            try:
                owned = self._owns_sigterm()
                if owned and not self._finalising:
                    _quiet_other_handlers()
                break
            except Exception as exc:
                raised = exc
        else:
            owned = self._owns_sigterm()
        if raised is not None and not owned:
            raise raised  # the process lives on: the script's handler raised in its code, as it would have
        return owned

    def _act_as_previous(self, signum: int, frame: Any) -> None:
        """Not npuprof's to handle (uninstalled, or chained to by the script's handler): what the handler
        ours replaced would have done."""
        previous = self._previous
        if callable(previous):
            previous(signum, frame)
            return
        if previous == signal.SIG_IGN:
            return
        if signal.getsignal(signum) != self._handle:
            return  # chained to: the caller would have found SIG_DFL, which cannot be called
        # Installed again after our capture (the script put back the handler it had found): SIG_DFL's action.
        if threads.on_main_thread():
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
        else:
            _die_of(signum)

    # ---- a trace export ------------------------------------------------------------------------
    @contextlib.contextmanager
    def export_hold(self, limit_s: float = HANDLER_LIMIT_S, holding: str = TRACE_EXPORT) -> Iterator[None]:
        """Hold SIGTERM back during the block (a profiler stop or step that may write a trace, its start),
        at most ``limit_s``; then deliver it. ``holding``: what the block does, as a SIGTERM that waits past
        the limit names it. Nested blocks are part of the outer one."""
        if self._exporting or not self._owns_sigterm():
            yield
            return
        self._held = self._exported = False
        self._holding = holding
        self._export_deadline = sigterm_clock.CLOCK.monotonic() + limit_s
        self._export_done.clear()
        self._exporting = True
        try:
            yield
        finally:
            self._exporting = False
            self._export_done.set()
            if self._held:
                self._held = False
                self._deliver_held()

    def note_exported(self) -> None:
        """A trace was written during the hold: a SIGTERM held now has nothing left to finalise."""
        if self._exporting:
            self._exported = True

    def _deliver_held(self) -> None:
        if not self._exported:
            os.kill(os.getpid(), signal.SIGTERM)  # the handler runs as for any SIGTERM in a capture
            return
        self._handler_started.set()
        main = threads.on_main_thread()
        self._finalising = True
        try:
            if self._on_term_after_export is not None:
                with sigint_held_back(deliver=False):  # dropped, as in _handle
                    self._on_term_after_export()
        except Exception as exc:
            self._log.error(f"handing the capture over on SIGTERM failed: {exc!r}")
        finally:
            if main:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                os.kill(os.getpid(), signal.SIGTERM)
            else:
                _die_of(signal.SIGTERM)

    def _watch(self) -> None:
        read_fd = self._read_fd
        assert read_fd is not None
        owned = self._owned_pair[0] if self._owned_pair else None
        while True:
            if owned is None or not owned.ours():  # the script closed it, its number maybe the script's pipe
                break  # now, whose data this read would take (helper-113: os.dup2 onto it)
            try:
                data = os.read(read_fd, 64)
            except OSError:
                break
            if not data:  # the write end closed: only the script does that (os.closerange)
                break
            if signal.SIGTERM in data and self._owns_sigterm():
                self._give_handler_time()
        self._pipe_lost(owned)

    def _pipe_lost(self, owned: OwnedFd | None) -> None:
        """The watcher's pipe was closed by the script while it is the guard's: until the next recorded step
        boundary makes a new one (check_pipe), nothing would see a SIGTERM that comes while the main thread
        is blocked in C++ (a collective), which Python's handler waits out: the job ignored SIGTERM
        (helper-114). SIGTERM gets its default action at the C level meanwhile: the job dies of it at once,
        as without npuprof, the capture in flight lost."""
        with self._renewing:
            if not (self._installed and self._owned_pair and self._owned_pair[0] is owned):
                return  # replaced or put down already
            if self._finalising:
                return
            self._pipe_was_lost = True  # the next recorded step makes a new one (check_pipe)
            _c_default(signal.SIGTERM)
        self._log.info(
            "the script closed npuprof's SIGTERM pipe: until the next step a SIGTERM ends the job at once, "
            "the capture in flight not finalised"
        )

    def _give_handler_time(self) -> None:
        arrived, duties = self._note_arrival(), self._duties
        if self._handler_started.is_set():
            # a watcher woken late (a loaded host) finds the handler under way: it ends the process once its
            # hand-over is done. The duty it has ended meanwhile (the capture it finished) is no sign that
            # nothing is left: dying of it here cut that hand-over short (helper-334). (Read after the
            # duties: not started then, the handler had not changed them.)
            self._leave_it_to_the_handler(arrived)
            return
        kept = duties.pending_copy()
        if duties.nothing_to_finish():  # nothing for the handler to save: dies as without npuprof
            _die_of(signal.SIGTERM)
            return
        if kept is not None:
            self._finish_kept(kept, 0.0)  # at full speed from now, whoever waits for it
        # During a trace export the main thread delivers the signal when done, within the limit.
        exporting = not self._export_done.is_set()
        clock = sigterm_clock.CLOCK
        if exporting and not clock.wait_until(self._export_done, self._export_deadline):
            self._log.error(
                f"SIGTERM during {self._holding} that took over {HANDLER_LIMIT_S:.0f} s: dying now; "
                "the capture in flight is lost"
            )
            _die_of(signal.SIGTERM)
            return
        started = self._handler_started_within_grace(duties, kept)
        if not started and kept is not None:
            self._copy_while_blocked(kept, arrived)
            started = self._handler_started.is_set()  # the main thread came back meanwhile: it ends us
        if started:
            self._leave_it_to_the_handler(arrived)
            return
        if not (duties.capture and self._finished_from_the_watcher(arrived)):
            if duties.capture:
                self._log.warning(LOST_WHILE_BLOCKED)
            if self._on_term_unhandled is not None:
                try:
                    self._on_term_unhandled()
                except Exception as exc:
                    self._log.error(f"saying the SIGTERM failed: {exc!r}")
        _die_of(signal.SIGTERM)

    def _finished_from_the_watcher(self, arrived: float) -> bool:
        """The main thread, blocked outside Python, has not started the handler in its grace: a capture that
        another thread records is finished from here, as the handler would have (it only asks that thread
        and waits for it; the script's other handlers cannot run meanwhile), within what is left of
        SIGTERM_LIMIT_S from the signal's arrival (``arrived``), as a started handler is: after a hold (an
        export) and the grace, the thread's next boundary and its finish let the process die past the
        SIGKILL at 30 s. Whether it was."""
        if self._recorded_off_main is None or not self._claim.acquire(blocking=False):
            return False
        try:
            elsewhere = self._recorded_off_main()
        except Exception:
            elsewhere = False
        if not elsewhere:
            self._claim.release()
            return False
        self._finalising = True
        self._log.warning(
            "SIGTERM while the main thread is blocked outside Python: the capture, recorded by another "
            "thread, is finished from npuprof's watcher"
        )
        cut = sigterm_clock.CLOCK.timer(
            _handler_deadline(arrived), lambda: self._finish_took_too_long(arrived)
        )
        with contextlib.suppress(RuntimeError):  # no thread to be had: the finish's own waits bound it
            cut.start()
        try:
            self._on_term()
        except Exception as exc:
            self._log.error(f"finalising the capture on SIGTERM failed: {exc!r}")
        finally:
            cut.cancel()
        return True

    def _leave_it_to_the_handler(self, arrived: float) -> None:
        """The handler runs: it ends the process once its hand-over is done, within its deadline; past it,
        the process dies here."""
        sigterm_clock.CLOCK.wait_until(threading.Event(), _handler_deadline(arrived))
        self._finish_took_too_long(arrived)

    def _finish_took_too_long(self, arrived: float) -> None:
        took = sigterm_clock.CLOCK.monotonic() - arrived
        self._log.error(
            f"finalising the capture on SIGTERM took too long ({took:.0f} s since the signal); dying now"
        )
        _die_of(signal.SIGTERM)

    def _handler_started_within_grace(self, duties: Duties, kept: KeptWork | None) -> bool:
        """Whether the main thread starts the handler within its grace. With a copy and no capture, the
        grace ends once the copy is done too: the watcher hands it over itself (``_copy_while_blocked``)
        and nothing is left, so the process dies as it would have at the signal. A blocked rank waited the
        whole 5 s (PEER_GRACE_S) out however soon its copy was done (helper-281). A main thread that runs
        Python starts it within IDLE_GRACE_S, as for a session: it does the hand-over then."""
        grace, clock = duties.grace_s(self._grace), sigterm_clock.CLOCK
        began = clock.monotonic()
        if duties.capture or kept is None:
            return clock.wait_until(self._handler_started, began + grace)
        while True:
            now = clock.monotonic()
            if now >= began + grace or (now >= began + IDLE_GRACE_S and kept.done()):
                return self._handler_started.is_set()
            if clock.wait_until(self._handler_started, min(began + grace, now + 0.01)):
                return True

    def _copy_while_blocked(self, kept: KeptWork, arrived: float) -> None:
        """The handler cannot run (the main thread is blocked outside Python): the kept work is waited
        for here, within its bound from the signal's arrival, before the process dies of SIGTERM."""
        done = self._finish_kept(kept, arrived + kept.within_s - sigterm_clock.CLOCK.monotonic())
        copied = "copied first" if done else f"not copied within {kept.within_s:g} s"
        self._log.warning(
            "SIGTERM while the main thread is blocked outside Python (e.g. in a collective) after a "
            f"capture: the process dies now, its memory snapshot {copied}"
        )


def _handler_deadline(arrived: float) -> float:
    """Until when a handler started now is given: HANDLER_LIMIT_S, within SIGTERM_LIMIT_S of the signal's
    arrival (``arrived``). A hold of up to 20 s and the handler's 20 s after it let the process die 40 s
    after the signal, its SIGKILL at 30 s first."""
    return min(sigterm_clock.CLOCK.monotonic() + HANDLER_LIMIT_S, arrived + SIGTERM_LIMIT_S)


def _die_of(signum: int) -> None:
    """Default action for ``signum`` at the C level (Python's own table can only be changed from the
    main thread, which is blocked), then raise it."""
    _c_default(signum)
    os.kill(os.getpid(), signum)


def _c_default(signum: int) -> None:
    """SIG_DFL for ``signum`` in the kernel's table, from any thread; Python's own table still names its
    handler (``signal.signal`` from the main thread arms it again)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.signal.restype = ctypes.c_void_p
    libc.signal.argtypes = (ctypes.c_int, ctypes.c_void_p)
    libc.signal(int(signum), 0)  # SIG_DFL


@contextlib.contextmanager
def export_hold(holding: str = TRACE_EXPORT) -> Iterator[None]:
    """SIGTERM held back during the block (see SigtermGuard.export_hold) when npuprof's guard handles it
    now; otherwise nothing changes. ``holding``: what the block does (a trace export, a profiler start)."""
    guard = _current
    if guard is None:
        yield
        return
    with guard.export_hold(holding=holding):
        yield


def note_exported() -> None:
    """Say that the block held by ``export_hold`` has written a trace."""
    guard = _current
    if guard is not None:
        guard.note_exported()


@contextlib.contextmanager
def sigint_held_back(deliver: bool = True) -> Iterator[None]:
    """Hold SIGINT back for the duration of the block (main thread only), then deliver it (or, without
    ``deliver``, drop it: the process is ending anyway). The SIGTERM handler's finalise and hand-over
    drop it: a Ctrl-C after a `kill` (the job seemed slow to go) raised KeyboardInterrupt there once the
    capture was stopped, cutting its hand-over short (a memory snapshot's copy lost, --dynamic's "stopped
    by SIGTERM" unlogged), and the process died of the SIGTERM all the same."""
    if not threads.on_main_thread():
        yield
        return
    try:
        previous = raw_signal.getsignal(signal.SIGINT)
    except ValueError:
        yield
        return
    if not callable(previous):
        yield
        return
    received: list[Any] = []

    def hold(signum: int, frame: Any) -> None:
        received.append(frame)

    raw_signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        raw_signal.signal(signal.SIGINT, previous)
        if received and deliver:
            previous(signal.SIGINT, received[-1])
