"""The zoo's tools (installed as `zoo.tools`), one room each: `cli/` (the `zoo` command line),
`benchmarks/` (`zoo benchmark NAME`), `reproduce/` (`zoo reproduce`: the papers' experiments and
RESULTS.md) and `corpora/` (raw-text corpus builders, `python -m zoo.tools.corpora`)."""
