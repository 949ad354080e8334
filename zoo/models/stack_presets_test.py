"""The stack presets' building blocks (zoo/models/stack_presets.py): an MoE layer's spec, the LSTM
sandwich of Table 7 and the treebank's MoE preset beside its dense baseline."""

from zoo import registry
from zoo.models.stack_presets import lstm_moe, moe, ptb_stack


def test_an_moe_spec_names_its_groups_only_when_hierarchical():
    assert moe(4, 2) == {"type": "moe", "num_experts": 4, "k": 2, "hidden_units": 1024}
    assert moe(256, 4, hidden=8, groups=16)["groups"] == 16


def test_the_lstm_sandwich_copies_its_layers_around_the_middle():
    config = lstm_moe(512, [moe(4, 2)], moe_optimizer=False)
    kinds = [layer["type"] for layer in config["layers"]]
    assert kinds == ["lstm", "moe", "lstm"] and config["layers"][0] is not config["layers"][2]
    assert config["optimizer"]["name"] == "adam" and lstm_moe(512, [])["optimizer"]["name"] == "factorized_adam"


def test_the_treebanks_moe_preset_and_its_dense_baseline_differ_in_the_middle_layer_only():
    a, b = ptb_stack(moe(4, 2)), ptb_stack({"type": "lstm", "units": 512})
    assert {k for k in a if a[k] != b[k]} == {"layers"}
    assert a["layers"][0] == b["layers"][0] and a["layers"][2] == b["layers"][2]
    moe_ptb, wide = registry.get_preset("lstm-moe-ptb").config, registry.get_preset("lstm-wide-ptb").config
    assert moe_ptb["layers"][1]["type"] == "moe" and moe_ptb["layers"][0] == wide["layers"][0]
