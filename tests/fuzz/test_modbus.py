"""Modbus-RTU framing in the firmware: CRC-16/MODBUS against an independent implementation, and the
reply decoder against the framing rules for valid, mutated and random frames."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from wattbench_devkit.fuzz import reference as ref
from wattbench_devkit.fuzz import targets as t
from wattbench_devkit.fuzz.crashes import tolerate
from wattbench_devkit.fuzz.mutate import DrawSource
from wattbench_fw import modbus

from .profiles import fuzz

registers = st.lists(st.integers(0, 0xFFFF), min_size=1, max_size=125)


def test_crc16_catalogue_check_value() -> None:
    assert modbus.crc16(b"123456789") == 0x4B37
    # A PZEM-004T read request from its datasheet: 01 04 00 00 00 0A, CRC 70 0D.
    assert modbus.read_request(1, 0x04, 0, 10) == bytes.fromhex("01040000000A700D")


@fuzz(ci=1000)
@given(st.binary(max_size=256), st.integers(0, 1 << 16))
def test_crc_appended_checks_and_any_single_bit_flip_fails(data: bytes, bit: int) -> None:
    tolerate(t.run_crc, (data, bit))


@fuzz(ci=500)
@given(
    st.binary(min_size=2, max_size=256), st.integers(0, 1 << 16), st.integers(1, 16), st.integers(1, 0xFFFF)
)
def test_crc_detects_every_burst_of_up_to_16_bits(data: bytes, start: int, length: int, pattern: int) -> None:
    framed = modbus.with_crc(data)
    nbits = 8 * len(framed)
    start %= nbits - length + 1
    # A burst: first and last bit of the span flipped, anything in between.
    burst = (pattern | 1 | (1 << (length - 1))) & ((1 << length) - 1)
    value = int.from_bytes(framed, "big") ^ (burst << (nbits - start - length))
    assert not modbus.crc_ok(value.to_bytes(len(framed), "big"))


@fuzz(ci=500)
@given(st.sampled_from([1, 2, 247, 0xF8]), st.sampled_from([0x03, 0x04]), registers)
def test_valid_replies_decode_to_their_registers(addr: int, function: int, regs: list[int]) -> None:
    frame = t.modbus_reply(addr, function, regs)
    assert modbus.parse_read_reply(frame, addr, function, len(regs)) == regs
    assert modbus.reply_complete(frame, len(regs))
    assert not modbus.reply_complete(frame[:-1], len(regs))


@fuzz(ci=1000)
@given(st.binary(max_size=260), st.integers(0, 255), st.integers(1, 127), st.integers(0, 125))
def test_any_bytes_decode_or_raise_the_documented_error(
    frame: bytes, addr: int, function: int, count: int
) -> None:
    tolerate(t.run_modbus, (frame, addr, function, count))


@fuzz(ci=1000)
@given(st.data())
def test_mutated_replies_decode_right_or_raise(data: st.DataObject) -> None:
    tolerate(t.run_modbus, t.gen_modbus(DrawSource(data)))


@fuzz(ci=300)
@given(st.integers(0, 255), st.integers(1, 127), st.integers(0, 255))
def test_exception_replies_carry_their_code(addr: int, function: int, code: int) -> None:
    frame = modbus.with_crc(bytes((addr, function | 0x80, code)))
    try:
        modbus.parse_read_reply(frame, addr, function, 1)
    except modbus.ModbusException as exc:
        assert exc.code == code and exc.function == function
    else:
        raise AssertionError("exception reply decoded as data")
    assert ref.crc16_modbus(frame[:-2]) == int.from_bytes(frame[-2:], "little")


@fuzz(ci=1000)
@given(st.data())
def test_pzem004t_reads_any_reply_safely(data: st.DataObject) -> None:
    tolerate(t.run_pzem, t.gen_pzem(DrawSource(data)))


@fuzz(ci=500)
@given(st.lists(st.integers(0, 0xFFFF), min_size=10, max_size=10), st.sampled_from(t.PZEM_VARIANTS))
def test_pzem004t_valid_replies_give_datasheet_values(regs: list[int], variant: str) -> None:
    # run_pzem compares every value with the datasheet scaling; over-range currents are flagged.
    assert tolerate(t.run_pzem, (t.modbus_reply(1, 0x04, regs), variant)) in ("ok", "flags:4")
