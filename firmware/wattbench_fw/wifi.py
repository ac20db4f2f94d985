"""Wi-Fi station that (re)joins in the background: connect() returns at once and service() retries
with backoff, so a missing access point never blocks the sampling loop."""

from wattbench_fw import port


class Wifi:
    def __init__(self, ssid, password=None, hostname=None, retry_ms=10000):
        import network

        if hostname:
            try:
                network.hostname(hostname)
            except (AttributeError, ValueError, OSError):
                pass
        self.wlan = network.WLAN(network.STA_IF)
        self.wlan.active(True)
        self.ssid = ssid
        self.password = password
        self.retry_ms = retry_ms
        self._next = port.ticks_ms()
        self.joins = 0

    def up(self):
        return self.wlan.isconnected()

    def service(self):
        if self.wlan.isconnected():
            return True
        if port.ticks_diff(port.ticks_ms(), self._next) >= 0:
            self._next = port.ticks_add(port.ticks_ms(), self.retry_ms)
            self.joins += 1
            try:
                self.wlan.connect(self.ssid, self.password)
            except OSError:
                pass
        return False

    def rssi(self):
        try:
            return max(-127, min(0, int(self.wlan.status("rssi"))))
        except (ValueError, TypeError, OSError):
            return None
