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
    trained = ", ".join(sorted(TRAINED)) or "none ship yet"
    if directory in zoo.presets():  # a preset, but no weights ship for it
        raise ValueError(f"No trained weights ship for the preset {directory!r}; give a preset directory (train "
                         f"one with `zoo train --preset {directory}`) or a preset with trained weights ({trained}).")
    import difflib

    close = difflib.get_close_matches(str(directory), sorted(TRAINED), n=1, cutoff=0.6)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"The preset directory {directory!r} does not exist; give a preset directory or a preset "
                     f"with trained weights ({trained}).{hint}")
