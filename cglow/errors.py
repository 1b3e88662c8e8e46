"""The one exception type for bad user input: the CLI prints it as one line and exits with 2."""


class CglowError(Exception):
    """A problem with the user's model or options (not a compiler bug)."""
