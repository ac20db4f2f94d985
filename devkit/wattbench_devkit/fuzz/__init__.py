"""The parsers' fuzz targets (`targets`), their input sources and mutators (`mutate`), independent
reference decoders (`reference`) and what counts as a crash (`crashes`). The hypothesis tests in
tests/fuzz/ and bench/fuzz_all.py drive the same targets."""
