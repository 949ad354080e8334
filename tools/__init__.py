"""The zoo's tools (installed as `zoo.tools`), one room each: `cli/` (the `zoo` command line, part
of the library) and the workshop, which the library's own install leaves out (workshop/setup.py
installs it; docs/contributing.md#the-workshop): `benchmarks/` (`zoo benchmark NAME`),
`reproduce/` (`zoo reproduce`: the papers' experiments and RESULTS.md), `corpora/` (raw-text
corpus builders, `python -m zoo.tools.corpora`) and `convert/` (the fairseq golden files)."""
