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


def test_decay_steps_fall_along_a_cosine_to_the_final_fraction_and_hold():
    opt = optimizers.from_config({"name": "adam", "learning_rate": 2e-3, "decay_steps": 8, "final_fraction": 0.02})
    schedule = opt._learning_rate  # the schedule, evaluated at the optimiser's step
    expected = {0: 2e-3, 2: 2e-3 * (0.02 + 0.98 * (1 + 0.5**0.5) / 2), 4: 2e-3 * (0.02 + 0.98 * 0.5),
                8: 4e-5, 24: 4e-5}
    for step, rate in expected.items():
        assert float(schedule(step)) == pytest.approx(rate, rel=1e-6), step
    held = optimizers.from_config({"name": "adam", "learning_rate": 2e-3, "decay_steps": 8, "final_fraction": 1.0})
    assert float(held._learning_rate(5)) == pytest.approx(2e-3)


@pytest.mark.parametrize("spec, message", [
    ({"decay_steps": 0}, "decay_steps must be a whole number of steps >= 1, got 0"),
    ({"decay_steps": 2.5}, "decay_steps must be a whole number of steps >= 1, got 2.5"),
    ({"decay_steps": 10, "final_fraction": 1.5}, "final_fraction must be a number from 0 to 1, got 1.5"),
    ({"decay_steps": 10, "warmup_steps": 5}, "warmup_steps \\(5\\) or decay_steps \\(10\\), not both"),
])
def test_bad_decay_is_one_clear_error(spec, message):
    with pytest.raises(ValueError, match=message):
        optimizers.from_config({"name": "adam", "learning_rate": 1e-3, **spec})
