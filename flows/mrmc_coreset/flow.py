"""MRMC (reconstructed) as a Prefect flow: core-sets by maximum reduction of the squared loss over early
proxy epochs, with a class-balance constraint, against Random, Herding, Forgetting and EL2N core-sets
of equal size on scikit-learn digits and a noisy 10-class make_classification pool."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.mrmc_coreset import method
from flows.mrmc_coreset.method import BASELINES, LABEL, METHODS
from flows.mrmc_coreset.params import SMOKE, Params
from tasks import stats
from tasks.contract import Claim, Control, Paper, RunContext, RunOutput, ci
from tasks.data import save_parquet
from tasks.paper import over_seeds, paper_flow, run_task

WHERE = "on digits and a 10-class make_classification pool (test accuracy, mean over the two pools, paired over seeds)"
MRMC = "MRMC (reconstructed: squared-loss reduction over the first E_early proxy epochs, class quotas)"


def _rkey(ratio: float) -> str:
    return f"r{round(100 * ratio)}"


def _beats_random(ratio: float) -> Claim:
    r = _rkey(ratio)
    return Claim(
        id=f"mrmc_beats_random_{r}",
        text=("Experimental results demonstrate that MRMC improves training efficiency significantly while preserving "
              f"model performance: test accuracy of {MRMC} minus that of a random core-set of the same size "
              f"({round(100 * ratio)}% of the pool) > 0 {WHERE}"),
        source="abstract; plan claim 1 (direction, at 30% and 50%)", metric=f"claim1.{r}.mean", comparison=">",
        threshold=0.0, kind="direction", role="claim", interval=ci(f"claim1.{r}"), per_setting=f"claim1.{r}_by_dataset",
        # the balance constraint alone (random within MRMC's class quotas) must not beat random, or the win is the quota's
        control=Control(name="class-balanced random (MRMC's quotas, contributions replaced by random numbers) - random",
                        metric=f"claim1_control.{r}.mean", interval=ci(f"claim1_control.{r}")))


def _preserves(ratio: float) -> Claim:
    r = _rkey(ratio)
    return Claim(
        id=f"mrmc_within_0p5pp_of_best_baseline_{r}",
        text=("MRMC improves training efficiency significantly while preserving model performance with minimal cost: "
              f"test accuracy of {MRMC} minus that of the best of Herding, Forgetting and EL2N (the baseline with the "
              f"highest mean accuracy on each pool) at {round(100 * ratio)}% of the pool >= -0.5 pp {WHERE}"),
        source="abstract; plan claim 2 (magnitude: MRMC >= best other baseline - 0.5 pp at each ratio)",
        metric=f"claim2.{r}.mean", comparison=">=", threshold=-0.005, kind="magnitude", role="claim",
        interval=ci(f"claim2.{r}"), per_setting=f"claim2.{r}_by_dataset",
        # a random core-set in MRMC's place: if it too is within 0.5 pp of the best baseline, the margin cannot tell
        control=Control(name="random core-set in MRMC's place (random - best baseline)",
                        metric=f"claim2_control.{r}.mean", interval=ci(f"claim2_control.{r}")))


PAPER = Paper(
    slug="mrmc_coreset",
    title="Maximum Reduction as Maximum Contribution: core-set selection by minimising the sum of squared losses",
    method="MRMC (reconstructed): per-sample reduction of the squared loss over early proxy epochs + balance constraint",
    paper_class="B",
    source="abstracts-004.txt #14 (ICML 2025, OpenReview UeGo9RmpRY)",
    official_code="ssssss489/MRMC (rebuttal README and figures only; no code, so the method is reconstructed)",
    claims=(
        _beats_random(0.3),
        _beats_random(0.5),
        _preserves(0.1),
        _preserves(0.3),
        _preserves(0.5),
        # Measured interleaved and repeated in one process, but the ratio is set by the epoch counts we chose
        # (E_early proxy epochs against the full trajectory, about E_early / E_full): it holds by arithmetic, so it
        # checks our timing, not the paper's cost claim.
        Claim(id="mrmc_scoring_cheaper_than_forgetting",
              text=("MRMC ... with minimal cost; a straightforward method identifying valuable samples early in the "
                    "training process (TL;DR): wall time of MRMC's selection (E_early proxy epochs + scoring) / wall "
                    "time of Forgetting's selection (the full proxy trajectory + event counts) <= 1, one thread, "
                    "interleaved repeats (sanity: by arithmetic, the ratio follows from E_early / E_full, which we "
                    "set)"),
              source="abstract and OpenReview TL;DR; plan claim 3 (direction, cost)",
              metric="timings.scoring.mrmc_over_forgetting.ratio", comparison="<=", threshold=1.0, kind="direction",
              role="sanity", interval=ci("timings.scoring.mrmc_over_forgetting")),
        Claim(id="equal_samples_seen",
              text=("equal size = equal budget: every core-set of a ratio has exactly k rows and its final model sees "
                    "exactly the same number of samples (max over pools, ratios and seeds of the spread of "
                    "samples_seen across methods = 0)"),
              source="issue 14 (baselines at equal size)", metric="sanity.samples_seen_spread", comparison="<=",
              threshold=0.0, kind="exact", role="sanity"),
        Claim(id="full_data_digits_learns",
              text="the MLP trained on the full digits pool reaches test accuracy >= 0.9 (the trainer works)",
              source="ours (implementation check)", metric="accuracy.digits.full.r100.mean", comparison=">=",
              threshold=0.9, kind="magnitude", role="sanity", interval=ci("accuracy.digits.full.r100")),
    ),
    limitations=(
        "No official code and no paper text beyond the abstract: the contribution (squared-loss reduction summed "
        "over the first E_early proxy epochs), both balance constraints and every hyper-parameter are the plan's "
        "reconstruction, not the paper's algorithm; a third-party unofficial implementation (FatemeBameri/"
        "subset-selection-algorithms, MRMC.py) reads the paper differently (an exponential fit of each loss "
        "curve, a top-rho share plus a regularised remainder) and is not run here. The sum over epochs telescopes "
        "to l(0)^2 - l(E_early)^2, so the loss at initialisation (random proxy weights) weighs as much as the learned "
        "state; reading t = 0 as the end of the first epoch instead is reported (MRMC from epoch 1), not claimed. Pools are small tabular sets (digits: ~1,260 training images; make_classification: "
        "a few thousand points) and models are one-hidden-layer MLPs, not the paper's CNNs on CIFAR/ImageNet; "
        "EL2N uses one proxy run (Paul et al. average ten); Forgetting counts events between epochs, not between "
        "mini-batch presentations. GraNd from the plan is not run; K-center greedy and high-loss top-k are reported, "
        "outside the claims (added after the first default run). The "
        "cost check follows from the epoch counts (E_early vs the full trajectory, fixed before the run), so it is a "
        "sanity check, not a counted claim; its timing (interleaved repeats in one process, with a Forgetting / "
        "Forgetting A/A ratio reported beside it) is measured on a shared 2-core machine."
    ),
)


def _per_seed(rows: pd.DataFrame, dataset: str, m: str, ratio: float) -> np.ndarray:
    sel = rows[(rows["dataset"] == dataset) & (rows["method"] == m) & np.isclose(rows["ratio"], ratio)]
    return sel.sort_values("seed")["accuracy"].to_numpy(dtype=float)


def _paired_over_pools(rows: pd.DataFrame, datasets: list[str], a: str | dict[str, str], b: str | dict[str, str],
                       ratio: float) -> tuple[dict, dict[str, float]]:
    """Paired summary over seeds of mean_d [acc(a, d) - acc(b, d)] and each pool's mean difference;
    ``a``/``b`` name a method, or one per pool."""
    pick = lambda m, d: m[d] if isinstance(m, dict) else m  # noqa: E731
    diffs = np.stack([_per_seed(rows, d, pick(a, d), ratio) - _per_seed(rows, d, pick(b, d), ratio) for d in datasets])
    return stats.summarize(diffs.mean(axis=0)), {d: float(x.mean()) for d, x in zip(datasets, diffs)}


def _metrics(rows: pd.DataFrame, timing: pd.DataFrame, params: Params) -> dict:
    datasets = list(params.datasets)
    accuracy = {d: {m: {_rkey(r): stats.summarize(_per_seed(rows, d, m, r))
                        for r in (params.ratios if m != "full" else [1.0])}
                    for m in (*METHODS, "full")} for d in datasets}
    out: dict = {"accuracy": accuracy, "claim1": {}, "claim1_control": {}, "claim2": {}, "claim2_control": {},
                 "best_baseline": {}}
    for r in params.ratios:
        key = _rkey(r)
        out["claim1"][key], out["claim1"][f"{key}_by_dataset"] = _paired_over_pools(rows, datasets, "mrmc", "random", r)
        out["claim1_control"][key], out["claim1_control"][f"{key}_by_dataset"] = _paired_over_pools(
            rows, datasets, "balanced_random", "random", r)
        best = {d: max(BASELINES, key=lambda m: accuracy[d][m][key]["mean"]) for d in datasets}
        out["best_baseline"][key] = best
        out["claim2"][key], out["claim2"][f"{key}_by_dataset"] = _paired_over_pools(rows, datasets, "mrmc", best, r)
        out["claim2_control"][key], out["claim2_control"][f"{key}_by_dataset"] = _paired_over_pools(
            rows, datasets, "random", best, r)
        for variant in ("mrmc_strata", "mrmc_noquota", "mrmc_from_epoch1"):
            out.setdefault(f"{variant}_minus_random", {})[key] = _paired_over_pools(rows, datasets, variant, "random", r)[0]
    spread = rows[rows["method"] != "full"].groupby(["seed", "dataset", "ratio"])["samples_seen"].agg(np.ptp)
    sizes_ok = rows[rows["method"] != "full"].groupby(["seed", "dataset", "ratio"])["k"].agg(np.ptp)
    out["sanity"] = {"samples_seen_spread": float(spread.max()), "k_spread": float(sizes_ok.max())}
    seconds = {s: timing[timing["scorer"] == s].sort_values("repeat")["seconds"].to_numpy() for s in timing["scorer"].unique()}
    out["timings"] = {"scoring": {
        "mrmc_over_forgetting": stats.ratio_of_means(seconds["mrmc"], seconds["forgetting"]),
        "aa_control": stats.ratio_of_means(seconds["forgetting_again"], seconds["forgetting"]),
        **{f"{s}_s": stats.summarize(v) for s, v in seconds.items()}}}
    out["scoring_epochs"] = {"mrmc": params.early_epochs, "el2n": params.early_epochs, "herding": params.early_epochs,
                             "forgetting": params.full_epochs, "mrmc_over_forgetting": params.early_epochs / params.full_epochs}
    return out


def _plot(metrics: dict, params: Params) -> pd.DataFrame:
    out = []
    for d in params.datasets:
        for m in METHODS:
            for r in params.ratios:
                s = metrics["accuracy"][d][m][_rkey(r)]
                out.append({"x": r, "y": s["mean"], "y_low": s["ci_low"], "y_high": s["ci_high"],
                            "series": f"{d}:{m}", "dataset": d, "method": m})
        s = metrics["accuracy"][d]["full"]["r100"]
        out.append({"x": 1.0, "y": s["mean"], "y_low": s["ci_low"], "y_high": s["ci_high"], "series": f"{d}:full",
                    "dataset": d, "method": "full"})
    return pd.DataFrame(out)


def _figure(plot: pd.DataFrame, params: Params):
    fig, axes = plt.subplots(1, len(params.datasets), figsize=(6.4 * len(params.datasets), 4.6), squeeze=False)
    style = {"mrmc": ("C3", "o", 2.2), "mrmc_strata": ("C3", "s", 1.0), "mrmc_noquota": ("C3", "^", 1.0),
             "random": ("k", "x", 1.5), "balanced_random": ("0.5", "x", 1.0), "herding": ("C0", "D", 1.2),
             "forgetting": ("C2", "v", 1.2), "el2n": ("C1", "P", 1.2), "kcenter": ("C4", "*", 0.8),
             "high_loss": ("C5", "h", 0.8), "mrmc_from_epoch1": ("C3", "d", 0.8)}
    for ax, d in zip(axes[0], params.datasets):
        g = plot[plot["dataset"] == d]
        for m, (colour, marker, width) in style.items():
            s = g[g["method"] == m].sort_values("x")
            ax.errorbar(s["x"], s["y"], yerr=[s["y"] - s["y_low"], s["y_high"] - s["y"]], color=colour, marker=marker,
                        lw=width, capsize=3, label=LABEL[m], ls="--" if m in ("mrmc_strata", "mrmc_noquota") else ":" if m in method.EXTRA_METHODS else "-")
        full = g[g["method"] == "full"]
        ax.axhline(float(full["y"].iloc[0]), color="k", ls=":", lw=1, label="full data")
        ax.set(xlabel="core-set size (fraction of the pool)", ylabel="test accuracy (mean, 95% CI)", title=d)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _setup(params: Params, rows: pd.DataFrame) -> str:
    n_pool = rows[rows["method"] == "full"].groupby("dataset")["k"].first().to_dict()
    return (
        f"**Data.** {', '.join(f'{d} ({n} pool rows)' for d, n in n_pool.items())}; a stratified "
        f"{1 - params.test_fraction:.0%}/{params.test_fraction:.0%} pool/test split per seed, features standardised "
        f"with the pool's statistics. make_classification: {params.synthetic_n} points, {params.synthetic_features} "
        f"features ({params.synthetic_informative} informative), 10 classes, flip_y = {params.synthetic_flip} "
        f"(label noise), class_sep = {params.synthetic_class_sep}. {params.seeds} seeds (a fresh split, data set and "
        "initialisation per seed).\n\n"
        f"**Models.** MLP {params.hidden} (ReLU), Adam lr = {params.lr}, batch {params.batch_size}, the toolkit's "
        "`train_with_selection`. Proxy: the full pool for "
        f"{params.full_epochs} epochs with per-sample loss, EL2N and correctness recorded at every epoch. Final "
        f"models: from the same initialisation per seed, {params.train_epochs} epochs on the core-set only "
        f"(equal size = equal samples seen); core-sets of {', '.join(f'{r:.0%}' for r in params.ratios)} of the pool.\n\n"
        f"**Methods.** MRMC (reconstructed): c_i = sum over t < {params.early_epochs} of l_i(t)^2 - l_i(t+1)^2 "
        "(l_i(0) at initialisation), the top-c_i samples within per-class quotas proportional to class frequency. "
        f"Variants: MRMC-strata (equal shares from {params.n_strata} quantile strata of c_i, random within) and "
        "MRMC-noquota (global top-c_i). Baselines: Random; class-balanced random (the control); Herding "
        f"(per class, on the penultimate layer of the proxy after {params.early_epochs} epochs); Forgetting "
        f"(events over all {params.full_epochs} proxy epochs, never-learned samples count {params.full_epochs}); "
        f"EL2N (after {params.early_epochs} epochs). Reported only (added after the first default run, in no claim): "
        "K-center greedy on the same embedding as Herding, high-loss top-k after "
        f"{params.early_epochs} epochs. Ties broken at random. Full data: {params.full_epochs} epochs "
        "on the whole pool (reference).\n\n"
        f"**Cost.** MRMC's and Forgetting's selections timed on {params.timing_dataset} at 30%, one thread, "
        f"{params.timing_repeats} interleaved repeats (MRMC, Forgetting, Forgetting again; the order rotates with the "
        "repeat), after the seeds, "
        "one untimed warm-up call each."
    )


def _mechanism(metrics: dict, params: Params) -> str:
    """What MRMC's contribution ranks by, from the per-seed Spearman correlations."""
    ranks = metrics["contribution_ranks_by"]
    parts = ", ".join(f"{d}: {v['spearman_c_initial_loss']['mean']:+.2f} with the loss at initialisation, "
                      f"{v['spearman_c_minus_early_loss']['mean']:+.2f} with minus the loss after {params.early_epochs} epochs"
                      for d, v in ranks.items())
    readings = []
    for d, v in ranks.items():
        if v["spearman_c_initial_loss"]["mean"] > 0.7:
            readings.append(f"on {d} c_i mostly ranks by the loss at initialisation, which the proxy's random weights "
                            "set, not the data")
        if v["spearman_c_minus_early_loss"]["mean"] > 0.7:
            readings.append(f"on {d} it mostly ranks by how well the proxy has learned the sample after "
                            f"{params.early_epochs} epochs (easiest first: the opposite end from EL2N, Forgetting and "
                            "high-loss top-k, which keep the hardest)")
    reading = "; ".join(readings) if readings else "neither correlation dominates"
    return (f"**What the contribution ranks by** (Spearman over the pool, mean over seeds): {parts}. Since the sum "
            f"telescopes to l(0)^2 - l({params.early_epochs})^2, {reading}. The reported-only variant that starts "
            "the sum after the first epoch (MRMC from epoch 1; added after the first default run) shows how much the "
            "initialisation term matters; it is in no claim.\n\n")


def _notes(metrics: dict, params: Params) -> str:
    acc = metrics["accuracy"]
    def cell(d, m, r):
        s = acc[d][m][_rkey(r)] if m != "full" else acc[d]["full"]["r100"]
        return f"{s['mean']:.3f}"
    table = ["| pool | method | " + " | ".join(f"{r:.0%}" for r in params.ratios) + " |",
             "|---|---|" + "---|" * len(params.ratios)]
    for d in params.datasets:
        for m in METHODS:
            table.append(f"| {d} | {LABEL[m]} | " + " | ".join(cell(d, m, r) for r in params.ratios) + " |")
        table.append(f"| {d} | full data ({acc[d]['full']['r100']['n']} seeds) | {cell(d, 'full', 1.0)} (whole pool) |"
                     + " |" * (len(params.ratios) - 1))
    t = metrics["timings"]["scoring"]
    lines = []
    for r in params.ratios:
        key = _rkey(r)
        c1, c1c, c2, c2c = (metrics[n][key] for n in ("claim1", "claim1_control", "claim2", "claim2_control"))
        best = ", ".join(f"{d}: {m}" for d, m in metrics["best_baseline"][key].items())
        lines.append(
            f"- {r:.0%}: MRMC - random {100 * c1['mean']:+.2f} pp [{100 * c1['ci_low']:+.2f}, {100 * c1['ci_high']:+.2f}] "
            f"(by pool: {', '.join(f'{d} {100 * v:+.2f}' for d, v in metrics['claim1'][f'{key}_by_dataset'].items())}); "
            f"balanced random - random {100 * c1c['mean']:+.2f} pp; best baseline ({best}); MRMC - best "
            f"{100 * c2['mean']:+.2f} pp [{100 * c2['ci_low']:+.2f}, {100 * c2['ci_high']:+.2f}] "
            f"(by pool: {', '.join(f'{d} {100 * v:+.2f}' for d, v in metrics['claim2'][f'{key}_by_dataset'].items())}); "
            f"random - best {100 * c2c['mean']:+.2f} pp; MRMC-strata - random "
            f"{100 * metrics['mrmc_strata_minus_random'][key]['mean']:+.2f} pp; MRMC-noquota - random "
            f"{100 * metrics['mrmc_noquota_minus_random'][key]['mean']:+.2f} pp; MRMC from epoch 1 - random "
            f"{100 * metrics['mrmc_from_epoch1_minus_random'][key]['mean']:+.2f} pp "
            f"[{100 * metrics['mrmc_from_epoch1_minus_random'][key]['ci_low']:+.2f}, "
            f"{100 * metrics['mrmc_from_epoch1_minus_random'][key]['ci_high']:+.2f}].")
    return (
        "**Sources.** The paper's code repository (ssssss489/MRMC) holds only a rebuttal README and two figures; the "
        "paper's text was not available here, so everything beyond the abstract is the plan's reconstruction "
        "(labelled MRMC (reconstructed)). An unofficial third-party implementation (FatemeBameri/"
        "subset-selection-algorithms) was read for orientation only: it records each sample's loss over R "
        "training rounds, fits l(r) = q exp(-w r) and scores q (1 - exp(-w R)) (the fitted loss reduction), keeps "
        "the top rho = 1/3 of the core-set by that score and fills the rest with a regularised score; its "
        "details do not agree across its own files and are not used.\n\n"
        "**Accuracy (mean over seeds).**\n\n" + "\n".join(table) + "\n\n**Per ratio.**\n" + "\n".join(lines) + "\n\n"
        f"**Cost.** Selection wall time: MRMC {t['mrmc_s']['mean']:.3f} s, Forgetting {t['forgetting_s']['mean']:.3f} s "
        f"(ratio {t['mrmc_over_forgetting']['ratio']:.3f} [{t['mrmc_over_forgetting']['ci_low']:.3f}, "
        f"{t['mrmc_over_forgetting']['ci_high']:.3f}]); A/A control {t['aa_control']['ratio']:.3f} "
        f"[{t['aa_control']['ci_low']:.3f}, {t['aa_control']['ci_high']:.3f}]. Exact proxy epochs: MRMC, EL2N and "
        f"Herding {params.early_epochs}, Forgetting {params.full_epochs} (ratio "
        f"{params.early_epochs / params.full_epochs:.3f}); the wall-time ratio follows from these counts, which "
        "were fixed before the run.\n\n"
        + _mechanism(metrics, params) +
        "**Reading.** The best baseline of claim 2 is chosen per pool by its mean over the same seeds (winner's "
        "curse: it slightly favours the baselines). Claim 1's control is random sampling within MRMC's class "
        "quotas: where it fails, any gain of MRMC over random comes from the contribution criterion, not from "
        "the quotas. Claim 2's control puts a random core-set in MRMC's place: where random too is within 0.5 pp "
        "of the best baseline, the margin cannot tell a good selection from none."
    )


@paper_flow(PAPER, Params, smoke=SMOKE)
def mrmc_coreset_flow(params: Params, ctx: RunContext) -> RunOutput:
    per_seed = over_seeds(method.run_seed, ctx.seeds, p=params)
    rows = pd.DataFrame([row for out in per_seed for row in out["rows"]])
    diagnostics = pd.DataFrame([row for out in per_seed for row in out["diagnostics"]])
    save_parquet(rows, ctx.data_dir / "per_seed.parquet")
    # timed alone, after the seeds, so the two scorers never compete with the seed threads
    timing = run_task(method.time_scorers, p=params, seed=ctx.seeds[0])
    save_parquet(timing, ctx.data_dir / "timing.parquet")
    metrics = _metrics(rows, timing, params)
    metrics["contribution_ranks_by"] = {d: {c: stats.summarize(g[c].to_numpy()) for c in
                                            ("spearman_c_initial_loss", "spearman_c_minus_early_loss")}
                                        for d, g in diagnostics.groupby("dataset", sort=False)}
    plot = _plot(metrics, params)
    return RunOutput(metrics=metrics, tables={"plot": plot, "per_seed": rows, "timing": timing},
                     figure=_figure(plot, params), setup=_setup(params, rows), notes=_notes(metrics, params))
