"""Activation communication, the evaluation: test accuracy of every protocol and the paired differences over
seeds, FLOPs ratios, the sanity checks, the tables and the figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.act_comm import method
from flows.act_comm.params import Params
from tasks import estimates as est
from tasks import stats
from tasks.contract import RunOutput
from tasks.records import Records
from tasks.report import fmt_estimate


def evaluate(params: Params, records: Records) -> RunOutput:
    protocols, nl_rows, grid = records["protocols"], records["nl"], records["validation_grid"]
    caps = {f"m{m}": m for m in params.message_lengths}
    names = {"plan": params.message_plan, "long": params.message_long}
    ac, b_alone, mismatched = (est.per_seed(protocols, key) for key in ("ac", "b_alone", "mismatched"))
    nl = {m: est.per_seed(nl_rows, "accuracy", message_length=m) for m in params.message_lengths}
    accuracy = {"b_alone": stats.summarize(b_alone), "full_info": est.summary(protocols, "full_info"),
                "ac": stats.summarize(ac), "mismatched": stats.summarize(mismatched),
                "ac_per_f": {f: est.summary(protocols, f"ac_{f}") for f in params.combines},
                "nl": {c: stats.summarize(nl[m]) for c, m in caps.items()}, "chance": 1.0 / params.n_countries}
    diff = {"ac_minus_b_alone": stats.paired_difference(ac, b_alone),
            "mismatched_minus_b_alone": stats.paired_difference(mismatched, b_alone),
            "ac_minus_nl": {**{c: stats.paired_difference(ac, nl[m]) for c, m in caps.items()},
                            **{n: stats.paired_difference(ac, nl[m]) for n, m in names.items()}},
            "mismatched_minus_nl": {**{c: stats.paired_difference(mismatched, nl[m]) for c, m in caps.items()},
                                    **{n: stats.paired_difference(mismatched, nl[m]) for n, m in names.items()}}}
    flops_ac, flops_full = est.per_seed(protocols, "flops_ac"), est.per_seed(protocols, "flops_full_info")
    flops_nl = {m: est.per_seed(nl_rows, "flops", message_length=m) for m in params.message_lengths}
    flops = {"ac_over_nl": stats.ratio_of_means(flops_ac, flops_nl[params.message_plan]),
             "full_info_over_nl": stats.ratio_of_means(flops_full, flops_nl[params.message_plan]),
             "ac_over_nl_long": stats.ratio_of_means(flops_ac, flops_nl[params.message_long]),
             "per_episode": {"ac": float(flops_ac.mean()), "b_alone": float(est.per_seed(protocols, "flops_b_alone").mean()),
                             "full_info": float(flops_full.mean()),
                             **{f"nl_{c}": float(flops_nl[m].mean()) for c, m in caps.items()}}}
    nl_detail = {c: {"names_country": float(est.per_seed(nl_rows, "names_country", message_length=m).mean()),
                     "message_tokens": float(est.per_seed(nl_rows, "message_tokens", message_length=m).mean())}
                 for c, m in caps.items()}
    # the model configuration (and its FLOP-counter check) of the run's first seed, as the setup describes one
    first = protocols.set_index("seed").loc[records.seeds[0]]
    config = method.gpt_config(params, int(first["vocab_size"]))
    chosen = protocols.sort_values("seed")
    metrics = {
        "accuracy": accuracy, "diff": diff, "flops": flops, "nl_messages": nl_detail,
        "chosen": {"k": [int(k) for k in chosen["k"]], "j": [int(j) for j in chosen["j"]],
                   "f_is_replace": [int(f == "replace") for f in chosen["f"]]},
        "sanity": {"hook_identity_max_abs": float(protocols["hook_identity_error"].max()),
                   "dense_flops_rel_error": float(first["dense_flops_rel_error"])},
        "timings": {"train_cpu_s_per_seed": float(est.per_seed(protocols, "train_cpu_s").mean()),
                    "ac_wall_s_test_batch": float(est.per_seed(protocols, "ac_s").mean()),
                    "nl_wall_s_test_batch": float(est.per_seed(protocols, "nl_s").mean())},
    }
    per_seed = _per_seed_table(params, chosen, nl_rows)
    plot = _plot_table(accuracy, flops["per_episode"], params)
    return RunOutput(metrics=metrics, tables={"plot": plot, "per_seed": per_seed, "validation_grid": grid},
                     figure=_figure(plot, grid, params), setup=_setup(params, config, metrics),
                     notes=_measured(params, metrics, per_seed))


def _per_seed_table(p: Params, protocols: pd.DataFrame, nl: pd.DataFrame) -> pd.DataFrame:
    """One row per seed: the chosen (k, j, f), every protocol's accuracy and A's first test message per cap."""
    message = nl.set_index(["seed", "message_length"])
    columns = ["seed", "k", "j", "f", "b_alone", "full_info", "ac", "mismatched", *[f"ac_{f}" for f in p.combines]]
    return pd.DataFrame([{**{c: r[c] for c in columns},
                          **{f"nl_m{m}": message.loc[(r["seed"], m), "accuracy"] for m in p.message_lengths},
                          **{f"nl_m{m}_example": message.loc[(r["seed"], m), "example"] for m in p.message_lengths}}
                         for r in protocols.to_dict("records")])


def _plot_table(accuracy: dict, flops: dict, p: Params) -> pd.DataFrame:
    """Test accuracy (mean over seeds, 95% CI) against FLOPs per episode, one row per protocol."""
    entries = [("B alone", accuracy["b_alone"], flops["b_alone"]),
               ("AC, mismatched A (control)", accuracy["mismatched"], flops["ac"]),
               ("AC (best k, j, f on validation)", accuracy["ac"], flops["ac"]),
               *[(f"NL, {m}-token cap", accuracy["nl"][f"m{m}"], flops[f"nl_m{m}"]) for m in p.message_lengths],
               ("full information (upper bound)", accuracy["full_info"], flops["full_info"])]
    return pd.DataFrame([{"x": x, "y": s["mean"], "y_low": s["ci_low"], "y_high": s["ci_high"], "series": name}
                         for name, s, x in entries])


def _figure(plot: pd.DataFrame, grid: pd.DataFrame, p: Params):
    fig, axes = plt.subplots(1, 1 + len(p.combines), figsize=(6 + 3.2 * len(p.combines), 4.4),
                             gridspec_kw={"width_ratios": [2.2] + [1] * len(p.combines)})
    ax = axes[0]
    for i, r in plot.iterrows():
        control = "control" in r["series"]                       # same FLOPs as AC: a hollow square beside it
        ax.errorbar(r["x"] / 1e6, r["y"], yerr=[[r["y"] - r["y_low"]], [r["y_high"] - r["y"]]],
                    fmt="s" if control else "o", mfc="none" if control else None, ms=9 if control else 6,
                    color=f"C{i}", capsize=3, label=r["series"])
    ax.axhline(1.0 / p.n_countries, color="grey", ls=":", lw=1, label="chance")
    ax.set(xlabel="MFLOPs per episode (analytic)", ylabel="test accuracy (mean over seeds, 95% CI)",
           title="Countries game on the stand-in", ylim=(0, 1.05))
    ax.legend(fontsize=7, loc="best")
    for ax, f in zip(axes[1:], p.combines):
        mean = grid[grid["f"] == f].groupby(["k", "j"])["val_accuracy"].mean().unstack()
        image = ax.imshow(mean.to_numpy(), vmin=0, vmax=1, cmap="viridis", origin="lower")
        ax.set(xlabel="B's layer j", ylabel="A's layer k", title=f"f = {f} (validation)",
               xticks=range(p.n_layer), yticks=range(p.n_layer))
        for (k, j), v in np.ndenumerate(mean.to_numpy()):
            ax.text(j, k, f"{v:.2f}", ha="center", va="center", fontsize=7, color="w" if v < 0.5 else "k")
    fig.colorbar(image, ax=axes[1:].tolist(), shrink=0.8)
    return fig


def _setup(p: Params, c, m: dict) -> str:
    n_params = sum(x for x in (c.vocab_size * c.d_model, c.context * c.d_model, c.n_layer * 12 * c.d_model ** 2))
    return (
        f"**World** (fresh per seed): {p.n_people} people, {p.n_landmarks} landmarks in {p.n_cities} cities in "
        f"{p.n_countries} countries (chance = {1 / p.n_countries:.2f}). **Model**: one word-level GPT ({p.n_layer} "
        f"blocks, {p.n_head} heads, d = {p.d_model}, ~{n_params / 1e3:.0f}k weights, vocabulary {c.vocab_size}) "
        f"trained from scratch per seed ({p.epochs} epochs of {p.n_stories} stories 'P is at L . L is in C . C is in "
        f"K .', {p.n_qa} QA lines '<context> which country is P in ? K' whose context is a random non-empty subset "
        f"of the story's three sentences, and each world fact x {p.fact_repeats}; AdamW lr {p.lr}, batch "
        f"{p.batch_size}), cached in data/ by its training key; it plays A and B. **Game**: A reads 'P is at L .', "
        f"B reads 'which country is P in ?'; B's answer is its most likely country token after '?'. "
        f"**Protocols**: B alone; full information (one model reads A's prompt then B's question); NL "
        f"communication (A greedily decodes up to {', '.join(map(str, p.message_lengths))} tokens, B reads message + "
        f"question); AC (A's last-token residual after block k, combined into B's last token after block j by f in "
        f"{{{', '.join(p.combines)}}}; the {p.n_layer}x{p.n_layer}x{len(p.combines)} grid of (k, j, f) scored on "
        f"{p.n_val} validation episodes, the best used on {p.n_test} test episodes); negative control: AC fed "
        f"another test episode's A activation (a derangement). **FLOPs**: analytic matmul FLOPs per episode of what "
        f"each protocol runs (see method.forward_flops). {p.seeds} seeds; intervals are 95% Student-t intervals over "
        f"seeds of paired differences."
    )


def _measured(p: Params, m: dict, per_seed: pd.DataFrame) -> str:
    """The measured numbers behind the claims, for the notes (how to read them is in NOTES.md)."""
    a, d, fl = m["accuracy"], m["diff"], m["flops"]
    chosen = ", ".join(f"seed {r.seed}: k={r.k}, j={r.j}, f={r.f}" for r in per_seed.itertuples())
    examples = "; ".join(f"{mm} tokens: '{per_seed[f'nl_m{mm}_example'].iloc[0]}'" for mm in p.message_lengths)
    nl = ", ".join(f"{mm}-token cap {fmt_estimate(a['nl'][f'm{mm}'])} (message names the country in "
                   f"{m['nl_messages'][f'm{mm}']['names_country']:.0%})" for mm in p.message_lengths)
    return (
        f"**Measured. Accuracy (test, mean over seeds [95% CI]).** B alone {fmt_estimate(a['b_alone'])}; AC {fmt_estimate(a['ac'])}; AC with a "
        f"mismatched A {fmt_estimate(a['mismatched'])}; full information {fmt_estimate(a['full_info'])}; NL: {nl}. AC per f (each at "
        "its best (k, j) on validation): " + ", ".join(f"{f} {fmt_estimate(s)}" for f, s in a["ac_per_f"].items())
        + f". Chosen on validation: {chosen}.\n\n"
        f"**Differences.** AC - B alone {fmt_estimate(d['ac_minus_b_alone'])} (control, mismatched - B alone "
        f"{fmt_estimate(d['mismatched_minus_b_alone'])}); AC - NL: "
        + ", ".join(f"{mm}-token cap {fmt_estimate(d['ac_minus_nl'][f'm{mm}'])}" for mm in p.message_lengths)
        + f". A's first test message (seed {per_seed['seed'].iloc[0]}) at each cap: {examples}.\n\n"
        f"**FLOPs per episode.** AC {fl['per_episode']['ac'] / 1e6:.2f} M, B alone {fl['per_episode']['b_alone'] / 1e6:.2f} M, "
        f"full information {fl['per_episode']['full_info'] / 1e6:.2f} M, NL "
        + ", ".join(f"{mm}-token cap {fl['per_episode'][f'nl_m{mm}'] / 1e6:.2f} M" for mm in p.message_lengths)
        + f". AC / NL (8-token cap) = {fmt_estimate(fl['ac_over_nl'], 'ratio')}, AC / NL (16) = "
        f"{fmt_estimate(fl['ac_over_nl_long'], 'ratio')}; full information / NL = {fmt_estimate(fl['full_info_over_nl'], 'ratio')}. "
        + f"NL (8-token cap) costs {1 / fl['ac_over_nl']['ratio']:.1f}x AC here. Measured wall time on the whole test "
        f"batch: AC {m['timings']['ac_wall_s_test_batch']:.3f} s, NL (8-token cap) {m['timings']['nl_wall_s_test_batch']:.3f} s "
        "(shared machine; reported, not claimed)."
    )
