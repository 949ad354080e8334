"""`zoo convert fairseq CHECKPOINT --dictionary dict.txt --out DIR`: a fairseq convolutional
language model (fconv_lm) as a preset directory (`zoo.convert.fairseq`); torch is not needed."""


def add_parser(subparsers):
    s = subparsers.add_parser("convert", help="convert another framework's checkpoint into a preset directory")
    frameworks = s.add_subparsers(dest="framework", required=True)
    f = frameworks.add_parser("fairseq", help="a fairseq fconv_lm checkpoint (.pt, either torch format)")
    f.add_argument("checkpoint", help="the checkpoint (read without running anything it holds)")
    f.add_argument("--dictionary", required=True, help="its dict.txt")
    f.add_argument("--out", required=True, help="the preset directory to write (must not hold a preset)")
    f.set_defaults(func=run)


def run(args):
    from zoo.convert import fairseq

    model = fairseq.convert(args.checkpoint, args.dictionary, args.out)
    print(f"{args.out}: GCNN of {len(model.blocks)} blocks, {model.vocabulary_size:,} ids"
          f"{', 2018 adaptive softmax' if model.adaptive_softmax_2018 else ''}", flush=True)
