"""Generate wattbench's Grafana dashboards with grafana-foundation-sdk.

Every dashboard exists twice, once per InfluxDB query language, because a Grafana InfluxDB data source
speaks either InfluxQL or Flux. Each panel below carries both queries side by side so the two flavours
cannot drift apart; the measurements, tags and fields are those of schema/v1/influx.json.

    pip install -e ".[grafana]"
    python deploy/grafana/build.py           # rewrite dashboards/{influxql,flux}/*.json
    python deploy/grafana/build.py --check   # exit 1 if the committed JSON is stale
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from grafana_foundation_sdk.builders import barchart, dashboard, stat, statetimeline, table, timeseries
from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog import variants as cogvariants
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as model

HERE = Path(__file__).resolve().parent
OUT = HERE / "dashboards"
Flavour = Literal["influxql", "flux"]
FLAVOURS: tuple[Flavour, ...] = ("influxql", "flux")
DATASOURCE_UID = {"influxql": "wattbench-influxql", "flux": "wattbench-flux"}
FLAVOUR_NAME = {"influxql": "InfluxQL", "flux": "Flux"}

# Labels Grafana gets from tags in both flavours, so one display name serves both.
CHANNEL_NAME = "${__field.labels.dev}/${__field.labels.ch}"
DEVICE_NAME = "${__field.labels.dev}"

# Flux building blocks. v.defaultBucket is the data source's bucket ("wattbench/autogen" on 1.8).
FROM = "from(bucket: v.defaultBucket)\n  |> range(start: v.timeRangeStart, stop: v.timeRangeStop)"
# Results and last-known status are looked up by tag, whatever the dashboard's time range.
FROM_ALL_TIME = "from(bucket: v.defaultBucket)\n  |> range(start: 0)"
DEV_CH_FILTER_FLUX = "  |> filter(fn: (r) => r.dev =~ /^${dev:regex}$/ and r.ch =~ /^${ch:regex}$/)"
DEV_FILTER_FLUX = "  |> filter(fn: (r) => r.dev =~ /^${dev:regex}$/)"
DEV_CH_WHERE = '"dev" =~ /^${dev:regex}$/ AND "ch" =~ /^${ch:regex}$/ AND $timeFilter'
DEV_WHERE = '"dev" =~ /^${dev:regex}$/ AND $timeFilter'


def flux(*lines: str) -> str:
    return "\n".join(lines)


def flux_field(measurement: str, *fields: str) -> str:
    match = " or ".join(f'r._field == "{f}"' for f in fields)
    if len(fields) > 1:
        match = f"({match})"
    return f'  |> filter(fn: (r) => r._measurement == "{measurement}" and {match})'


@dataclass(frozen=True)
class Query:
    """One panel query in both languages; `table` asks InfluxQL for rows instead of series."""

    influxql: str
    flux: str
    table: bool = False

    def text(self, flavour: Flavour) -> str:
        return self.influxql if flavour == "influxql" else self.flux


class InfluxTarget(cogvariants.Dataquery):
    """The InfluxDB data source's query model. The SDK ships no InfluxDB query type, so this is the
    plain Grafana shape: raw InfluxQL (rawQuery) or a Flux script, both in `query`."""

    def __init__(self, ref_id: str, flavour: Flavour, query: Query) -> None:
        self.ref_id = ref_id
        self.flavour = flavour
        self.query = query

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "refId": self.ref_id,
            "datasource": {"type": "influxdb", "uid": DATASOURCE_UID[self.flavour]},
            "query": self.query.text(self.flavour),
        }
        if self.flavour == "influxql":
            out["rawQuery"] = True
            out["resultFormat"] = "table" if self.query.table else "time_series"
        return out


class Target(cogbuilder.Builder[cogvariants.Dataquery]):
    def __init__(self, ref_id: str, flavour: Flavour, query: Query) -> None:
        self._target = InfluxTarget(ref_id, flavour, query)

    def build(self) -> cogvariants.Dataquery:
        return self._target


class AnnotationTarget:
    """Target of an InfluxDB annotation query: the columns that give each marker its text and tags."""

    def __init__(self, flavour: Flavour, query: str, text: str, tags: str, title: str) -> None:
        self.flavour = flavour
        self.query = query
        self.columns = {"textColumn": text, "tagsColumn": tags, "titleColumn": title}

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"refId": "Anno", "query": self.query, "fromAnnotations": True}
        if self.flavour == "influxql":
            out.update(rawQuery=True, resultFormat="table", **self.columns)
        return out


class AnnotationTargetBuilder(cogbuilder.Builder[Any]):
    def __init__(self, target: AnnotationTarget) -> None:
        self._target = target

    def build(self) -> Any:
        return self._target


def datasource(flavour: Flavour) -> model.DataSourceRef:
    return model.DataSourceRef(type_val="influxdb", uid=DATASOURCE_UID[flavour])


# ------------------------------------------------------------------ panel catalogue


@dataclass
class Panel:
    """A panel independent of the query language: build(flavour) gives the SDK builder."""

    kind: Literal["timeseries", "bars", "stat", "table", "barchart", "state"]
    title: str
    queries: list[Query]
    description: str = ""
    unit: str = ""
    width: int = 12
    height: int = 8
    display_name: str = ""
    decimals: int | None = None
    thresholds: list[tuple[float | None, str]] = field(default_factory=list)
    mappings: dict[str, tuple[str, str]] = field(default_factory=dict)
    transformations: list[dict[str, Any]] = field(default_factory=list)
    x_field: str = ""
    custom: Callable[[Any], Any] | None = None

    def build(self, flavour: Flavour, panel_id: int) -> cogbuilder.Builder[model.Panel]:
        maker = {
            "timeseries": timeseries.Panel,
            "bars": timeseries.Panel,
            "stat": stat.Panel,
            "table": table.Panel,
            "barchart": barchart.Panel,
            "state": statetimeline.Panel,
        }[self.kind]
        p: Any = maker().id(panel_id).title(self.title).datasource(datasource(flavour))
        p = p.span(self.width).height(self.height)
        if self.description:
            p = p.description(self.description)
        for i, q in enumerate(self.queries):
            p = p.with_target(Target(chr(ord("A") + i), flavour, q))
        if self.unit:
            p = p.unit(self.unit)
        if self.display_name:
            p = p.display_name(self.display_name)
        if self.decimals is not None:
            p = p.decimals(self.decimals)
        if self.thresholds:
            steps = [model.Threshold(value=v, color=c) for v, c in self.thresholds]  # type: ignore[arg-type]
            p = p.thresholds(dashboard.ThresholdsConfig().mode(model.ThresholdsMode.ABSOLUTE).steps(steps))
        if self.mappings:
            options = {
                value: model.ValueMappingResult(text=text, color=color, index=i)
                for i, (value, (text, color)) in enumerate(self.mappings.items())
            }
            p = p.mappings([model.ValueMap(options=options)])
        for t in self.transformations:
            p = p.with_transformation(model.DataTransformerConfig(id_val=t["id"], options=t["options"]))
        if self.kind == "bars":
            p = p.draw_style(common.GraphDrawStyle.BARS).fill_opacity(60)
        if self.kind == "barchart":
            p = p.x_field(self.x_field).show_value(common.VisibilityMode.AUTO)
        if self.kind == "stat":
            p = p.reduce_options(common_builders.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
        if self.custom is not None:
            p = self.custom(p)
        return p  # type: ignore[no-any-return]


def sample_series(quantity: str, agg: str = "mean") -> Query:
    """One sample quantity per channel, reduced per display interval. Mean is right for W, V, A, PF
    and T because each sample is itself a level, not a running total (see energy_* for Wh)."""
    return Query(
        f'SELECT {agg}("{quantity}") FROM "wb_sample" WHERE {DEV_CH_WHERE} '
        'GROUP BY time($__interval), "dev", "ch" fill(none)',
        flux(
            FROM,
            flux_field("wb_sample", quantity),
            DEV_CH_FILTER_FLUX,
            f"  |> aggregateWindow(every: v.windowPeriod, fn: {agg}, createEmpty: false)",
            '  |> keep(columns: ["_time", "_value", "dev", "ch"])',
        ),
    )


def inlet_series(quantity: str) -> Query:
    """Inlet probes are channels with T or RH; the channel filter is skipped so that choosing power
    channels never hides the inlet temperature."""
    return Query(
        f'SELECT mean("{quantity}") FROM "wb_sample" WHERE {DEV_WHERE} '
        'GROUP BY time($__interval), "dev", "ch" fill(none)',
        flux(
            FROM,
            flux_field("wb_sample", quantity),
            DEV_FILTER_FLUX,
            "  |> aggregateWindow(every: v.windowPeriod, fn: mean, createEmpty: false)",
            '  |> keep(columns: ["_time", "_value", "dev", "ch"])',
        ),
    )


# The Wh field is a counter that only grows. Energy in a window is how much it grew: the difference
# of the last reading of consecutive windows. Averaging a counter would give a meaningless number.
ENERGY_PER_INTERVAL = Query(
    'SELECT non_negative_difference(last("Wh")) / 1000 FROM "wb_sample" '
    f'WHERE {DEV_CH_WHERE} GROUP BY time($__interval), "dev", "ch" fill(none)',
    flux(
        FROM,
        flux_field("wb_sample", "Wh"),
        DEV_CH_FILTER_FLUX,
        "  |> aggregateWindow(every: v.windowPeriod, fn: last, createEmpty: false)",
        "  |> difference(nonNegative: true)",
        "  |> map(fn: (r) => ({r with _value: r._value / 1000.0}))",
        '  |> keep(columns: ["_time", "_value", "dev", "ch"])',
    ),
)
# Energy over the whole range: the sum of every sample-to-sample increase of the counter.
ENERGY_IN_RANGE = Query(
    'SELECT sum("d") / 1000 FROM (SELECT non_negative_difference("Wh") AS "d" FROM "wb_sample" '
    f'WHERE {DEV_CH_WHERE} GROUP BY "dev", "ch") GROUP BY "dev", "ch"',
    flux(
        FROM,
        flux_field("wb_sample", "Wh"),
        DEV_CH_FILTER_FLUX,
        "  |> difference(nonNegative: true)",
        "  |> sum()",
        "  |> map(fn: (r) => ({r with _value: r._value / 1000.0}))",
        '  |> keep(columns: ["_value", "dev", "ch"])',
    ),
)
POWER_NOW = Query(
    f'SELECT last("W") FROM "wb_sample" WHERE {DEV_CH_WHERE} GROUP BY "dev", "ch"',
    flux(
        FROM,
        flux_field("wb_sample", "W"),
        DEV_CH_FILTER_FLUX,
        "  |> last()",
        '  |> keep(columns: ["_time", "_value", "dev", "ch"])',
    ),
)

RUN = "${run}"


def result_rows(*fields: str) -> Query:
    """Per-level rows of the selected run (the overall row excluded), one column per field."""
    cols = ", ".join(f'"{f}"' for f in fields)
    keep = ", ".join(f'"{f}"' for f in ("phase", *fields))
    return Query(
        f'SELECT "phase", {cols} FROM "wb_result" WHERE "run" = \'{RUN}\' AND "phase" != \'overall\'',
        flux(
            FROM_ALL_TIME,
            f'  |> filter(fn: (r) => r._measurement == "wb_result" and r.run == "{RUN}" and r.phase != "overall")',
            "  |> filter(fn: (r) => " + " or ".join(f'r._field == "{f}"' for f in fields) + ")",
            '  |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")',
            "  |> group()",
            f"  |> keep(columns: [{keep}])",
        ),
        table=True,
    )


def run_overall(field_name: str) -> Query:
    return Query(
        f'SELECT last("{field_name}") AS "{field_name}" FROM "wb_result" '
        f"WHERE \"run\" = '{RUN}' AND \"phase\" = 'overall'",
        flux(
            FROM_ALL_TIME,
            f'  |> filter(fn: (r) => r._measurement == "wb_result" and r.run == "{RUN}" and r.phase == "overall")',
            f'  |> filter(fn: (r) => r._field == "{field_name}")',
            "  |> last()",
            '  |> keep(columns: ["_time", "_value"])',
        ),
    )


def health_series(field_name: str, agg: str = "mean") -> Query:
    return Query(
        f'SELECT {agg}("{field_name}") FROM "wb_health" WHERE $timeFilter '
        'GROUP BY time($__interval), "dev" fill(none)',
        flux(
            FROM,
            flux_field("wb_health", field_name),
            f"  |> aggregateWindow(every: v.windowPeriod, fn: {agg}, createEmpty: false)",
            '  |> group(columns: ["dev"])',
            '  |> keep(columns: ["_time", "_value", "dev"])',
        ),
    )


# wb_health.offset_ms is stored as the collector measures it (receive time minus sample time, host minus
# device); everything wattbench shows uses device minus host, so the panels turn the sign.
CLOCK_OFFSET = Query(
    'SELECT mean("offset_ms") * -1 AS "offset_ms" FROM "wb_health" WHERE $timeFilter '
    'GROUP BY time($__interval), "dev" fill(none)',
    flux(
        FROM,
        flux_field("wb_health", "offset_ms"),
        "  |> aggregateWindow(every: v.windowPeriod, fn: mean, createEmpty: false)",
        "  |> map(fn: (r) => ({r with _value: -r._value}))",
        '  |> group(columns: ["dev"])',
        '  |> keep(columns: ["_time", "_value", "dev"])',
    ),
)

# The collector's health counters run up from its start; gaps per interval are their increase.
# A collector restart resets them to zero, which the non-negative difference skips.
GAPS_PER_INTERVAL = Query(
    'SELECT non_negative_difference(last("gaps")) FROM "wb_health" WHERE $timeFilter '
    'GROUP BY time($__interval), "dev", "collector" fill(none)',
    flux(
        FROM,
        flux_field("wb_health", "gaps"),
        "  |> aggregateWindow(every: v.windowPeriod, fn: last, createEmpty: false)",
        "  |> difference(nonNegative: true)",
        '  |> keep(columns: ["_time", "_value", "dev", "collector"])',
    ),
)

STATUS_FIELDS = ("state", "clk_sync", "boot", "up", "rssi", "buf_ram", "buf_flash", "dropped")
HEALTH_FIELDS = ("rate_hz", "offset_ms", "clk_err", "gaps", "missing")
DEVICE_MINUS_HOST = ("offset_ms",)  # stored host minus device, shown the other way round


def last_per_device(measurement: str, fields: tuple[str, ...], all_time: bool) -> Query:
    """The newest value of each field per appliance as one row; status is retained on the broker, so
    its last known value counts whatever the time range."""
    sel = ", ".join(
        f'last("{f}") * -1 AS "{f}"' if f in DEVICE_MINUS_HOST else f'last("{f}") AS "{f}"' for f in fields
    )
    negate = [f for f in fields if f in DEVICE_MINUS_HOST]
    turn = (
        [
            "  |> map(fn: (r) => ({r with _value: if "
            + " or ".join(f'r._field == "{f}"' for f in negate)
            + " then -r._value else r._value}))"
        ]
        if negate
        else []
    )
    where = "" if all_time else " WHERE $timeFilter"
    return Query(
        f'SELECT {sel} FROM "{measurement}"{where} GROUP BY "dev"',
        flux(
            FROM_ALL_TIME if all_time else FROM,
            flux_field(measurement, *fields),
            "  |> last()",
            *turn,
            '  |> group(columns: ["dev", "_field"])',
            "  |> last()",
            '  |> pivot(rowKey: ["dev"], columnKey: ["_field"], valueColumn: "_value")',
            "  |> group()",
            f"  |> keep(columns: {json.dumps(['dev', *fields])})",
        ),
        table=True,
    )


STATUS_TIMELINE = Query(
    'SELECT last("state") FROM "wb_status" WHERE $timeFilter GROUP BY time($__interval), "dev" fill(previous)',
    flux(
        FROM,
        flux_field("wb_status", "state"),
        "  |> aggregateWindow(every: v.windowPeriod, fn: last, createEmpty: false)",
        '  |> keep(columns: ["_time", "_value", "dev"])',
    ),
)


# ------------------------------------------------------------------ variables and annotations


def variable_query(
    influxql: str, measurement: str, tag: str, where_flux: str = "", all_time: bool = False
) -> Query:
    """Distinct values of a tag. Flux reads one always-present field so the scan stays small and runs
    the same on InfluxDB 1.8 and 2.x (the schema package is missing from 1.8's Flux)."""
    always = {"wb_sample": "s", "wb_phase": "n", "wb_status": "state"}[measurement]
    return Query(
        influxql,
        flux(
            FROM_ALL_TIME if all_time else FROM,
            flux_field(measurement, always),
            *([where_flux] if where_flux else []),
            # _value stays: distinct() on a table without it returns nothing on InfluxDB 1.8.
            f'  |> keep(columns: ["{tag}", "_value"])',
            "  |> group()",
            f'  |> distinct(column: "{tag}")',
        ),
    )


DEV_VARIABLE = variable_query('SHOW TAG VALUES FROM "wb_sample" WITH KEY = "dev"', "wb_sample", "dev")
CH_VARIABLE = variable_query(
    'SHOW TAG VALUES FROM "wb_sample" WITH KEY = "ch" WHERE "dev" =~ /^${dev:regex}$/',
    "wb_sample",
    "ch",
    DEV_FILTER_FLUX,
)
RUN_VARIABLE = variable_query(
    'SHOW TAG VALUES FROM "wb_phase" WITH KEY = "run"', "wb_phase", "run", all_time=True
)

PHASE_ANNOTATION = Query(
    f'SELECT "n", "phase", "event" FROM "wb_phase" WHERE "run" = \'{RUN}\' AND $timeFilter',
    flux(
        FROM,
        f'  |> filter(fn: (r) => r._measurement == "wb_phase" and r.run == "{RUN}" and r._field == "n")',
        '  |> map(fn: (r) => ({_time: r._time, text: r.phase + " " + r.event, phase: r.phase, event: r.event}))',
        "  |> group()",
    ),
)


def query_variable(
    flavour: Flavour, name: str, label: str, q: Query, multi: bool, sort: model.VariableSort
) -> dashboard.QueryVariable:
    v = (
        dashboard.QueryVariable(name)
        .label(label)
        .datasource(datasource(flavour))
        .query(q.text(flavour))
        .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(sort)
        .multi(multi)
        .include_all(multi)
    )
    if multi:
        v = v.current(model.VariableOption(selected=True, text="All", value="$__all"))
    return v


def phase_annotation(flavour: Flavour) -> dashboard.AnnotationQuery:
    target = AnnotationTarget(
        flavour, PHASE_ANNOTATION.text(flavour), text="event", tags="phase,event", title="phase"
    )
    return (
        dashboard.AnnotationQuery()
        .name("Run phases")
        .datasource(datasource(flavour))
        .enable(True)
        .icon_color("#8F3BB8")
        .target(AnnotationTargetBuilder(target))
    )


# ------------------------------------------------------------------ dashboards


def live_panels() -> list[Panel]:
    return [
        Panel(
            "stat",
            "Power now",
            [POWER_NOW],
            unit="watt",
            width=12,
            height=5,
            display_name=CHANNEL_NAME,
            decimals=1,
        ),
        Panel(
            "stat",
            "Energy in range",
            [ENERGY_IN_RANGE],
            description="Increase of each channel's Wh counter over the selected time range.",
            unit="kwatth",
            width=12,
            height=5,
            display_name=CHANNEL_NAME,
            decimals=4,
        ),
        Panel("timeseries", "Active power", [sample_series("W")], unit="watt", display_name=CHANNEL_NAME),
        Panel(
            "bars",
            "Energy per interval",
            [ENERGY_PER_INTERVAL],
            description="kWh drawn in each display interval: the increase of the Wh counter, never its average.",
            unit="kwatth",
            display_name=CHANNEL_NAME,
        ),
        Panel("timeseries", "Voltage", [sample_series("V")], unit="volt", width=8, display_name=CHANNEL_NAME),
        Panel("timeseries", "Current", [sample_series("A")], unit="amp", width=8, display_name=CHANNEL_NAME),
        Panel(
            "timeseries",
            "Power factor",
            [sample_series("PF")],
            unit="none",
            width=8,
            display_name=CHANNEL_NAME,
            decimals=3,
        ),
        Panel(
            "timeseries",
            "Inlet temperature",
            [inlet_series("T")],
            description="Measured at most 50 mm in front of the server's air inlet. The line marks the 20 °C minimum that SPECpower-style runs expect (a configurable default).",
            unit="celsius",
            display_name=CHANNEL_NAME,
            thresholds=[(None, "blue"), (20.0, "green")],
            custom=lambda p: p.thresholds_style(
                common_builders.GraphThresholdsStyleConfig().mode(common.GraphThresholdsStyleMode.DASHED)
            ),
        ),
        Panel(
            "timeseries", "Inlet humidity", [inlet_series("RH")], unit="humidity", display_name=CHANNEL_NAME
        ),
    ]


def run_panels() -> list[Panel]:
    sort_levels = [
        {"id": "sortBy", "options": {"sort": [{"field": "target", "desc": True}]}},
        {"id": "organize", "options": {"excludeByName": {"time": True, "Time": True, "target": True}}},
    ]
    return [
        Panel(
            "stat",
            "Compliance",
            [run_overall("valid")],
            description="Whether the scored run passed every validity check (result topic, valid flag).",
            width=6,
            height=5,
            mappings={"true": ("VALID", "green"), "false": ("NOT VALID", "red")},
            custom=lambda p: p.color_mode(common.BigValueColorMode.BACKGROUND),
        ),
        Panel(
            "stat",
            "Overall ops/W",
            [run_overall("overall")],
            description="Sum of ops over the target loads divided by the sum of average power over the target loads and active idle.",
            width=6,
            height=5,
            decimals=1,
        ),
        Panel(
            "timeseries",
            "Power during the run",
            [sample_series("W")],
            unit="watt",
            width=12,
            height=5,
            display_name=CHANNEL_NAME,
        ),
        Panel(
            "barchart",
            "Performance to power ratio per level",
            [result_rows("target", "ratio")],
            unit="none",
            display_name="ops/W",
            x_field="phase",
            transformations=sort_levels,
        ),
        Panel(
            "barchart",
            "Average active power per level",
            [result_rows("target", "W")],
            unit="watt",
            display_name="W",
            x_field="phase",
            transformations=sort_levels,
        ),
        Panel(
            "table",
            "Levels",
            [result_rows("kind", "target", "actual", "ops", "W", "Wh", "ratio", "inlet_C")],
            width=24,
            transformations=[
                {"id": "sortBy", "options": {"sort": [{"field": "target", "desc": True}]}},
                {
                    "id": "organize",
                    "options": {
                        "excludeByName": {"time": True, "Time": True},
                        "renameByName": {
                            "target": "Target load",
                            "actual": "Actual load",
                            "ops": "ops",
                            "W": "Average active power (W)",
                            "ratio": "Performance to power ratio",
                            "inlet_C": "Inlet (°C)",
                        },
                    },
                },
            ],
        ),
    ]


def fleet_panels() -> list[Panel]:
    return [
        Panel(
            "table",
            "Appliances",
            [
                last_per_device("wb_status", STATUS_FIELDS, all_time=True),
                last_per_device("wb_health", HEALTH_FIELDS, all_time=False),
            ],
            description="Last status each appliance published (retained) joined with the collector's latest accounting.",
            width=24,
            transformations=[
                {"id": "joinByField", "options": {"byField": "dev", "mode": "outer"}},
                {
                    "id": "organize",
                    "options": {
                        "excludeByName": {"time": True, "Time": True, "time 1": True, "time 2": True},
                        "renameByName": {
                            "dev": "Appliance",
                            "state": "Status",
                            "clk_sync": "Clock",
                            "up": "Uptime (s)",
                            "buf_ram": "Buffered",
                            "buf_flash": "Spooled",
                            "dropped": "Dropped",
                            "rate_hz": "Sample rate (Hz)",
                            "offset_ms": "Clock offset, device − host (ms)",
                            "clk_err": "Time error bound (ms)",
                            "gaps": "Sequence gaps",
                            "missing": "Missing samples",
                        },
                    },
                },
            ],
            mappings={"online": ("online", "green"), "offline": ("offline", "red")},
        ),
        Panel(
            "state",
            "Status",
            [STATUS_TIMELINE],
            width=24,
            height=6,
            display_name=DEVICE_NAME,
            mappings={"online": ("online", "green"), "offline": ("offline", "red")},
        ),
        Panel(
            "timeseries", "Sample rate", [health_series("rate_hz")], unit="hertz", display_name=DEVICE_NAME
        ),
        Panel(
            "bars",
            "Sequence gaps",
            [GAPS_PER_INTERVAL],
            description="Samples lost in transit per interval, from gaps in each appliance's sequence numbers.",
            unit="none",
            display_name="${__field.labels.dev} via ${__field.labels.collector}",
            decimals=0,
        ),
        Panel(
            "timeseries",
            "Clock offset (device − host)",
            [CLOCK_OFFSET],
            description="Device clock minus host clock, as wattbench status, the report and --clock-offset show it: the negated wb_health offset_ms (collector receive time minus sample time, the minimum over recent batches), so it includes the shortest delivery delay. Phase alignment needs the clocks within 400 ms.",
            unit="ms",
            display_name=DEVICE_NAME,
        ),
        Panel(
            "timeseries",
            "Timestamp error bound",
            [health_series("clk_err")],
            unit="ms",
            display_name=DEVICE_NAME,
        ),
    ]


@dataclass(frozen=True)
class DashboardSpec:
    slug: str
    title: str
    description: str
    panels: Callable[[], list[Panel]]
    variables: tuple[str, ...]
    annotations: bool = False
    time_from: str = "now-1h"
    refresh: str = "10s"


DASHBOARDS = (
    DashboardSpec(
        "live-power",
        "Live power",
        "W, V, A and PF per channel, energy per interval from the Wh counter, inlet climate.",
        live_panels,
        ("dev", "ch"),
        time_from="now-15m",
        refresh="5s",
    ),
    DashboardSpec(
        "run-view",
        "Run view",
        "One sweep: its phases, per-level ops/W and power, and whether it is valid.",
        run_panels,
        ("run", "dev", "ch"),
        annotations=True,
        time_from="now-3h",
        refresh="",
    ),
    DashboardSpec(
        "fleet",
        "Fleet",
        "Every appliance: status, sample rate, sequence gaps and clock offset.",
        fleet_panels,
        (),
        time_from="now-6h",
        refresh="30s",
    ),
)


def build_dashboard(spec: DashboardSpec, flavour: Flavour) -> dict[str, Any]:
    d = (
        dashboard.Dashboard(f"wattbench · {spec.title} ({FLAVOUR_NAME[flavour]})")
        .uid(f"wattbench-{spec.slug}-{flavour}")
        .description(spec.description)
        .tags(["wattbench", flavour])
        .time(spec.time_from, "now")
        .timezone("utc")
        .tooltip(model.DashboardCursorSync.CROSSHAIR)
        .readonly()
    )
    if spec.refresh:
        d = d.refresh(spec.refresh)
    variables = {
        "dev": lambda: query_variable(
            flavour, "dev", "Appliance", DEV_VARIABLE, True, model.VariableSort.ALPHABETICAL_ASC
        ),
        "ch": lambda: query_variable(
            flavour, "ch", "Channel", CH_VARIABLE, True, model.VariableSort.ALPHABETICAL_ASC
        ),
        "run": lambda: query_variable(
            flavour, "run", "Run", RUN_VARIABLE, False, model.VariableSort.ALPHABETICAL_DESC
        ),
    }
    for name in spec.variables:
        d = d.with_variable(variables[name]())
    if spec.annotations:
        d = d.annotation(phase_annotation(flavour))
    for i, panel in enumerate(spec.panels(), start=1):
        d = d.with_panel(panel.build(flavour, i))
    d = d.link(
        dashboard.DashboardLink("wattbench")
        .type(model.DashboardLinkType.DASHBOARDS)
        .tags(["wattbench", flavour])
        .as_dropdown(True)
        .include_vars(False)
        .keep_time(True)
    )
    out: dict[str, Any] = json.loads(json.dumps(d.build(), cls=JSONEncoder))
    # The SDK leaves these as {} when empty; Grafana's model always has the lists.
    out.setdefault("templating", {}).setdefault("list", [])
    out.setdefault("annotations", {}).setdefault("list", [])
    return out


def render() -> dict[Path, str]:
    files: dict[Path, str] = {}
    for flavour in FLAVOURS:
        for spec in DASHBOARDS:
            doc = build_dashboard(spec, flavour)
            files[OUT / flavour / f"{spec.slug}.json"] = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="compare with the committed files instead of writing"
    )
    args = parser.parse_args(argv)
    stale = []
    for path, text in render().items():
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(path)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(path.relative_to(HERE))
    for path in stale:
        print(f"stale: {path.relative_to(HERE)} (run python deploy/grafana/build.py)", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
