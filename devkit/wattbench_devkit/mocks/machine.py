"""A stand-in `machine` module for tests, under MicroPython (WebAssembly) and CPython.

The bus classes replay recorded byte sequences: a UART answers each write with the next scripted
reply, an I2C bus serves register contents from a table. Every write is recorded for assertions.
"""


class Pin:
    IN = 0
    OUT = 1
    PULL_UP = 2
    PULL_DOWN = 3

    def __init__(self, pin_id, mode=None, pull=None, value=1):
        self.id = pin_id
        self.mode = mode
        self.pull = pull
        self._value = value

    def value(self, v=None):
        if v is None:
            return self._value
        self._value = v
        return None


class WDT:
    instances = []  # noqa: RUF012 - MicroPython has no typing.ClassVar

    def __init__(self, id=0, timeout=5000):
        self.timeout = timeout
        self.feeds = 0
        WDT.instances.append(self)

    def feed(self):
        self.feeds += 1


class UART:
    """Scripted UART: expect(request, reply) queues one exchange; reply None means silence."""

    def __init__(self, uart_id=1, baudrate=9600, **kw):
        self.id = uart_id
        self.baudrate = baudrate
        self.kw = kw
        self.rx = bytearray()
        self.written = []
        self.script = []
        self.strict = True

    def expect(self, request, reply):
        self.script.append((request, reply))

    def inject(self, data):
        """Bytes arriving unasked (line noise, a late reply)."""
        self.rx.extend(data)

    def write(self, data):
        data = bytes(data)
        self.written.append(data)
        if self.script:
            request, reply = self.script.pop(0)
            if request is not None and self.strict and request != data:
                raise AssertionError(f"UART got {data!r}, expected {request!r}")
            if reply:
                self.rx.extend(reply)
        return len(data)

    def any(self):
        return len(self.rx)

    def read(self, n=-1):
        if not self.rx:
            return None
        if n is None or n < 0 or n > len(self.rx):
            n = len(self.rx)
        out = bytes(self.rx[:n])
        self.rx = self.rx[n:]
        return out


class I2C:
    """Register-table I2C bus: devices[addr][reg] = bytes returned for that register."""

    def __init__(self, i2c_id=0, scl=None, sda=None, freq=400000):
        self.id = i2c_id
        self.freq = freq
        self.devices = {}
        self.writes = []  # (addr, reg or None, bytes)
        self.replies = {}  # addr -> list of byte strings for readfrom_into (command/response chips)

    def add(self, addr, regs=None):
        self.devices[addr] = dict(regs or {})

    def _dev(self, addr):
        if addr not in self.devices:
            raise OSError(19)  # ENODEV: nobody acknowledged the address
        return self.devices[addr]

    def readfrom_mem_into(self, addr, reg, buf):
        data = self._dev(addr)[reg]
        for i in range(len(buf)):
            buf[i] = data[i]

    def readfrom_mem(self, addr, reg, n):
        return bytes(self._dev(addr)[reg][:n])

    def writeto_mem(self, addr, reg, data):
        self._dev(addr)
        self.writes.append((addr, reg, bytes(data)))

    def writeto(self, addr, data, stop=True):
        self._dev(addr)
        self.writes.append((addr, None, bytes(data)))
        return 1

    def queue_reply(self, addr, data):
        self.replies.setdefault(addr, []).append(bytes(data))

    def readfrom_into(self, addr, buf):
        self._dev(addr)
        queue = self.replies.get(addr) or []
        if not queue:
            raise OSError(5)  # EIO: the chip did not answer
        data = queue.pop(0)
        for i in range(len(buf)):
            buf[i] = data[i]
