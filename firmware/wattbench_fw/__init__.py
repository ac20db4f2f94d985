"""wattbench appliance firmware: samples power meters and sensors and publishes them over MQTT.

The same package runs on MicroPython (ESP32, Raspberry Pi Pico W) and on CPython (host mode with
simulated meters). Modules import only what both have; `wattbench_fw.port` hides the differences.
"""

__version__ = "0.1.0"
