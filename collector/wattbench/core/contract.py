"""Validation of what the sweep publishes, against the one contract in wattbench_schema."""

from __future__ import annotations

import math
from functools import cache
from typing import Any

import wattbench_schema

from .score import overall_ratio


class ContractError(ValueError):
    """A message the sweep built does not match the contract: a bug, never sent."""


@cache
def _validator(name: str) -> Any:
    import fastjsonschema  # late: start-up

    return fastjsonschema.compile(wattbench_schema.inline_refs(name))


def validate(name: str, payload: dict[str, Any]) -> dict[str, Any]:
    import fastjsonschema  # late: start-up

    try:
        _validator(name)(payload)
    except fastjsonschema.JsonSchemaException as exc:
        raise ContractError(f"{name} message breaks the contract: {exc.message}") from None
    return payload


def validate_phase(event: dict[str, Any]) -> dict[str, Any]:
    return validate("phase", event)


def validate_result(result: dict[str, Any]) -> dict[str, Any]:
    return validate("result", result)


def contradiction(result: dict[str, Any]) -> str | None:
    """Where a result that meets the schema contradicts itself, or None: a file edited by hand (an
    INVALID run set to valid, an overall typed over), which a comparison must not rank as measured.
    The overall is Σops over the loads ÷ Σ average power over them and active idle (core/score.py),
    computed from the same floats the result carries, so only an edit moves it."""
    failed = sorted({str(c.get("name")) for c in result.get("checks", []) if not c.get("ok")})
    if result.get("valid") is True and failed:
        return f"valid is true, but {', '.join(failed)} failed: a run is VALID only when every check passes"
    powered = [lv for lv in result.get("levels", []) if "W" in lv]
    if "overall" not in result or not powered:
        return None
    try:
        loads = [lv["ops"] for lv in powered if lv.get("kind", "target") != "idle"]
        recomputed = overall_ratio(loads, [lv["W"] for lv in powered])
    except (ValueError, TypeError, KeyError):
        return None
    if not math.isclose(recomputed, float(result["overall"]), rel_tol=1e-9, abs_tol=1e-12):
        return f"overall {result['overall']:g} is not its levels' Σops / Σpower ({recomputed:g})"
    return None
