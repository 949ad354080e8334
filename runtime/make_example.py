"""Writes zoo_litert's example export (runtime/zoo_litert/example/): a GCNN of 15 words, trained
for a moment on the sentences below so that greedy decoding continues them, exported with
`zoo.export.export_litert`, and its Keras weights (runtime/example.weights.h5, not shipped). It
needs the zoo (TensorFlow); the package only reads the export.

    python runtime/make_example.py          # from the checkout's root, after pip install -e '.[test]'

export/litert_runtime_test.py checks that the shipped export answers as the model of those weights
does. Training again on another CPU gives other weights (its kernels sum in another order, and
300 steps of Adam grow the difference), which is why the weights are kept beside the export.
"""

import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = os.path.join(HERE, "zoo_litert", "example")
WEIGHTS = os.path.join(HERE, "example.weights.h5")
SENTENCES = ["the cat sat on the mat", "a dog sat on the mat", "the dog ran to the house",
             "a cat ran to the park", "the man saw a bird", "the woman saw the cat"]


def untrained_model():
    """The example's architecture and tokenizer, seeded, with its weights as initialised."""
    import keras

    import zoo
    from zoo.data import WordTokenizer

    keras.utils.set_random_seed(0)
    tokenizer = WordTokenizer.build(SENTENCES)
    lm = zoo.GCNNLanguageModel(vocabulary_size=len(tokenizer), embedding_dim=16, blocks=[[[3, 16]], [[3, 16]]])
    lm.tokenizer = tokenizer
    return lm


def saved_model():
    """The model the shipped export was made from: `untrained_model` with the kept weights."""
    lm = untrained_model()  # built by its __init__
    lm.load_weights(WEIGHTS)
    return lm


def example_model():
    """The example's model: seeded, trained 300 steps with Adam on `SENTENCES`, in memory."""
    import keras

    from zoo.data import sentence_dataset

    lm = untrained_model()
    lm.compile(optimizer=keras.optimizers.Adam(0.02))
    data = sentence_dataset(SENTENCES, lm.tokenizer, batch_size=len(SENTENCES)).repeat()
    lm.fit(data, steps_per_epoch=300, epochs=1, verbose=0)
    return lm


def main():
    from zoo.export import export_litert

    lm = example_model()
    if os.path.exists(TARGET):
        shutil.rmtree(TARGET)
    export_litert(lm, TARGET)
    lm.save_weights(WEIGHTS)
    print(TARGET, sorted(os.listdir(TARGET)), file=sys.stderr)
    return lm


if __name__ == "__main__":
    main()
