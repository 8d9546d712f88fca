"""repr_shattering_ke as a Prefect flow: a small GPT trained from scratch on a cyclic knowledge graph, edited by ROME
at six ring distances; representation shattering R and the damage to recall and composition, per model (seed)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.manifold import Isomap

from flows.repr_shattering_ke import method
from flows.repr_shattering_ke.params import SMOKE, Params
from tasks import stats
from tasks.contract import Claim, Control, Paper, RunContext, RunOutput, ci
from tasks.data import save_parquet
from tasks.paper import over_seeds, paper_flow

WHERE = ("on the stand-in (a 2-block GPT trained from scratch on a 64-entity, 2-cycle knowledge graph; ROME on block "
         "1's MLP output matrix; 60 counterfactual edits per model, 10 at each ring distance d in {1,2,4,8,16,32}); "
         "mean over models (seeds) with a bootstrap interval")
PERMUTED = "the same statistic with the edits' distance labels permuted (seeded): no geometry behind the labels"

PAPER = Paper(
    slug="repr_shattering_ke",
    title="Representation Shattering in Transformers: A Synthetic Study with Knowledge Editing",
    method="ROME rank-one knowledge edits on a Transformer trained on a cyclic knowledge graph; shattering "
           "R = |D_edit - D_orig|_F / |D_orig|_F of the entity-representation distance matrix",
    paper_class="B",
    source="abstracts-000.txt #14",
    official_code=None,
    claims=(
        Claim(id="shattering_grows_with_edit_distance",
              text=("Shattering grows with how far an edit conflicts with the learned geometry: per model, Spearman "
                    f"rank correlation of the ring distance d of the edit with R is > 0 {WHERE}"),
              source="paper (r^2 = 0.905 between edit distance and shattering); plan claim 1 (direction)",
              metric="shatter.spearman_d_R.mean", comparison=">", threshold=0.0, kind="direction", role="claim",
              interval=ci("shatter.spearman_d_R"),
              # the same old/new objects, but their distance on the cycle the edited relation does not use
              control=Control(name="Spearman of R with the old/new objects' ring distance on the *other* cycle",
                              metric="control.spearman_dother_R.mean", interval=ci("control.spearman_dother_R"))),
        Claim(id="shattering_linear_in_edit_distance",
              text=("... with a strong correlation: r^2 of the least-squares line of mean R on d (six distances) "
                    f">= 0.5 {WHERE}"),
              source="paper r^2 = 0.905; plan claim 1 (magnitude, r^2 >= 0.5)",
              metric="shatter.r2_d_R.mean", comparison=">=", threshold=0.5, kind="magnitude", role="claim",
              interval=ci("shatter.r2_d_R"),
              scaled="the plan's 0.5, not the paper's 0.905: six distances x 10 edits per small model",
              control=Control(name=f"r^2 with {PERMUTED}", metric="control.r2_permuted_d.mean",
                              interval=ci("control.r2_permuted_d"))),
        Claim(id="shattering_tracks_recall_loss",
              text=("Representation shattering degrades the model's factual recall: per model, Spearman of R with "
                    f"the drop in recall of unedited facts (subjects other than the edited one) >= 0.5 {WHERE}"),
              source="abstract; plan claim 2", metric="shatter.spearman_R_recall_drop.mean", comparison=">=",
              threshold=0.5, kind="direction", role="claim", interval=ci("shatter.spearman_R_recall_drop"),
              control=Control(name="the same Spearman with R paired to another edit's recall drop (seeded permutation)",
                              metric="control.spearman_R_recall_drop_permuted.mean",
                              interval=ci("control.spearman_R_recall_drop_permuted"))),
        Claim(id="far_edits_hurt_recall_more",
              text=("Edits that conflict more with the geometry do more damage: far edits (d >= 16) reduce recall of "
                    f"unedited facts by >= 2 pp more than near edits (d <= 2) {WHERE}"),
              source="paper (distance-dependent degradation); plan claim 3", metric="shatter.far_minus_near_recall_drop.mean",
              comparison=">=", threshold=0.02, kind="magnitude", role="claim",
              interval=ci("shatter.far_minus_near_recall_drop"),
              control=Control(name=f"far minus near recall drop with {PERMUTED}",
                              metric="control.far_minus_near_recall_permuted.mean",
                              interval=ci("control.far_minus_near_recall_permuted"))),
        Claim(id="far_edits_hurt_reasoning_more",
              text=("... and reasoning: far edits (d >= 16) reduce the accuracy of 2-hop compositions (the model's "
                    f"own intermediate; chains avoiding the edited subject) by >= 2 pp more than near edits {WHERE}"),
              source="abstract ('degrades ... reasoning performance'); plan measure (composition accuracy), claim 3's form",
              metric="shatter.far_minus_near_composition_drop.mean", comparison=">=", threshold=0.02,
              kind="magnitude", role="claim", interval=ci("shatter.far_minus_near_composition_drop"),
              control=Control(name=f"far minus near composition drop with {PERMUTED}",
                              metric="control.far_minus_near_composition_permuted.mean",
                              interval=ci("control.far_minus_near_composition_permuted"))),
        Claim(id="ke_degrades_recall",
              text=("Applying KE adversely affects broader factual recall: the mean drop in recall of unedited facts "
                    f"over all counterfactual edits (d >= 1) is > 0 {WHERE}"),
              source="abstract", metric="shatter.recall_drop_counterfactual.mean", comparison=">", threshold=0.0,
              kind="direction", role="claim", interval=ci("shatter.recall_drop_counterfactual"),
              control=Control(name="same-object edits (d = 0: the full ROME pipeline re-asserting the old fact)",
                              metric="control.recall_drop_same_object.mean",
                              interval=ci("control.recall_drop_same_object"))),
        Claim(id="model_learns_the_graph",
              text="the stand-in recalls its training facts: greedy accuracy on training facts >= 0.95 (plan)",
              source="plan (train to >= 95 % fact accuracy)", metric="model.train_recall.mean", comparison=">=",
              threshold=0.95, kind="magnitude", role="sanity"),
        Claim(id="rome_edits_succeed",
              text="ROME's edits take: the edited fact predicts its new object (greedy) in >= 90 % of counterfactual edits",
              source="our editor", metric="edit.success_rate.mean", comparison=">=", threshold=0.9, kind="magnitude",
              role="sanity"),
        Claim(id="rome_update_is_exact",
              text="the rank-one update meets ROME's constraint W' k* = v* (max abs error, float64, every edit) < 1e-9",
              source="ROME closed form (Meng et al. 2022)", metric="edit.exactness_max_abs", comparison="<",
              threshold=1e-9, kind="exact", role="sanity"),
    ),
    limitations=(
        "The stand-in is a 2-block, 64-wide GPT trained for seconds on 64 entities and 2 cyclic orders, not the "
        "paper's Transformer, and nothing here touches Llama or Mamba: the paper's naturalistic month-cycle "
        "experiments, its MEMIT/PMET/AlphaEdit editors and its LLM-scale figures are not reproduced; the claims are the "
        "protocol's own claims on this stand-in. The stand-in memorises its training facts but infers none of the "
        "held-out ones (accuracy ~0), and its entity representations hold little of the rings (the setup gives the "
        "Spearman of representation distance with ring distance; ~0.02-0.08 on two development seeds, against the "
        "paper's clean Isomap rings): the paper's premise, a ring manifold that an edit shatters, is not met at this "
        "scale, so R measures a generic distortion and the 'structures that allow a model to infer unseen knowledge' "
        "cannot be shown to break here; 'reasoning' is 2-hop composition through the model's own intermediate, over facts it "
        "has seen. No official code exists: the graph, the sequence format, where representations are read and the "
        "edit site are choices made here after the paper's pages and the plan. ROME is ROME's algorithm (keys' second "
        "moment, v* search with its GPT-2-XL hyper-parameters, closed-form rank-one update) re-implemented for this "
        "model, with ROME's fact_token = 'last' edit site (the relation token) because at the subject token its v* "
        "search rarely succeeds in a 2-block model (see the notes)."
    ),
)


def _per_seed(frame: pd.DataFrame, column: str, d: int) -> np.ndarray:
    return frame[frame["d"] == d].groupby("seed")[column].mean().sort_index().to_numpy(float)


@paper_flow(PAPER, Params, smoke=SMOKE)
def repr_shattering_ke_flow(params: Params, ctx: RunContext) -> RunOutput:
    results = over_seeds(method.run_seed, ctx.seeds, p=params, data_dir=str(ctx.data_dir), smoke=ctx.smoke)
    rows = pd.DataFrame([r for res in results for r in res["rows"]])
    save_parquet(rows, ctx.data_dir / "edits.parquet")
    per_seed = pd.DataFrame([method.seed_statistics(params, res["rows"], res["seed"]) for res in results])
    claims = [c for c in per_seed.columns if not c.startswith("control_")]
    metrics: dict = {
        "shatter": {c: stats.summarize(per_seed[c].to_numpy(float)) for c in claims},
        "control": {c.removeprefix("control_"): stats.summarize(per_seed[c].to_numpy(float))
                    for c in per_seed.columns if c.startswith("control_")},
        "model": {k: stats.summarize([res["model"][k] for res in results]) for k in results[0]["model"]},
        "edit": {"success_rate": stats.summarize(per_seed["success_rate"].to_numpy(float)),
                 "exactness_max_abs": float(rows["exactness"].max()),
                 "v_steps_mean": float(rows.loc[rows["d"] > 0, "v_steps"].mean()),
                 "v_steps_same_object": float(rows.loc[rows["d"] == 0, "v_steps"].mean())},
        "by_distance": {},
        "per_seed": {c: per_seed[c].tolist() for c in per_seed.columns},
    }
    counter = rows[rows["d"] > 0]
    metrics["diagnostic"] = {
        "R_rome_over_random": stats.ratio_of_means(counter.groupby("seed")["R_rome"].mean().to_numpy(float),
                                                   counter.groupby("seed")["R_random"].mean().to_numpy(float)),
        "recall_drop_random": stats.summarize(counter.groupby("seed")["recall_drop_random"].mean().to_numpy(float)),
    }
    columns = ["R_rome", "R_random", "R_others_rome", "recall_drop_rome", "recall_drop_random",
               "composition_drop_rome", "inference_drop_rome", "success", "delta_norm", "update_norm"]
    for d in sorted(rows["d"].unique()):
        metrics["by_distance"][str(int(d))] = {c: stats.summarize(_per_seed(rows, c, d)) for c in columns}
    plot = _plot_table(metrics)
    return RunOutput(metrics=metrics, tables={"plot": plot, "edits": rows}, figure=_figure(plot, results, params),
                     setup=_setup(params, metrics), notes=_notes(params, metrics))


def _plot_table(metrics: dict) -> pd.DataFrame:
    out = []
    for d, m in metrics["by_distance"].items():
        for series in ("R_rome", "R_random", "recall_drop_rome", "composition_drop_rome"):
            s = m[series]
            out.append({"x": int(d), "y": s["mean"], "y_low": s["ci_low"], "y_high": s["ci_high"], "series": series})
    return pd.DataFrame(out)


def _figure(plot: pd.DataFrame, results: list[dict], params: Params):
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
    for ax, series, label in ((axes[0], ("R_rome",), "R (ROME)"), (axes[1], ("recall_drop_rome", "composition_drop_rome"), "")):
        for s in series:
            g = plot[plot["series"] == s].sort_values("x")
            ax.errorbar(g["x"], g["y"], yerr=[g["y"] - g["y_low"], g["y_high"] - g["y"]], marker="o", capsize=3,
                        label=s.replace("_rome", "").replace("_", " "))
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xlabel("ring distance d of the edit (0 = same object)")
        ax.legend(fontsize=8)
    axes[0].set_ylabel("shattering R (mean over models, 95% CI)")
    axes[1].set_ylabel("accuracy drop on unedited items")
    first = results[0]["reps"]
    if first["far"] is not None:
        position = np.asarray(first["position"])[0]
        both = np.vstack([first["orig"], first["far"]["reps"]])
        embedded = Isomap(n_neighbors=min(10, len(position) - 1), n_components=2).fit_transform(both)
        n = len(position)
        axes[2].scatter(*embedded[:n].T, c=position, cmap="hsv", s=30, label="unedited")
        axes[2].scatter(*embedded[n:].T, c=position, cmap="hsv", s=30, marker="x", label=f"after a d = {max(params.edit_distances)} edit")
        axes[2].set_title(f"seed {results[0]['seed']}: Isomap of entity representations (colour = cycle-0 position)",
                          fontsize=9)
        axes[2].legend(fontsize=8)
    fig.tight_layout()
    return fig


def _setup(p: Params, m: dict) -> str:
    far, near = method.far_near(p)
    mod = m["model"]
    return (
        f"**Knowledge graph** (one per seed, {p.seeds} seeds). {p.n_entities} entities on {p.n_cycles} cyclic orders "
        f"(random permutations); relations = k-th neighbour on a cycle, k in +-{p.steps} "
        f"({2 * p.n_cycles * len(p.steps)} relations, {p.n_entities * 2 * p.n_cycles * len(p.steps)} facts); "
        f"{p.holdout_frac:.0%} of the facts are never trained on. Training data: {p.n_walks} random walks of "
        f"{p.walk_hops} facts, `<bos> e0 r1 e1 r2 e2 r3 e3 <eos>` (word tokens).\n\n"
        f"**Model.** tasks.lm GPT, {p.n_layer} blocks, width {p.d_model}, {p.n_head} heads, AdamW lr {p.lr}, weight "
        f"decay {p.weight_decay}, {p.epochs} epochs of batch {p.batch_size}; weights cached under the data folder. "
        f"Unedited: training-fact recall {mod['train_recall']['mean']:.3f}, held-out fact accuracy "
        f"{mod['heldout_accuracy']['mean']:.3f}, 2-hop composition {mod['composition_accuracy']['mean']:.3f}; ring "
        "geometry of the entity representations (Spearman of representation distance with ring distance over entity "
        "pairs): " + ", ".join(f"cycle {c}: {_fmt(mod[f'ring_geometry_cycle{c}'])}" for c in range(p.n_cycles)) + ".\n\n"
        f"**Edits.** Per model, {p.edits_per_distance} distinct training facts (x, r) per ring distance d in "
        f"{[0, *p.edit_distances]} re-mapped to the entity at distance d from the old object on r's cycle (d = 0: the "
        f"same object). ROME on block {p.edit_layer + 1}'s MLP output matrix (4 x {p.d_model} -> {p.d_model}), edit "
        f"site fact_token = '{p.fact_token}', C = uncentred second moment of the keys over the training walks, "
        f"{p.n_contexts} prompts per edit (the bare `<bos> x r` and chain prefixes `<bos> a r_a x r`), v* by "
        f"{p.v_steps} Adam steps (lr {p.v_lr}, weight decay {p.v_weight_decay}, KL factor {p.kl_factor}, clamp "
        f"{p.clamp_norm_factor} |v_init|). Beside every ROME update, a random rank-one update of the same Frobenius "
        f"norm.\n\n"
        f"**Measures.** Entity representation = residual stream after block {p.repr_layer + 1} at the entity token of "
        f"`<bos> e`; D = pairwise Euclidean distances; R = |D_edit - D_orig|_F / |D_orig|_F. Drops (unedited minus "
        f"edited accuracy, greedy) on training facts with another subject, held-out facts with another subject and "
        f"{p.n_chains} 2-hop chains avoiding the subject. Far = d >= {far}, near = d <= {near}. Each model gives one "
        "value of every statistic; intervals are bootstraps over models."
    )


def _fmt(s: dict) -> str:
    return f"{s['mean']:.3f} [{s['ci_low']:.3f}, {s['ci_high']:.3f}]"


def _notes(p: Params, m: dict) -> str:
    sh, co, bd = m["shatter"], m["control"], m["by_distance"]
    table = "\n".join(
        f"| {d} | {_fmt(v['R_rome'])} | {v['R_random']['mean']:.3f} | {v['recall_drop_rome']['mean']:.4f} | "
        f"{v['composition_drop_rome']['mean']:.4f} | {v['inference_drop_rome']['mean']:.4f} | {v['success']['mean']:.2f} | "
        f"{v['delta_norm']['mean']:.2f} |" for d, v in bd.items())
    return (
        "**Per distance** (mean over models; R with its 95% interval):\n\n"
        "| d | R (ROME) | R (random rank-one, same norm) | recall drop | composition drop | held-out drop | success | |delta| |\n"
        "|---|---|---|---|---|---|---|---|\n" + table + "\n\n"
        f"**Claim statistics** (per model, then mean [95% CI] over models). Spearman(d, R) {_fmt(sh['spearman_d_R'])} "
        f"(other-cycle distance control {_fmt(co['spearman_dother_R'])}); r^2 of mean R on d {_fmt(sh['r2_d_R'])} "
        f"(permuted d {_fmt(co['r2_permuted_d'])}); Spearman(R, recall drop) {_fmt(sh['spearman_R_recall_drop'])} "
        f"(permuted pairing {_fmt(co['spearman_R_recall_drop_permuted'])}); far - near recall drop "
        f"{_fmt(sh['far_minus_near_recall_drop'])} (permuted {_fmt(co['far_minus_near_recall_permuted'])}); far - near "
        f"composition drop {_fmt(sh['far_minus_near_composition_drop'])} (permuted "
        f"{_fmt(co['far_minus_near_composition_permuted'])}); mean recall drop of counterfactual edits "
        f"{_fmt(sh['recall_drop_counterfactual'])} (same-object edits {_fmt(co['recall_drop_same_object'])}).\n\n"
        f"**Diagnostics** (no claim). R of the random rank-one update of equal norm, Spearman with d "
        f"{_fmt(sh['spearman_d_R_random'])}; R(ROME) / R(random) {m['diagnostic']['R_rome_over_random']['ratio']:.3f}; "
        f"recall drop of the random update {_fmt(m['diagnostic']['recall_drop_random'])}: ROME's update (u = C^-1 k, "
        f"aimed at the edited key) moves the entity representations "
        f"{'less' if m['diagnostic']['R_rome_over_random']['ratio'] < 1 else 'more'} than a random direction of the "
        f"same size. Spearman(d, R restricted to the other entities) {_fmt(sh['spearman_d_R_others'])}. Edit success "
        f"{_fmt(m['edit']['success_rate'])}; mean v* steps {m['edit']['v_steps_mean']:.1f}; max |W' k* - v*| "
        f"{m['edit']['exactness_max_abs']:.1e}. Same-object edits (d = 0): mean v* steps "
        f"{m['edit']['v_steps_same_object']:.1f}; where ROME's v* loss is already below its early-stop 0.05 at step 0 "
        "the update is zero, so that control shows the measurements do not drift, not that an update of a given "
        "size is harmless (the random update above is that comparison).\n\n"
        "**Sources and choices.** No official code; the task (entities on cyclic orders, relations = k-step "
        "neighbours, chained facts), the edit distance and R follow the paper's pages and the plan. ROME was read in "
        "kmeng01/rome (rome_main.py, compute_v.py): left vector u = C^-1 k, right vector (v* - W k*) / (k*.u), v* by "
        "Adam on a delta added at the edit site with NLL + KL + weight decay and a norm clamp, hyper-parameters of "
        "its GPT-2-XL config. **Edit site, decided on a one-seed development run:** at ROME's default site (the "
        "subject token) the v* search reached its target in about 1 edit in 10 (probability of the new object "
        "mostly < 0.1, also with 100 steps or no clamp): in a 2-block model the object is looked up at the relation "
        "token, not carried from the subject's MLP. ROME's own alternative, fact_token = 'last' (edit at the "
        "prompt's last token), succeeds in every edit and is the default; `fact_token: subject_last` in params "
        "reruns the other. That development run printed the claim statistics of one seed as well; no threshold or "
        "other setting was changed after it. The stand-in never infers held-out facts (accuracy ~0 before any "
        "edit), so their drop is reported but carries no claim."
    )
