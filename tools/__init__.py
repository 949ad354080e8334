"""The `zoo` command line and the benchmarks (installed as `zoo.tools`)."""
