"""The appliance's flash spool: the compact form rebuilds every batch byte for byte or leaves it as
JSON, and segment files read at boot, intact, torn by a power cut or damaged, are sent or counted as
dropped, never a crash."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from wattbench_devkit.fuzz import targets as t
from wattbench_devkit.fuzz.crashes import tolerate
from wattbench_devkit.fuzz.mutate import DrawSource

from .profiles import fuzz


@fuzz(ci=500)
@given(st.data())
def test_compact_form_rebuilds_or_refuses(data: st.DataObject) -> None:
    tolerate(t.run_flash_compact, t.gen_flash_payload(DrawSource(data)))


@fuzz(ci=120)
@given(st.data())
def test_segment_files_are_sent_or_counted(data: st.DataObject) -> None:
    tolerate(t.run_flash_segment, t.gen_flash_segment(DrawSource(data)))


@fuzz(ci=300)
@given(st.binary(max_size=300))
def test_compact_records_of_any_bytes(raw: bytes) -> None:
    from wattbench_fw import compact

    try:
        compact.unpack(raw)
    except ValueError:
        pass
