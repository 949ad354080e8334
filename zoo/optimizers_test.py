import keras
import pytest

import zoo
from zoo import optimizers


def tiny(**kwargs):
    return zoo.GCNNLanguageModel(vocabulary_size=50, embedding_dim=8, blocks=[[[3, 8]]], **kwargs)


def test_compile_without_arguments_uses_the_papers_recipe():
    model = tiny()
    model.compile()
    opt = model.optimizer
    assert isinstance(opt, keras.optimizers.SGD) and opt.nesterov
    assert float(opt.momentum) == pytest.approx(0.99)
    assert float(opt.learning_rate) == pytest.approx(1.0)
    assert opt.global_clipnorm == pytest.approx(0.1)


def test_presets_with_their_own_optimizer_and_any_keras_optimizer():
    model = tiny(optimizer={"name": "adam", "learning_rate": 2e-3, "clipnorm": 1.0})
    model.compile()
    assert isinstance(model.optimizer, keras.optimizers.Adam)
    assert float(model.optimizer.learning_rate) == pytest.approx(2e-3)
    model.compile(optimizer=keras.optimizers.RMSprop(1e-3))
    assert isinstance(model.optimizer, keras.optimizers.RMSprop)


def test_unknown_optimizer_name_is_one_clear_error():
    with pytest.raises(ValueError, match="Unknown optimizer 'lamb'"):
        optimizers.from_config({"name": "lamb"})
