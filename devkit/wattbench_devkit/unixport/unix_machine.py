"""`machine` for the firmware on MicroPython's unix port: only what the appliance asks of a board
whose meters need no bus (the simulated ones).

Pins hold a level and nothing more (the safe pin reads high, so the appliance starts). The watchdog
is real in what it checks: a feed later than its timeout is a reset, as on a board, and the process
ends with EXIT_WDT; a board's hardware would reset it mid-stall, this one notices at the next feed.
"""

import sys
import time

EXIT_WDT = 3


class Pin:
    IN = 0
    OUT = 1
    PULL_UP = 2
    PULL_DOWN = 3

    def __init__(self, pin_id, mode=None, pull=None, value=1):
        self.id = pin_id
        self._value = value

    def value(self, v=None):
        if v is None:
            return self._value
        self._value = v
        return None


class WDT:
    def __init__(self, id=0, timeout=5000):
        self.timeout = timeout
        self.feeds = 0
        self.longest_ms = 0
        self._last = time.ticks_ms()

    def feed(self):
        now = time.ticks_ms()
        gap = time.ticks_diff(now, self._last)
        self._last = now
        self.feeds += 1
        if gap > self.longest_ms:
            self.longest_ms = gap
        if gap > self.timeout:
            print("WDT reset: %d ms between feeds (timeout %d ms)" % (gap, self.timeout))
            sys.exit(EXIT_WDT)


def reset():
    sys.exit(0)


def unique_id():
    return b"unix"
