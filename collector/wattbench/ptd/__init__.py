"""A PTDaemon-protocol interface over a wattbench source, for rehearsing MLPerf power runs with
MLCommons' power-dev (docs/mlperf-power.md): the protocol and its state (protocol.py, pure), a
sample and its lines (samples.py, pure), the sources (source.py) and the TCP server (server.py)."""
