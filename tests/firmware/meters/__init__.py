"""One test file per meter kind of the firmware's meter table, plus the table's own checks."""
