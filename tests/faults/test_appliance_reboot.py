"""Scenario 5: the appliance reboots mid-run (SIGKILL of its process, like a power cut, then a
start with the same state and flash directory).

The sequence number and the energy counter must continue: the new boot never reuses a sequence
number of an earlier boot and never reports less energy than before. A power cut takes with it
what was only in RAM (the batch being filled and unacknowledged batches still in the RAM buffer),
so "sent" here is what reached the broker, as seen by an independent subscriber (harness.Observer):
every sample the broker accepted must be stored exactly once. The numbers the new boot skips (the
unused rest of the reserved sequence block, and the samples lost in RAM) show as a jump in the
numbering, never as reuse.
"""

from __future__ import annotations

import itertools
import signal
import time

import pytest

from .harness import Observer, Row, read_truth, tally, wait_until

VARIANTS = [
    pytest.param("ci", 1, 10, id="ci"),
    pytest.param("full", 4, 25, id="full", marks=pytest.mark.slow),
]
HZ, CHANNELS = 20, 2


def boots_of(observed: dict[int, tuple[int, Row]]) -> dict[int, list[Row]]:
    out: dict[int, list[Row]] = {}
    for boot, row in observed.values():
        out.setdefault(boot, []).append(row)
    for rows in out.values():
        rows.sort(key=lambda r: r.s)
    return out


def energy_backwards(rows: list[Row]) -> list[tuple[Row, Row]]:
    """Pairs of samples of one channel, in sequence order, where the energy total went down."""
    bad = []
    last: dict[str, Row] = {}
    for r in sorted(rows, key=lambda r: r.s):
        if r.Wh is None:
            continue
        prev = last.get(r.ch)
        if prev is not None and r.Wh < prev.Wh - 1e-9:  # type: ignore[operator]
            bad.append((prev, r))
        last[r.ch] = r
    return bad


@pytest.mark.services
@pytest.mark.parametrize(("variant", "reboots", "period_s"), VARIANTS)
def test_appliance_reboot_continues(rig, record, variant, reboots, period_s):  # type: ignore[no-untyped-def]
    dev = f"reboot-{variant}"
    observer = Observer(rig.mosquitto.host, rig.mosquitto.port)
    rig.closers.append(observer.close)
    col = rig.collector()
    col.start_subscribed()
    app = rig.appliance(dev, hz=HZ, channels=CHANNELS, model="sine")
    t0 = time.monotonic()
    app.start()
    rig.wait_flowing(dev)
    for k in range(reboots):
        time.sleep(period_s + k)  # a different point of the batch cycle each time
        assert app.kill() == -signal.SIGKILL
        time.sleep(1.0)  # powered off
        app.start()
    time.sleep(period_s)
    app.signal(signal.SIGINT)  # a clean stop of the last boot: it drains its buffer first
    assert app.wait(60) == 0, app.tail()
    last_boot = app.final_counters(app.starts)
    assert last_boot["ram"] == 0 and last_boot["flash"] == 0, "the last boot did not drain"
    observed = observer.snapshot()
    published = {s: row for s, (_, row) in observed.items()}
    rig.wait_stored(dev, len(published), timeout=120)
    assert col.terminate() == 0, col.tail()
    stored = rig.stored(dev)

    by_boot = boots_of(observed)
    boots = sorted(by_boot)
    # The truth file of a killed boot dies with its write buffer, so what a power cut took from RAM is
    # bounded from the boot's last counters line instead: sampled by then, minus what was published.
    in_ram_at_cut = 0
    for start, boot in enumerate(boots[:-1], start=1):
        lines = app.counter_lines(start)
        if lines:
            in_ram_at_cut += max(0, max(c["samples"] for c in lines) - len(by_boot[boot]))
    jumps = []
    for a, b in itertools.pairwise(boots):
        jumps.append({"boot": b, "last_seq_before": by_boot[a][-1].s, "first_seq_after": by_boot[b][0].s})
    fig = record(
        tally(
            "appliance_reboot",
            variant,
            f"appliance power-cut (SIGKILL) {reboots}x and restarted on the same flash",
            {s: r for s, r in published.items() if r.W is not None},
            stored,
            time.monotonic() - t0,
            issued=len(published),
            reboots=reboots,
            boots=boots,
            sequence_jumps=jumps,
            lost_in_ram_at_power_cut_at_least=in_ram_at_cut,
            redelivered_copies_seen=observer.copies,
            energy_backwards_published=len(energy_backwards(list(published.values()))),
            energy_backwards_stored=len(energy_backwards(stored)),
        )
    )
    # Every boot is a new boot number, and each one's numbers start above the previous boot's.
    assert len(boots) == reboots + 1 and boots == list(range(boots[0], boots[0] + reboots + 1))
    for j in jumps:
        assert j["first_seq_after"] > j["last_seq_before"], f"sequence reused or went back: {j}"
    assert not energy_backwards(list(published.values())), "the energy counter went backwards"
    assert not energy_backwards(stored), "the stored energy counter goes backwards"
    # The last boot stopped cleanly: everything it sampled reached the broker and the store.
    clean = read_truth(app.truths[-1:])
    assert all(s in published for s in clean), "a sample of the clean last boot never reached the broker"
    fig.assert_clean()


@pytest.mark.services
def test_clean_restart_is_no_loss_in_the_accounting(rig):  # type: ignore[no-untyped-def]
    """A clean stop and start: the new boot's numbers begin at the next reserved block, and the
    collector's accounting (status file and wb_health) calls that jump neither missing nor a gap."""
    dev = "restart-clean"
    observer = Observer(rig.mosquitto.host, rig.mosquitto.port)
    rig.closers.append(observer.close)
    col = rig.collector()
    col.start_subscribed()
    app = rig.appliance(dev, hz=HZ, channels=CHANNELS, model="sine")
    for _ in range(2):
        app.start()
        rig.wait_flowing(dev)
        time.sleep(3)
        app.signal(signal.SIGINT)
        assert app.wait(60) == 0, app.tail()
    by_boot = boots_of(observer.snapshot())
    assert len(by_boot) == 2, sorted(by_boot)
    before, after = (by_boot[b] for b in sorted(by_boot))
    assert after[0].s > before[-1].s + 1, "the new boot did not start at a new block: no jump to judge"
    published = len(observer.snapshot())
    rig.wait_stored(dev, published, timeout=120)

    def settled() -> dict | None:
        acct = (col.state().get("accounts") or {}).get(dev)
        return acct if acct and acct.get("stored") == published else None

    acct = wait_until(settled, 30, what="the collector's account of every sample")
    assert acct["reboots"] == 1, acct
    assert (acct["gaps"], acct["missing"]) == (0, 0), acct
    assert acct["unassigned"] == after[0].s - before[-1].s - 1, acct
    assert col.terminate() == 0, col.tail()
