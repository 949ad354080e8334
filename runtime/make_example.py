"""Writes zoo_litert's example export (runtime/zoo_litert/example/): a GCNN of 15 words, trained
for a moment on the sentences below so that greedy decoding continues them, exported with
`zoo.export.export_litert`. It needs the zoo (TensorFlow); the package only reads the result.

    python runtime/make_example.py          # from the checkout's root, after pip install -e '.[test]'

export/litert_runtime_test.py checks that the shipped export still answers as this model does.
"""

import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = os.path.join(HERE, "zoo_litert", "example")
SENTENCES = ["the cat sat on the mat", "a dog sat on the mat", "the dog ran to the house",
             "a cat ran to the park", "the man saw a bird", "the woman saw the cat"]


def example_model():
    """The example's model: seeded, trained 300 steps with Adam on `SENTENCES`, in memory."""
    import keras

    import zoo
    from zoo.data import WordTokenizer, sentence_dataset

    keras.utils.set_random_seed(0)
    tokenizer = WordTokenizer.build(SENTENCES)
    lm = zoo.GCNNLanguageModel(vocabulary_size=len(tokenizer), embedding_dim=16, blocks=[[[3, 16]], [[3, 16]]])
    lm.tokenizer = tokenizer
    lm.compile(optimizer=keras.optimizers.Adam(0.02))
    data = sentence_dataset(SENTENCES, tokenizer, batch_size=len(SENTENCES)).repeat()
    lm.fit(data, steps_per_epoch=300, epochs=1, verbose=0)
    return lm


def main():
    from zoo.export import export_litert

    lm = example_model()
    if os.path.exists(TARGET):
        shutil.rmtree(TARGET)
    export_litert(lm, TARGET)
    print(TARGET, sorted(os.listdir(TARGET)), file=sys.stderr)
    return lm


if __name__ == "__main__":
    main()
