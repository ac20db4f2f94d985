"""`network` for the firmware on MicroPython's unix port: the station is the host's own network
stack, always joined; what reaches the broker (or not) is decided by real sockets."""

STA_IF = 0


def hostname(name=None):
    return "wattbench-unix" if name is None else None


class WLAN:
    def __init__(self, which=STA_IF):
        self._active = False

    def active(self, on=None):
        if on is not None:
            self._active = bool(on)
        return self._active

    def isconnected(self):
        return True

    def connect(self, ssid, password=None):
        pass

    def status(self, what=None):
        if what == "rssi":
            return -40
        return 1010  # STAT_GOT_IP
