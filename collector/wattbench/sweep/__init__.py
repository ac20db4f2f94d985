"""The load-level sweep: a pure phase plan, the driver that walks it, and the `wattbench sweep` command."""
