"""Compact flash form of a samples batch, decoded back to the very same bytes.

A batch spilled to flash is stored as numbers instead of JSON text; sending it from flash rebuilds
the exact payload encode.batch (and sign) made, byte for byte, so the wire never sees a difference.
Every part is checked as it is packed: a part whose rebuilt text would differ in any byte (a number
in exponent form, an unknown key, another key order) is stored as its text instead, and a payload
that cannot be split at all is not packed (the caller keeps it as JSON). A number is never
approximated: it is kept as its decimal digits, never parsed into a float.

Layout (varint: 7 bits a byte, low first; zz: zigzag-coded varint; str: varint length + bytes):

    version (1), payload length
    head:  0, str (the text up to and including '"samples":[': device, boot, clock state)
    tail:  0, str (the text from the closing ']', with a signature if any)  or 1 ("]}")
    channel table: count, str per channel
    decimals: bitmap of the row keys used, then per used key its decimal places in this batch
    row count, then per row:
           0, str (a row kept as text)
        or channel index + 1, keys bitmap (bit i: ROW_KEYS[i], bit 12: f), zz s - previous s,
           zz t - previous t, per present key zz (mantissa - this channel's previous mantissa), [f]

Sequence and time are deltas from the previous packed row, each quantity a delta from the same
channel's previous value at the batch's scale for that key: a steady 10 Hz channel costs a byte or
two per field. The head and a signature stay text (about 2 bytes a sample in a full batch): packing
them too took more code, and on a board every name and string of the module costs RAM for good.
"""

from wattbench_fw.contract import MAX_PAYLOAD_BYTES, ROW_KEYS

VERSION = 1
F_BIT = 1 << len(ROW_KEYS)
SAMPLES_B = b'"samples":['
# More decimal places than a float's repr ever writes (it turns to exponent form below 1e-4): a
# number with more is kept as text, and a record asking for more is damaged, not a huge allocation.
MAX_DECIMALS = 24
# Rows are rebuilt into pieces of about this many bytes: a piece a row made the MQTT client's queue a
# list of 20 to 40 entries a batch, and that list's array one more run of about a kilobyte to find.
PIECE_BYTES = 256
# One message for every way a record can be damaged: each distinct string costs a board RAM for good.
DAMAGED = "damaged compact record"


# ---- numbers ----------------------------------------------------------------------------------


def _uv(out, x):
    while x > 0x7F:
        out.append((x & 0x7F) | 0x80)
        x >>= 7
    out.append(x)


def _zz(out, x):
    _uv(out, x << 1 if x >= 0 else ((-x) << 1) - 1)


def _str(out, text):
    b = text.encode()
    _uv(out, len(b))
    out.extend(b)


def digits(text):
    """(mantissa, decimals) of a plain decimal number's text, or None (exponent form, empty, ...)."""
    body = text[1:] if text[:1] == "-" else text
    dot = body.find(".")
    whole, frac = (body, "") if dot < 0 else (body[:dot], body[dot + 1 :])
    if not whole or not whole.isdigit() or frac and not frac.isdigit() or len(frac) > MAX_DECIMALS:
        return None
    m = int(whole + frac)
    return (-m if text[:1] == "-" else m), len(frac)


def render(m, d):
    """The shortest text of mantissa m at d decimal places, as encode.num writes it."""
    if d == 0:
        return str(m)
    text = str(-m if m < 0 else m)
    if len(text) <= d:
        text = "0" * (d + 1 - len(text)) + text
    frac = text[-d:].rstrip("0")
    text = text[:-d] + "." + frac if frac else text[:-d]
    return "-" + text if m < 0 else text


# ---- parsing the text encode wrote ------------------------------------------------------------


def _items(inner):
    """[(key, value text)] of a flat JSON object's inner text; None if it is not that simple."""
    out = []
    for item in inner.split(","):
        colon = item.find('":')
        if colon < 2 or item[0] != '"':
            return None
        out.append((item[1:colon], item[colon + 2 :]))
    return out


def _row_fields(text):
    """(s, t, channel, {key: (mantissa, decimals)}, f) of a row's text, or None."""
    if text[:1] != "{" or text[-1:] != "}":
        return None
    items = _items(text[1:-1])
    if items is None or len(items) < 3 or items[0][0] != "s" or items[1][0] != "t" or items[2][0] != "c":
        return None
    c = items[2][1]
    if len(c) < 3 or c[0] != '"' or c[-1] != '"':
        return None
    s = digits(items[0][1])
    t = digits(items[1][1])
    if s is None or t is None or s[1] or t[1]:
        return None
    vals = {}
    f = 0
    for key, v in items[3:]:
        num = digits(v)
        if num is None or key in vals:
            return None
        if key == "f":
            if num[1] or num[0] <= 0:
                return None
            f = num[0]
        elif key in ROW_KEYS:
            vals[key] = num
        else:
            return None
    return s[0], t[0], c[1:-1], vals, f


def _row_text(s, t, c, vals, f, dec):
    parts = ['{"s":', str(s), ',"t":', str(t), ',"c":"', c, '"']
    for i in range(len(ROW_KEYS)):
        key = ROW_KEYS[i]
        if key in vals:
            parts.append(',"%s":%s' % (key, render(vals[key], dec[i])))
    if f:
        parts.append(',"f":%d' % f)
    parts.append("}")
    return "".join(parts)


def _pack_tail(out, tail):
    if tail == "]}":
        out.append(1)
    else:
        out.append(0)
        _str(out, tail)


def _rows(payload, start, end):
    """Each row's text in turn: one row at a time, so that packing a batch never holds a second
    copy of it."""
    pos = start
    while True:
        nxt = payload.find(b"},{", pos, end)
        if nxt < 0:
            yield payload[pos:end].decode()
            return
        yield payload[pos : nxt + 1].decode()
        pos = nxt + 2


def pack(payload):
    """The compact form (bytes) of a samples payload, or None when it does not split into head,
    rows and tail as encode.batch writes them."""
    start = payload.find(SAMPLES_B)
    end = payload.rfind(b"]")
    if start < 0 or end < start + len(SAMPLES_B) + 2:
        return None
    start += len(SAMPLES_B)
    try:
        head = payload[:start].decode()
        tail = payload[end:].decode()
        # First pass: the channels, and the decimal places each key needs in this batch.
        channels = []
        dec = [0] * len(ROW_KEYS)
        used = 0
        count = 0
        for row in _rows(payload, start, end):
            count += 1
            r = _row_fields(row)
            if r is None:
                continue
            if r[2] not in channels:
                channels.append(r[2])
            for j in range(len(ROW_KEYS)):
                num = r[3].get(ROW_KEYS[j])
                if num is not None:
                    used |= 1 << j
                    if num[1] > dec[j]:
                        dec[j] = num[1]
    except UnicodeError:
        return None
    out = bytearray()
    out.append(VERSION)
    _uv(out, len(payload))
    out.append(0)
    _str(out, head)
    _pack_tail(out, tail)
    _uv(out, len(channels))
    for c in channels:
        _str(out, c)
    _uv(out, used)
    for j in range(len(ROW_KEYS)):
        if used & (1 << j):
            _uv(out, dec[j])
    _uv(out, count)
    # Second pass: the rows, each checked against its own text.
    prev_s = prev_t = 0
    last_vals = [None] * len(channels)
    for row in _rows(payload, start, end):
        r = _row_fields(row)
        if r is not None:
            s, t, c, vals, f = r
            scaled = {}
            for j in range(len(ROW_KEYS)):
                num = vals.get(ROW_KEYS[j])
                if num is not None:
                    scaled[ROW_KEYS[j]] = num[0] * 10 ** (dec[j] - num[1])
            if _row_text(s, t, c, scaled, f, dec) != row:
                r = None
        if r is None:
            out.append(0)
            _str(out, row)
            continue
        ci = channels.index(c)
        _uv(out, ci + 1)
        bits = F_BIT if f else 0
        for j in range(len(ROW_KEYS)):
            if ROW_KEYS[j] in scaled:
                bits |= 1 << j
        _uv(out, bits)
        _zz(out, s - prev_s)
        _zz(out, t - prev_t)
        prev_s, prev_t = s, t
        lv = last_vals[ci]
        if lv is None:
            lv = last_vals[ci] = [0] * len(ROW_KEYS)
        for j in range(len(ROW_KEYS)):
            if bits & (1 << j):
                m = scaled[ROW_KEYS[j]]
                _zz(out, m - lv[j])
                lv[j] = m
        if f:
            _uv(out, f)
    return bytes(out)


# ---- unpacking --------------------------------------------------------------------------------


class _Reader:
    __slots__ = ("b", "i")

    def __init__(self, b):
        self.b = b
        self.i = 0

    def byte(self):
        x = self.b[self.i]
        self.i += 1
        return x

    def uv(self):
        x = 0
        shift = 0
        while True:
            c = self.b[self.i]
            self.i += 1
            x |= (c & 0x7F) << shift
            if c < 0x80:
                return x
            shift += 7

    def decimals(self):
        d = self.uv()
        if d > MAX_DECIMALS:
            raise ValueError(DAMAGED)
        return d

    def zz(self):
        z = self.uv()
        return -((z + 1) >> 1) if z & 1 else z >> 1

    def text(self):
        n = self.uv()
        if self.i + n > len(self.b):
            raise ValueError(DAMAGED)
        self.i += n
        return bytes(self.b[self.i - n : self.i]).decode()


def unpack(data):
    """The payload of a compact record as one bytes object (tools and tests; the firmware sends the
    pieces of unpack_pieces as they are). ValueError if the record is damaged."""
    return b"".join(unpack_pieces(data))


def unpack_pieces(data):
    """The payload of a compact record as a list of pieces of about PIECE_BYTES (the head, rows and
    their commas, the tail) whose concatenation is the payload, checked against the record's length.
    Sending from flash queues the pieces as they are: no run of the whole payload's size is needed,
    which a board's heap after a long outage no longer has (its free runs are a few hundred bytes to
    1.5 KB while a full batch is about 2 KB). ValueError if the record is damaged."""
    try:
        pieces, size = _unpack(data)
    except (IndexError, UnicodeError):
        raise ValueError(DAMAGED)
    total = 0
    for piece in pieces:
        total += len(piece)
    if total != size:
        raise ValueError(DAMAGED)
    return pieces


def _unpack(data):
    rd = _Reader(data)
    if rd.byte() != VERSION:
        raise ValueError(DAMAGED)
    size = rd.uv()
    if size > MAX_PAYLOAD_BYTES:
        raise ValueError(DAMAGED)
    if rd.byte() != 0:
        raise ValueError(DAMAGED)
    head = rd.text()
    mode = rd.byte()
    if mode == 0:
        tail = rd.text()
    elif mode == 1:
        tail = "]}"
    else:
        raise ValueError(DAMAGED)
    channels = [rd.text() for _ in range(rd.uv())]
    used = rd.uv()
    dec = [0] * len(ROW_KEYS)
    for j in range(len(ROW_KEYS)):
        if used & (1 << j):
            dec[j] = rd.decimals()
    out = [head.encode()]
    group = []
    grouped = 0
    prev_s = prev_t = 0
    last_vals = [None] * len(channels)
    for i in range(rd.uv()):
        ci = rd.uv()
        if ci == 0:
            text = rd.text()
        else:
            ci -= 1
            bits = rd.uv()
            prev_s += rd.zz()
            prev_t += rd.zz()
            lv = last_vals[ci]
            if lv is None:
                lv = last_vals[ci] = [0] * len(ROW_KEYS)
            vals = {}
            for j in range(len(ROW_KEYS)):
                if bits & (1 << j):
                    lv[j] += rd.zz()
                    vals[ROW_KEYS[j]] = lv[j]
            f = rd.uv() if bits & F_BIT else 0
            text = _row_text(prev_s, prev_t, channels[ci], vals, f, dec)
        if i:
            group.append(",")
        group.append(text)
        grouped += len(text) + 1
        if grouped >= PIECE_BYTES:
            out.append("".join(group).encode())
            group = []
            grouped = 0
    if group:
        out.append("".join(group).encode())
    out.append(tail.encode())
    if rd.i != len(data):
        raise ValueError(DAMAGED)
    return out, size
