"""The few facts of the wattbench v1 contract the appliance needs.

The single source of truth is schema/ in the repository (package wattbench_schema). A device cannot
import it, so this module repeats what the firmware uses while it runs, and
tests/firmware/test_fw_contract.py checks every value here against wattbench_schema. What only the
configuration check needs (boards, roles, identifier rules) is in contract_boot.py, loaded at boot and
released with the check: every name kept here costs a board RAM for as long as it runs.

The list of meter kinds is the firmware's meter table (wattbench_fw.meters.KINDS), which
wattbench_schema reads in turn. It is not repeated here: errors imports this module and the table's
module imports errors, and re-exporting the table closed that cycle.
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
TOPIC_SAMPLES = "wattbench/v1/dev/{dev}/samples"
TOPIC_STATUS = "wattbench/v1/dev/{dev}/status"
TOPIC_META = "wattbench/v1/dev/{dev}/meta"
MAX_BATCH_SAMPLES = 500
MAX_PAYLOAD_BYTES = 131072


def topic(name, dev):
    if name == "samples":
        return TOPIC_SAMPLES.format(dev=dev)
    if name == "status":
        return TOPIC_STATUS.format(dev=dev)
    if name == "meta":
        return TOPIC_META.format(dev=dev)
    raise ValueError("appliance does not publish " + name)
