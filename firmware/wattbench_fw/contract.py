"""The few facts of the wattbench v1 contract the appliance needs.

The single source of truth is schema/ in the repository (package wattbench_schema). A device cannot
import it, so this module repeats what the firmware uses, and tests/firmware/test_fw_contract.py
checks every value here against wattbench_schema. The one exception is the list of meter kinds: it is
the firmware's meter table (wattbench_fw.meters.KINDS), which wattbench_schema reads in turn. It is not
repeated here: errors imports this module and the table's module imports errors, and re-exporting the
table closed that cycle.
"""

VERSION = 1

FLAG_MISSED = 1
FLAG_CRC = 2
FLAG_OVER_RANGE = 4
FLAG_CLOCK_STEP = 8
FLAG_UNSYNCED = 16
FLAG_REVERSE = 32
FLAG_RANGE_CHANGE = 64
FLAG_PARTIAL = 128
FLAG_SENSOR_ERROR = 256
# With any of these set a sample carries no quantities: nothing is made up.
FLAGS_WITHOUT_VALUES = FLAG_MISSED | FLAG_CRC | FLAG_SENSOR_ERROR
FLAGS_MAX = 65535

QUANTITIES = ("W", "V", "A", "PF", "Hz", "Wh", "T", "RH")
# Sample keys in the order the encoder writes them.
ROW_KEYS = ("W", "V", "A", "PF", "Hz", "Wh", "T", "RH", "u", "n", "Wmin", "Wmax")
# Inclusive bounds from samples.schema.json; a value outside is withheld and flagged.
BOUNDS = {
    "W": (0, 1e7),
    "V": (0, 1e5),
    "A": (0, 1e5),
    "PF": (-1, 1),
    "Hz": (0, 1e6),
    "Wh": (0, 1e13),
    "T": (-60, 150),
    "RH": (0, 100),
    "u": (0, 1),
    "Wmin": (0, 1e7),
    "Wmax": (0, 1e7),
}
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

TOPIC_SAMPLES = "wattbench/v1/dev/{dev}/samples"
TOPIC_STATUS = "wattbench/v1/dev/{dev}/status"
TOPIC_META = "wattbench/v1/dev/{dev}/meta"
# (qos, retain) per topic the appliance publishes.
TOPIC_QOS_RETAIN = {"samples": (1, False), "status": (1, True), "meta": (1, True)}
MAX_BATCH_SAMPLES = 500
MAX_PAYLOAD_BYTES = 131072

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


def topic(name, dev):
    if name == "samples":
        return TOPIC_SAMPLES.format(dev=dev)
    if name == "status":
        return TOPIC_STATUS.format(dev=dev)
    if name == "meta":
        return TOPIC_META.format(dev=dev)
    raise ValueError("appliance does not publish " + name)
