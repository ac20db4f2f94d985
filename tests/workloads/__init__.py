"""One test file per workload of the registry (wattbench.workloads.REGISTRY), plus the registry's own
checks."""
