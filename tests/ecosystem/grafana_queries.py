"""Read every query out of the committed Grafana dashboards and run it against InfluxDB the way
Grafana would, with its macros and template variables replaced by concrete values."""

from __future__ import annotations

import csv
import io
import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import demo_data

REPO = Path(__file__).resolve().parents[2]
DASHBOARDS = REPO / "deploy" / "grafana" / "dashboards"
DATASOURCE_FLAVOUR = {"wattbench-influxql": "influxql", "wattbench-flux": "flux"}
INTERVAL = "10s"
RETENTION_POLICY = "autogen"


@dataclass(frozen=True)
class PanelQuery:
    dashboard: str
    where: str  # panel title, "annotation: ..." or "variable: ..."
    flavour: str
    text: str
    table: bool

    @property
    def id(self) -> str:
        return f"{self.dashboard}:{self.where}"


def dashboard_files() -> list[Path]:
    return sorted(DASHBOARDS.glob("*/*.json"))


def _flavour(ds: dict[str, Any] | None) -> str:
    assert ds and ds.get("type") == "influxdb", ds
    return DATASOURCE_FLAVOUR[ds["uid"]]


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for p in panels:
        yield p
        yield from _panels(p.get("panels", []))  # rows nest their panels


def queries(path: Path) -> Iterator[PanelQuery]:
    doc = json.loads(path.read_text())
    name = f"{path.parent.name}/{path.stem}"
    for panel in _panels(doc.get("panels", [])):
        for target in panel.get("targets", []):
            flavour = _flavour(target.get("datasource") or panel.get("datasource"))
            yield PanelQuery(
                name,
                f"{panel['title']} [{target['refId']}]",
                flavour,
                target["query"],
                target.get("resultFormat") == "table",
            )
    for ann in doc.get("annotations", {}).get("list", []):
        if ann.get("builtIn"):
            continue
        yield PanelQuery(
            name, f"annotation: {ann['name']}", _flavour(ann["datasource"]), ann["target"]["query"], True
        )
    for var in doc.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            q = var["query"]
            text = q if isinstance(q, str) else q["query"]
            yield PanelQuery(name, f"variable: {var['name']}", _flavour(var["datasource"]), text, True)


def _regex_alternation(values: list[str]) -> str:
    """What Grafana's ${var:regex} gives for a multi-value selection."""
    return "(" + "|".join(re.sub(r"([^A-Za-z0-9_])", r"\\\1", v) for v in values) + ")"


def variables() -> dict[str, str]:
    channels = sorted([*demo_data.POWER_CHANNELS, demo_data.INLET_CHANNEL])
    return {
        "dev": _regex_alternation(list(demo_data.DEVICES)),
        "ch": _regex_alternation(channels),
        "run": demo_data.RUN_ID,
    }


def _rfc3339(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def substitute(q: PanelQuery, db: str = "wattbench") -> str:
    start, stop = demo_data.window()
    text = q.text
    for name, value in variables().items():
        text = re.sub(r"\$\{" + name + r"(?::regex|:raw)?\}", lambda _m, v=value: v, text)
        text = re.sub(r"\$" + name + r"\b", lambda _m, v=value: v, text)
    if q.flavour == "influxql":
        text = text.replace("$timeFilter", f"time >= {start}ms AND time <= {stop}ms")
        text = text.replace("$__interval", INTERVAL)
    else:
        text = text.replace("v.timeRangeStart", _rfc3339(start)).replace("v.timeRangeStop", _rfc3339(stop))
        text = text.replace("v.windowPeriod", INTERVAL).replace(
            "v.defaultBucket", json.dumps(f"{db}/{RETENTION_POLICY}")
        )
    leftover = re.findall(r"\$\{?\w+|\bv\.\w+", text)
    assert not leftover, f"{q.id}: unreplaced macros {leftover}"
    return text


def run_influxql(url: str, db: str, text: str) -> list[dict[str, Any]]:
    import urllib.parse

    body = urllib.parse.urlencode({"q": text, "db": db, "epoch": "ms"}).encode()
    with urllib.request.urlopen(urllib.request.Request(f"{url}/query", data=body), timeout=60) as r:
        out = json.loads(r.read())
    rows: list[dict[str, Any]] = []
    for result in out.get("results", []):
        if "error" in result:
            raise RuntimeError(result["error"])
        for series in result.get("series", []):
            for values in series.get("values", []):
                row = dict(zip(series["columns"], values, strict=True))
                row.update(series.get("tags", {}))
                rows.append(row)
    return rows


def run_flux(url: str, text: str) -> list[dict[str, str]]:
    req = urllib.request.Request(
        f"{url}/api/v2/query",
        data=text.encode(),
        headers={"Accept": "application/csv", "Content-Type": "application/vnd.flux"},
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            body = r.read().decode()
    except urllib.error.HTTPError as exc:
        raise RuntimeError(exc.read().decode(errors="replace")) from None
    rows: list[dict[str, str]] = []
    header: list[str] | None = None
    for record in csv.reader(io.StringIO(body)):
        if not record or all(not c for c in record):
            header = None  # a blank line ends a table; the next one brings its own header
            continue
        if record[0].startswith("#"):
            continue
        if header is None:
            header = record
            if "error" in header and "reference" in header:
                header = ["error", "reference"]
            continue
        row = dict(zip(header, record, strict=False))
        if header[:2] == ["error", "reference"]:
            raise RuntimeError(row["error"])
        rows.append(row)
    return rows


def run(q: PanelQuery, url: str, db: str) -> list[dict[str, Any]]:
    text = substitute(q, db)
    if q.flavour == "influxql":
        return run_influxql(url, db, text)
    return run_flux(url, text)
