"""Generating text from a language model, one token at a time through `decode_step`. A part of
`LanguageModel` (zoo.models.base), which mixes it in."""

import numpy as np


class Generation:
    """`LanguageModel.generate`, on the model's `decode_step` and vocabulary."""

    def generate(self, prompt, max_length=20, temperature=1.0, top_k=None, seed=None):
        """Continue `prompt` (a string, or a list of ids) up to `max_length` new tokens.

        `temperature=0` is greedy decoding; `top_k` samples among the k most likely tokens.
        Stops early at `</s>`. Returns a string for a string prompt, else a list of ids.
        """
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}.")
        if top_k is not None and not 1 <= top_k <= self.vocabulary_size:
            raise ValueError(f"top_k must be in [1, {self.vocabulary_size}], got {top_k}.")
        as_text = isinstance(prompt, str)
        if as_text:
            ids = self.require_vocabulary().encode(prompt, add_eos=False)
        else:
            ids = [int(i) for i in self.check_ids(prompt).reshape(-1)]
        rng = np.random.default_rng(seed)
        state = None
        for token in ids:
            log_probs, state = self.decode_step([token], state)
        out = []
        eos = self.vocabulary.eos_id if self.vocabulary is not None else None
        for _ in range(max_length):
            lp = log_probs.numpy()[0].astype("float64")
            lp[:2] = -np.inf  # never emit <pad> or <s>
            if temperature == 0:
                token = int(np.argmax(lp))
            else:
                lp = lp / temperature
                if top_k is not None:
                    cut = np.partition(lp, -top_k)[-top_k]
                    lp[lp < cut] = -np.inf
                p = np.exp(lp - lp.max())
                token = int(rng.choice(len(p), p=p / p.sum()))
            out.append(token)
            if token == eos:
                break
            log_probs, state = self.decode_step([token], state)
        if as_text:
            return self.vocabulary.decode(ids + out)
        return ids + out
