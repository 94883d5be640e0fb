"""Progress on stderr for long work: done / total, rate, elapsed and remaining time.

One line, redrawn in place on a terminal (every 0.5 s) and printed every 10 s otherwise, so that logs of
batch jobs stay short. Thread-safe: tiles of :func:`nqm.simulate` report from worker threads.
"""

from __future__ import annotations

import sys
import threading
import time


class Progress:
    """Reports ``update(amount)`` calls against ``total``.

    Args:
        total: the amount of work (> 0). label: what is running.
        enabled: False makes every call a no-op.
        unit: None reports a percentage of work; a noun (``"tasks"``) reports counts and a rate.
        stream: where to write (default ``sys.stderr``).
        delay: print nothing during the first ``delay`` seconds (short work stays silent).
        initial: work already done before this call (a resumed sweep); the rate counts only new work.
    """

    def __init__(
        self,
        total: float,
        label: str,
        enabled: bool = True,
        unit: str | None = None,
        stream=None,
        delay: float = 0.0,
        initial: float = 0.0,
    ):
        self.total, self.label, self.enabled, self.unit = float(total), label, enabled, unit
        self.stream = sys.stderr if stream is None else stream
        self.delay, self.initial = delay, float(initial)
        self.done, self.start, self.last = float(initial), time.perf_counter(), 0.0
        self.lock = threading.Lock()
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def update(self, amount: float = 1.0) -> None:
        if not self.enabled:
            return
        with self.lock:
            self.done += amount
            now = time.perf_counter()
            if (
                now - self.start < self.delay
                or now - self.last < (0.5 if self.tty else 10.0)
                and self.done < self.total
            ):
                return
            self.last = now
            print(
                self.line(now - self.start),
                end="\r" if self.tty and self.done < self.total else "\n",
                file=self.stream,
                flush=True,
            )

    def line(self, elapsed: float) -> str:
        """The status line after ``elapsed`` seconds."""
        frac = self.done / self.total if self.total > 0 else 1.0
        new = self.done - self.initial
        rate = new / elapsed if elapsed > 0 else float("nan")
        left = (self.total - self.done) / rate if new > 0 and elapsed > 0 else float("nan")
        times = f"{elapsed:7.1f} s elapsed, ~{left:6.1f} s left"
        if self.unit is None:
            return f"{self.label}: {100 * frac:5.1f}%  {times}"
        return f"{self.label}: {self.done:.0f}/{self.total:.0f} {self.unit} ({100 * frac:.0f}%), {rate:.3g}/s, {times}"
