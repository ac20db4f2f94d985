"""Worklets: one kind of work each (compression, hashing, sorting, a floating-point kernel, memory
bandwidth and capacity, random and sequential storage reads), paced like the built-in transaction
mix: exponential arrivals at target x calibrated rate on every core, no duty cycle. A worklet is a
folder here (its make_unit, README and sample.toml) plus one line in WORKLETS: its name, the group its
efficiency counts in for the suite score (core/suite.py), and the unit its ops are counted in."""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from typing import Any, ClassVar

from ..base import WorkloadError, check_keys, setting
from ..builtin.workers import BuiltinWorkload
from ._storage import check_file, open_file

# name -> (group, unit, what one op is). The unit heads the report's throughput columns. VERSION
# changes whenever any worklet's op changes: results of other versions are not comparable
# (`wattbench compare` marks them).
VERSION = 1
WORKLETS: dict[str, tuple[str, str, str]] = {
    "compress": ("cpu", "compressions", "zlib compress and decompress of a 64 KiB text block"),
    "sha256": ("cpu", "hashes", "SHA-256 of a 64 KiB block"),
    "aes": ("cpu", "AES-blocks", "AES-256-CBC encryption and decryption of a 64 KiB block"),
    "sort": ("cpu", "sorts", "sort of 5 000 random integers"),
    "lu": ("cpu", "solves", "LU solve of a 200 x 200 system (numpy, LAPACK)"),
    "sor": ("cpu", "sweeps", "one red-black SOR sweep of a 256 x 256 grid (numpy)"),
    "flood": ("memory", "triads", "a streaming triad over 3 x 8 MiB arrays"),
    "capacity": ("memory", "probe-sets", "65 536 random reads across the worker's whole array"),
    "random": ("storage", "4KiB-reads", "one random 4 KiB read of the file"),
    "sequential": ("storage", "1MiB-reads", "one sequential 1 MiB read of the file"),
}


class WorkletWorkload(BuiltinWorkload):
    """One worklet on all cores (workers), paced by the built-in workload's arrival stream."""

    name = "worklet"
    SETTINGS = ("worklet", "workers", "seed", "nice", "options")
    OPTION_TYPES: ClassVar[dict[str, tuple[type, ...]]] = {
        "size_mb": (int,),
        "file": (str,),
        "direct": (bool,),
    }

    def __init__(
        self,
        worklet: str,
        workers: int | None = None,
        seed: int = 1,
        nice: int = 0,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        if worklet not in WORKLETS:
            raise WorkloadError(f"worklet {worklet!r}: one of {', '.join(WORKLETS)}")
        super().__init__(workers=workers, seed=seed, nice=nice)
        self.worklet = worklet
        self.group, self.ops_unit, self.op = WORKLETS[worklet]
        # The run's record names the worklet and the version of its op.
        self.name = f"worklet-{worklet}-v{VERSION}"
        self.options = dict(options or {})
        known = sorted(self.OPTION_TYPES)
        for key, value in self.options.items():
            if key not in self.OPTION_TYPES:
                near = difflib.get_close_matches(key, known, n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                raise WorkloadError(
                    f"worklet workload: unknown option {key!r}{hint}; known: {', '.join(known)}"
                )
            setting("worklet", {f"options.{key}": value}, f"options.{key}", self.OPTION_TYPES[key], None)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> WorkletWorkload:
        check_keys(cls.name, config, cls.SETTINGS)
        worklet = setting(cls.name, config, "worklet", (str,), None)
        if worklet is None:
            raise WorkloadError(f"worklet workload: worklet missing; one of {', '.join(WORKLETS)}")
        n = {key: setting(cls.name, config, key, (int,), None) for key in ("workers", "seed", "nice")}
        options = setting(cls.name, config, "options", (dict,), {})
        try:
            return cls(
                worklet, n["workers"] or None, 1 if n["seed"] is None else n["seed"], n["nice"] or 0, options
            )
        except ValueError as exc:
            raise WorkloadError(f"worklet workload: {exc}") from None

    def preflight(self) -> None:
        """A storage worklet's file can be made (or is there) and its size is in range: in a suite
        the worklet may start an hour after the first."""
        super().preflight()
        if self.group == "storage":
            try:
                check_file(
                    str(self.options.get("file", "wattbench-worklet.dat")),
                    int(self.options.get("size_mb", 1024)),
                )
            except ValueError as exc:
                raise WorkloadError(f"worklet {self.worklet}: {exc}") from None

    def open(self) -> None:
        if self.group == "storage":
            # Laid out once here, before the workers start, not by each of them at once.
            try:
                fd, buf, _ = open_file(
                    str(self.options.get("file", "wattbench-worklet.dat")),
                    int(self.options.get("size_mb", 1024)),
                    bool(self.options.get("direct", True)),
                    4096,
                )
            except (OSError, ValueError) as exc:
                raise WorkloadError(f"worklet {self.worklet}: {exc}") from None
            os.close(fd)
            buf.close()
        super().open()

    def unit(self) -> tuple[str, dict[str, Any]]:
        return (f"{__name__}.{self.worklet}", dict(self.options))
