"""Hypothesis settings for the fuzz tests.

Two profiles: "ci" (the default: a few hundred to a thousand examples per parser, the whole folder in
well under two minutes on two cores) and "scheduled" (at least 100 000 examples per parser). Choose
with WATTBENCH_FUZZ_PROFILE=ci|scheduled. They are registered as fuzz-ci and fuzz-scheduled and
applied per test, so other test folders keep their own hypothesis settings.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

SCHEDULED_EXAMPLES = 100_000
_SUPPRESS = [
    HealthCheck.too_slow,
    HealthCheck.data_too_large,
    HealthCheck.filter_too_much,
    HealthCheck.large_base_example,
]

# CI runs the same examples every time (derandomize), so a red build always points at a code change;
# the scheduled profile explores new inputs on every run.
settings.register_profile(
    "fuzz-ci",
    max_examples=500,
    deadline=None,
    suppress_health_check=_SUPPRESS,
    print_blob=True,
    derandomize=True,
)
settings.register_profile(
    "fuzz-scheduled",
    max_examples=SCHEDULED_EXAMPLES,
    deadline=None,
    suppress_health_check=_SUPPRESS,
    print_blob=True,
)

NAME = os.environ.get("WATTBENCH_FUZZ_PROFILE", "ci").strip() or "ci"
if NAME not in ("ci", "scheduled"):
    raise RuntimeError(f"WATTBENCH_FUZZ_PROFILE={NAME!r}: use ci or scheduled")
PROFILE = settings.get_profile(f"fuzz-{NAME}")


def fuzz(ci: int) -> settings:
    """Settings for one parser's test: `ci` examples in CI, the scheduled count otherwise."""
    return settings(PROFILE, max_examples=ci if NAME == "ci" else max(ci, SCHEDULED_EXAMPLES))
