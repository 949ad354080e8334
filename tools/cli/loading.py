"""The model a subcommand works on: a preset directory, or a preset whose trained weights ship."""

import os


def load_model(directory):
    """A preset directory's model, or a preset's trained weights (`zoo score gcnn-ptb "..."`)."""
    import zoo
    from zoo.weights import TRAINED

    if os.path.isdir(directory):
        return zoo.load(directory)
    if directory in TRAINED:
        return zoo.load(directory, weights="trained")
    raise ValueError(f"The preset directory {directory!r} does not exist; give a preset directory or a preset "
                     f"with trained weights ({', '.join(sorted(TRAINED)) or 'none ship yet'}).")
