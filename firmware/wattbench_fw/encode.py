"""Payload encoding for the appliance's three topics (samples, status, meta).

Sample rows are written by hand in a fixed key order: it is faster than json.dumps on a small
board, the bytes do not depend on dict ordering, and integral floats lose their ".0".
Callers pass only clean values (see sampler.clean): finite and inside the contract's bounds.
"""

import json

from wattbench_fw.contract import ROW_KEYS, VERSION

CLOCK_KEYS = ("sync", "age", "off", "err", "ppm", "steps")


def num(v):
    if isinstance(v, int):
        return str(v)
    if v == int(v) and -1e15 < v < 1e15:
        return str(int(v))
    return repr(v)


def row(r):
    """One sample row: {"s":..,"t":..,"c":"..",<quantities>,"f":..}."""
    parts = ['{"s":', str(r["s"]), ',"t":', str(r["t"]), ',"c":"', r["c"], '"']
    for key in ROW_KEYS:
        if key in r:
            parts.append(',"%s":%s' % (key, num(r[key])))
    if r.get("f"):
        parts.append(',"f":%d' % r["f"])
    parts.append("}")
    return "".join(parts)


def clock(clk):
    parts = []
    for key in CLOCK_KEYS:
        if key in clk:
            v = clk[key]
            parts.append('"%s":%s' % (key, '"%s"' % v if key == "sync" else num(v)))
    return "{" + ",".join(parts) + "}"


def batch_head(dev, boot, clk):
    return '{"v":%d,"dev":"%s","boot":%d,"clk":%s,"samples":[' % (VERSION, dev, boot, clock(clk))


BATCH_TAIL = "]}"
BATCH_TAIL_B = b"]}"


def _chunks(head, parts):
    # The unsigned payload's bytes in order, as batch() joins them.
    yield head
    for i, p in enumerate(parts):
        if i:
            yield b","
        yield p
    yield BATCH_TAIL_B


def batch(dev, boot, clk, row_texts, signer=None):
    """A complete samples payload (bytes) from already encoded rows (text or bytes), signed by
    `signer` (sign.Signer) when given: its "mac" member goes before the closing brace, the very bytes
    signer.sign() gives for the unsigned payload.

    The payload is the only allocation of its size: a board's heap, fragmented by the rows and the
    code around them, may not hold several runs of a batch's size at once. Joining text and then
    encoding it took four (the rows joined, the head and the tail added one at a time, the encoding),
    which made the esp32 profile run out of memory at its first 4 KB batch under the fixed heap of
    MicroPython's unix port; signing the joined payload took one more."""
    parts = [r.encode() if isinstance(r, str) else r for r in row_texts]
    head = batch_head(dev, boot, clk).encode()
    tail = BATCH_TAIL_B
    if signer is not None:
        tail = b"]" + signer.mac_member(_chunks(head, parts)) + b"}"
    if not parts:
        return head + tail
    parts[0] = head + parts[0]
    parts[-1] = parts[-1] + tail
    return b",".join(parts)


def _dumps(doc):
    try:
        return json.dumps(doc, separators=(",", ":")).encode()
    except TypeError:  # a port without the separators argument
        return json.dumps(doc).encode()


def status(
    dev,
    state,
    t_ms=None,
    reason=None,
    fw=None,
    boot=None,
    up=None,
    seq=None,
    buf=None,
    clk=None,
    rssi=None,
    mem=None,
    repairs=None,
):
    doc = {"v": VERSION, "dev": dev, "state": state}
    for key, value in (
        ("t", t_ms),
        ("reason", reason),
        ("fw", fw),
        ("boot", boot),
        ("up", up),
        ("seq", seq),
        ("buf", buf),
        ("clk", clk),
        ("rssi", rssi),
        ("mem", mem),
        ("repairs", repairs or None),
    ):
        if value is not None:
            doc[key] = value
    return _dumps(doc)


def will(dev):
    """The last will the broker publishes if the appliance vanishes: minimal, no timestamp."""
    return _dumps({"v": VERSION, "dev": dev, "state": "offline"})


def meta(dev, fw, board, channels, t_ms=None, hmac=None, batch_ms=None):
    doc = {"v": VERSION, "dev": dev, "fw": fw, "board": board, "channels": channels}
    if t_ms is not None:
        doc["t"] = t_ms
    if hmac:
        doc["hmac"] = True
    if batch_ms is not None:
        doc["batch_ms"] = batch_ms
    return _dumps(doc)
