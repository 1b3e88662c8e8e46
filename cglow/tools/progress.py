"""Progress on long work: the running stage and the seconds since the start, on one line of a terminal."""
from __future__ import annotations

import time
from typing import Callable, TextIO

from ..stages import Observer


class Progress(Observer):
    """Writes `cglow: 1.2 s lower` over and over on one line of `stream` when it is a terminal, and nothing
    at all when it is not (piped, a file, a test's captured output). Used as a context manager, it clears
    the line at the end, so that what the command prints next starts on a clean line."""

    def __init__(self, stream: TextIO, clock: Callable[[], float] = time.perf_counter):
        self.stream = stream
        self.shown = stream.isatty()
        self.clock = clock
        self.begin = clock()
        self.width = 0       # characters of the line on screen

    def start(self, stage: str) -> None:
        self.show(f"cglow: {self.clock() - self.begin:.1f} s {stage}")

    def show(self, text: str) -> None:
        if self.shown:
            self.stream.write("\r" + text.ljust(self.width))
            self.stream.flush()
            self.width = len(text)

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc_info) -> None:
        if self.shown and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
