"""The concurrency workload (see README.md)."""
