"""The model a subcommand works on: a preset directory, or a preset whose trained weights ship."""

import os


def load_model(directory, quantize=None):
    """A preset directory's model, or a preset's trained weights (`zoo score gcnn-ptb "..."`);
    with `quantize` ("int8", `--quantize int8`), quantized in memory (the directory is only read)."""
    import zoo
    from zoo.layers import int8
    from zoo.weights import TRAINED

    if quantize is not None:
        int8.check_mode(quantize)  # before the model is loaded
    if os.path.isdir(directory) or directory in TRAINED:
        model = zoo.load(directory) if os.path.isdir(directory) else zoo.load(directory, weights="trained")
        if quantize is not None:
            model.quantize(quantize)
        return model
    raise ValueError(f"The preset directory {directory!r} does not exist; give a preset directory or a preset "
                     f"with trained weights ({', '.join(sorted(TRAINED)) or 'none ship yet'}).")
