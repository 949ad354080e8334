"""The GCNN presets' building blocks (zoo/models/gcnn_presets.py): repeated blocks, Table 1's
bottlenecks and a Table 1 row as a preset."""

from zoo import registry
from zoo.models.gcnn_presets import blocks, bottlenecks, table_1


def test_blocks_repeat_fresh_copies_and_bottlenecks_go_down_across_and_up():
    stages = blocks([(3, 8), (1, 4)], 2)
    assert stages == [[[3, 8], [1, 4]], [[3, 8], [1, 4]]]
    stages[0][0][0] = 99  # each block its own lists: editing one leaves the other
    assert stages[1][0] == [3, 8]
    assert bottlenecks(5, 128, 512, 2) == [[[1, 128], [5, 128], [1, 512]]] * 2


def test_a_table_1_row_says_its_blocks_and_cutoffs():
    row = table_1("Dauphin et al. 2016, Table 1", 793_471, 128, blocks([(5, 8)], 3), [10_000, 40_000, 200_000], "Note.")
    assert row["description"] == ("Dauphin et al. 2016, Table 1: 3 residual blocks, embedding 128, adaptive softmax "
                                  "with cutoffs 10k/40k/200k. Note.")
    assert row["config"]["cutoffs"] == [10_000, 40_000, 200_000] and len(row["config"]["blocks"]) == 3
    # the registered GCNN-8's blocks are made by these helpers: bottlenecks after plain blocks
    assert registry.get_preset("gcnn-8b").config["blocks"][-1][0][0] == 1
