"""Tools that write the converters' test data; make_fairseq_goldens.py runs in its own environment, with torch."""
