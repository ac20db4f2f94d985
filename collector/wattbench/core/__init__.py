"""The pure measurement core: decode, align, score and check. No I/O: nothing here opens a
socket, a file for writing, a database or a process (tests/test_architecture.py checks it)."""


class FieldError(ValueError):
    """A value outside its rule, naming the field it was given for. str() is "FIELD REASON"; a caller
    that took the value from a user names it as the user gave it (an option, a key) with the reason."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field} {reason}")
        self.field = field
        self.reason = reason


def plain_number(text: str) -> str:
    """The text of a number as people type it, or ValueError. Python's float and int also read
    "1_0" as 10 and digits of other scripts ("５" as 5): a slip of the keyboard that would run a
    window ten times the one meant."""
    if "_" in text or not text.isascii():
        raise ValueError(text)
    return text
