"""The TensorFlow-free sides of `zoo benchmark litert`, each a harness worker (docs/benchmarks.md#litert).

`python litert_worker.py litert THREADS` runs LiteRT exports with `ai_edge_litert` and numpy alone;
`python litert_worker.py saved-model THREADS` calls a SavedModel's `generate` with TensorFlow alone
(no zoo), as a model server would. Standalone, as harness.py says.
"""

import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import serve, timed  # noqa: E402


class LiteRT:
    """Exports loaded by name; a greedy loop of `decode` calls, a `prefill`, and the read bandwidth."""

    def __init__(self, threads):
        self.threads, self.models = threads, {}

    def load(self, name, path):
        from ai_edge_litert.interpreter import Interpreter

        interpreter = Interpreter(model_path=os.path.join(path, "model.tflite"), num_threads=self.threads)
        with open(os.path.join(path, "zoo_litert.json")) as f:
            state_size = json.load(f)["state"]["size"]
        self.models[name] = (interpreter.get_signature_runner("prefill"), interpreter.get_signature_runner("decode"),
                             state_size, interpreter)
        ops = {}
        for op in interpreter._get_ops_details():  # noqa: SLF001 - which ops XNNPACK took (DELEGATE)
            ops[op["op_name"]] = ops.get(op["op_name"], 0) + 1
        return {"ops": ops}

    def generate(self, name, prompt, new_tokens):
        """`new_tokens` greedy tokens after `prompt` (ids, `<s>` first), batch 1: the prompt's `prefill`
        then one `decode` call a token, as zoo_litert's loop makes them."""
        prefill, decode, _, _ = self.models[name]

        def run():
            out = prefill(token_ids=np.asarray([prompt], np.int32))
            made, state = [], out["state"]
            for _ in range(new_tokens):
                made.append(int(np.argmax(out["log_probs"][0])))
                out = decode(token_ids=np.asarray(made[-1:], np.int32), state=state)
                state = out["state"]
            return made

        seconds, made = timed(run)
        return {"s": seconds, "tokens": new_tokens, "ids": made}

    def score(self, name, ids):
        seconds, out = timed(self.models[name][0], token_ids=np.asarray([ids], np.int32))
        return {"s": seconds, "tokens": len(ids) - 1, "sum": float(out["token_log_probs"].sum())}

    def read_bandwidth(self, mib, repeats=5):
        """One pass over a float32 buffer of `mib` MiB (far larger than L3), a slice per thread
        (numpy's sum, which lets go of the GIL): bytes read per second, the median of `repeats`."""
        data = np.ones(mib * 2**18, np.float32)
        parts = np.array_split(data, self.threads)
        with ThreadPoolExecutor(self.threads) as pool:
            list(pool.map(np.sum, parts))
            times = sorted(timed(lambda: list(pool.map(np.sum, parts)))[0] for _ in range(repeats))
        return {"gbs": data.nbytes / times[len(times) // 2] / 1e9, "mib": mib, "threads": self.threads}

    def pid(self):
        return {"pid": os.getpid()}


class SavedModel:
    """A SavedModel's `generate` signature in a process with TensorFlow alone, greedy, batch 1."""

    def __init__(self, threads):
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(threads)
        try:
            import tensorflow_text  # noqa: F401 - a subword export's tokenizer ops
        except ImportError:
            pass
        self.tf, self.loaded = tf, None

    def load(self, path):
        seconds, self.loaded = timed(self.tf.saved_model.load, path)
        return {"load_s": seconds}

    def generate(self, text, new_tokens):
        from harness import generate_request

        start = time.perf_counter()
        out = generate_request(self.loaded, [text], new_tokens)
        made = int(out["lengths"].numpy()[0])
        return {"s": time.perf_counter() - start, "tokens": made, "text": out["text"].numpy()[0].decode()}


if __name__ == "__main__":
    side = {"litert": LiteRT, "saved-model": SavedModel}[sys.argv[1]](int(sys.argv[2]))
    serve(side, {"ready": True, "pid": os.getpid()})
