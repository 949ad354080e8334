"""Converters from other frameworks' checkpoints into the zoo's model families."""
