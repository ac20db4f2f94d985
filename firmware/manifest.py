# Freezes the appliance into a MicroPython image you build yourself: the bytecode then stays in
# flash instead of being loaded into the GC heap (see firmware/README.md, "Freezing").
#
# In your board's manifest:  include("/path/to/wattbench/firmware/manifest.py")
# The list names every module a board runs (host.py is host-only); tests/firmware/test_manifest.py
# keeps it complete. Driver folders are found, not listed, so a new meter needs no line here;
# MicroPython's manifest tool runs this file from its own directory.
import os


def _drivers(group):
    top = "wattbench_fw/" + group
    return tuple(
        sorted(
            group + "/" + name + "/__init__.py"
            for name in os.listdir(top)
            if os.path.isfile(top + "/" + name + "/__init__.py")
        )
    )


package(
    "wattbench_fw",
    files=(
        "__init__.py",
        "app.py",
        "board.py",
        "buffer.py",
        "clock.py",
        "compact.py",
        "config.py",
        "contract.py",
        "contract_boot.py",
        "device.py",
        "encode.py",
        "errors.py",
        "hass.py",
        "hass_state.py",
        "link.py",
        "meters/__init__.py",
        "modbus.py",
        "mqtt.py",
        "persist.py",
        "port.py",
        "sampler.py",
        "sensors/__init__.py",
        "serialio.py",
        "sign.py",
        "stateload.py",
        "wifi.py",
    )
    + _drivers("meters")
    + _drivers("sensors"),
    opt=2,
)
