"""The one exception type for bad user input: the CLI prints it as one line and exits with 2.

Any other exception out of the compiler is a bug in cglow, not in the model: the CLI reports it as one
line that says so, exits with 3, and (like for a user error) writes no file."""
from __future__ import annotations

import re


class CglowError(Exception):
    """A problem with the user's model or options (not a compiler bug)."""


class Notice(UserWarning):
    """Something the user should know that is no failure (a symbolic batch taken as 1): a Python warning from
    the library, which the CLI prints once as one line `cglow: notice: ...`."""


LISTED = 10  # the most items one message names: a model of thousands of nodes can fail at every one of them


def listed(items: list[str], separator: str = ", ") -> str:
    """At most LISTED items joined, then how many more there are (one line stays readable)."""
    more = len(items) - LISTED
    return separator.join(items[:LISTED]) + (f"{separator}and {more} more" if more > 0 else "")


class ModelProblems(CglowError):
    """Every problem found in a model, each a message of its own (`cglow info` lists them all); one message
    of the first LISTED joined by "; " for everything else."""

    def __init__(self, problems: list[str]):
        super().__init__(listed(list(problems), "; "))
        self.problems = list(problems)


def reason(exc: BaseException) -> str:
    """An exception from a library as a short phrase: its type and the first line of its message."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:200]}" if lines else type(exc).__name__


def one_line(text: str) -> str:
    """Text for a one-line message: line breaks and other control characters (a model's names are data and
    may hold them) escaped as Python writes them: \\n, \\r, \\x85, \\u2028..."""
    return re.sub(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]", lambda m: repr(m.group())[1:-1], text)
