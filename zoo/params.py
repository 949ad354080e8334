"""Parameter counts from a config alone, without building (Table 1's models are large)."""

from zoo.layers.gated_conv import ACTIVATIONS


def gcnn_params(config):
    vocab, dim = config["vocabulary_size"], config.get("embedding_dim", 128)
    activation = config.get("activation", "glu")
    weight_norm = config.get("weight_norm", True)
    per_channel = 2 if weight_norm else 1  # bias, and g under weight normalisation
    total = vocab * dim
    for block in config["blocks"]:
        block_in = dim
        for k, width in block:
            channels = 2 * width if ACTIVATIONS[activation] else width
            total += k * dim * channels + per_channel * channels
            dim = width
        if dim != block_in:  # linear projection on the skip path
            total += block_in * dim + per_channel * dim
    moe = config.get("moe")
    if moe:
        total += len(moe.get("after_blocks", [])) * moe_params(dim_after(config, moe), moe)
    return total + head_params(vocab, dim, config.get("cutoffs"))


def dim_after(config, moe):
    """Width at the MoE's place (all MoE layers of a GCNN sit where widths agree)."""
    return config["blocks"][moe["after_blocks"][0]][-1][1]


def recurrent_params(config):
    vocab, dim = config["vocabulary_size"], config.get("embedding_dim", 128)
    gates = 4 if config.get("cell", "lstm") == "lstm" else 1
    total = vocab * dim
    for units in config["units"]:
        total += gates * (dim * units + units * units + units)
        dim = units
    return total + head_params(vocab, dim, config.get("cutoffs"))


def head_params(vocab, dim, cutoffs=None, factor=4):
    if not cutoffs:
        return dim * vocab + vocab
    head = cutoffs[0] + len(cutoffs)
    total = dim * head + head
    bounds = list(cutoffs) + [vocab]
    for i in range(len(cutoffs)):
        width = dim // int(factor ** (i + 1))
        total += dim * width + width * (bounds[i + 1] - bounds[i])
    return total


def moe_params(dim, spec):
    experts, hidden = spec["num_experts"], spec["hidden_units"]
    out = spec.get("output_units") or dim
    noisy = 2 if spec.get("noisy_gating", True) else 1
    total = experts * (dim * hidden + hidden + hidden * out + out)
    groups = spec.get("groups")
    if groups:
        return total + noisy * (dim * groups + dim * experts)  # primary [d, G], secondary [G, d, E/G]
    return total + noisy * dim * experts


def stack_params(config):
    vocab, dim = config["vocabulary_size"], config.get("embedding_dim", 512)
    total = vocab * dim
    for spec in config["layers"]:
        if spec["type"] == "lstm":
            units, proj = spec["units"], spec.get("projection")
            recurrent = proj or units
            total += 4 * (dim * units + recurrent * units + units) + (units * proj if proj else 0)
            dim = recurrent
        elif spec["type"] == "moe":
            total += moe_params(dim, spec)
            dim = spec.get("output_units") or dim
        else:
            widths = [dim] + list(spec.get("hidden_units", [])) + [dim]
            total += sum(a * b + b for a, b in zip(widths, widths[1:]))
    return total + head_params(vocab, dim, config.get("cutoffs"))


def count_params(class_name, config):
    if class_name == "GCNNLanguageModel":
        return gcnn_params(config)
    if class_name == "RecurrentLanguageModel":
        return recurrent_params(config)
    if class_name == "StackLanguageModel":
        return stack_params(config)
    raise ValueError(f"No parameter count for model class {class_name!r}.")
