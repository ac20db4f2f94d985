"""Render the pictures in docs/img/ with headless Chromium.

    python docs/render_pictures.py                 # both pictures
    python docs/render_pictures.py --only dashboard
    python docs/render_pictures.py --only report --report path/to/report.html

dashboard-live-power.png
    The panels of the Live power dashboard (deploy/grafana/dashboards/influxql/live-power.json), laid out
    on its grid. Every panel's own InfluxQL query runs against a local InfluxDB holding the demo data of
    tests/ecosystem/demo_data.py, and the rows it returns are drawn on a local page that Chromium
    screenshots. It shows what the queries return; it is not a screenshot of Grafana itself.

report-chart.png
    The performance-to-power chart of an HTML report written by `wattbench demo` (or the report given
    with --report), cut out onto a page of its own and screenshotted.

Needs matplotlib, Chromium (`apt-get install -y chromium`) and, without --influx, the influxd binary
that scripts/provision.sh installs into the services cache (~/.cache/wattbench/services).
"""

from __future__ import annotations

import argparse
import html
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
IMG = REPO / "docs" / "img"
DASHBOARD = REPO / "deploy" / "grafana" / "dashboards" / "influxql" / "live-power.json"
PICTURE_DB = "wattbench_pictures"  # never the user's own database

# Grafana's dark theme and classic palette, so the picture reads like the dashboard it stands for.
BG = "#111217"
PANEL = "#181b1f"
BORDER = "#2c3235"
TEXT = "#ccccdc"
MUTED = "#8e8e9e"
PALETTE = ("#73bf69", "#f2cc0c", "#8ab8ff", "#ff780a", "#f2495c", "#5794f2", "#b877d9", "#fade2a")
UNIT_LABEL = {
    "watt": "W",
    "kwatth": "kWh",
    "volt": "V",
    "amp": "A",
    "celsius": "°C",
    "humidity": "%",
    "none": "",
}
GRID_COLUMN_PX = 58
GRID_ROW_PX = 30
GAP_PX = 8


def _helpers() -> tuple[Any, Any, Any]:
    """The test package's demo data, query runner and service starter: one definition of each."""
    path = REPO / "tests" / "ecosystem"
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
    import demo_data
    import grafana_queries

    from wattbench_devkit import services

    return demo_data, grafana_queries, services


def chromium_binary(given: str | None) -> str:
    for name in (given, "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return str(shutil.which(name))
    raise SystemExit("Chromium not found: apt-get install -y chromium (or pass --chromium PATH)")


def screenshot(chromium: str, page: Path, out: Path, width: int, height: int) -> None:
    """One headless capture of a local file with a fresh profile, nothing fetched from the network."""
    with tempfile.TemporaryDirectory(prefix="wattbench-chromium-") as profile:
        argv = [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            f"--window-size={width},{height}",
            f"--screenshot={out}",
            page.as_uri(),
        ]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0 or not out.exists():
        raise SystemExit(f"Chromium failed ({proc.returncode}): {proc.stderr[-2000:]}")


# ------------------------------------------------------------------ the dashboard picture


def _value_key(row: dict[str, Any]) -> str:
    (key,) = [k for k in row if k not in ("time", "dev", "ch", "collector")]
    return key


def _series(rows: list[dict[str, Any]]) -> dict[str, list[tuple[int, float]]]:
    out: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for row in rows:
        value = row[_value_key(row)]
        if value is None:
            continue
        out[f"{row['dev']}/{row['ch']}"].append((int(row["time"]), float(value)))
    return dict(sorted(out.items()))


def _svg_chart(panel: dict[str, Any], series: dict[str, list[tuple[int, float]]], w: int, h: int) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    plt.rcParams["svg.fonttype"] = "none"
    plt.rcParams["svg.hashsalt"] = "wattbench-docs"
    fig, ax = plt.subplots(figsize=(w / 100, h / 100), dpi=100)
    fig.patch.set_facecolor(PANEL)
    ax.set_facecolor(PANEL)
    bars = panel.get("fieldConfig", {}).get("defaults", {}).get("custom", {}).get("drawStyle") == "bars"
    for i, (name, points) in enumerate(series.items()):
        t = [datetime.fromtimestamp(ms / 1000, UTC) for ms, _ in points]
        v = [value for _, value in points]
        colour = PALETTE[i % len(PALETTE)]
        if bars:
            width = 10 / 86400 / max(1, len(series))  # a share of one 10 s interval, in days
            shifted = [mdates.date2num(x) + (i - len(series) / 2) * width for x in t]
            ax.bar(shifted, v, width=width, color=colour, alpha=0.8, label=name)
        else:
            ax.plot(t, v, color=colour, linewidth=1.4, label=name)
    for step in panel.get("fieldConfig", {}).get("defaults", {}).get("thresholds", {}).get("steps", []):
        if step.get("value") is not None:
            ax.axhline(step["value"], color="#f2495c", linestyle="--", linewidth=1)
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M", tz=UTC))
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    for side in ("left", "bottom"):
        ax.spines[side].set_color(BORDER)
    ax.tick_params(colors=MUTED, labelsize=8)
    ax.grid(color=BORDER, linewidth=0.6)
    unit = UNIT_LABEL.get(panel.get("fieldConfig", {}).get("defaults", {}).get("unit", ""), "")
    if unit:
        ax.set_ylabel(unit, color=MUTED, fontsize=8)
    if w >= 600:
        legend = ax.legend(
            loc="upper center",
            bbox_to_anchor=(0.5, -0.16),
            ncol=min(4, len(series)),
            fontsize=8,
            frameon=False,
        )
    else:  # a narrow panel: the legend goes inside, two columns
        legend = ax.legend(loc="best", ncol=2, fontsize=7, frameon=False)
    for text in legend.get_texts():
        text.set_color(TEXT)
    fig.tight_layout(pad=0.4)
    buf = io.StringIO()
    fig.savefig(buf, format="svg", facecolor=PANEL)
    plt.close(fig)
    text = buf.getvalue()
    return text[text.find("<svg") :]


def _stat_html(panel: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    defaults = panel.get("fieldConfig", {}).get("defaults", {})
    unit = UNIT_LABEL.get(defaults.get("unit", ""), "")
    decimals = defaults.get("decimals", 1)
    cells = []
    for i, row in enumerate(sorted(rows, key=lambda r: (r["dev"], r["ch"]))):
        value = row[_value_key(row)]
        colour = PALETTE[i % len(PALETTE)]
        cells.append(
            f'<div class="stat"><div class="name">{html.escape(row["dev"])}/{html.escape(row["ch"])}</div>'
            f'<div class="value" style="color:{colour}">{value:.{decimals}f}<span> {unit}</span></div></div>'
        )
    return '<div class="stats">' + "".join(cells) + "</div>"


def dashboard_page(url: str, db: str) -> tuple[str, int, int]:
    demo_data, gq, _ = _helpers()
    doc = json.loads(DASHBOARD.read_text())
    queries = {q.where: q for q in gq.queries(DASHBOARD)}
    blocks = []
    width = 24 * GRID_COLUMN_PX
    height = 0
    for panel in doc["panels"]:
        pos = panel["gridPos"]
        x, y = pos["x"] * GRID_COLUMN_PX, pos["y"] * GRID_ROW_PX + 50
        w, h = pos["w"] * GRID_COLUMN_PX - GAP_PX, pos["h"] * GRID_ROW_PX - GAP_PX
        height = max(height, y + h + GAP_PX)
        q = queries[f"{panel['title']} [{panel['targets'][0]['refId']}]"]
        rows = gq.run_influxql(url, db, gq.substitute(q, db))
        if panel["type"] == "stat":
            body = _stat_html(panel, rows)
        else:
            body = _svg_chart(panel, _series(rows), w, h - 34)
        blocks.append(
            f'<section style="left:{x}px;top:{y}px;width:{w}px;height:{h}px">'
            f"<h3>{html.escape(panel['title'])}</h3>{body}</section>"
        )
    start, stop = demo_data.window()
    fmt = "%Y-%m-%d %H:%M UTC"
    span = (
        f"{datetime.fromtimestamp(start / 1000, UTC).strftime(fmt)} to "
        f"{datetime.fromtimestamp(stop / 1000, UTC).strftime(fmt)}"
    )
    page = f"""<!doctype html><html><head><meta charset="utf-8"><style>
body{{margin:0;background:{BG};color:{TEXT};font-family:"DejaVu Sans",Arial,sans-serif;width:{width}px;height:{height}px;position:relative}}
header{{position:absolute;left:8px;top:10px;font-size:17px}}
header small{{color:{MUTED};font-size:12px;margin-left:12px}}
section{{position:absolute;background:{PANEL};border:1px solid {BORDER};border-radius:3px;overflow:hidden;box-sizing:border-box}}
h3{{margin:6px 10px;font-size:13px;font-weight:500}}
section svg{{display:block;width:100%;height:auto}}
.stats{{display:flex;flex-wrap:wrap;gap:6px;padding:0 10px}}
.stat{{flex:1 1 22%;min-width:120px}}
.stat .name{{font-size:11px;color:{MUTED}}}
.stat .value{{font-size:26px;font-weight:500}}
.stat .value span{{font-size:14px}}
</style></head><body>
<header>{html.escape(doc["title"])}<small>demo data, {html.escape(span)}; drawn from the panels' own InfluxQL queries</small></header>
{"".join(blocks)}
</body></html>"""
    return page, width, height


def render_dashboard(chromium: str, influx: str | None) -> Path:
    demo_data, _, services = _helpers()
    out = IMG / "dashboard-live-power.png"
    with tempfile.TemporaryDirectory(prefix="wattbench-pictures-") as tmp:
        server = None
        if influx:
            url = influx.rstrip("/")
            db = PICTURE_DB
            services.InfluxDB.create_database(_Remote(url), db)  # type: ignore[arg-type]
        else:
            server = services.InfluxDB(Path(tmp) / "influxdb", db=PICTURE_DB).start()
            url, db = server.url, server.db
        try:
            demo_data.write(url, db)
            page, width, height = dashboard_page(url, db)
        finally:
            if server is not None:
                server.stop()
        html_path = Path(tmp) / "dashboard.html"
        html_path.write_text(page, encoding="utf-8")
        IMG.mkdir(parents=True, exist_ok=True)
        screenshot(chromium, html_path, out, width, height)
    return out


class _Remote:
    """Just enough of services.InfluxDB to create a database on a server this script did not start."""

    def __init__(self, url: str) -> None:
        self.url = url

    def _post_query(self, q: str, db: str | None = None) -> dict[str, Any]:
        import urllib.parse
        import urllib.request

        body = urllib.parse.urlencode({"q": q}).encode()
        with urllib.request.urlopen(urllib.request.Request(f"{self.url}/query", data=body), timeout=30) as r:
            out: dict[str, Any] = json.loads(r.read())
        return out


# ------------------------------------------------------------------ the report chart


def demo_report(workdir: Path) -> Path:
    """Run `wattbench demo` in a scratch directory and return the HTML report it writes."""
    try:
        import wattbench.cli.demo  # noqa: F401
    except ImportError:
        raise SystemExit("wattbench demo is not available in this installation; pass --report FILE") from None
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    report = workdir / "wattbench-demo.html"
    proc = subprocess.run(
        [sys.executable, "-m", "wattbench.cli", "demo", "--quiet", "--html", str(report)],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if proc.returncode not in (0, 1):  # 1: the demo's run is complete but invalid; it still has a chart
        raise SystemExit(
            f"wattbench demo failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        )
    if not report.exists():
        raise SystemExit("wattbench demo wrote no HTML report")
    return report


CHART_WIDTH_PX = 960
CHART_PAD_PX = 16


def chart_page(report_html: str) -> tuple[str, int]:
    """The report's first chart alone on a page, and the page height that fits it."""
    m = re.search(r"<div class=chart>(.*?)</div>", report_html, re.S)
    if not m:
        raise SystemExit("the report has no chart")
    svg = m.group(1)
    size = re.search(r'<svg[^>]*\swidth="([\d.]+)[a-z]*"[^>]*\sheight="([\d.]+)[a-z]*"', svg)
    aspect = float(size.group(2)) / float(size.group(1)) if size else 0.6
    height = int(CHART_WIDTH_PX * aspect) + 2 * CHART_PAD_PX + 4
    page = (
        '<!doctype html><html><head><meta charset="utf-8"><style>'
        f"body{{margin:0;background:#fff}}div{{width:{CHART_WIDTH_PX}px;padding:{CHART_PAD_PX}px}}"
        "svg{display:block;width:100%;height:auto}"
        f"</style></head><body><div>{svg}</div></body></html>"
    )
    return page, height


def render_report(chromium: str, report: str | None) -> Path:
    out = IMG / "report-chart.png"
    with tempfile.TemporaryDirectory(prefix="wattbench-pictures-") as tmp:
        path = Path(report) if report else demo_report(Path(tmp))
        page = Path(tmp) / "chart.html"
        text, height = chart_page(path.read_text(encoding="utf-8"))
        page.write_text(text, encoding="utf-8")
        IMG.mkdir(parents=True, exist_ok=True)
        screenshot(chromium, page, out, CHART_WIDTH_PX + 2 * CHART_PAD_PX, height)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Render docs/img/*.png with headless Chromium.")
    parser.add_argument("--only", choices=("dashboard", "report"), help="render one picture")
    parser.add_argument(
        "--report", metavar="FILE", help="an HTML report to take the chart from (default: run the demo)"
    )
    parser.add_argument("--influx", metavar="URL", help="an InfluxDB 1.8 to use instead of starting one")
    parser.add_argument("--chromium", metavar="PATH", help="Chromium binary")
    args = parser.parse_args(argv)
    chromium = chromium_binary(args.chromium)
    if args.only in (None, "dashboard"):
        print(render_dashboard(chromium, args.influx).relative_to(REPO))
    if args.only in (None, "report"):
        print(render_report(chromium, args.report).relative_to(REPO))
    return 0


if __name__ == "__main__":
    sys.exit(main())
