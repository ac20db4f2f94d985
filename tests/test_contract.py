"""The contract in schema/ is self-consistent and its vectors mean what they say, under a plain
jsonschema check that reads the schema files directly (through wattbench_schema.load_schema, which adds
the one list that lives outside them: the meter kinds of the firmware's meter table)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

import wattbench_schema as contract

VALID = contract.vectors("valid")
INVALID = contract.vectors("invalid")


def test_enough_vectors_for_every_topic() -> None:
    assert len(VALID) >= 30 and len(INVALID) >= 30
    topics = set(contract.topics()["topics"])
    for kind in (VALID, INVALID):
        assert {v.schema for v in kind} == topics, "every topic needs valid and invalid vectors"


def test_every_schema_file_is_a_valid_draft_2020_12_schema() -> None:
    for path in sorted(contract.SCHEMA_DIR.glob("*.schema.json")):
        doc = json.loads(path.read_text())
        jsonschema.Draft202012Validator.check_schema(doc)


def _plain_check(raw: bytes, schema_file: Path) -> list[str]:
    """Decode strictly, then validate with jsonschema against the file itself, refs resolved offline."""
    try:
        payload = contract.strict_loads(raw)
    except contract.DecodeError as exc:
        return [f"decode: {exc}"]
    # The file as the loader serves it: meta's meter enum is the firmware's meter table.
    schema = contract.load_schema(schema_file.name.removesuffix(".schema.json"))
    validator = jsonschema.Draft202012Validator(schema, registry=contract.registry())
    return [e.message for e in validator.iter_errors(payload)]


@pytest.mark.parametrize("vec", VALID, ids=lambda v: v.name)
def test_valid_vector_validates(vec: contract.Vector) -> None:
    assert _plain_check(vec.raw, contract.SCHEMA_DIR / f"{vec.schema}.schema.json") == []
    name, params = contract.match_topic(vec.topic) or (None, {})
    assert name == vec.schema
    if "dev" in params and isinstance(vec.payload, dict) and "dev" in vec.payload:
        assert vec.payload["dev"] == params["dev"], "the device in the payload is the device in the topic"


@pytest.mark.parametrize("vec", INVALID, ids=lambda v: v.name)
def test_invalid_vector_is_rejected_at_its_stage(vec: contract.Vector) -> None:
    errors = _plain_check(vec.raw, contract.SCHEMA_DIR / f"{vec.schema}.schema.json")
    assert errors, f"{vec.name} should be rejected: {vec.why}"
    assert errors[0].startswith("decode:") == (vec.stage == "decode"), errors


def test_nan_and_infinity_are_not_json() -> None:
    for token in ("NaN", "Infinity", "-Infinity"):
        with pytest.raises(contract.DecodeError):
            contract.strict_loads('{"W": ' + token + "}")
    with pytest.raises(ValueError):
        contract.dumps({"W": float("nan")})


def test_inlined_schemas_match_the_files() -> None:
    """fastjsonschema gets the refs inlined; it must judge every vector the same way."""
    import fastjsonschema

    for name in contract.topics()["topics"].values():
        compiled = fastjsonschema.compile(contract.inline_refs(name["schema"]))
        for vec in contract.iter_vectors(name["schema"]):
            try:
                compiled(contract.strict_loads(vec.raw))
                ok = True
            except (fastjsonschema.JsonSchemaException, contract.DecodeError):
                ok = False
            assert ok == vec.valid, vec.name


def test_topic_patterns_round_trip() -> None:
    assert contract.topic_for("samples", dev="bench-a") == "wattbench/v1/dev/bench-a/samples"
    assert contract.match_topic("wattbench/v1/run/r1/phase") == ("phase", {"run": "r1"})
    assert contract.match_topic("wattbench/v1/dev/a/b/samples") is None
    assert contract.subscription("status") == "wattbench/v1/dev/+/status"


def test_influx_layout_covers_every_sample_key() -> None:
    sample = contract.load_schema("samples")["$defs"]["sample"]["properties"]
    fields = contract.influx_layout()["measurements"]["wb_sample"]["fields"]
    assert set(sample) - {"t", "c"} == set(fields), "every sample key except time and channel is a field"
    for key, kind in fields.items():
        expected = "int" if sample[key].get("type") == "integer" or "$ref" in sample[key] else "float"
        assert kind == expected, key


def test_every_number_in_every_schema_is_bounded() -> None:
    """Unbounded numbers pass validation and then overflow int64 in InfluxDB or the spool encoder."""
    unbounded: list[str] = []

    def walk(node: object, path: str) -> None:
        if isinstance(node, dict):
            if node.get("type") in ("integer", "number") and "const" not in node:
                if not (
                    {"maximum", "exclusiveMaximum"} & node.keys()
                    and {"minimum", "exclusiveMinimum"} & node.keys()
                ):
                    unbounded.append(path)
            for key, value in node.items():
                walk(value, f"{path}/{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{path}/{i}")

    for path in sorted(contract.SCHEMA_DIR.glob("*.schema.json")):
        walk(json.loads(path.read_text()), path.name)
    assert unbounded == []


def test_strict_loads_raises_only_decode_errors() -> None:
    for raw in (b"1" * 4301, b"[" * 100000, b"\xff", b'{"a":1,"a":2}', b"NaN"):
        with pytest.raises(contract.DecodeError):
            contract.strict_loads(raw)
