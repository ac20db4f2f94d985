# Runs at boot on the board (after boot.py). Hold the safe pin low at reset to skip it.
from wattbench_fw.device import main

main()
