"""The appliance's state files, read back at every boot: damaged or odd content must not stop the
boot, and the sequence and energy counters must stay valid."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from wattbench_devkit.fuzz import targets as t
from wattbench_devkit.fuzz.crashes import tolerate
from wattbench_devkit.fuzz.mutate import DrawSource

from .profiles import fuzz


def test_good_state_continues() -> None:
    assert t.run_state((json.dumps(t.STATE_DOC).encode(), None)) == "ok"


@fuzz(ci=600)
@given(st.data())
def test_state_files_mutated(data: st.DataObject) -> None:
    tolerate(t.run_state, t.gen_state(DrawSource(data)))


@fuzz(ci=300)
@given(st.one_of(st.none(), st.binary(max_size=120)), st.one_of(st.none(), st.binary(max_size=120)))
def test_state_files_any_bytes(a: bytes | None, b: bytes | None) -> None:
    tolerate(t.run_state, (a, b))
