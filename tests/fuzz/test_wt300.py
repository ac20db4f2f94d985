"""Yokogawa WT300 SCPI replies: any text is parsed or refused with FrameError; the manual's error
data (NAN, INF, 9.91E+37, 9.9E+37) are withheld and flagged."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wattbench_devkit.fuzz import targets as t
from wattbench_devkit.fuzz.crashes import tolerate
from wattbench_devkit.fuzz.mutate import DrawSource
from wattbench_fw.contract import FLAG_MISSED, FLAG_OVER_RANGE
from wattbench_fw.errors import FrameError, SensorError
from wattbench_fw.meters import wt300

from .profiles import fuzz

ITEMS = st.permutations(t.WT300_ITEMS).flatmap(
    lambda p: st.integers(1, len(p)).map(lambda n: tuple(p[:n]) if "W" in p[:n] else ("W", *p[: n - 1]))
)


@pytest.mark.parametrize(
    "line,vals,flags",
    [
        ("+2.3140E+02,+2.2980E+02", {"W": 231.4, "V": 229.8}, 0),
        ("NAN,+2.2980E+02", {}, FLAG_MISSED),
        ("+9.91E+37,+2.2980E+02", {}, FLAG_MISSED),
        ("+2.3140E+02,INF", {"W": 231.4}, FLAG_OVER_RANGE),
        ("+2.3140E+02,+9.9E+37", {"W": 231.4}, FLAG_OVER_RANGE),
        ("+2.3140E+02,NAN", {"W": 231.4}, 0),
    ],
)
def test_manual_error_data(line: str, vals: dict[str, float], flags: int) -> None:
    assert wt300.parse_reply(line, ("W", "V")) == (vals, flags)


@fuzz(ci=1000)
@given(st.text(max_size=120), ITEMS)
def test_any_text_reply_parses_or_raises_frame_error(line: str, items: tuple[str, ...]) -> None:
    tolerate(t.run_wt300, (line.encode("utf-8", errors="surrogatepass"), items, None))


@fuzz(ci=1000)
@given(st.binary(max_size=120), ITEMS)
def test_any_bytes_reply_parses_or_raises_frame_error(line: bytes, items: tuple[str, ...]) -> None:
    tolerate(t.run_wt300, (line, items, None))


@fuzz(ci=1000)
@given(st.data())
def test_markers_and_numbers_in_any_order(data: st.DataObject) -> None:
    tolerate(t.run_wt300, t.gen_wt300(DrawSource(data)))


@fuzz(ci=500)
@given(st.text(max_size=80))
def test_identity_check_takes_any_text(idn: str) -> None:
    try:
        model = wt300.check_identity(idn)
    except SensorError:
        return
    assert model.upper().startswith("WT3")


def test_garbage_number_is_a_frame_error() -> None:
    with pytest.raises(FrameError):
        wt300.parse_reply("+2.3140E+02,abc", ("W", "V"))
