"""The command workload (see README.md)."""
