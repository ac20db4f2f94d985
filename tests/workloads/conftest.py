"""The workload tests share the sweep tests' polling helper (tests/sweep/sweep_synth.py)."""

from __future__ import annotations

import sys
from pathlib import Path

SWEEP_TESTS = Path(__file__).resolve().parents[1] / "sweep"
if str(SWEEP_TESTS) not in sys.path:
    sys.path.insert(0, str(SWEEP_TESTS))
