"""The zoo-free sides of `zoo benchmark litert`, harness workers: `python litert_worker.py litert THREADS`
runs LiteRT exports with `zoo_litert` (no TensorFlow); `... saved-model THREADS` a SavedModel's `generate`
with TensorFlow alone, as a model server would (docs/benchmarks.md#litert).
"""

import collections
import contextlib
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import serve, timed, timed_for  # noqa: E402


class LiteRT:
    """Exports loaded by name into `zoo_litert` (what a user runs), and the read bandwidth."""

    def __init__(self, threads):
        self.threads, self.models = threads, {}

    def load(self, name, path):
        import zoo_litert

        model = self.models[name] = zoo_litert.load(path, num_threads=self.threads)
        interpreter = model._local.interpreter  # noqa: SLF001 - this thread's: which ops XNNPACK took (DELEGATE)
        return {"ops": dict(collections.Counter(op["op_name"] for op in interpreter._get_ops_details()))}

    def generate(self, name, prompt, new_tokens, min_seconds=0.0):
        """`zoo_litert`'s greedy generation after the ids `prompt`, batch 1, every token made, again
        and again for `min_seconds` (harness.timed_for)."""
        seconds, calls, ids = timed_for(min_seconds, self.models[name].generate, prompt, new_tokens,
                                        sampler="greedy", stop=None)
        return {"s": seconds, "tokens": calls * (len(ids) - len(prompt)), "ids": ids[len(prompt):]}

    def score(self, name, ids, min_seconds=0.0):
        seconds, calls, scores = timed_for(min_seconds, self.models[name].score, ids)
        return {"s": seconds, "tokens": calls * (len(ids) - 1), "sum": float(scores[0].sum())}

    def read_bandwidth(self, mib, repeats=5):
        """One pass over a float32 buffer of `mib` MiB (far larger than L3), a slice per thread
        (numpy's sum, which lets go of the GIL): bytes read per second, the median of `repeats`."""
        data = np.ones(mib * 2**18, np.float32)
        parts = np.array_split(data, self.threads)
        with ThreadPoolExecutor(self.threads) as pool:
            list(pool.map(np.sum, parts))
            times = sorted(timed(lambda: list(pool.map(np.sum, parts)))[0] for _ in range(repeats))
        return {"gbs": data.nbytes / times[len(times) // 2] / 1e9, "mib": mib, "threads": self.threads}


class SavedModel:
    """A SavedModel's `generate` signature in a process with TensorFlow alone, greedy, batch 1."""

    def __init__(self, threads):
        import tensorflow as tf  # its logs quiet: harness.child_env

        tf.config.threading.set_intra_op_parallelism_threads(threads)
        with contextlib.suppress(ImportError):
            import tensorflow_text  # noqa: F401 - a subword export's tokenizer ops
        self.tf, self.loaded = tf, None

    def load(self, path):
        seconds, self.loaded = timed(self.tf.saved_model.load, path)
        return {"load_s": seconds}

    def generate(self, text, new_tokens, min_seconds=0.0):
        from harness import generate_request

        def request():
            out = generate_request(self.loaded, [text], new_tokens)
            return int(out["lengths"].numpy()[0]), out["text"].numpy()[0].decode()

        seconds, calls, (made, text) = timed_for(min_seconds, request)
        return {"s": seconds, "tokens": calls * made, "text": text}


if __name__ == "__main__":
    side = {"litert": LiteRT, "saved-model": SavedModel}[sys.argv[1]](int(sys.argv[2]))
    serve(side, {"ready": True, "pid": os.getpid()})
