# Three source folders install as three packages: the host tools (collector/), the firmware that also
# runs on the host (firmware/) and the message contract (schema/). Declarative config cannot map a
# discovered tree onto a differently named folder, hence this file.
from setuptools import find_packages, setup

setup(
    packages=[
        *find_packages("collector", include=["wattbench", "wattbench.*"]),
        *find_packages("firmware", include=["wattbench_fw", "wattbench_fw.*"]),
        "wattbench_schema",
    ],
    package_dir={
        "wattbench": "collector/wattbench",
        "wattbench_fw": "firmware/wattbench_fw",
        "wattbench_schema": "schema",
    },
)
