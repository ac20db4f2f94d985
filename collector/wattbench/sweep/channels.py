"""Which device channels a run uses.

Only channels whose role is server power (`power`) are summed; `inlet` channels give the inlet
temperature. A role comes from the device's metadata (meta topic, kept in the store by the collector as
it changes), never from what a channel happens to carry. A sweep binds to its channels before it
starts: those named with --channel, or else the power channels of the one appliance that is online and
publishing power (bind_from_survey). A named channel must be one its device's metadata lists
(unknown_named): a typo costs seconds, not a run that waits for data that never comes. Scoring a stored
run takes the channels the run named, or else the power channels the stored metadata gives for the
run's span (from_store). A channel with no known role is not summed; when it carries power the run
fails the `channels` check with the reason.

What the appliances say about themselves is survey.py; how far each device's clock is from the sweep
host's is offsets.py.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..core.align import ChannelSpec
from ..meterinfo import simulated_kinds
from .offsets import DEFAULT_DEADBAND_MS, offsets_from_store, wait_for_data
from .survey import BATCH_SLACK_S, RECENT_MS, Survey, batch_ms, has_power, survey, survey_store

if TYPE_CHECKING:
    from ..store.base import Store

# The sweep and the report reach the survey and the clock offsets through this module, with the
# channels they go with.
__all__ = [
    "BATCH_SLACK_S",
    "DEFAULT_DEADBAND_MS",
    "OPTION",
    "RECENT_MS",
    "ChannelError",
    "Choice",
    "KnownRole",
    "Survey",
    "apply_roles",
    "batch_ms",
    "bind_from_survey",
    "from_store",
    "known_channels",
    "offsets_from_store",
    "parse_channel",
    "parse_offset",
    "roles_from_metas",
    "stored_roles",
    "survey",
    "survey_store",
    "unknown_in_store",
    "unknown_named",
    "wait_for_data",
    "with_meta",
]

_ARG = re.compile(
    r"^([a-z0-9][a-z0-9_-]{0,31})/([a-z0-9][a-z0-9_.-]{0,23})(?:@([A-Za-z0-9][A-Za-z0-9_.-]{0,31}))?$"
)


def parse_channel(text: str, role: str = "power") -> ChannelSpec:
    """DEV/CH or DEV/CH@NODE."""
    m = _ARG.match(text.strip())
    if not m:
        dev, sep, rest = text.strip().partition("/")
        ch, at, node = rest.partition("@")
        lowered = f"{dev.lower()}{sep}{ch.lower()}{at}{node}"
        if lowered != text.strip() and _ARG.match(lowered):
            raise ValueError(f"bad channel {text!r}: ids are lower case ({lowered}?)")
        raise ValueError(f"bad channel {text!r}: use DEVICE/CHANNEL or DEVICE/CHANNEL@NODE")
    return ChannelSpec(m.group(1), m.group(2), role=role, node=m.group(3))


# A device whose clock is a day or more off its host's is not synchronised at all: no offset aligns it.
MAX_OFFSET_MS = 86_400_000


def parse_offset(text: str) -> tuple[str, float]:
    """DEV=MS: the device clock minus the host clock."""
    dev, sep, ms = text.partition("=")
    try:
        if not sep or not dev.strip():
            raise ValueError
        value = float(ms)
    except ValueError:
        raise ValueError(f"bad clock offset {text!r}: use DEVICE=MILLISECONDS") from None
    if not (math.isfinite(value) and abs(value) <= MAX_OFFSET_MS):
        raise ValueError(
            f"bad clock offset {text!r}: the milliseconds must be a finite number within a day ({MAX_OFFSET_MS})"
        )
    return dev.strip(), value


class ChannelError(ValueError):
    """The channels cannot be chosen without guessing; the message says why and what to do."""


@dataclass(frozen=True)
class KnownRole:
    """What the metadata said about a channel. role is None when it is not known, and problem says why."""

    role: str | None
    meter: str | None = None
    node: str | None = None
    hz: float | None = None
    acc: float | None = None
    upd: float | None = None
    quantities: tuple[str, ...] | None = None
    problem: str = ""


def roles_from_metas(docs: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], KnownRole]:
    """Each channel's role from metadata documents, oldest first. Meter, node and rate are the latest;
    the role is known only when every document states the same one."""
    seen: dict[tuple[str, str], list[str | None]] = {}
    last: dict[tuple[str, str], Mapping[str, Any]] = {}
    for doc in docs:
        for ch in doc.get("channels", []):
            key = (str(doc.get("dev")), str(ch.get("c")))
            seen.setdefault(key, []).append(ch.get("role"))
            last[key] = ch
    out: dict[tuple[str, str], KnownRole] = {}
    for key, roles in seen.items():
        ch = last[key]
        hz, acc, upd, q = ch.get("hz"), ch.get("acc"), ch.get("upd"), ch.get("q")
        base = KnownRole(
            None,
            meter=ch.get("meter"),
            node=ch.get("node"),
            hz=float(hz) if hz is not None else None,
            acc=float(acc) if acc is not None else None,
            upd=float(upd) if upd is not None else None,
            quantities=tuple(str(x) for x in q) if isinstance(q, list) else None,
        )
        distinct = sorted({str(r) if r else "none" for r in roles})
        if len(distinct) > 1:
            out[key] = replace(base, problem=f"its role changed during the run ({', '.join(distinct)})")
        elif roles[-1] is None:
            out[key] = replace(base, problem="its metadata states no role")
        else:
            out[key] = replace(base, role=str(roles[-1]))
    return out


def stored_roles(store: Store, start_ms: int, end_ms: int) -> dict[tuple[str, str], KnownRole]:
    """Roles as the store's metadata gave them during the span."""
    return roles_from_metas(doc for _, doc in store.meta_history(int(start_ms), int(end_ms)))


def with_meta(spec: ChannelSpec, known: KnownRole | None) -> ChannelSpec:
    """A named spec completed by what the metadata says (node, rate, meter, accuracy, update period,
    quantities); what was named wins."""
    if known is None:
        return spec
    return replace(
        spec,
        node=spec.node or known.node,
        hz=spec.hz or known.hz,
        meter=spec.meter or known.meter,
        simulated=(spec.meter or known.meter) in simulated_kinds(),
        acc=spec.acc if spec.acc is not None else known.acc,
        upd=spec.upd if spec.upd is not None else known.upd,
        quantities=spec.quantities if spec.quantities is not None else known.quantities,
    )


@dataclass
class Choice:
    """The channels a run uses, the problems that fail its `channels` check, and notes on the channels
    left out for a good reason (shown, not failed)."""

    specs: list[ChannelSpec] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def unmeasured_offsets(offsets: Mapping[str, float], choice: Choice) -> list[str]:
    """Given clock offsets that name no device the run measures. Given offsets replace the store's
    estimates for the whole run, so one for a misspelt device leaves the device measured with none."""
    measured = sorted({s.dev for s in choice.specs})
    return [
        f"--clock-offset {dev}={ms:g}: no channel of {dev} is measured "
        f"(the run's devices: {', '.join(measured) or 'none'})"
        for dev, ms in offsets.items()
        if dev not in measured
    ]


def apply_roles(
    named: Sequence[ChannelSpec], roles: Mapping[tuple[str, str], KnownRole], typed: bool = False
) -> Choice:
    """Named channels checked against their metadata: one named as power whose metadata gives it another
    role is refused; one whose role is not known is taken as named (the operator or the run stated it).
    typed: the names are the command line's, and a problem names the option as it was typed."""
    out = Choice()
    for spec in named:
        known = roles.get((spec.dev, spec.ch))
        if known is not None and known.role == "component" and spec.role == "power":
            # Never summed unless named; named, it is what the run measures, and says so.
            out.specs.append(replace(with_meta(spec, known), component=True))
            out.notes.append(f"{spec.key}: role component, summed because named: the power is not wall power")
            continue
        if known is not None and known.role is not None and known.role != spec.role:
            out.problems.append(
                f"{typed_as(spec)}: its metadata gives role {known.role}, not {spec.role}"
                if typed
                else f"{spec.key} was named as {spec.role} but its metadata gives role {known.role}: not used"
            )
            continue
        out.specs.append(with_meta(spec, known))
    return out


# The sweep's option that names a channel of each role, for a message about what was typed.
OPTION = {"power": "--channel", "inlet": "--inlet"}


def typed_as(spec: ChannelSpec) -> str:
    """A named channel as the command line gave it: its option and DEV/CH[@NODE]."""
    return f"{OPTION.get(spec.role, spec.role)} {spec.key}" + (f"@{spec.node}" if spec.node else "")


def known_channels(docs: Iterable[Mapping[str, Any]]) -> dict[str, set[str]]:
    """Each device's channels as metadata documents list them."""
    out: dict[str, set[str]] = {}
    for doc in docs:
        out.setdefault(str(doc.get("dev")), set()).update(str(ch.get("c")) for ch in doc.get("channels", []))
    return out


def unknown_named(
    named: Sequence[ChannelSpec], known: Mapping[str, Collection[str]], where: str
) -> list[str]:
    """One problem for each named channel that no known device has, naming it as it was typed and
    listing what there is, with the nearest name when one is close. known: each device's channels;
    where: where they were looked for ("on the broker", "in the store")."""
    problems: list[str] = []
    for spec in named:
        typed = typed_as(spec)
        channels = known.get(spec.dev)
        if channels is None:
            devices = sorted(known)
            near = difflib.get_close_matches(spec.dev, devices, n=1)
            seen = f"devices seen: {', '.join(devices)}" if devices else f"no device seen {where}"
            problems.append(
                f"{typed}: no device {spec.dev} {where}"
                + (f", did you mean {near[0]}?" if near else "")
                + f" ({seen})"
            )
        elif spec.ch not in channels:
            listed = sorted(channels)
            near = difflib.get_close_matches(spec.ch, listed, n=1)
            problems.append(
                f"{typed}: {spec.dev} has no channel {spec.ch}"
                + (f", did you mean {spec.dev}/{near[0]}?" if near else "")
                + f" (its channels: {', '.join(listed)})"
            )
    return problems


def unknown_in_store(
    store: Store, named: Sequence[ChannelSpec], start_ms: int, end_ms: int, run: str
) -> list[str]:
    """unknown_named for a stored run: the channels its devices' stored metadata listed during the run,
    or for a device with none stored (a store Telegraf fills), those with samples in it."""
    known = known_channels(doc for _, doc in store.meta_history(int(start_ms), int(end_ms)))
    described = set(known)
    for dev, ch in store.channels(int(start_ms), int(end_ms)):
        if dev not in described:
            known.setdefault(dev, set()).add(ch)
    return unknown_named(named, known, f"in the store during run {run}")


def from_store(store: Store, start_ms: int, end_ms: int, named: Sequence[str] | None = None) -> Choice:
    """The channels of a stored run. With the run's named channels: those (checked against the stored
    roles), plus inlet probes. Without: every channel with samples in the span whose stored role is power
    or inlet; one that carries power but has no known role is not summed and is a problem."""
    roles = stored_roles(store, start_ms, end_ms)
    found = store.channels(start_ms, end_ms)
    if named:
        specs = []
        for key in named:
            dev, ch = key.split("/", 1)
            known = roles.get((dev, ch))
            # A run names its power and inlet channels alike; the stored role tells which is which.
            role = known.role if known is not None and known.role == "inlet" else "power"
            specs.append(ChannelSpec(dev, ch, role))
        choice = apply_roles(specs, roles)
        keys = set(named)
        for dev, ch in found:
            known = roles.get((dev, ch))
            if f"{dev}/{ch}" not in keys and known is not None and known.role == "inlet":
                choice.specs.append(with_meta(ChannelSpec(dev, ch, "inlet"), known))
        return choice
    out = Choice()
    for dev, ch in found:
        key = f"{dev}/{ch}"
        known = roles.get((dev, ch))
        if known is not None and known.role in ("power", "inlet"):
            out.specs.append(with_meta(ChannelSpec(dev, ch, known.role), known))
        elif known is not None and known.role is not None:
            out.notes.append(f"{key}: role {known.role}, not summed")
        elif has_power(store, dev, ch, start_ms, end_ms):
            why = known.problem if known is not None else "no metadata of its device is stored for the run"
            out.problems.append(
                f"{key} carries power but {why}: not summed (name the server's channels with --channel)"
            )
    if not any(s.role == "power" for s in out.specs) and not out.problems:
        out.problems.append("no channel with role power has samples in the run")
    return out


def bind_from_survey(s: Survey, nodes: Sequence[str] | None = None) -> Choice:
    """The power channels of the one appliance that is online (retained status) and publishing power,
    and that appliance's inlet probes. Offline appliances, channels of other roles and channels with no
    stated role are left out, each with a note. More than one such appliance is ambiguous: several
    benches may share a broker, so the operator names the channels (ChannelError).

    nodes: the nodes of a cluster sweep. Then every appliance online and publishing power for one of
    those nodes (its channels' node, or the device's name when they state none) is summed, appliances of
    other nodes are left out, and each node with no metered power is noted: the run's share of the
    system metered follows from it."""
    if nodes is not None:
        return _bind_nodes(s, list(nodes))
    out = Choice()
    taken: dict[str, list[ChannelSpec]] = {}
    for dev in sorted(s.metas):
        state = s.states.get(dev)
        if state != "online":
            out.notes.append(f"{dev}: {state or 'no retained status'}, not taken")
            continue
        specs: list[ChannelSpec] = []
        inlets: list[ChannelSpec] = []
        for ch in s.metas[dev].get("channels", []):
            key, known = _announced(dev, ch)
            if known.role == "power":
                if (dev, str(ch["c"])) in s.publishing:
                    specs.append(with_meta(ChannelSpec(dev, str(ch["c"]), "power"), known))
                else:
                    out.notes.append(_silent(key, s))
            elif known.role == "inlet":
                inlets.append(with_meta(ChannelSpec(dev, str(ch["c"]), "inlet"), known))
            else:
                out.notes.append(_not_summed(key, known))
        if specs:
            taken[dev] = specs + inlets
    if len(taken) > 1:
        listed = "; ".join(
            f"{d} ({', '.join(x.key for x in v if x.role == 'power')})" for d, v in taken.items()
        )
        raise ChannelError(
            f"{len(taken)} appliances are online and publishing power ({listed}): "
            "name this server's channels with --channel DEV/CH (repeat it)"
        )
    for specs in taken.values():
        out.specs.extend(specs)
    return out


def _announced(dev: str, ch: Mapping[str, Any]) -> tuple[str, KnownRole]:
    """A channel of an appliance's retained metadata: its DEV/CH key and the role it states."""
    return f"{dev}/{ch['c']}", roles_from_metas([{"dev": dev, "channels": [ch]}])[(dev, str(ch["c"]))]


def _silent(key: str, s: Survey) -> str:
    return f"{key}: published no power in {s.listened_s:.0f} s, not taken"


def _not_summed(key: str, known: KnownRole) -> str:
    """Why a channel that is neither power nor inlet is left out."""
    if known.role is None:
        return f"{key}: {known.problem}, not summed"
    return f"{key}: role {known.role}, not summed"


def _bind_nodes(s: Survey, nodes: list[str]) -> Choice:
    wanted = set(nodes)
    out = Choice()
    metered: set[str] = set()
    for dev in sorted(s.metas):
        state = s.states.get(dev)
        chans = s.metas[dev].get("channels", [])
        belongs = {str(ch.get("node") or dev) for ch in chans if ch.get("role") == "power"}
        if not belongs & wanted:
            out.notes.append(
                f"{dev}: meters no node of the cluster ({', '.join(sorted(belongs)) or 'no power'})"
            )
            continue
        if state != "online":
            out.notes.append(f"{dev}: {state or 'no retained status'}, not taken")
            continue
        for ch in chans:
            key, known = _announced(dev, ch)
            node = str(ch.get("node") or dev)
            if known.role == "power" and node in wanted:
                if (dev, str(ch["c"])) in s.publishing:
                    out.specs.append(with_meta(ChannelSpec(dev, str(ch["c"]), "power", node=node), known))
                    metered.add(node)
                else:
                    out.notes.append(_silent(key, s))
            elif known.role == "power":
                out.notes.append(f"{key}: node {node} is not in the cluster, not summed")
            elif known.role != "inlet":
                out.notes.append(_not_summed(key, known))
    missing = [n for n in nodes if n not in metered]
    if missing:
        out.notes.append(
            f"not metered: {', '.join(missing[:8])}{' …' if len(missing) > 8 else ''} "
            f"({len(metered)} of {len(nodes)} nodes have an appliance online and publishing power)"
        )
    return out
