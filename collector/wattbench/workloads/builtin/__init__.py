"""The built-in transactional workload (see README.md); the class is BuiltinWorkload in workers.py."""
