"""The pure measurement core: decode, align, score and check. No I/O: nothing here opens a
socket, a file for writing, a database or a process (tests/test_architecture.py checks it)."""
