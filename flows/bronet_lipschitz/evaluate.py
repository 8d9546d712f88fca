"""BRONet, the evaluation: certified and PGD accuracy per configuration, the paired comparisons and their A/A
controls, the soundness checks, the step timing and the figure, from the per-seed records."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.bronet_lipschitz.claims import COMPARISONS, LABEL
from flows.bronet_lipschitz.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records
from paperflows.core.report import fmt


def _per_seed(rows: pd.DataFrame, config: str, column: str) -> np.ndarray:
    return est.per_seed(rows, column, config=config)


def _paired(rows: pd.DataFrame, new: str, base: str, column: str) -> dict[str, float]:
    return est.paired(rows, column, {"config": new}, {"config": base})


def evaluate(params: Params, records: Records) -> RunOutput:
    rows = records["runs"]
    configs = list(dict.fromkeys(rows["config"]))  # the configurations in the order they ran
    # per layer family, the mean step time of each timing repeat, in repeat order
    times = {name: g.sort_values("repeat")["seconds"].to_numpy()
             for name, g in records["step_times"].groupby("layer", sort=False)}
    radii = list(params.radii_255)

    metrics: dict = {"certified": {}, "pgd": {}, "clean": {}, "median_radius": {}, "compare": {}, "control": {}}
    for c in configs:
        metrics["certified"][c] = {f"r{r}": stats.summarize(_per_seed(rows, c, f"cert_{r}")) for r in radii}
        metrics["pgd"][c] = {f"r{r}": stats.summarize(_per_seed(rows, c, f"pgd_{r}")) for r in radii}
        metrics["clean"][c] = stats.summarize(_per_seed(rows, c, "clean_acc"))
        metrics["median_radius"][c] = stats.summarize(_per_seed(rows, c, "median_radius"))
    for _, new, base, r, aa, _ in COMPARISONS:
        metrics["compare"][f"{new}_vs_{base}"] = {
            f"r{q}": _paired(rows, new, base, f"cert_{q}") for q in radii}
        metrics["control"][f"aa_{aa}"] = {
            f"r{q}": _paired(rows, f"{aa}_twin", aa, f"cert_{q}") for q in radii}
    cert_minus_pgd = max(float((rows[f"cert_{r}"] - rows[f"pgd_{r}"]).max()) for r in radii)
    fft_rows = rows[rows["layer"].isin(["bro", "cayley"])]
    metrics["sanity"] = {
        "bro_core_error_max": float(rows["orth_core_error"].max()),
        "bro_used_error_max": float(rows["orth_used_error"].max()),
        "violations_total": int(rows["violations"].sum()),
        "max_cert_minus_pgd": cert_minus_pgd,
        "max_bound_bro_cayley": float(fft_rows["lipschitz_bound"].max()),
        "max_bound_soc": float(rows[rows["layer"] == "soc"]["lipschitz_bound"].max()),
    }
    step = {name: stats.summarize(values) for name, values in times.items()}
    step["bro_over_soc"] = stats.ratio_of_means(times["bro"], times["soc"])
    step["cayley_over_soc"] = stats.ratio_of_means(times["cayley"], times["soc"])
    step["bro_over_cayley"] = stats.ratio_of_means(times["bro"], times["cayley"])
    step["soc_twin_over_soc"] = stats.ratio_of_means(times["soc_twin"], times["soc"])
    metrics["timings"] = {"step": step, "train_s": {c: float(_per_seed(rows, c, "train_s").mean()) for c in configs}}

    figure, axes = plt.subplots(1, 2, figsize=(11, 4))
    plot_rows = []
    for c in configs:
        if c.endswith("_twin"):
            continue
        means = [metrics["certified"][c][f"r{r}"]["mean"] for r in radii]
        axes[0].plot(radii, means, "o-", label=LABEL[c])
        plot_rows += [{"x": r, "y": m, "series": LABEL[c]} for r, m in zip(radii, means)]
    axes[0].set(xlabel="l2 radius (x 1/255)", ylabel="certified accuracy (test)",
                title=f"8x8 digits, mean of {len(records.seeds)} seeds")
    axes[0].legend(fontsize=7)
    names = ["bro", "cayley", "soc"]
    axes[1].bar(names, [1000 * step[n]["mean"] for n in names],
                yerr=[[1000 * (step[n]["mean"] - step[n]["ci_low"]) for n in names],
                      [1000 * (step[n]["ci_high"] - step[n]["mean"]) for n in names]])
    axes[1].set(ylabel="ms per training step (1 CPU thread)", title=f"batch {params.batch_size}")
    figure.tight_layout()
    return RunOutput(metrics=metrics, tables={"plot": pd.DataFrame(plot_rows), "runs": rows}, figure=figure,
                     setup=_setup(params, configs, len(records.seeds)), notes=_measured(params, metrics, configs))


def _setup(p: Params, configs: list[str], n_seeds: int) -> str:
    return (
        f"**Data.** scikit-learn's 8x8 digits, pixels scaled to [0, 1], stratified {1 - p.test_fraction:.0%}/"
        f"{p.test_fraction:.0%} split per seed ({n_seeds} seeds); radii {p.radii_255} / 255 in that pixel "
        "scale (no input normalisation, so the certificate is in pixel units).\n\n"
        f"**Network.** LipConvNet with stages of {p.channels} channels (two {p.kernel_size}x{p.kernel_size} orthogonal "
        "convs per stage, MaxMin after each, invertible 2x2 downsampling between stages), an orthogonal dense head of "
        "the same family. Layers: BRO (rank fraction "
        f"{p.bro_rank} for square convs, eps = {p.bro_eps:g} x mean diag, identity init, zero-pad + crop as the official "
        f"code), Cayley (the official repository's FFT Cayley conv after Trockman & Kolter: the same pad + crop, centred "
        "kernel, alpha W / ||W||, generalised transform for rectangular layers), SOC (skew conv divided by the smallest "
        f"of four reshaped-kernel norms as the official code; Taylor series, {p.soc_train_terms} terms in training, "
        f"{p.soc_eval_terms} at evaluation). Scaled from the plan (16/32/64 channels, 40 epochs) to fit the ~2-minute "
        "budget, decided before any run.\n\n"
        f"**Training.** SGD lr {p.lr} (cosine to 0), momentum {p.momentum}, weight decay {p.weight_decay:g}, batch "
        f"{p.batch_size}, {p.epochs} epochs. Losses: CE; offset-CE (Xent: T * CE((z - offset sqrt(2) onehot) / T)); "
        f"LA (the same offset logits under a focal loss, alpha {p.la_alpha}, beta {p.la_beta}), T = {p.temperature}, "
        f"offset factor {p.offset} (official CIFAR-100 defaults; the trainer's offset is factor x sqrt(2)). Runs per "
        f"seed: {', '.join(LABEL[c] for c in configs)}.\n\n"
        "**Certification.** radius = (z_y - max_{j != y} z_j) / (sqrt(2) L) with L = max(1, product of the layers' "
        f"spectral norms by {p.power_iters} power-iteration steps, tasks.lipschitz); certified accuracy = share of test "
        f"points with radius > r. Soundness: PGD-l2 on the logit margin ({p.pgd_steps} steps, step 2.5 r / steps, "
        f"{p.pgd_restarts} restart(s), tasks.attacks) at each radius. Timing: {p.timing_repeats} repeats x "
        f"{p.timing_steps} rounds, each round one training step of every layer family in a shuffled order (the "
        "families interleaved step by step in one process), one thread, after all training; the clock is the "
        "thread's CPU time, which the machine's other load does not inflate as it does wall time."
    )


def _interval(d: dict) -> str:
    return f"{fmt(d['mean'])} [{fmt(d['ci_low'])}, {fmt(d['ci_high'])}]"


def _measured(p: Params, m: dict, configs: list[str]) -> str:
    """The measured numbers behind the claims, for the notes (how to read them is in NOTES.md)."""
    radii = list(p.radii_255)
    table = "\n".join(
        f"| {LABEL[c]} | {m['clean'][c]['mean']:.3f} | "
        + " | ".join(f"{m['certified'][c][f'r{r}']['mean']:.3f} / {m['pgd'][c][f'r{r}']['mean']:.3f}" for r in radii if r > 0)
        + f" | {m['median_radius'][c]['mean']:.3f} |" for c in configs)
    header = ("| run | clean | " + " | ".join(f"cert / PGD at {r}/255" for r in radii if r > 0)
              + " | median radius |\n|" + "---|" * (3 + sum(r > 0 for r in radii)))
    comparisons = "; ".join(
        f"{LABEL[new]} - {LABEL[base]} at {r}/255: {_interval(m['compare'][f'{new}_vs_{base}'][f'r{r}'])} "
        f"(A/A {LABEL[aa]}: {_interval(m['control'][f'aa_{aa}'][f'r{r}'])})" for _, new, base, r, aa, _ in COMPARISONS)
    excluding_zero = list(dict.fromkeys(
        f"{LABEL[aa]} at {r}/255" for _, _, _, r, aa, _ in COMPARISONS
        if m["control"][f"aa_{aa}"][f"r{r}"]["ci_low"] > 0 or m["control"][f"aa_{aa}"][f"r{r}"]["ci_high"] < 0))
    st = m["timings"]["step"]
    s = m["sanity"]
    return (
        "**Certified / PGD robust accuracy (mean over seeds).**\n\n" + header + "\n" + table + "\n\n"
        f"**Paired differences in certified accuracy** (mean [95% CI]): {comparisons}. A/A differences whose "
        f"interval excludes 0: {'; '.join(excluding_zero) or 'none'}.\n\n"
        f"**Time per training step** (ms of thread CPU time, one thread): BRO {1000 * st['bro']['mean']:.1f}, Cayley "
        f"{1000 * st['cayley']['mean']:.1f}, SOC {1000 * st['soc']['mean']:.1f}; BRO / SOC {st['bro_over_soc']['ratio']:.2f} "
        f"[{st['bro_over_soc']['ci_low']:.2f}, {st['bro_over_soc']['ci_high']:.2f}], BRO / Cayley "
        f"{st['bro_over_cayley']['ratio']:.2f}, SOC A/A {st['soc_twin_over_soc']['ratio']:.2f}.\n\n"
        f"**Orthogonality and soundness.** BRO's full circular operator deviates from an isometry by at most "
        f"{s['bro_core_error_max']:.1e}; the layer as used (zero pad, circular conv, crop) has distance ratios off 1 by "
        f"up to {s['bro_used_error_max']:.3f} on random inputs. Network Lipschitz bounds: BRO / Cayley max "
        f"{s['max_bound_bro_cayley']:.6f}, SOC max {s['max_bound_soc']:.6f}. Certified-but-broken points: "
        f"{s['violations_total']}; max(certified - PGD accuracy) = {s['max_cert_minus_pgd']:+.3f}."
    )
