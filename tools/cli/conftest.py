"""Fixtures of the `zoo` subcommands' tests: a tiny corpus a model can learn, and one short
`zoo train` run on it, trained once for every test file of this folder that asks for it."""

import numpy as np
import pytest

from zoo.tools.cli import main


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    """A tiny corpus with structure a model can learn: 'the <adj> <noun> sat on the mat'."""
    rng = np.random.default_rng(0)
    root = tmp_path_factory.mktemp("corpus")
    for split, n in (("train", 300), ("valid", 30), ("test", 30)):
        lines = [f"the {rng.choice(['big', 'small', 'red'])} {rng.choice(['cat', 'dog'])} sat on the mat"
                 for _ in range(n)]
        (root / f"{split}.txt").write_text("\n".join(lines) + "\n")
    return str(root)


@pytest.fixture(scope="session")
def trained(corpus, tmp_path_factory):
    """The run directory of `zoo train` on `corpus`: three epochs of a small gcnn-ptb, a word vocabulary."""
    out = str(tmp_path_factory.mktemp("run"))
    code = main(["train", "--preset", "gcnn-ptb", "--data", corpus, "--out", out, "--epochs", "3", "--tokenizer", "word",
                 "--batch-size", "8", "--seq-len", "16", "--set", "dropout=0.0",
                 "--set", 'blocks=[[[3, 16]], [[3, 16]]]', "--set", "embedding_dim=16"])
    assert code == 0
    return out
