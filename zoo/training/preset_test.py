"""What training asks of the preset registry: a preset's training defaults and vocabulary kind."""

import pytest

from zoo import registry
from zoo.training import preset


def test_a_preset_name_gives_its_batch_sequence_length_and_vocabulary_kind():
    spec = registry.get_preset("gcnn-ptb")
    info = preset.resolve_preset("gcnn-ptb")
    assert info.train_defaults == {"global_batch_size": spec.batch_size, "seq_len": spec.seq_len}
    assert info.vocabulary_kind == spec.token_kind and info.tokenizer is None
    assert info.fixes_head == ("cutoffs" in spec.config)


def test_a_directory_without_a_tokenizer_is_refused_in_one_sentence(tmp_path):
    with pytest.raises(ValueError, match="has no tokenizer to train with"):
        preset.resolve_preset(str(tmp_path))


def test_an_unknown_preset_name_is_refused():
    with pytest.raises(ValueError, match="Unknown preset .no-such-preset."):
        preset.resolve_preset("no-such-preset")
