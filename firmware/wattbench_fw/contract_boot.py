"""The facts of the wattbench v1 contract that only the configuration check needs, and the limits the
tests hold the firmware's copy to: boards, roles, channel count, identifier rules, the sequence,
boot and time ranges, the enums of status and clock.

Split from contract.py because a board keeps a module's names and constants in RAM for as long as
the module is loaded: this one is imported by the configuration check at boot and released with it
(device.boot). tests/firmware/test_fw_contract.py checks every value here against wattbench_schema.
"""

FLAGS_MAX = 65535

N_MAX = 1000000
SEQ_MAX = 9007199254740991
BOOT_MAX = 4294967295
UTC_MS_MIN = 1577836800000
UTC_MS_MAX = 4102444800000

CLOCK_SYNC = ("ntp", "host", "free", "recv")
STATUS_REASONS = ("boot", "reconnect", "periodic", "shutdown", "will")
BOARDS = ("esp32", "esp32-psram", "picow", "host")
ROLES = ("power", "inlet", "component", "other")
MAX_CHANNELS = 16

# (qos, retain) per topic the appliance publishes.
TOPIC_QOS_RETAIN = {"samples": (1, False), "status": (1, True), "meta": (1, True)}

DEVICE_ID_PATTERN = "^[a-z0-9][a-z0-9_-]{0,31}$"
CHANNEL_ID_PATTERN = "^[a-z0-9][a-z0-9_.-]{0,23}$"
FW_MAX_LEN = 32

_LOWER_DIGITS = "abcdefghijklmnopqrstuvwxyz0123456789"


def _id_ok(text, extra, max_len):
    # Hand-written instead of re: the MicroPython re module lacks {m,n} repetition on some ports.
    if not isinstance(text, str) or not 1 <= len(text) <= max_len:
        return False
    if text[0] not in _LOWER_DIGITS:
        return False
    for ch in text[1:]:
        if ch not in _LOWER_DIGITS and ch not in extra:
            return False
    return True


def valid_device_id(text):
    return _id_ok(text, "_-", 32)


def valid_channel_id(text):
    return _id_ok(text, "_.-", 24)
