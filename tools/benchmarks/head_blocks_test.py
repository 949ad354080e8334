"""The blocks the side-by-side run forces for each simulated level-2 cache (no timing)."""

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
