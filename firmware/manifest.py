# Freezes the appliance into a MicroPython image you build yourself: the bytecode then stays in
# flash instead of being loaded into the GC heap (see firmware/README.md, "Freezing").
#
# In your board's manifest:  include("/path/to/wattbench/firmware/manifest.py")
# The list names every module a board runs (host.py is host-only); tests/firmware/test_manifest.py
# keeps it complete.
package(
    "wattbench_fw",
    files=(
        "__init__.py",
        "app.py",
        "board.py",
        "buffer.py",
        "clock.py",
        "config.py",
        "contract.py",
        "device.py",
        "encode.py",
        "errors.py",
        "hass.py",
        "hass_state.py",
        "link.py",
        "meters/__init__.py",
        "meters/ina226/__init__.py",
        "meters/ina228/__init__.py",
        "meters/pzem004t/__init__.py",
        "meters/sim/__init__.py",
        "meters/wt300/__init__.py",
        "modbus.py",
        "mqtt.py",
        "persist.py",
        "port.py",
        "sampler.py",
        "sensors/__init__.py",
        "sensors/ds18b20/__init__.py",
        "sensors/sht3x/__init__.py",
        "serialio.py",
        "sign.py",
        "wifi.py",
    ),
    opt=2,
)
