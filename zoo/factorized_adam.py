"""Adam with a factorised second moment for the experts (Shazeer et al. 2017, Appendix D).

Adam keeps two extra tensors the size of every parameter (first and second moments), which
triples the memory of the expert weights of a large mixture-of-experts layer. Appendix D removes
both costs for the expert matrices:

* no first moment (β1 = 0): the update uses the current gradient directly;
* the second-moment matrix of an r×c weight matrix is not stored. Instead the optimiser keeps a
  *row vector* (r entries: for each row, the exponential average over steps of the mean over the
  columns of g²) and a *column vector* (c entries: for each column, the exponential average of the
  mean over the rows of g²), and estimates the second moment as their outer product divided by a
  normaliser.

Normalisation. With R the row vector and C the column vector (both averages of g², not sums):

    v̂[i, j] = R[i] · C[j] / mean(R)

``mean(R)`` equals ``mean(C)`` (both are the running mean of all of g²), so "divided by the
average of either of them", as the paper puts it, is the same number. The estimate is exact for a
rank-1 squared gradient: if g²[i, j] = a[i] · b[j], then R[i] = a[i] · mean(b), C[j] = mean(a) ·
b[j], mean(R) = mean(a) · mean(b), so R[i] · C[j] / mean(R) = a[i] · b[j]. When g² is zero
everywhere (mean(R) = 0), the estimate is 0 rather than NaN.

Bias correction. R and C start at zero and are exponential averages with rate ``factored_beta_2``,
so both are Adam-style corrected, each divided by (1 − β2^t). Since mean(R) is corrected by the
same factor, correcting both vectors is the same as dividing the estimate once by (1 − β2^t):

    v̂_t = R_t ⊗ C_t / mean(R_t) / (1 − β2^t)
    w  ← w − lr · g / (sqrt(v̂_t) + ε)

ε is added to sqrt of the *bias-corrected* estimate (Algorithm 1 of Kingma & Ba). Keras's
``Adam``, used unchanged here for the non-factored variables, instead uses the "ε-hat" form
(lr · sqrt(1 − β2^t) / (1 − β1^t) · m / (sqrt(v) + ε)); the two differ only in the size of ε
relative to sqrt(v̂).

Which variables are factored. A variable of rank ≥ 2 is treated as a stack of matrices over its
last two axes: the MoE layer stores the weights of all experts as ``[num_experts, rows, cols]``,
and the optimiser keeps ``[num_experts, rows]`` and ``[num_experts, cols]`` state for it, i.e.
num_experts · (rows + cols) floats instead of Adam's 2 · num_experts · rows · cols. By default a
variable is factored when its layer marked it as its experts' weight matrices
(``zoo.layers.moe_dispatch.mark_expert_matrix``, as ``SparseMoE`` does for its two kernels), whatever
the layer or the variable is called; pass ``is_factored`` (a callable variable → bool) to choose
otherwise. The choice is made once, in
``build``, on the Keras variables. Every other variable gets ordinary, bias-corrected Adam with
``beta_1``, ``beta_2`` and ``epsilon`` (numerically the same as ``keras.optimizers.Adam``).

Sparse gradients. ``tf.IndexedSlices`` gradients (from embedding look-ups) are converted to dense
tensors (slices of a repeated index summed) before the update, and before clipping when
``clipnorm``/``global_clipnorm``/``clipvalue`` is set, at the cost of a dense temporary the size of
the variable. Like Keras's ``Adam``, every row's moments then decay at every step. With distinct
indices the result equals ``keras.optimizers.Adam`` fed the same IndexedSlices; when an index
repeats within one gradient, Keras's ``Adam`` (and its clipping) squares each slice before summing
(Σ g_k² instead of (Σ g_k)²), while this optimiser follows the dense gradient.

Distribution. The update is written as ``update_step(gradient, variable, learning_rate)``; under
``tf.distribute`` strategies Keras's TensorFlow optimiser all-reduces the gradients first and
calls it inside the per-variable update context, so each replica applies the same all-reduced
gradient to its copy of the (mirrored) state.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import keras
import numpy as np
from keras import ops

from zoo import compat
from zoo.layers.moe_dispatch import is_expert_matrix

try:  # the TensorFlow backend only: IndexedSlices gradients
    import tensorflow as _tf
except ImportError:  # pragma: no cover
    _tf = None

if TYPE_CHECKING:
    import tensorflow as tf


def _densify(gradient):
    if _tf is not None and isinstance(gradient, _tf.IndexedSlices):
        return _tf.convert_to_tensor(gradient)  # sums the slices of repeated indices
    return gradient


def default_is_factored(variable):
    """True for the experts' weight matrices, as their layer marked them
    (``zoo.layers.moe_dispatch.is_expert_matrix``). Appendix D factors every weight *matrix* of an
    expert; a stacked bias such as ``expert_bias_in`` ``[experts, hidden]`` is one vector per
    expert, so it is not marked and keeps ordinary Adam.
    """
    return is_expert_matrix(variable) and len(variable.shape) >= 2


def factored_second_moment(row, col):
    """The Appendix D estimate of a second-moment matrix from its row and column averages.

    ``row`` has shape ``[..., rows]`` (the mean of g² over the columns), ``col`` has shape
    ``[..., cols]`` (the mean over the rows); the result ``[..., rows, cols]`` is
    ``row[i] * col[j] / mean(row)``, exact when g² is rank 1, and 0 where ``mean(row)`` is 0.
    """
    outer = ops.multiply(ops.expand_dims(row, -1), ops.expand_dims(col, -2))
    norm = ops.expand_dims(ops.mean(row, axis=-1, keepdims=True), -1)
    return ops.divide_no_nan(outer, norm)


def _check_rate(name, value):
    if callable(value):
        raise ValueError(f"`{name}` must be a number in [0, 1); got a callable {value!r}.")
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"`{name}` must be a number in [0, 1); got {value!r}.") from None
    if not (0.0 <= value < 1.0):
        raise ValueError(f"`{name}` must be in [0, 1); got {value}.")
    return value


@keras.saving.register_keras_serializable(package="zoo")
class FactorizedAdam(keras.optimizers.Optimizer):
    """Adam for ordinary variables, β1 = 0 and a factorised second moment for expert matrices.

    Args:
        learning_rate: a non-negative float, a ``LearningRateSchedule`` or a callable.
        beta_1: first-moment decay of the non-factored (ordinary Adam) variables, in [0, 1).
        beta_2: second-moment decay of the non-factored variables, in [0, 1).
        epsilon: added to the square root of the second moment, > 0.
        factored_beta_2: decay of the row and column averages of the factored variables, in
            [0, 1); defaults to ``beta_2``.
        is_factored: a callable ``variable -> bool`` choosing the factored variables (evaluated
            once, in ``build``, on the Keras variables); ``None`` means
            :func:`default_is_factored`. It must have rank ≥ 2 for a variable it selects.
        **kwargs: the base optimiser's arguments (``clipnorm``, ``global_clipnorm``,
            ``clipvalue``, ``weight_decay``, ``use_ema``, ``gradient_accumulation_steps``,
            ``loss_scale_factor``, ``name``, ...).

    See the module docstring for the exact update, normalisation and bias correction.

    Example: four experts' 8×16 matrices stacked in one variable keep 4·(8 + 16) numbers of
    state instead of Adam's 2·4·8·16; a first step moves every weight by the learning rate.

    >>> from zoo import FactorizedAdam
    >>> experts = keras.Variable(np.ones((4, 8, 16), "float32"))
    >>> bias = keras.Variable(np.zeros((16,), "float32"))
    >>> optimizer = FactorizedAdam(learning_rate=0.01, is_factored=lambda v: len(v.shape) == 3)
    >>> optimizer.build([experts, bias])
    >>> optimizer.uses_factored_state(experts), optimizer.uses_factored_state(bias)
    (True, False)
    >>> optimizer.apply([np.ones((4, 8, 16), "float32"), np.ones((16,), "float32")], [experts, bias])
    >>> round(float(experts[0, 0, 0]), 4), round(float(bias[0]), 4)
    (0.99, -0.01)
    """

    def __init__(
        self,
        learning_rate: float | keras.optimizers.schedules.LearningRateSchedule | Callable[[], float] = 1e-3,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-7,
        factored_beta_2: float | None = None,
        is_factored: Callable[[keras.Variable], bool] | None = None,
        name: str | None = None,
        **kwargs,
    ):
        if isinstance(learning_rate, (int, float, np.integer, np.floating)) and not isinstance(
            learning_rate, bool
        ):
            learning_rate = float(learning_rate)
            if not learning_rate >= 0.0:  # also rejects NaN
                raise ValueError(f"`learning_rate` must be >= 0; got {learning_rate}.")
        beta_1 = _check_rate("beta_1", beta_1)
        beta_2 = _check_rate("beta_2", beta_2)
        factored_beta_2 = beta_2 if factored_beta_2 is None else factored_beta_2
        factored_beta_2 = _check_rate("factored_beta_2", factored_beta_2)
        try:
            epsilon = float(epsilon)
        except (TypeError, ValueError):
            raise ValueError(f"`epsilon` must be a positive number; got {epsilon!r}.") from None
        if not (epsilon > 0.0 and math.isfinite(epsilon)):
            raise ValueError(f"`epsilon` must be a positive number; got {epsilon}.")
        if isinstance(is_factored, (str, dict)):  # from a serialised config
            is_factored = keras.saving.deserialize_keras_object(is_factored)
        if is_factored is not None and not callable(is_factored):
            raise ValueError(
                "`is_factored` must be None or a callable taking a variable and returning a "
                f"bool; got {is_factored!r}."
            )
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        # The strategy in scope at construction, which the slots are placed under (Keras's
        # TensorFlow optimiser records the same one for its own slots).
        self._slot_strategy = (
            _tf.distribute.get_strategy()
            if _tf is not None and keras.backend.backend() == "tensorflow"
            else None
        )
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.factored_beta_2 = factored_beta_2
        self.is_factored = is_factored

    # ------------------------------------------------------------------ state

    def _wants_factored(self, variable):
        predicate = self.is_factored or default_is_factored
        if not predicate(variable):
            return False
        if len(variable.shape) < 2:
            raise ValueError(
                f"`is_factored` selected variable {getattr(variable, 'path', variable.name)!r} "
                f"of shape {tuple(variable.shape)}; only variables of rank >= 2 can be factored."
            )
        return True

    def _add_slot(self, reference, shape, suffix):
        """A zero state variable of its own ``shape`` for ``reference``, placed with it under a
        ``tf.distribute`` strategy (as ``add_variable_from_reference`` places Adam's slots)."""
        name = f"{getattr(reference, 'path', reference.name).replace('/', '_')}_{suffix}"
        name = name.replace(":", "_")
        strategy = self._slot_strategy
        if strategy is not None and isinstance(reference, keras.Variable):
            with strategy.extended.colocate_vars_with(reference.value):
                return self.add_variable(shape=shape, dtype=reference.dtype, name=name)
        return self.add_variable(shape=shape, dtype=reference.dtype, name=name)

    def build(self, var_list: Sequence[keras.Variable]) -> None:
        """Creates the state: (momentum, velocity) per ordinary variable, (row, col) per factored."""
        if self.built:
            return
        super().build(var_list)
        momentums, velocities, rows, cols, factored = [], [], [], [], []
        for index, variable in enumerate(var_list):
            m = v = row = col = None
            if self._overwrite_variable_with_gradient(variable):
                pass  # the base optimiser assigns the gradient itself; no state
            elif self._wants_factored(variable):
                shape = tuple(variable.shape)
                factored.append(index)
                row = self._add_slot(variable, shape[:-1], "velocity_row")
                col = self._add_slot(variable, shape[:-2] + shape[-1:], "velocity_col")
            else:
                m = self.add_variable_from_reference(variable, "momentum")
                v = self.add_variable_from_reference(variable, "velocity")
            momentums.append(m)
            velocities.append(v)
            rows.append(row)
            cols.append(col)
        self._momentums = momentums
        self._velocities = velocities
        self._velocity_rows = rows
        self._velocity_cols = cols
        self._factored_indices = frozenset(factored)

    def uses_factored_state(self, variable: keras.Variable) -> bool:
        """Whether the (built) optimiser keeps factored row/column state for ``variable``."""
        return compat.optimizer_variable_index(self, variable) in self._factored_indices

    # ----------------------------------------------------------------- update

    def apply(self, grads: Sequence[tf.Tensor | tf.IndexedSlices],
              trainable_variables: Sequence[keras.Variable] | None = None) -> None:
        """Keras's ``apply``, with IndexedSlices gradients made dense first when clipping is on.

        Keras squares (or clips) each slice of an IndexedSlices separately, which is not the norm
        (or the values) of the actual gradient when an index repeats; so with ``clipnorm``,
        ``global_clipnorm`` or ``clipvalue`` set, the gradients reach the clipping dense."""
        if self.clipnorm or self.global_clipnorm or self.clipvalue:
            grads = [_densify(g) for g in grads]
        return super().apply(grads, trainable_variables)

    def update_step(self, gradient: tf.Tensor | tf.IndexedSlices, variable: keras.Variable,
                    learning_rate: float | tf.Tensor) -> None:
        """One update of ``variable`` with the (already all-reduced and clipped) gradient."""
        gradient = _densify(gradient)  # see "Sparse gradients" in the module docstring
        index = compat.optimizer_variable_index(self, variable)
        lr = ops.cast(learning_rate, variable.dtype)
        gradient = ops.cast(gradient, variable.dtype)
        step = ops.cast(self.iterations + 1, variable.dtype)
        if index in self._factored_indices:
            self._factored_update(index, gradient, variable, lr, step)
        else:
            self._adam_update(index, gradient, variable, lr, step)

    def _adam_update(self, index, gradient, variable, lr, step):
        m = self._momentums[index]
        v = self._velocities[index]
        beta_1_power = ops.power(ops.cast(self.beta_1, variable.dtype), step)
        beta_2_power = ops.power(ops.cast(self.beta_2, variable.dtype), step)
        alpha = lr * ops.sqrt(1 - beta_2_power) / (1 - beta_1_power)
        self.assign_add(m, ops.multiply(ops.subtract(gradient, m), 1 - self.beta_1))
        self.assign_add(v, ops.multiply(ops.subtract(ops.square(gradient), v), 1 - self.beta_2))
        self.assign_sub(
            variable, ops.divide(ops.multiply(m, alpha), ops.add(ops.sqrt(v), self.epsilon))
        )

    def _factored_update(self, index, gradient, variable, lr, step):
        row = self._velocity_rows[index]
        col = self._velocity_cols[index]
        decay = 1 - self.factored_beta_2
        squared = ops.square(gradient)
        self.assign_add(row, ops.multiply(ops.subtract(ops.mean(squared, axis=-1), row), decay))
        self.assign_add(col, ops.multiply(ops.subtract(ops.mean(squared, axis=-2), col), decay))
        correction = 1 - ops.power(ops.cast(self.factored_beta_2, variable.dtype), step)
        v_hat = ops.divide(factored_second_moment(row, col), correction)
        self.assign_sub(
            variable, ops.divide(ops.multiply(gradient, lr), ops.add(ops.sqrt(v_hat), self.epsilon))
        )

    # ----------------------------------------------------------------- config

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            {
                "beta_1": self.beta_1,
                "beta_2": self.beta_2,
                "epsilon": self.epsilon,
                "factored_beta_2": self.factored_beta_2,
                "is_factored": (
                    None
                    if self.is_factored is None
                    else keras.saving.serialize_keras_object(self.is_factored)
                ),
            }
        )
        return config


def is_counter_variable(optimizer, variable):
    """Whether ``variable`` (one of ``optimizer.variables``) is the iteration counter or the
    learning-rate variable that every Keras optimiser creates in its constructor, recognised by
    their public names, ``iteration`` and ``learning_rate``, under the optimiser's name scope
    (their path ends in ``<optimizer.name>/iteration``). State variables are named after the
    variable they belong to (``<variable path>_momentum`` …), so they never match."""
    name = variable.name
    if name not in ("iteration", "learning_rate"):
        return False
    path = getattr(variable, "path", name)
    return path == f"{optimizer.name}/{name}" or path.endswith(f"/{optimizer.name}/{name}")


def optimizer_state_bytes(optimizer):
    """Bytes of an optimiser's state: all its variables but the iteration counter and learning rate.

    Works for any Keras optimiser (slots, EMA averages, gradient accumulators all count). Sizes come
    from shapes and dtypes, so nothing is copied to the host.
    """
    total = 0
    for variable in optimizer.variables:
        if is_counter_variable(optimizer, variable):
            continue
        itemsize = np.dtype(keras.backend.standardize_dtype(variable.dtype)).itemsize
        total += int(np.prod(variable.shape, dtype=np.int64)) * itemsize
    return total
