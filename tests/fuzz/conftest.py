"""Fuzz and property tests of every parser. Profiles: see profiles.py (WATTBENCH_FUZZ_PROFILE)."""

from . import profiles  # noqa: F401  (registers the fuzz-ci and fuzz-scheduled hypothesis profiles)
