"""The plot of a training-curve experiment: validation perplexity against minutes and against
updates, one line per variant."""

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


def variant_train(settings, variant):
    """The training settings of one variant: the experiment's, with the variant's own `train`
    entries (a batch size, a validation interval) in their place."""
    return dict(settings["train"], **(variant.get("train") or {}))


def plot_curves(result, path, title, keys=None, paper_lines=(), log_y=True, extra=None, y_max=None, styles=None,
                data_label="Penn Treebank"):
    """Validation perplexity against minutes (left) and against updates (right), one line per
    variant; a diverged variant ends in a cross; `paper_lines` are `(value, label)` drawn dashed;
    `y_max` cuts the axis above (early points of slow starters then leave the top); `styles` maps
    a variant to its `(colour, line style)` instead of the palette's next."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    units = result["units"]
    keys = keys or list(result["settings"]["variants"])
    many = len(keys) > 6  # the legend goes under the plots, two columns
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8 + (0.2 * ((len(keys) + 1) // 2) if many else 0)), sharey=True)
    for i, key in enumerate(keys):
        colour = COLOURS[i % len(COLOURS)]
        style = ("-", "--", ":")[i // len(COLOURS) % 3]  # past the palette: the same colours, dashed
        if styles and key in styles:
            colour, style = styles[key]
        u = units[key]
        xs_t = [c["seconds"] / 60 for c in u["curve"]]
        xs_s = [c["step"] for c in u["curve"]]
        ys = [c["val_perplexity"] for c in u["curve"]]
        label = u["label"] + (f" ({u['params'] / 1e6:.2f}M params)" if u.get("params") else "")
        if u.get("diverged"):
            label += f", diverged at step {u['diverged']['step']}"
        for ax, xs in ((axes[0], xs_t), (axes[1], xs_s)):
            ax.plot(xs, ys, marker="o" if ys else "x", markersize=3 if ys else 8, color=colour, linestyle=style,
                    label=label)
            if u.get("diverged"):
                x = u["diverged"]["seconds"] / 60 if ax is axes[0] else u["diverged"]["step"]
                if ys:
                    ax.plot([x], [ys[-1]], marker="x", markersize=10, color=colour)
                else:  # diverged before its first validation: a cross at the top of the axes
                    ax.plot([x], [0.97], marker="x", markersize=10, color=colour,
                            transform=ax.get_xaxis_transform(), clip_on=False)
    for j, (value, label) in enumerate(paper_lines):  # labels alternate right and left: close values stay legible
        for ax in axes:
            ax.axhline(value, linestyle="--", color="black", linewidth=1)
            ax.text(ax.get_xlim()[1 - j % 2], value, f" {label} ", va="bottom" if j % 2 else "top",
                    ha="right" if j % 2 == 0 else "left", fontsize=8,
                    bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "none", "pad": 1})
    cores = result.get("machine", {}).get("cores", "?")
    devices = sorted({units[k].get("device") or f"CPU ({cores} cores)" for k in keys})
    axes[0].set_xlabel(f"training time [minutes on {', '.join(devices)}, validation included]")
    batches = {(t["global_batch_size"], t["seq_len"]) for v in result["settings"]["variants"].values()
               for t in [variant_train(result["settings"], v)]}
    axes[1].set_xlabel(f"updates [steps of {'{} × {}'.format(*batches.pop())} tokens]"
                       if len(batches) == 1 and not result["settings"]["quick"] else "updates [steps]")
    axes[0].set_ylabel(f"validation perplexity ({data_label}, per word)")
    from matplotlib.ticker import FuncFormatter, LogLocator

    for ax in axes:
        if log_y:  # perplexities on a log axis, every tick written out (100, 150, 200, 300 ...)
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 7.0)))
            ax.yaxis.set_minor_locator(LogLocator(base=10, subs=(1.25, 1.75, 2.5, 6.0, 8.0, 9.0)))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:,.0f}"))
            ax.yaxis.set_minor_formatter(FuncFormatter(lambda y, _: ""))
        ax.grid(True, which="both", alpha=0.3)
        if y_max and not result["quick"]:
            ax.set_ylim(top=y_max)
    if extra:
        extra(fig, axes)
    fig.suptitle(title + (" (--quick smoke test: says nothing about the paper)" if result["quick"] else ""))
    if many:
        if axes[1].get_legend():  # one legend, under the plots
            axes[1].get_legend().remove()
        handles, labels = axes[1].get_legend_handles_labels()
        fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=2)
        fig.tight_layout(rect=(0, 0.035 * ((len(keys) + 1) // 2), 1, 1))
    else:
        axes[1].legend(fontsize=8, loc="best")
        fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
