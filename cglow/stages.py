"""The compiler's stages as they run, for observers that show progress or keep the IR (they only watch:
the compiler's output is the same with or without them)."""
from __future__ import annotations

from typing import Any, Callable


class Observer:
    """Told when each stage starts and what it produced; subclasses override what they need."""

    def start(self, stage: str) -> None:
        pass

    def done(self, stage: str, result: Any) -> None:
        pass


class Stages:
    """Runs the compiler's stages, telling every observer about each one."""

    def __init__(self, *observers: Observer):
        self.observers = observers

    def run(self, stage: str, fn: Callable[..., Any], *args: Any) -> Any:
        for observer in self.observers:
            observer.start(stage)
        result = fn(*args)
        for observer in self.observers:
            observer.done(stage, result)
        return result


def stage_name(rewrite: Callable) -> str:
    """A pass's name (a functools.partial's function's)."""
    return getattr(rewrite, "func", rewrite).__name__
