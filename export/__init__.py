"""SavedModel export for TF Serving, with the text pipeline inside the graph.

    from zoo.export import export_saved_model
    export_saved_model(model, "exports", name="gcnn-ptb")   # exports/gcnn-ptb/<n>/

See `zoo.export.saved_model` (versions, atomic writes), `zoo.export.signatures` (the four
signatures; per-word scores for subword models) and `zoo.export.state` (decoding-state names).
The tokenizer runs in the graph as `zoo.data.graph_tokenizers` (the vocabulary as core TF ops; a
SentencePiece subword tokenizer as tensorflow-text ops).
"""

from zoo.export.saved_model import DEFAULT_MAX_TOKENS, ExportError, existing_versions, export_saved_model

__all__ = ["export_saved_model", "existing_versions", "ExportError", "DEFAULT_MAX_TOKENS"]
