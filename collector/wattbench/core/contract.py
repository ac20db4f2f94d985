"""Validation of what the sweep publishes, against the one contract in wattbench_schema."""

from __future__ import annotations

from functools import cache
from typing import Any

import wattbench_schema


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
