"""What the training loop does around its steps, one piece each, as Orbit's actions are composed by
its controller: the progress line and its TensorBoard scalars (`ProgressLog`, `Summaries`) and the
time budget every worker agrees on (`TimeBudget`). Validation, the best model and checkpoints are
`Trainer` methods, since they need the run's model and directories."""

import math
import time

import tensorflow as tf

from zoo.training.workers import any_worker


class Summaries:
    """TensorBoard scalars in `log_dir`, written by the chief only (a no-op on other workers)."""

    def __init__(self, log_dir, chief):
        self.writer = tf.summary.create_file_writer(log_dir) if chief else None

    def scalars(self, step, values):
        """Writes `{name: value}` at `step`, in order."""
        if self.writer is None:
            return
        with self.writer.as_default(step=step):
            for name, value in values.items():
                tf.summary.scalar(name, value)

    def flush(self):
        if self.writer is not None:
            self.writer.flush()


class TimeBudget:
    """Whether a run's `max_minutes` (None: no budget) have passed since it began. In a
    multi-worker job every worker gets the same answer (`any_worker`): a worker that stopped alone
    would leave the others waiting in a collective."""

    def __init__(self, max_minutes, strategy):
        self.max_minutes = max_minutes
        self.seconds = max_minutes * 60.0 if max_minutes else None
        self.agree = any_worker(strategy)
        self.began = time.monotonic()

    def elapsed(self):
        return time.monotonic() - self.began

    def spent(self):
        if self.seconds is None:
            return False
        return self.agree(self.elapsed() > self.seconds)


class ProgressLog:
    """The progress line, `step <s>[/<steps>]  loss …  perplexity … since validation  <rate> tokens/s`
    (this step's loss; the training perplexity since the last validation, or since this process
    began training), and the same
    figures as TensorBoard scalars. The rate counts the tokens trained since the previous line over
    the time since then, validations left out (`restart` after one)."""

    def __init__(self, model, schedule, tokens_per_step, log, summaries):
        self.model = model
        self.schedule = schedule
        self.tokens_per_step = tokens_per_step
        self.log = log
        self.summaries = summaries
        self.window_start, self.window_tokens = time.monotonic(), 0

    def count_step(self):
        self.window_tokens += self.tokens_per_step

    def restart(self):
        self.window_start = time.monotonic()

    def __call__(self, step, loss):
        now = time.monotonic()
        rate = self.window_tokens / max(now - self.window_start, 1e-9)
        metrics = metric_results(self.model)
        of = "" if self.schedule.until_budget else f"/{self.schedule.steps}"
        # the loss is this step's; the perplexity the mean since the last validation (or this
        # process began training): not exp(loss)
        self.log(f"step {step}{of}  loss {loss:.4f}  perplexity {metrics.get('perplexity', math.nan):.2f} since "
                 f"validation  {rate:,.0f} tokens/s")
        self.summaries.scalars(step, {"loss": loss, "tokens_per_second": rate, **metrics})
        self.window_start, self.window_tokens = now, 0


def metric_results(model):
    return {m.name: float(m.result()) for m in model.metrics if m.variables}


def reset_metrics(model):
    for m in model.metrics:
        m.reset_state()
