"""Activation communication as a Prefect flow: one small GPT trained from scratch on a Countries-game world
plays agents A and B; AC (last-token grafting of A's layer-k residual into B's layer j through f) against
B alone, natural-language messages and full information, with FLOPs counted per protocol."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.act_comm import method
from flows.act_comm.params import SMOKE, Params
from tasks import stats
from tasks.contract import Claim, Control, Paper, RunContext, RunOutput, ci
from tasks.paper import over_seeds, paper_flow
from tasks.rows import by_seed

ON_STAND_IN = ("on the stand-in (one small GPT trained from scratch on a landmark -> city -> country world "
               "plays both agents; A is told 'P is at L .', B is asked 'which country is P in ?')")
MISMATCHED = "AC fed the activation of another episode's A (a derangement), same (k, j, f)"


def _beats_nl(cap: str, how: str) -> Claim:
    return Claim(
        id=f"ac_beats_nl_{cap}",
        text=("[AC] achieves up to 27% improvement over natural language communication: test accuracy of AC "
              f"(k, j, f chosen on validation) - accuracy of NL communication > 0 {ON_STAND_IN}; NL: A greedily "
              f"decodes a message {how}, B reads message + question"),
        source="abstract; plan claim check 2 (direction)", metric=f"diff.ac_minus_nl.{cap}.mean",
        comparison=">", threshold=0.0, kind="direction", role="claim", interval=ci(f"diff.ac_minus_nl.{cap}"),
        # a graft that carries nothing about this episode must not beat NL: otherwise AC's edge is NL's failure
        control=Control(name=f"{MISMATCHED} - NL", metric=f"diff.mismatched_minus_nl.{cap}.mean",
                        interval=ci(f"diff.mismatched_minus_nl.{cap}")))


PAPER = Paper(
    slug="act_comm",
    title="Communicating Activations Between Language Model Agents",
    method="Activation communication (AC): A's last-token layer-k activation combined into B's layer j by f",
    paper_class="C",
    source="abstracts-004.txt #9",
    official_code=None,
    claims=(
        Claim(id="ac_beats_b_alone",
              text=("[AC] scales up LMs on new tasks with zero additional parameters and data: test accuracy of AC "
                    f"(k, j, f chosen on validation) - accuracy of B alone > 0 {ON_STAND_IN}"),
              source="abstract; plan claim check 1 (direction)", metric="diff.ac_minus_b_alone.mean",
              comparison=">", threshold=0.0, kind="direction", role="claim", interval=ci("diff.ac_minus_b_alone"),
              control=Control(name=f"{MISMATCHED} - B alone", metric="diff.mismatched_minus_b_alone.mean",
                              interval=ci("diff.mismatched_minus_b_alone"))),
        _beats_nl("plan", "of at most 8 tokens (the plan's cap)"),
        _beats_nl("long", "of at most 16 tokens (room for A's whole 10-token sentence; added after a one-seed "
                          "development run showed the comparison hinges on the cap, the stricter reading)"),
        Claim(id="ac_flops_quarter_of_nl",
              text=("[AC] saves a substantial amount of compute over natural language communication ... with <1/4 "
                    "the compute: mean FLOPs of AC / mean FLOPs of NL communication (8-token cap) <= 0.25 "
                    f"{ON_STAND_IN}; analytic matmul FLOPs of what each protocol runs (A up to layer k and no "
                    "decoding for AC; A's prompt, its greedy decoding with a key/value cache and B reading message + "
                    "question for NL)"),
              source="abstract; plan claim check 3 (magnitude)", metric="flops.ac_over_nl.ratio",
              comparison="<=", threshold=0.25, kind="magnitude", role="claim", interval=ci("flops.ac_over_nl"),
              # one model reading both prompts at once communicates nothing; if it also came under 1/4 of NL, the
              # figure would measure how expensive NL is, not what AC saves
              control=Control(name="full information (B reads A's prompt + its question, one model) / NL",
                              metric="flops.full_info_over_nl.ratio", interval=ci("flops.full_info_over_nl"))),
        Claim(id="full_info_learned",
              text=("the stand-in learned its world: test accuracy with full information (B reads A's prompt "
                    "followed by its question) >= 0.9; without it no protocol can transmit anything"),
              source="ours (plan: full-info upper bound)", metric="accuracy.full_info.mean", comparison=">=",
              threshold=0.9, kind="magnitude", role="sanity", interval=ci("accuracy.full_info")),
        Claim(id="hook_write_back_is_identity",
              text=("reading every block's residual stream and writing it back unchanged leaves B's logits "
                    "unchanged (max abs difference over seeds < 1e-6): the grafting hook has no side effect"),
              source="ours", metric="sanity.hook_identity_max_abs", comparison="<", threshold=1e-6,
              kind="exact", role="sanity"),
        Claim(id="flops_match_torch_counter",
              text=("the analytic dense FLOPs of a full forward of B's question equal torch's FlopCounterMode "
                    "count (relative difference < 1e-12)"),
              source="ours", metric="sanity.dense_flops_rel_error", comparison="<", threshold=1e-12,
              kind="exact", role="sanity"),
    ),
    limitations=(
        "The stand-in is one 4-layer, 64-wide GPT trained for well under a minute on a synthetic Countries-game world; "
        "it plays both agents, so A and B share a residual space by construction and the paper's learned linear map "
        "between different models (its only learned part) is not needed or tested. It cannot show anything about "
        "pretrained LLMs: not the paper's reasoning benchmarks (GSM8k, Biographies, ...), not the Tip Sheets game, "
        "not its LLaMA-scale layer choice (k = j = 26) nor its +27% figure; in a tiny model, latent 'meaning' at a "
        "given layer may simply not exist, so a negative result here says little about LLMs. The natural-language "
        "baseline is one message from A (greedy, capped), not the multi-round debate of the paper, and B reads it "
        "only as well as its training text taught it to read statements before a question. Answers are read as "
        "the most likely of the countries (multiple choice), not free decoding. No official code exists; the "
        "protocol is written from the paper's description (last-token grafting, f in {replace, sum, mean}, FLOP "
        "accounting)."
    ),
)


@paper_flow(PAPER, Params, smoke=SMOKE)
def act_comm_flow(params: Params, ctx: RunContext) -> RunOutput:
    rows = over_seeds(method.run_seed, ctx.seeds, p=params, data_dir=str(ctx.data_dir), smoke=ctx.smoke)
    caps = {f"m{m}": m for m in params.message_lengths}
    names = {"plan": params.message_plan, "long": params.message_long}
    ac, b_alone, mismatched = (by_seed(rows, key) for key in ("ac", "b_alone", "mismatched"))
    nl = {m: by_seed(rows, "nl", m, "accuracy") for m in params.message_lengths}
    accuracy = {"b_alone": stats.summarize(b_alone), "full_info": stats.summarize(by_seed(rows, "full_info")),
                "ac": stats.summarize(ac), "mismatched": stats.summarize(mismatched),
                "ac_per_f": {f: stats.summarize(by_seed(rows, "ac_per_f", f)) for f in params.combines},
                "nl": {c: stats.summarize(nl[m]) for c, m in caps.items()}, "chance": 1.0 / params.n_countries}
    diff = {"ac_minus_b_alone": stats.paired_difference(ac, b_alone),
            "mismatched_minus_b_alone": stats.paired_difference(mismatched, b_alone),
            "ac_minus_nl": {**{c: stats.paired_difference(ac, nl[m]) for c, m in caps.items()},
                            **{n: stats.paired_difference(ac, nl[m]) for n, m in names.items()}},
            "mismatched_minus_nl": {**{c: stats.paired_difference(mismatched, nl[m]) for c, m in caps.items()},
                                    **{n: stats.paired_difference(mismatched, nl[m]) for n, m in names.items()}}}
    flops_ac, flops_full = by_seed(rows, "flops", "ac"), by_seed(rows, "flops", "full_info")
    flops_nl = {m: by_seed(rows, "nl", m, "flops") for m in params.message_lengths}
    flops = {"ac_over_nl": stats.ratio_of_means(flops_ac, flops_nl[params.message_plan]),
             "full_info_over_nl": stats.ratio_of_means(flops_full, flops_nl[params.message_plan]),
             "ac_over_nl_long": stats.ratio_of_means(flops_ac, flops_nl[params.message_long]),
             "per_episode": {"ac": float(flops_ac.mean()), "b_alone": float(by_seed(rows, "flops", "b_alone").mean()),
                             "full_info": float(flops_full.mean()),
                             **{f"nl_{c}": float(flops_nl[m].mean()) for c, m in caps.items()}}}
    nl_detail = {c: {"names_country": float(by_seed(rows, "nl", m, "names_country").mean()),
                     "message_tokens": float(by_seed(rows, "nl", m, "message_tokens").mean())}
                 for c, m in caps.items()}
    config = method.gpt_config(params, len(method.tokenizer_for(method.make_world(params, ctx.seeds[0]))))
    metrics = {
        "accuracy": accuracy, "diff": diff, "flops": flops, "nl_messages": nl_detail,
        "chosen": {"k": [int(r["chosen"][0]) for r in rows],
                   "j": [int(r["chosen"][1]) for r in rows],
                   "f_is_replace": [int(r["chosen"][2] == "replace") for r in rows]},
        "sanity": {"hook_identity_max_abs": float(max(r["hook_identity_error"] for r in rows)),
                   "dense_flops_rel_error": method.dense_flops_error(config, 7)},
        "timings": {"train_cpu_s_per_seed": float(by_seed(rows, "train_cpu_s").mean()),
                    "ac_wall_s_test_batch": float(by_seed(rows, "timings", "ac_s").mean()),
                    "nl_wall_s_test_batch": float(by_seed(rows, "timings", "nl_s").mean())},
    }
    per_seed = pd.DataFrame([{"seed": r["seed"], "k": r["chosen"][0], "j": r["chosen"][1], "f": r["chosen"][2],
                              "b_alone": r["b_alone"], "full_info": r["full_info"], "ac": r["ac"],
                              "mismatched": r["mismatched"], **{f"ac_{f}": v for f, v in r["ac_per_f"].items()},
                              **{f"nl_m{m}": r["nl"][m]["accuracy"] for m in params.message_lengths},
                              **{f"nl_m{m}_example": r["nl"][m]["example"] for m in params.message_lengths}}
                             for r in rows])
    grid = pd.DataFrame([{"seed": r["seed"], "k": k, "j": j, "f": f, "val_accuracy": acc}
                         for r in rows for (k, j, f), acc in r["val_grid"].items()])
    plot = _plot_table(accuracy, flops["per_episode"], params)
    return RunOutput(metrics=metrics, tables={"plot": plot, "per_seed": per_seed, "validation_grid": grid},
                     figure=_figure(plot, grid, params), setup=_setup(params, config, metrics),
                     notes=_notes(params, metrics, per_seed))


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
        f"each protocol runs (see method.forward_flops). {p.seeds} seeds; intervals are 95% bootstrap intervals over "
        f"seeds of paired differences."
    )


def _fmt(s: dict, key: str = "mean") -> str:
    return f"{s[key]:.3f} [{s['ci_low']:.3f}, {s['ci_high']:.3f}]"


def _notes(p: Params, m: dict, per_seed: pd.DataFrame) -> str:
    a, d, fl = m["accuracy"], m["diff"], m["flops"]
    chosen = ", ".join(f"seed {r.seed}: k={r.k}, j={r.j}, f={r.f}" for r in per_seed.itertuples())
    examples = "; ".join(f"{mm} tokens: '{per_seed[f'nl_m{mm}_example'].iloc[0]}'" for mm in p.message_lengths)
    nl = ", ".join(f"{mm}-token cap {_fmt(a['nl'][f'm{mm}'])} (message names the country in "
                   f"{m['nl_messages'][f'm{mm}']['names_country']:.0%})" for mm in p.message_lengths)
    return (
        f"**Accuracy (test, mean over seeds [95% CI]).** B alone {_fmt(a['b_alone'])}; AC {_fmt(a['ac'])}; AC with a "
        f"mismatched A {_fmt(a['mismatched'])}; full information {_fmt(a['full_info'])}; NL: {nl}. AC per f (each at "
        "its best (k, j) on validation): " + ", ".join(f"{f} {_fmt(s)}" for f, s in a["ac_per_f"].items())
        + f". Chosen on validation: {chosen}.\n\n"
        f"**Differences.** AC - B alone {_fmt(d['ac_minus_b_alone'])} (control, mismatched - B alone "
        f"{_fmt(d['mismatched_minus_b_alone'])}); AC - NL: "
        + ", ".join(f"{mm}-token cap {_fmt(d['ac_minus_nl'][f'm{mm}'])}" for mm in p.message_lengths)
        + f". A's first test message (seed {per_seed['seed'].iloc[0]}) at each cap: {examples}. A continues its prompt "
        "with what its training text puts after 'P is at L .'; the messages above show where each cap cuts it, and "
        "NL accuracy tracks whether the cut message still names the country (or a city B can map to one).\n\n"
        f"**FLOPs per episode.** AC {fl['per_episode']['ac'] / 1e6:.2f} M, B alone {fl['per_episode']['b_alone'] / 1e6:.2f} M, "
        f"full information {fl['per_episode']['full_info'] / 1e6:.2f} M, NL "
        + ", ".join(f"{mm}-token cap {fl['per_episode'][f'nl_m{mm}'] / 1e6:.2f} M" for mm in p.message_lengths)
        + f". AC / NL (8-token cap) = {_fmt(fl['ac_over_nl'], 'ratio')}, AC / NL (16) = "
        f"{_fmt(fl['ac_over_nl_long'], 'ratio')}; full information / NL = {_fmt(fl['full_info_over_nl'], 'ratio')}. "
        + f"NL (8-token cap) costs {1 / fl['ac_over_nl']['ratio']:.1f}x AC here: with prompts of 6-7 tokens and one "
        "short message, the saving is A's decoding, A's blocks after k and B's shorter input; the paper's multi-round "
        "debates with long generations have far more decoding to save. Measured wall time on the whole test batch: AC "
        f"{m['timings']['ac_wall_s_test_batch']:.3f} s, NL (8-token cap) {m['timings']['nl_wall_s_test_batch']:.3f} s "
        "(shared machine; reported, not claimed).\n\n"
        "**Sources.** No official code was found; the protocol (last-token activation of A after layer k, f in "
        "{replace, sum, mean} into B's last token after layer j, A stopped after layer k, FLOP accounting, NL baseline) "
        "is written from the paper's description and the plan. The world, corpus and model are ours (plan: "
        f"4 layers, d = 128; here d = {p.d_model} to keep training of all seeds near a minute on 2 cores)."
    )
