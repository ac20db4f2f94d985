"""INA226 and INA228 register decoding: sign handling of 16/20/24/40-bit values against
int.from_bytes, and any register bytes give values inside the configured range or a flag."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from wattbench_devkit.fuzz import reference as ref
from wattbench_devkit.fuzz import targets as t
from wattbench_devkit.fuzz.crashes import tolerate
from wattbench_devkit.fuzz.mutate import DrawSource
from wattbench_fw.meters import ina226, ina228

from .profiles import fuzz


def test_datasheet_examples() -> None:
    assert ina226.s16(0x8000) == -32768 and ina226.s16(0x7FFF) == 32767 and ina226.s16(0xFFFF) == -1
    assert (
        ina228.s20(0xFFFFF0) == -1
        and ina228.s20(0x800000) == -(1 << 19)
        and ina228.s20(0x7FFFF0) == (1 << 19) - 1
    )
    assert ina228.s40(1 << 39) == -(1 << 39) and ina228.s40((1 << 40) - 1) == -1


@fuzz(ci=1000)
@given(st.integers(0, 0xFFFF))
def test_s16_matches_twos_complement(raw: int) -> None:
    assert (
        ina226.s16(raw) == ref.signed(raw, 16) == int.from_bytes(raw.to_bytes(2, "big"), "big", signed=True)
    )


@fuzz(ci=1000)
@given(st.integers(0, 0xFFFFFF))
def test_20_bit_value_in_24_bit_register(raw: int) -> None:
    assert ina228.s20(raw) == ref.signed_high20_of_24(raw) == ref.signed(raw >> 4, 20)
    assert ina228.u20(raw) == raw >> 4


@fuzz(ci=1000)
@given(st.integers(0, (1 << 40) - 1))
def test_s40_matches_twos_complement(raw: int) -> None:
    assert ina228.s40(raw) == int.from_bytes(raw.to_bytes(5, "big"), "big", signed=True)


@fuzz(ci=1000)
@given(st.binary(min_size=10, max_size=10), st.integers(0, len(t.INA226_CONFIGS) - 1))
def test_ina226_any_register_bytes(data: bytes, cfg: int) -> None:
    tolerate(t.run_ina226, (data, cfg))


@fuzz(ci=500)
@given(st.data())
def test_ina226_edge_words(data: st.DataObject) -> None:
    tolerate(t.run_ina226, t.gen_ina226(DrawSource(data)))


@fuzz(ci=1000)
@given(st.binary(min_size=16, max_size=16), st.integers(0, len(t.INA228_CONFIGS) - 1))
def test_ina228_any_register_bytes(data: bytes, cfg: int) -> None:
    tolerate(t.run_ina228, (data, cfg))


@fuzz(ci=500)
@given(st.data())
def test_ina228_edge_words(data: st.DataObject) -> None:
    tolerate(t.run_ina228, t.gen_ina228(DrawSource(data)))
