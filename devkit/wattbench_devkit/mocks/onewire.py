"""A stand-in `onewire` module: one DS18B20 whose scratchpad replies are scripted."""


class OneWire:
    def __init__(self, pin=None):
        self.pin = pin
        self.present = True
        self.sent = []
        self.scratchpads = []

    def reset(self, required=False):
        return self.present

    def writebyte(self, b):
        self.sent.append(b)

    def write(self, buf):
        self.sent.extend(buf)

    def select_rom(self, rom):
        self.sent.append(0x55)
        self.sent.extend(rom)

    def readinto(self, buf):
        data = self.scratchpads.pop(0) if self.scratchpads else b"\xff" * len(buf)
        for i in range(len(buf)):
            buf[i] = data[i]
