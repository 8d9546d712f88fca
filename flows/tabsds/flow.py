"""TabSDS as a Prefect flow: rank-and-shuffle synthetic tables vs library generators (Gaussian copula,
CTGAN, TVAE, ARF), a compact TabDDPM and two references, on four bundled tables."""

from __future__ import annotations

import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.tabsds import method
from flows.tabsds.params import SMOKE, Params
from tasks import stats
from tasks.contract import Claim, Control, Paper, RunContext, RunOutput
from tasks.paper import paper_flow, run_mapped, run_task

SPEED_SANITY = ("a sanity check, not counted: the time ratio is one wall-clock measurement per table (the "
                "baselines run once, on one seed, in a shared process), not the method and the baseline interleaved "
                "and repeated with an interval over repeats; with baselines at 3-10 s per table such a measurement "
                "would cost several times this paper's run, and the single ratio flips with machine load")


def _speed_check(other: str, claim_id: str, threshold: float, comparison: str, text: str,
                 scaled: str | None = None) -> Claim:
    """TabSDS time / ``other``'s time, worst table, as a sanity check (see ``SPEED_SANITY``)."""
    return Claim(id=claim_id, text=f"{text} ({SPEED_SANITY})", source="abstract; plan claim 1",
                 metric=f"timings.speed.max_ratio_{other}", comparison=comparison, threshold=threshold,
                 kind="magnitude" if threshold < 1 else "direction", role="sanity",
                 per_setting=f"timings.speed.{other}", scaled=scaled)


PAPER = Paper(
    slug="tabsds",
    title="Model-free tabular synthesis by rank and data shuffling",
    method="TabSDS (SynTabSJPPDS): sequential joint-probability-preserving data shuffling + IOS marginals + rank matching",
    paper_class="A",
    source="abstracts-004.txt #12",
    official_code="echaibub/TabSDS (GitHub; Python utilities and Synthcity plugin read)",
    claims=(
        _speed_check("ctgan", "faster_than_ctgan_100x", 0.01, "<=",
                     "the execution time of TabSDS is orders of magnitude faster than the deep generative baselines "
                     "(CTGAN: TabSDS fit+sample time <= 1/100 of CTGAN's on every dataset)",
                     scaled="CTGAN runs 100 epochs on at most 1,000 rows, far below the paper's tables: its time here "
                            "is a lower bound on the paper's"),
        _speed_check("tabddpm", "faster_than_tabddpm_100x", 0.01, "<=",
                     "orders of magnitude faster than the deep generative baselines (TabDDPM: TabSDS time <= 1/100 of "
                     "TabDDPM's on every dataset)",
                     scaled="a compact TabDDPM (1,000 Adam steps, 100 diffusion steps) instead of the reference one "
                            "(tens of thousands of steps, T = 1,000): its time here is a lower bound"),
        _speed_check("arf", "faster_than_arf", 1.0, "<",
                     "and also considerably faster than other computationally efficient baselines such as adversarial "
                     "random forests (TabSDS time < ARF time on every dataset)"),
        Claim(id="competitive_with_tabddpm",
              text="TabSDS showed very competitive performance against all baselines (including TabDDPM) -- TSTR >= "
                   "TabDDPM's - 0.05, detection AUC <= TabDDPM's + 0.05, and distance to closest record (DCR, "
                   "relative to held-out real rows) >= TabDDPM's - 0.05, on >= 3 of 4 datasets",
              source="abstract; plan claim 2; DCR condition added by the verdict-rules issue",
              metric="competitive.tabsds.fraction_ok", comparison=">=", threshold=0.75, kind="magnitude",
              role="claim", per_setting="competitive.tabsds.ok_by_dataset",
              no_interval_reason="TabDDPM runs on one seed (one split) per table; the metric counts tables",
              control=Control(name="jittered copies of the training rows (a near-memoriser)",
                              metric="competitive.jittered_copy.fraction_ok")),
        Claim(id="no_exact_copies",
              text="IOS sampling draws new values, so no TabSDS row is an exact copy of a training row "
                   "(exact-copy rate = 0 on every dataset and seed)",
              source="plan claim 3 (sanity)", metric="privacy.tabsds_exact_copy_rate_max", comparison="<=",
              threshold=0.0, kind="exact", role="sanity"),
    ),
    limitations=(
        "Four small bundled tables (89 to 1,000 training rows, 9 to 31 columns) stand in for the paper's 16 "
        "benchmark tables of up to tens of thousands of rows; the baselines come from their own PyPI packages "
        "(copulas, ctgan, arfpy), not Synthcity, and TabDDPM is a compact re-implementation trained for 1,000 "
        "steps, so its quality and its time are both below the paper's TabDDPM. The library baselines and TabDDPM "
        "run on one seed (one train/holdout split) per table, TabSDS and the references on all seeds, so the "
        "competitive check compares single runs. Times are wall-clock on a shared 2-core machine with seeds in "
        "parallel threads (the library baselines one at a time under a lock, timed once it is held), one measurement per "
        "table, so the speed checks are sanity checks, not counted claims. TabSDS's tuning parameter n_c is fixed (10 and 30; the claims use "
        "the official plugin's default 30) rather than tuned per table with the paper's DCR-based selection; the "
        "competitive claim's DCR condition therefore tests the default n_c, not the paper's privacy-matched one."
    ),
)

@paper_flow(PAPER, Params, smoke=SMOKE)
def tabsds_flow(params: Params, ctx: RunContext) -> RunOutput:
    started = time.perf_counter()
    paths = run_task(method.save_tables, p=params, data_dir=str(ctx.data_dir))
    # Units with the baselines first: they are the long ones.
    units = sorted(((d, s, i < params.baseline_seeds) for i, s in enumerate(ctx.seeds) for d in params.datasets),
                   key=lambda u: not u[2])
    datasets, seeds, with_baselines = zip(*units)
    results = run_mapped(method.run_unit, {"dataset": datasets, "seed": seeds, "with_baselines": with_baselines,
                                           "data_path": [paths[d] for d in datasets]}, p=params)
    runs = pd.DataFrame([r for res in results for r in res["rows"]]).sort_values(["dataset", "method", "seed"])
    refs = pd.DataFrame([res["reference"] for res in results]).sort_values(["dataset", "seed"])
    runs, refs = runs.reset_index(drop=True), refs.reset_index(drop=True)

    # DCR relative to held-out real rows of the same split: 1 = as far from the training rows as fresh real data
    holdout_dcr = refs.set_index(["dataset", "seed"])["dcr_holdout_median"]
    runs["dcr_ratio"] = runs["dcr_median"].to_numpy() / holdout_dcr.loc[list(zip(runs["dataset"], runs["seed"]))].to_numpy()

    primary = f"tabsds_{params.claim_n_levels}"
    metric_cols = ["seconds", "ks_tv", "corr_error", "energy", "detection_auc", "tstr", "dcr_median", "dcr_ratio",
                   "exact_copy_rate"]
    summary = runs.groupby(["dataset", "method"], sort=True)[metric_cols].mean().reset_index()
    summary["n_seeds"] = runs.groupby(["dataset", "method"], sort=True).size().to_numpy()

    def paired(dataset: str, method_a: str, other: str, column: str) -> tuple[np.ndarray, np.ndarray]:
        """``column`` of ``method_a`` and of ``other`` on the seeds where both ran."""
        a = runs[(runs["dataset"] == dataset) & (runs["method"] == method_a)].set_index("seed")[column]
        b = runs[(runs["dataset"] == dataset) & (runs["method"] == other)].set_index("seed")[column]
        common = a.index.intersection(b.index)
        return a.loc[common].to_numpy(float), b.loc[common].to_numpy(float)

    def time_ratios(method_a: str, other: str) -> dict[str, float]:
        return {d: float(a.mean() / b.mean()) for d in params.datasets
                for a, b in [paired(d, method_a, other, "seconds")] if len(a)}

    speed = {}
    for other in ("ctgan", "tvae", "tabddpm", "arf", "gaussian_copula"):
        speed[other] = time_ratios(primary, other)
        speed[f"max_ratio_{other}"] = max(speed[other].values()) if speed[other] else float("nan")

    competitive = {"tabsds": _competitive(paired, params.datasets, primary),
                   method.CONTROL: _competitive(paired, params.datasets, method.CONTROL)}
    tab = runs[runs["method"] == primary]
    privacy = {"tabsds_exact_copy_rate_max": float(tab["exact_copy_rate"].max()),
               "exact_copy_rate": {d: {m: float(g["exact_copy_rate"].mean()) for m, g in runs[runs["dataset"] == d].groupby("method")}
                                   for d in params.datasets},
               "dcr_median": {d: {m: float(g["dcr_median"].mean()) for m, g in runs[runs["dataset"] == d].groupby("method")}
                              for d in params.datasets},
               "dcr_holdout_median": {d: float(g["dcr_holdout_median"].mean()) for d, g in refs.groupby("dataset")}}
    by_dataset = {d: {m: {c: float(v) for c, v in row[metric_cols[1:]].items()} | {"n_seeds": int(row["n_seeds"])}
                      for m, row in g.set_index("method").iterrows()}
                  for d, g in summary.groupby("dataset")}
    tabsds_ci = stats.summarize_by(tab, "dataset", ["detection_auc", "tstr"])
    metrics = {
        "competitive": competitive, "privacy": privacy, "by_dataset": by_dataset,
        "tabsds_over_seeds": tabsds_ci,
        "trtr": {d: float(g["trtr"].mean()) for d, g in refs.groupby("dataset")},
        "timings": {"speed": speed, "total_s": time.perf_counter() - started,
                    "seconds_by_method": {m: float(g["seconds"].mean()) for m, g in runs.groupby("method")}},
    }
    plot = pd.DataFrame({"x": summary["method"], "y": summary["seconds"], "series": summary["dataset"]})
    figure = _figure(summary, refs, primary)
    return RunOutput(metrics=metrics, tables={"plot": plot, "summary": summary, "runs": runs, "references": refs},
                     figure=figure, setup=_setup(params, ctx), notes=_notes(params, metrics, primary))


COMPETITIVE_MARGIN = 0.05   # the plan's tolerance on each axis (TSTR, detection AUC, and DCR ratio)


def _competitive(paired, datasets: list[str], generator: str) -> dict:
    """Is ``generator`` competitive with TabDDPM on each table (paired seeds)? TSTR gap >= -0.05, detection-AUC gap
    <= +0.05, and DCR-ratio gap >= -0.05: held-out-based detection cannot see a jittered copy of the training
    rows, the distance to the closest training record can (relative to held-out real rows, the natural scale)."""
    by_dataset = {}
    for d in datasets:
        gaps = {}
        for column, sign in (("tstr", 1.0), ("detection_auc", -1.0), ("dcr_ratio", 1.0)):
            a, b = paired(d, generator, "tabddpm", column)
            if len(a):
                gaps[column] = float((a - b).mean())
        if len(gaps) < 3:
            continue
        tstr_ok, auc_ok = gaps["tstr"] >= -COMPETITIVE_MARGIN, gaps["detection_auc"] <= COMPETITIVE_MARGIN
        dcr_ok = gaps["dcr_ratio"] >= -COMPETITIVE_MARGIN
        by_dataset[d] = {"tstr_gap": gaps["tstr"], "auc_gap": gaps["detection_auc"], "dcr_ratio_gap": gaps["dcr_ratio"],
                         "ok_without_dcr": float(tstr_ok and auc_ok), "ok": float(tstr_ok and auc_ok and dcr_ok)}
    frac = lambda key: float(np.mean([v[key] for v in by_dataset.values()])) if by_dataset else float("nan")
    return {"by_dataset": by_dataset, "ok_by_dataset": {d: v["ok"] for d, v in by_dataset.items()},
            "n_datasets": len(by_dataset), "n_ok": int(sum(v["ok"] for v in by_dataset.values())),
            "fraction_ok": frac("ok"), "fraction_ok_without_dcr": frac("ok_without_dcr")}


def _figure(summary: pd.DataFrame, refs: pd.DataFrame, primary: str):
    fig, (ax, bx, cx) = plt.subplots(1, 3, figsize=(16, 4.5))
    methods = list(dict.fromkeys(summary.sort_values("seconds")["method"]))
    datasets = sorted(summary["dataset"].unique())
    width = 0.8 / max(len(datasets), 1)
    for i, d in enumerate(datasets):
        g = summary[summary["dataset"] == d].set_index("method").reindex(methods)
        ax.bar(np.arange(len(methods)) + i * width, g["seconds"], width, label=d)
    ax.set_yscale("log")
    ax.set_xticks(np.arange(len(methods)) + 0.4 - width / 2, methods, rotation=45, ha="right", fontsize=8)
    ax.set(ylabel="fit + sample time (s, log)", title="Generation time")
    ax.legend(fontsize=7)
    trtr = refs.groupby("dataset")["trtr"].mean()
    for m, g in summary.groupby("method"):
        kw = {"marker": "*", "s": 140, "zorder": 3} if m.startswith("tabsds") else {"s": 40}
        bx.scatter(g["detection_auc"], g["tstr"] - trtr.reindex(g["dataset"]).to_numpy(), label=m, **kw)
        cx.scatter(g["dcr_median"], g["detection_auc"], label=m, **kw)
    bx.axvline(0.5, color="gray", lw=0.8, ls=":")
    bx.axhline(0.0, color="gray", lw=0.8, ls=":")
    low, high = bx.get_ylim()
    bx.set_ylim(max(low, -1.0), high)
    bx.set(xlabel="detection AUC vs held-out rows (0.5 = indistinguishable)", ylabel="TSTR - TRTR (clipped at -1)",
           title="Fidelity and utility (one point per table)")
    bx.legend(fontsize=7)
    cx.set(xlabel="median distance to closest record (standardised)", ylabel="detection AUC",
           title="Privacy vs fidelity")
    fig.tight_layout()
    return fig


def _setup(params: Params, ctx: RunContext) -> str:
    described = {"breast_cancer": "breast_cancer (569 x 31, binary target)", "wine": "wine (178 x 14, 3 classes)",
                 "diabetes": "diabetes (442 x 11, regression; 'sex' categorical)",
                 "fair": f"statsmodels fair ({params.fair_rows} of 6,366 rows, target affairs > 0; rate_marriage, "
                         "religious, occupation, occupation_husb categorical)"}
    return (
        f"Tables: {'; '.join(described[d] for d in params.datasets)}. Each seed splits a table into two "
        f"random halves (the official code's split); generators see the training half. Seeds {ctx.seeds}; the "
        f"baselines run on the first {params.baseline_seeds}.\n\n"
        f"- **TabSDS** (official algorithm, NumPy): n_c in {params.n_levels} (claims: {params.claim_n_levels}), "
        f"simple JPPDS, IOS with n_prop = {params.n_prop}; categorical columns by the rank encoding of the mixed "
        "variant.\n"
        f"- **Baselines**: {', '.join(params.baselines)}. copulas GaussianMultivariate ({params.copula_marginal} "
        f"marginals); ctgan CTGAN / TVAE ({params.gan_epochs} epochs, library defaults otherwise); arfpy ARF "
        f"({params.arf_trees} trees); compact TabDDPM ({params.ddpm_steps} Adam steps, T = {params.ddpm_timesteps}, "
        "cosine schedule, MLP 3 x 128); independent marginals and the row bootstrap as references.\n"
        "- **Metrics**: fidelity vs the training half -- mean KS (numeric) / TV (categorical), ||corr_real - "
        "corr_syn||_F (Pearson, all columns), energy distance (tasks.two_sample, standardised numerics + one-hot, "
        f"<= {params.max_eval_rows} rows); detection AUC of a random forest ({params.eval_trees} trees, 3-fold CV) "
        "telling *held-out* real rows from synthetic ones; utility TSTR = random forest trained on synthetic, "
        "accuracy / R^2 on the held-out half (TRTR: trained on the real training half); privacy = median over "
        "training rows of the distance to the closest synthetic row (standardised numerics + one-hot), and the "
        "fraction of synthetic rows identical to a training row; the DCR ratio divides the median DCR by that of the "
        "held-out real rows of the same split (1 = as far from the training rows as fresh real data). Negative "
        f"control: jittered copies of the training rows (noise {params.jitter_scale:g} sd), on every seed. "
        "Time = fit + sample wall-clock of each generator "
        "in this run."
    )


def _notes(params: Params, metrics: dict, primary: str) -> str:
    sp, priv = metrics["timings"]["speed"], metrics["privacy"]
    comp, ctrl = metrics["competitive"]["tabsds"], metrics["competitive"][method.CONTROL]
    lines = [
        ("**Faithfulness.** The TabSDS steps follow the official Python utilities (`echaibub/TabSDS`, "
        "`utility_functions_syn_tab_sjppds_for_icml_2025.py` and the Synthcity plugin, defaults n_levels = 30, "
        "n_prop = 0.5, shuffle_type 'simple'): `pd.cut` equal-width bins of the last column only (the simple JPPDS "
        "uses no other bins), within-bin permutation of the other columns' rows, a full row shuffle, p rounds "
        "rotating columns; IOS marginals; ordinal ranks with random ties; rank matching; categorical columns "
        "encoded by level-ordered integer ranges (Algorithms 11-12), shuffled jointly with the raw numeric columns. "
        "Rewritten vectorised with one explicit generator, so draws differ from the official code's global-state "
        "NumPy calls, not the distribution. Not checked: the paper's text itself (only its code was readable), "
        "and the per-dataset n_c the paper selected (its tables use 20-1,000 levels chosen by a DCR criterion)."),
        ("**Deviations.** Synthcity is not used (heavy, old pins): copulas 0.14.1, ctgan 0.12.1 and arfpy 0.1.1 "
        "are installed without their dependency pins because they cap pandas < 3 (copulas, rdt) or call "
        "`np.in1d` (arfpy, removed in NumPy 2.4; a per-module alias is supplied, and columns are renamed to "
        "integers for arfpy's positional Series indexing under pandas 3). The copula models categorical codes as "
        "numbers (rounded back). DCR uses standardised numerics (the official code uses raw values, where one "
        "large-scale column dominates). Detection uses held-out rows (against the training rows a near-copy "
        "generator such as the bootstrap scores an AUC below 0.5). TabDDPM is ours and small."),
        f"**Reading.** Time ratios (TabSDS n_c = {params.claim_n_levels} / other), worst table: CTGAN "
        f"{sp['max_ratio_ctgan']:.2g}, TabDDPM {sp['max_ratio_tabddpm']:.2g}, ARF {sp['max_ratio_arf']:.2g}, "
        f"TVAE {sp['max_ratio_tvae']:.2g}, copula {sp['max_ratio_gaussian_copula']:.2g}. Competitive with TabDDPM on "
        f"{comp['n_ok']} of {comp['n_datasets']} tables ("
        + "; ".join(f"{d}: TSTR gap {v['tstr_gap']:+.3f}, AUC gap {v['auc_gap']:+.3f}, DCR-ratio gap "
                    f"{v['dcr_ratio_gap']:+.3f}" for d, v in comp["by_dataset"].items())
        + f"; TabSDS minus TabDDPM, one seed); without the DCR condition: {comp['fraction_ok_without_dcr']:.2f} of "
          "tables.",
        (f"**Negative control (jittered copies).** The training rows plus N(0, ({params.jitter_scale:g} sd)^2) noise on "
         "the numeric columns. By TSTR and held-out detection AUC alone (the claim's metric before the DCR "
         f"condition) it is competitive with TabDDPM on a fraction {ctrl['fraction_ok_without_dcr']:.2f} of tables "
         "(noise on integer-valued columns is visible to the detector; where the columns are continuous the "
         f"two axes cannot tell it from real data), and on {ctrl['fraction_ok']:.2f} with the DCR condition ("
         + "; ".join(f"{d}: DCR-ratio gap {v['dcr_ratio_gap']:+.3f}" for d, v in ctrl["by_dataset"].items())
         + "). The DCR condition is the verdict-rules issue's: TabSDS at n_c = 30 keeps each row within a "
           "few bins of a real one, so its DCR is a fraction of held-out rows'."),
        (f"**Timing.** Times start once a library baseline holds the global-RNG lock (the previous code started "
         "the clock before, so the baselines' times included waits for other seeds' baselines). The three speed "
         "checks are sanity checks, not counted claims: each ratio is one wall-clock measurement per table, "
         "taken while other seeds run in parallel threads, and the seed-robustness rerun flipped the two 100x "
         "ones with machine load. A counted speed claim would time TabSDS and the baseline interleaved in one "
         "process, repeated, with an interval over the repeats; with CTGAN and TabDDPM at about 9 s per table that "
         "would cost several times this paper's whole run, so it is not done. Their former controls (another slow "
         "generator in TabSDS's place) could not pass and are dropped."),
        f"**Exact copies.** Largest TabSDS exact-copy rate: {priv['tabsds_exact_copy_rate_max']:.3f}. "
        + ", ".join(f"{d}: {v[primary]:.3f}" for d, v in priv["exact_copy_rate"].items() if primary in v)
        + ". IOS draws uniformly between two order statistics, so a column whose values repeat (fair's age, "
        "years married, children and education take a handful of values) gets back exactly the observed values "
        "whenever the two order statistics tie; with categorical columns kept exactly, whole rows can then "
        "coincide with training rows. The 'new values by construction' argument holds for continuous columns "
        "only; the held-out half itself repeats training rows on fair "
        "(see `references.csv`, `holdout_exact_copy_rate`).",
        ("**Privacy (not a claim).** Median distance from a training row to its closest synthetic row, TabSDS "
         f"n_c = {params.claim_n_levels} vs a held-out real row: "
         + ", ".join(f"{d}: {priv['dcr_median'][d].get(primary, float('nan')):.2f} vs {priv['dcr_holdout_median'][d]:.2f}"
                     for d in params.datasets)
         + ". Shuffling within 30 equal-width bins keeps each row close to a real one; the paper picks n_c per table "
           "so that this distance matches the held-out one, which lowers fidelity (compare n_c = 10 in `summary.csv`)."),
    ]
    return "\n\n".join(lines)
