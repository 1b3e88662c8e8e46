"""Every text field of a model must be text: protobuf hands a string field that is not valid UTF-8 (a damaged
file) to Python as bytes, which no later stage expects."""
from __future__ import annotations

from google.protobuf.message import Message

from ..errors import CglowError


def check_text(message: Message, path: str = "model") -> None:
    problem = _first_bytes(message, path)
    if problem:
        raise CglowError(f"{problem}: not UTF-8 text (a damaged file?)")


def _first_bytes(message: Message, path: str) -> str | None:
    for field, value in message.ListFields():
        items = [value] if isinstance(value, (str, bytes, Message)) else value
        if field.type == field.TYPE_STRING and any(isinstance(v, bytes) for v in items):
            return f"{path}.{field.name}"
        if field.type == field.TYPE_MESSAGE:
            for i, item in enumerate(items):
                found = _first_bytes(item, f"{path}.{field.name}" + (f"[{i}]" if items is value else ""))
                if found:
                    return found
    return None
