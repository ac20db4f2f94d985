"""What wattbench's test suite and its benchmarks (bench/) share.

- `services`: real Mosquitto, InfluxDB and Telegraf on free loopback ports;
- `streams`: contract-valid sample streams and a publisher for them;
- `mpy`: code run under the official MicroPython WebAssembly build, with the `machine` stand-ins of
  `mocks/`;
- `memory_rig`: the firmware's GC heap per board profile (the program it runs is `memrig/rig.py`);
- `fuzz`: the parsers' fuzz targets, their input generators and the list of known crashes.

Install it from a checkout beside the main package: `python -m pip install -e . -e ./devkit`. The
services and the MicroPython runner read that checkout (deploy/, firmware/), found here
as REPO.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path


def _is_checkout(path: Path) -> bool:
    return (path / "deploy" / "mosquitto.conf").is_file() and (path / "firmware" / "wattbench_fw").is_dir()


def _find_checkout() -> Path:
    # An editable install of this kit sits in the checkout; an installed copy finds it through an
    # editable install of the main package, or else from the working directory.
    starts = [Path(__file__).resolve().parent]
    spec = importlib.util.find_spec("wattbench")
    if spec is not None and spec.origin:
        starts.append(Path(spec.origin).resolve().parent)
    starts.append(Path.cwd().resolve())
    for start in starts:
        for path in (start, *start.parents):
            if _is_checkout(path):
                return path
    raise ImportError(
        "wattbench_devkit needs a wattbench checkout (deploy/ and firmware/): run from inside one"
    )


REPO = _find_checkout()
