"""`zoo score`: the log-probability of each word (or token) of texts."""

from zoo.tools.cli.loading import load_model


def add_parser(subparsers):
    s = subparsers.add_parser("score", help="per-token log-probabilities of texts")
    s.add_argument("directory")
    s.add_argument("text", nargs="+")
    s.set_defaults(func=run)


def run(args):
    model = load_model(args.directory)
    tokenizer = model.require_tokenizer()
    for text in args.text:  # every text checked before any is scored or printed
        if not text.strip():
            raise ValueError("Cannot score an empty text; give at least one word.")
    for text, scores in zip(args.text, model.score(args.text)):  # one call: the texts run in batches
        if getattr(tokenizer, "kind", "word") == "subword":  # one score per word of the text
            words = tokenizer.normalize(text).split() + ["</s>"]
        else:  # one per token: a word vocabulary shows <unk> where a word is unknown
            words = [tokenizer.tokens[i] for i in tokenizer.encode(text)[1:]]
        print(f"{sum(scores):.4f}\t" + " ".join(f"{w}:{s:.3f}" for w, s in zip(words, scores)))
