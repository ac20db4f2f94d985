"""The pure measurement core: decode, align, score and check. No I/O: nothing here opens a
socket, a file for writing, a database or a process (tests/test_architecture.py checks it)."""


class FieldError(ValueError):
    """A value outside its rule, naming the field it was given for. str() is "FIELD REASON"; a caller
    that took the value from a user names it as the user gave it (an option, a key) with the reason."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field} {reason}")
        self.field = field
        self.reason = reason
