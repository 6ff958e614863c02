"""How late a time window opened, and why (docs/architecture.md, "Time windows"): the recorded time is not
the time asked when no step boundary came sooner, the main thread was held in C code, or the timer held its
signal back. The window plan (agent/window_plan.py) tells this watch what its timer and its signal handler
did; the watch counts lateness to the first moment the main thread could have opened the window (the step
boundary that did, or the handler's run), not what the first profiler start costs after that."""

from __future__ import annotations

import threading
import time

# a window that opens this much after its start says so in its capture's record: more than a kick's delay on a
# loaded host, and than the step grace of a window of a second or less (the timer opens one mid-step then)
LATE_OPEN_S = 2.0


class OpeningWatch:
    """What happened between a window's start and its opening, as its timer and signal handler report it."""

    def __init__(self) -> None:
        self.sent_at: float | None = None  # the timer's first signal after the window's start
        # the main thread's run of the handler that began its latest unbroken series of them (one every
        # kick), and the run before the break: a run that could not open the window (an import) and then
        # seconds of C code holding Python's lock, or of torch.distributed's set-up, are no moment it could
        self.ran_at: float | None = None
        self.last_ran: float | None = None
        self.unreached_from: float | None = None
        # the thread whose decision runs inside the handler (not at a step boundary), while it does: another
        # thread's boundary that opens the window meanwhile is a boundary's opening
        self.deciding: int | None = None
        self.waited_for_a_boundary = False  # the timer gave steps a grace before its first signal
        self.held_back = ""  # why the timer held its first signal back (torch.distributed set-up)
        self.held_back_later = ""  # ... or a later one, before the window opened
        self.blocked = False  # the main thread was seen blocking the timer's signal before the window opened

    # ---- the timer's side --------------------------------------------------------------------------
    def signal_held_back(self, why: str, window_waits: bool) -> None:
        if self.sent_at is None and not self.held_back:
            self.held_back = why
        elif self.sent_at is not None and window_waits:
            self.held_back_later = why

    def signal_blocked(self, window_waits: bool) -> None:
        self.blocked = self.blocked or window_waits

    def signal_sent(self, steps_armed: bool) -> None:
        if self.sent_at is None:
            self.sent_at = time.monotonic()
            self.waited_for_a_boundary = steps_armed

    # ---- the handler's side ------------------------------------------------------------------------
    def handler_runs(self, in_an_import: bool) -> None:
        """The main thread runs the handler now; ``in_an_import``: where no window opens."""
        ran = time.monotonic()
        gap = self.ran_at is not None and ran - (self.last_ran or ran) >= LATE_OPEN_S / 2
        # a gap that ends inside an import (C code of one: an extension module loading) is the job's
        # import, which no window opens in, not lateness
        if self.ran_at is None or (gap and not in_an_import):
            self.unreached_from = self.last_ran  # None: the first run
            self.ran_at = ran
        self.last_ran = ran

    def handler_ran(self) -> None:
        """The handler's run ends: one that took seconds itself (the profiler's imports) is no gap."""
        self.last_ran = time.monotonic()

    # ---- the opening -------------------------------------------------------------------------------
    def lateness(self, start_at: float, now: float, no_kick_why: str) -> tuple[float, str]:
        """Seconds from the window's start (``start_at``) to the first moment the main thread could open it,
        for a window that opens ``now`` on this thread, and why it was not sooner, in words.
        ``no_kick_why``: why the timer cannot make the main thread open it, when it cannot."""
        me = threading.get_ident()
        # the handler ran on this (the main) thread since the window's start, and opened nothing there (an
        # import: an optimizer's first import of torch._dynamo) before this boundary did: timed as the kick's
        kicked = self.deciding == me or (self.ran_at is not None and me == threading.main_thread().ident)
        reached = self.ran_at if kicked and self.ran_at is not None else now
        late = reached - start_at
        if not kicked:
            prefix = f"{no_kick_why}, and " if no_kick_why else ""
            if self.held_back and self.sent_at is None:  # a rank's set-up ran past the start
                prefix = f"the timer held its signal back: {self.held_back}, and "
            return late, f"{prefix}no step boundary came sooner"
        sent = self.sent_at if self.sent_at is not None else reached
        why = []
        if sent - start_at >= LATE_OPEN_S / 2:
            waited = sent - start_at
            if self.held_back:
                why.append(f"the timer held its signal back {waited:.1f} s: {self.held_back}")
            elif self.waited_for_a_boundary:
                why.append(f"no step boundary came within {waited:.1f} s, the timer then opened it mid-step")
            else:
                why.append(f"the timer's signal went out {waited:.1f} s late (a loaded host?)")
        # a main thread that ran the handler, could not open the window there (an import), then ran none
        # for seconds: counted from that run
        since = max(sent, self.unreached_from or sent)
        held = reached - since
        if held >= LATE_OPEN_S / 2:
            if self.blocked:
                blocked = "the job's main thread blocked the timer's signal"
                why.append(f"{blocked}, and ran it {held:.1f} s after it went out")
            elif self.unreached_from is None:
                why.append(f"the main thread ran the timer's signal {held:.1f} s after it went out (C code?)")
            elif self.held_back_later:
                why.append(f"the timer held its signal back {held:.1f} s: {self.held_back_later}")
            else:
                why.append(f"the main thread ran none of the timer's signals for {held:.1f} s (C code?)")
        return late, "; ".join(why) or "the main thread could not be reached sooner"
