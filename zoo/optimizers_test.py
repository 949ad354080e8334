import keras
import numpy as np
import pytest

from zoo import optimizers


def test_compile_without_arguments_uses_the_papers_recipe(tiny_model):
    model = tiny_model("gcnn", blocks=[[[3, 8]]])
    model.compile()
    opt = model.optimizer
    assert isinstance(opt, keras.optimizers.SGD) and opt.nesterov
    assert float(opt.momentum) == pytest.approx(0.99)
    assert float(opt.learning_rate) == pytest.approx(1.0)
    assert opt.global_clipnorm == pytest.approx(0.1)


def test_presets_with_their_own_optimizer_and_any_keras_optimizer(tiny_model):
    model = tiny_model("gcnn", blocks=[[[3, 8]]], optimizer={"name": "adam", "learning_rate": 2e-3, "global_clipnorm": 1.0})
    model.compile()
    assert isinstance(model.optimizer, keras.optimizers.Adam)
    assert float(model.optimizer.learning_rate) == pytest.approx(2e-3)
    assert model.optimizer.global_clipnorm == 1.0 and model.optimizer.clipnorm is None
    model.compile(optimizer=keras.optimizers.RMSprop(1e-3))
    assert isinstance(model.optimizer, keras.optimizers.RMSprop)


def test_unknown_optimizer_name_is_one_clear_error():
    with pytest.raises(ValueError, match="Unknown optimizer 'lamb'"):
        optimizers.from_config({"name": "lamb"})


def test_decay_steps_fall_along_a_cosine_to_the_final_fraction_and_hold():
    spec = {"name": "adam", "learning_rate": 2e-3, "decay_steps": 8, "final_fraction": 0.02}
    opt = optimizers.from_config(spec)
    expected = {0: 2e-3, 2: 2e-3 * (0.02 + 0.98 * (1 + 0.5**0.5) / 2), 4: 2e-3 * (0.02 + 0.98 * 0.5),
                8: 4e-5, 24: 4e-5}
    for step, rate in expected.items():
        assert optimizers.learning_rate_at(opt, step) == pytest.approx(rate, rel=1e-6), step
    held = optimizers.from_config({"name": "adam", "learning_rate": 2e-3, "decay_steps": 8, "final_fraction": 1.0})
    assert optimizers.learning_rate_at(held, 5) == pytest.approx(2e-3)


def test_warmup_then_inverse_square_root_decay():
    opt = optimizers.from_config({"name": "adam", "learning_rate": 1e-3, "warmup_steps": 4})
    # step s (from 0) applies 1e-3 · min((s + 1) / 4, sqrt(4 / (s + 1))): up for 4 steps, then down
    for step, rate in {0: 2.5e-4, 3: 1e-3, 15: 5e-4}.items():
        assert optimizers.learning_rate_at(opt, step) == pytest.approx(rate, rel=1e-6), step


def test_global_clipnorm_clips_all_gradients_together_as_the_former_clipnorm_key_did():
    grads = [keras.ops.convert_to_tensor([3.0, 0.0]), keras.ops.convert_to_tensor([0.0, 4.0])]  # norm 5
    for key in ("global_clipnorm", "clipnorm"):  # "clipnorm": specs saved before the key was renamed
        opt = optimizers.from_config({"name": "sgd", "learning_rate": 1.0, key: 1.0})
        variables = [keras.Variable([0.0, 0.0]), keras.Variable([0.0, 0.0])]
        opt.apply(grads, variables)
        # one norm over both (equation 4's trust region), not each gradient clipped to norm 1 alone
        np.testing.assert_allclose([v.numpy() for v in variables], [[-0.6, 0.0], [0.0, -0.8]], rtol=1e-6)
    with pytest.raises(ValueError, match="got both"):
        optimizers.from_config({"name": "adam", "clipnorm": 1.0, "global_clipnorm": 1.0})
    assert optimizers.without_clipping({"name": "adam", "clipnorm": 1.0}) == {"name": "adam"}
    assert optimizers.without_clipping(optimizers.PAPER_RECIPE) == {"name": "nesterov", "learning_rate": 1.0,
                                                                    "momentum": 0.99}


@pytest.mark.parametrize("spec, message", [
    ({"decay_steps": 0}, "decay_steps must be a whole number of steps >= 1, got 0"),
    ({"decay_steps": 2.5}, "decay_steps must be a whole number of steps >= 1, got 2.5"),
    ({"decay_steps": 10, "final_fraction": 1.5}, "final_fraction must be a number from 0 to 1, got 1.5"),
    ({"decay_steps": 10, "warmup_steps": 5}, "warmup_steps \\(5\\) or decay_steps \\(10\\), not both"),
])
def test_bad_decay_is_one_clear_error(spec, message):
    with pytest.raises(ValueError, match=message):
        optimizers.from_config({"name": "adam", "learning_rate": 1e-3, **spec})
