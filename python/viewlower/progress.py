"""Phase lines on standard error for `python3 -m viewlower export|check`.

Each phase (trace, layouts, lower, replay, …) prints one line when it ends, with its time:

    viewlower: trace 2.41 s
    viewlower: replay 1.03 s (412 nodes)

When standard error is a terminal, the running phase also shows a live line (a bar when the
phase knows how many steps it has, else the seconds so far), redrawn by a background thread at
most ten times a second and erased before the phase's line is printed. `Progress(enabled=False)`
(the `--json` mode) prints nothing and only records the times.
"""
from __future__ import annotations

import sys
import threading
import time
from typing import Any, Dict, Optional, TextIO

BAR = 24


class Phase:
    """One running phase: `step(k)` advances it by k of its `total` steps."""

    def __init__(self, progress: "Progress", name: str, total: Optional[int]):
        self.progress = progress
        self.name = name
        self.total = total
        self.done = 0
        self.start = time.monotonic()
        self.note = ""

    def step(self, k: int = 1) -> None:
        self.done += k

    def line(self) -> str:
        elapsed = time.monotonic() - self.start
        if self.total:
            frac = min(1.0, self.done / self.total)
            fill = int(frac * BAR)
            return (f"viewlower: {self.name} [{'#' * fill}{'.' * (BAR - fill)}] "
                    f"{self.done}/{self.total} {elapsed:.1f} s")
        return f"viewlower: {self.name} {elapsed:.1f} s"

    def __enter__(self) -> "Phase":
        self.progress._begin(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress._end(self, ok=exc[0] is None)


class Progress:
    """Phases of one command; `timings` holds each finished phase's seconds by name."""

    def __init__(self, enabled: bool = True, stream: Optional[TextIO] = None,
                 live: Optional[bool] = None):
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        if live is None:
            isatty = getattr(self.stream, "isatty", None)
            live = bool(isatty and isatty())
        self.live = enabled and live
        self.timings: Dict[str, float] = {}
        self._current: Optional[Phase] = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._drawn = 0

    def phase(self, name: str, total: Optional[int] = None) -> Phase:
        return Phase(self, name, total)

    def _begin(self, p: Phase) -> None:
        with self._lock:
            self._current = p
        if self.live and self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._draw_loop, daemon=True)
            self._thread.start()

    def _end(self, p: Phase, ok: bool) -> None:
        seconds = time.monotonic() - p.start
        with self._lock:
            self._current = None
            self._erase()
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        self.timings[p.name] = round(seconds, 3)
        if self.enabled and ok:
            counted = f" ({p.total} nodes)" if p.total else ""
            note = f" {p.note}" if p.note else ""
            print(f"viewlower: {p.name} {seconds:.2f} s{counted}{note}", file=self.stream,
                  flush=True)

    def _erase(self) -> None:
        if self._drawn:
            self.stream.write("\r" + " " * self._drawn + "\r")
            self.stream.flush()
            self._drawn = 0

    def _draw_loop(self) -> None:
        while not self._stop.wait(0.1):
            with self._lock:
                if self._current is None:
                    continue
                text = self._current.line()
                pad = max(0, self._drawn - len(text))
                self.stream.write("\r" + text + " " * pad)
                self.stream.flush()
                self._drawn = len(text)


#: A Progress that prints nothing (library calls without a progress of their own).
def silent() -> Progress:
    return Progress(enabled=False)
