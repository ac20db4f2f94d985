"""Tables for the terminal whose cells are never cut: a number too wide for its column folds onto a
second line instead of ending in "…" (rich's default), so "617,957" never reads as "617,9…"."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.table import Table


@cache
def _folding() -> type[Table]:
    from rich.table import Table  # late: start-up

    class FoldingTable(Table):
        def add_column(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("overflow", "fold")
            super().add_column(*args, **kwargs)

    return FoldingTable


def new_table(*args: Any, **kwargs: Any) -> Table:
    """A rich Table whose columns fold what does not fit (a column may still ask for another overflow)."""
    return _folding()(*args, **kwargs)
