"""Reports of a scored run: the terminal table, JSON and a self-contained HTML page."""
