"""SavedModel export for TF Serving, with the text pipeline inside the graph, and LiteRT export
for a phone or a lean CPU server.

    from zoo.export import export_saved_model, export_litert
    export_saved_model(model, "exports", name="gcnn-ptb")   # exports/gcnn-ptb/<n>/
    export_litert(model, "exports/gcnn-ptb/litert")          # model.tflite, the tokenizer, zoo_litert.json

See `zoo.export.saved_model` (versions, atomic writes), `zoo.export.signatures` (the four
signatures; per-word scores for subword models) and `zoo.export.state` (decoding-state names).
The tokenizer runs in the graph as `zoo.data.graph_tokenizers` (the vocabulary as core TF ops; a
SentencePiece subword tokenizer as tensorflow-text ops). `zoo.export.litert`: the LiteRT
flatbuffer's `prefill` and `decode` signatures and its one-tensor decoding state.
"""

import os

from zoo.export.litert import export_litert
from zoo.export.saved_model import DEFAULT_MAX_TOKENS, ExportError, existing_versions, export_saved_model
from zoo.models.base import register_export_format


def _saved_model_in(model, filepath, **kwargs):
    """Keras' `model.export(filepath)` (format "tf_saved_model"): `filepath` is the model's
    directory that TF Serving watches, the next version written under it."""
    model_dir = os.path.abspath(os.fspath(filepath))
    return export_saved_model(model, os.path.dirname(model_dir), name=os.path.basename(model_dir), **kwargs)


register_export_format("tf_saved_model", _saved_model_in)
register_export_format("litert", export_litert)

__all__ = ["export_saved_model", "export_litert", "existing_versions", "ExportError", "DEFAULT_MAX_TOKENS"]
