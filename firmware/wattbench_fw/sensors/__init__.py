"""Node sensors (inlet temperature and humidity). Same driver interface as wattbench_fw.meters."""
