"""The blocks the side-by-side run forces for each simulated level-2 cache (no timing), and a tiny
run's tables and JSON."""

import pytest

from zoo.layers.softmax import FullSoftmax
from zoo.tools.benchmarks import head_blocks


class _Model:
    def __init__(self, head):
        self.head = head


def test_the_penn_treebank_output_layer_is_forced_into_the_blocks_each_cache_would_choose():
    head = FullSoftmax(10002)
    head.build((None, None, 128))  # gcnn-ptb's: 512 bytes per id, 5.1 MB
    # 0.9 of 0.5 MiB holds 921 ids (11 blocks), of 1 MiB 1843 (6), of 2 MiB 3686 (3), of 32 MiB all
    assert head_blocks.forced_blocks(_Model(head)) == {0.5: 11, 1: 6, 2: 3, 32: 1, "export": 1}


@pytest.mark.ci
def test_a_tiny_run_prints_both_tables_and_writes_the_json(tmp_path, monkeypatch, capsys):
    import json

    import keras

    import zoo
    from zoo.tools.benchmarks.common import SMALL_CONFIGS

    def tiny(vocabulary):
        keras.utils.set_random_seed(0)
        return zoo.load("gcnn-ptb", weights="random", vocabulary_size=min(vocabulary, 400),
                        **SMALL_CONFIGS["gcnn-ptb"])

    monkeypatch.setattr(head_blocks, "model_of", tiny)
    monkeypatch.setattr(head_blocks, "COUNTS", (1, 3))
    report = head_blocks.main(["--repeats", "2", "--new-tokens", "3", "--out", str(tmp_path / "r.json")])
    assert json.loads((tmp_path / "r.json").read_text()) == json.loads(json.dumps(report))
    assert set(report["forced"]) == {"0.5", "1", "2", "32", "export"}
    assert set(report["emulated"]) == {"0.5", "1", "2", "32"}
    assert all(min(r["x_fastest"].values()) >= 1.0 and r["best"] in (1, 3) for r in report["emulated"].values())
    out = capsys.readouterr().out
    assert "| simulated L2 | blocks chosen | × fastest here |" in out
    assert ("| emulated L2 (MiB) | vocabulary | 1 blocks | 3 blocks | best | export default / best | rule / best |"
            in out)
    assert "| worst of the sizes | | " in out
