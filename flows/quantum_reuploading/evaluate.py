"""Deep data re-uploading, the evaluation: accuracy against encoding depth and width, repetition, the D2 bound
checks and the figure, from the per-circuit records."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.quantum_reuploading import method
from flows.quantum_reuploading.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records
from tasks.correlation import spearman


def evaluate(params: Params, records: Records) -> RunOutput:
    rows = records["runs"]
    metrics = _metrics(params, rows)
    plot = _plot_table(params, rows)
    return RunOutput(metrics=metrics, tables={"plot": plot, "runs": rows, "d2": _d2_table(rows)},
                     figure=_figure(params, plot, rows), setup=_setup(params, method.build_jobs(params)),
                     notes=_measured(params, metrics))


def _acc(rows: pd.DataFrame, ds: str, D: int, N: int, R: int, col: str = "test_acc") -> np.ndarray:
    """``col`` per seed (seed order) of the circuit (N, R) on data set ``ds`` at dimension D."""
    return est.per_seed(rows, col, dataset=ds, D=D, N=N, R=R)


def _metrics(params: Params, rows: pd.DataFrame) -> dict:
    n0, dims = params.narrow_qubits, sorted(params.synthetic_dims)
    m: dict = {"synthetic": {}, "digits": {}}
    for ds, ds_dims in (("synthetic", dims), ("digits", sorted(params.digits_dims))):
        out = m[ds]
        reps = params.repetitions if ds == "synthetic" else [1]
        out["deep_narrow"] = {
            f"R{r}": {str(d // (3 * n0)): {"test_acc": stats.summarize(_acc(rows, ds, d, n0, r)),
                                          "train_acc": stats.summarize(_acc(rows, ds, d, n0, r, "train_acc"))}
                      for d in ds_dims} for r in reps}
        Ls = [d // (3 * n0) for d in ds_dims]
        curve = [float(_acc(rows, ds, d, n0, 1).mean()) for d in ds_dims]
        per_seed = np.array([_acc(rows, ds, d, n0, 1) for d in ds_dims])  # (n_L, n_seeds)
        dn = out["deep_narrow"]
        dn["spearman_L_test_acc"] = spearman(Ls, curve)
        dn["spearman_per_seed"] = [spearman(Ls, per_seed[:, i]) for i in range(per_seed.shape[1])]
        dn["largest_L"] = Ls[-1]
        dn["largest_L_test_acc"] = stats.summarize(per_seed[-1])
        dn["smallest_L"] = Ls[0]
        dn["smallest_L_test_acc"] = stats.summarize(per_seed[0])
        dn["largest_L_train_acc"] = stats.summarize(_acc(rows, ds, ds_dims[-1], n0, 1, "train_acc"))
        shallow = [i for i, L in enumerate(Ls) if L <= 2]
        if shallow:
            worst = min(shallow, key=lambda i: curve[i])
            dn["shallow_min_test_acc"] = {**stats.summarize(per_seed[worst]), "L": Ls[worst]}
        out["wide"] = {str(d): stats.summarize(_acc(rows, ds, d, d // 3, 1)) for d in params.wide_dims}
        out["width_sweep"] = {str(n): stats.summarize(_acc(rows, ds, params.width_dim, n, 1))
                              for n in params.width_qubits}
        out["width_sweep_train"] = {str(n): stats.summarize(_acc(rows, ds, params.width_dim, n, 1, "train_acc"))
                                    for n in params.width_qubits}
        wide, deep = _acc(rows, ds, params.width_dim, params.width_dim // 3, 1), _acc(rows, ds, params.width_dim, n0, 1)
        out["wide_minus_deep"] = {**stats.paired_difference(wide, deep), "D": params.width_dim,
                                  "N_wide": params.width_dim // 3, "N_deep": n0}
        if ds == "synthetic":
            r_max = max(params.repetitions)
            out["repetition_gain_largest_L"] = {
                **stats.paired_difference(_acc(rows, ds, dims[-1], n0, r_max), _acc(rows, ds, dims[-1], n0, 1)),
                "R": r_max, "L": Ls[-1]}
            out["repetition_train_gain_largest_L"] = stats.paired_difference(
                _acc(rows, ds, dims[-1], n0, r_max, "train_acc"), _acc(rows, ds, dims[-1], n0, 1, "train_acc"))

    # negative controls: the same circuits trained on permuted labels (nothing to learn, so nothing to lose)
    perm = "synthetic_permuted"
    curve = [float(_acc(rows, perm, d, n0, 1).mean()) for d in dims]
    per_seed = np.array([_acc(rows, perm, d, n0, 1) for d in dims])
    Ls = [d // (3 * n0) for d in dims]
    m[perm] = {
        "deep_narrow": {"test_acc": {str(L): c for L, c in zip(Ls, curve)},
                        "spearman_L_test_acc": spearman(Ls, curve),
                        "spearman_per_seed": [spearman(Ls, per_seed[:, i]) for i in range(per_seed.shape[1])]},
        "wide_minus_deep": {**stats.paired_difference(_acc(rows, perm, params.width_dim, params.width_dim // 3, 1),
                                                      _acc(rows, perm, params.width_dim, n0, 1)),
                            "D": params.width_dim},
    }

    r1 = rows[rows.R == 1]
    syn1 = r1[r1.dataset == "synthetic"]
    excess = np.concatenate([syn1["init_excess_lcb"], syn1["trained_excess_lcb"]])
    excess_per_seed = [float(max(g["init_excess_lcb"].max(), g["trained_excess_lcb"].max()))
                       for _, g in syn1.groupby("seed", sort=True)]
    iid_excess = np.concatenate([syn1["init_iid_d2"] - syn1["iid_bound"], syn1["trained_iid_d2"] - syn1["iid_bound"]])
    narrow = syn1[syn1.N == n0].groupby("L")
    m["d2"] = {
        "empirical": {"max_excess_lcb": float(excess.max()), "max_excess_lcb_per_seed": excess_per_seed,
                      "max_excess_point": float(np.concatenate([syn1["init_d2"] - syn1["init_bound"],
                                                                syn1["trained_d2"] - syn1["trained_bound"]]).max()),
                      "digits_max_excess_lcb": float(np.concatenate([r1[r1.dataset == "digits"][c] for c in
                                                                     ("init_excess_lcb", "trained_excess_lcb")]).max())},
        "exact_iid": {"max_excess": float(iid_excess.max())},
        "narrow_by_L": {str(L): {"trained_d2": float(g["trained_d2"].mean()), "init_d2": float(g["init_d2"].mean()),
                                 "trained_iid_d2": float(g["trained_iid_d2"].mean()), "bound": float(g["trained_bound"].mean()),
                                 "iid_bound": float(g["iid_bound"].mean())} for L, g in narrow},
        # per-layer decay of S = 2^D2 - 1 of the exact i.i.d. mean state vs the bound's e^{-sigma^2}
        "exact_iid_decay_rate": _decay_rate(syn1[syn1.N == n0]),
        "bound_decay_rate": float(np.pi ** 2 / 12),
    }
    syn = rows[rows.dataset == "synthetic"]
    real = rows[rows.dataset != perm]
    m["class_mean_gap"] = {  # |E[<Z0>|y=0] - E[<Z0>|y=1]| on test data vs 2 sqrt((2^N-1) e^{-L sigma^2})
        "narrow_by_L": {str(L): {"measured": float(g["z_class_gap"].mean()), "bound": float(g["z_gap_bound"].mean())}
                        for L, g in syn[(syn.N == n0) & (syn.R == 1)].groupby("L")},
        "max_excess_point": float((real["z_class_gap"] - real["z_gap_bound"]).max()),
        # gap minus 3 standard errors of the finite test set, minus the bound
        "max_excess_lcb": float((real["z_class_gap"] - 3 * real["z_class_gap_se"] - real["z_gap_bound"]).max()),
    }
    m["timings"] = {"job_seconds_total": float(rows["seconds"].sum()),
                    "job_seconds_max": float(rows["seconds"].max())}
    return m


def _decay_rate(frame: pd.DataFrame) -> float:
    """Slope of -ln S(L), S = 2^{D2} - 1, over L (exact i.i.d. mean state, trained, mean over seeds),
    using points with S > 1e-12."""
    g = frame.groupby("L")["trained_iid_d2"].mean()
    S = 2.0 ** g.to_numpy() - 1.0
    ok = S > 1e-12
    if ok.sum() < 2:
        return float("nan")
    return float(-np.polyfit(g.index.to_numpy()[ok], np.log(S[ok]), 1)[0])


def _plot_table(params: Params, rows: pd.DataFrame) -> pd.DataFrame:
    """Test (and train) accuracy against data dimension D for deep-narrow and wide circuits."""
    n0 = params.narrow_qubits
    out = []

    def add(series: str, ds: str, dims, n_of, r: int, col: str = "test_acc") -> None:
        for d in sorted(dims):
            s = stats.summarize(_acc(rows, ds, d, n_of(d), r, col))
            out.append({"x": d, "y": s["mean"], "y_low": s["ci_low"], "y_high": s["ci_high"], "series": series,
                        "N": n_of(d), "L": d // (3 * n_of(d)), "R": r})

    for r in params.repetitions:
        add(f"synthetic deep-narrow N={n0} R={r} test", "synthetic", params.synthetic_dims, lambda d: n0, r)
    add(f"synthetic deep-narrow N={n0} R=1 train", "synthetic", params.synthetic_dims, lambda d: n0, 1, "train_acc")
    add("synthetic wide N=D/3 L=1 test", "synthetic", params.wide_dims, lambda d: d // 3, 1)
    add(f"digits deep-narrow N={n0} test", "digits", params.digits_dims, lambda d: n0, 1)
    add(f"digits deep-narrow N={n0} train", "digits", params.digits_dims, lambda d: n0, 1, "train_acc")
    add("digits wide N=D/3 L=1 test", "digits", params.wide_dims, lambda d: d // 3, 1)
    return pd.DataFrame(out)


def _d2_table(rows: pd.DataFrame) -> pd.DataFrame:
    cols = ["dataset", "D", "N", "L", "R", "seed", "sigma2", "init_S", "init_S_se", "init_d2", "init_d2_lcb", "trained_S",
            "trained_S_se", "trained_d2", "trained_d2_lcb", "trained_bound", "init_iid_d2", "trained_iid_d2", "iid_bound",
            "z_class_gap", "z_class_gap_se", "z_gap_bound"]
    return rows[[c for c in cols if c in rows.columns]].copy()


def _figure(params: Params, plot: pd.DataFrame, rows: pd.DataFrame):
    fig, (ax, bx, cx) = plt.subplots(1, 3, figsize=(17, 5.6))
    for series, g in plot.groupby("series", sort=False):
        style = "--" if "train" in series else "-"
        color = "tab:gray" if "digits" in series else None
        marker = "s" if "wide" in series else "o"
        ax.errorbar(g["x"], g["y"], yerr=[g["y"] - g["y_low"], g["y_high"] - g["y"]], linestyle=style, marker=marker,
                    capsize=3, label=series, alpha=0.6 if "digits" in series else 1.0,
                    **({"color": color} if color and "train" in series else {}))
    ax.axhline(0.5, color="k", lw=0.8, ls=":")
    ax.set(xscale="log", xlabel="data dimension D", ylabel="accuracy",
           title=f"Deep-narrow (N={params.narrow_qubits}, L=D/{3 * params.narrow_qubits}) vs wide (N=D/3, L=1)")
    ax.set_xticks(sorted(set(params.synthetic_dims) | set(params.digits_dims)))
    ax.set_xticklabels([str(d) for d in sorted(set(params.synthetic_dims) | set(params.digits_dims))])
    ax.minorticks_off()
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)

    syn = rows[(rows.dataset == "synthetic") & (rows.R == 1) & (rows.N == params.narrow_qubits)]
    g = syn.groupby("L").mean(numeric_only=True)
    floor = 1e-6
    clip = lambda v: np.maximum(np.asarray(v, dtype=float), floor)  # noqa: E731
    for stage, style in (("trained", "o-"), ("init", "o--")):
        d2 = clip(g[f"{stage}_d2"])
        hi = clip(np.log2(1 + np.maximum(g[f"{stage}_S"], 0) + 3 * g[f"{stage}_S_se"]))
        bx.errorbar(g.index, d2, yerr=[np.zeros_like(d2), hi - d2], fmt=style, capsize=3,
                    label=f"empirical D2 on data ({stage}), bar to +3 SE")
    bx.plot(g.index, clip(g["trained_iid_d2"]), "s-", label="exact D2, i.i.d. uniform angles (trained)")
    bx.plot(g.index, clip(g["trained_bound"]), "k-", label="bound log2(1+(2^N-1)e^{-L s^2}), data s^2")
    bx.plot(g.index, clip(g["iid_bound"]), "k:", label="bound, s^2 = pi^2/12")
    bx.set(xscale="log", yscale="log", xlabel="encoding layers L", ylabel="D2(E_x rho || I/d) (bits)",
           title=f"Mean encoded state -> maximally mixed (N={params.narrow_qubits}; values < {floor:g} drawn at {floor:g})")
    bx.set_xticks(sorted(g.index))
    bx.set_xticklabels([str(L) for L in sorted(g.index)])
    bx.minorticks_off()
    bx.legend(fontsize=7, loc="lower left")

    for ds, c in (("synthetic", "tab:blue"), ("digits", "tab:gray")):
        means = [_acc(rows, ds, params.width_dim, n, 1).mean() for n in params.width_qubits]
        trains = [_acc(rows, ds, params.width_dim, n, 1, "train_acc").mean() for n in params.width_qubits]
        cx.plot(params.width_qubits, means, "o-", color=c, label=f"{ds} test")
        cx.plot(params.width_qubits, trains, "o--", color=c, label=f"{ds} train")
    cx.axhline(0.5, color="k", lw=0.8, ls=":")
    cx.set(xscale="log", xlabel="qubits N (L = D/3N)", ylabel="accuracy", title=f"Width sweep at D = {params.width_dim}")
    cx.set_xticks(params.width_qubits)
    cx.set_xticklabels([str(n) for n in params.width_qubits])
    cx.minorticks_off()
    cx.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _setup(params: Params, jobs: list[dict]) -> str:
    n0 = params.narrow_qubits
    return (
        "Exact batched statevector simulation in PyTorch (complex128) of the official circuit: per encoding layer "
        "and qubit `Rot(x_3 features)` then trainable `Rot(theta)`, then a CNOT ring; the L-layer block repeated "
        "R times with fresh parameters; readout probabilities of qubit 0 used as softmax logits "
        "(loss softplus(-s <Z_0>)), trainable angles ~ N(0, 1), full-batch Adam "
        f"(lr {params.lr}, {params.steps} steps), {params.seeds} seeds.\n\n"
        f"- **Synthetic** (official generator): x ~ U(-pi/2, pi/2)^D, y = [sum x < 0], kept if |sum x| > "
        f"{params.margin_sd} std(sum x); {params.n_train} train / {params.n_test} test points per (seed, D).\n"
        f"- **Deep-narrow**: N = {n0}, L = D/{3 * n0} for D in {sorted(params.synthetic_dims)} "
        f"(L = {[d // (3 * n0) for d in sorted(params.synthetic_dims)]}), R in {params.repetitions}.\n"
        f"- **Wide**: N = D/3, L = 1 for D in {params.wide_dims}; **width sweep** at D = {params.width_dim}: "
        f"N in {params.width_qubits}, L = D/3N.\n"
        f"- **Digits**: scikit-learn digits {params.digits_classes[0]} vs {params.digits_classes[1]}, stratified "
        f"{params.digits_train_frac:.0%} train split per seed, PCA to D in {sorted(params.digits_dims)} fitted on the "
        "train part, each component standardised; same circuits (R = 1).\n"
        f"- **D2 diagnostics**: empirical D2 = log2(1 + S) of the mean state over {params.d2_samples} fresh inputs, "
        "S = d Tr(mean rho)^2 - 1 estimated without bias by the U-statistic over pairs (standard error from its "
        "Hoeffding projection), at random init and after training, against the bound with sigma^2 = the mean "
        "per-feature variance of those inputs; and the exact mean state for i.i.d. U(-pi/2, pi/2) angles "
        "(averaged data channels, Pauli-diagonal with factors (2/pi)^3, (2/pi)^2, 2/pi) against the bound with "
        "sigma^2 = pi^2/12.\n"
        f"- **Negative controls** (permuted labels): the synthetic draw of each (seed, D) with its training labels "
        f"shuffled by a seeded permutation (test labels untouched), trained the same way: the N = {n0} circuits at "
        f"every D (R = 1) and the wide N = {params.width_dim // 3}, L = 1 circuit at D = {params.width_dim}.\n"
        f"- {len(jobs)} circuit configurations x {params.seeds} seeds, one Prefect task each, torch limited to one "
        "intra-op thread while they run."
    )


def _by_L(values: dict) -> list[tuple[str, dict]]:
    return sorted(values.items(), key=lambda kv: int(kv[0]))


def _measured(params: Params, m: dict) -> str:
    """The measured numbers behind the claims, for the notes (how to read them is in NOTES.md)."""
    syn = m["synthetic"]
    dn = syn["deep_narrow"]
    wmd = syn["wide_minus_deep"]
    rep = syn["repetition_gain_largest_L"]
    ctrl = m["synthetic_permuted"]
    gap = m["class_mean_gap"]
    r_max = max(params.repetitions)
    n_w = str(wmd["N_wide"])
    lines = [
        f"**Measured**: test accuracy of the N = {params.narrow_qubits} circuits by L (R = 1): "
        + ", ".join(f"L={L}: {v['test_acc']['mean']:.3f} (train {v['train_acc']['mean']:.3f})" for L, v in _by_L(dn["R1"]))
        + f"; Spearman {dn['spearman_L_test_acc']:.2f} (per seed "
        + ", ".join(f"{v:.2f}" for v in dn["spearman_per_seed"]) + f"). Wide minus deep at D = {wmd['D']}: "
        f"{wmd['mean']:+.3f} [{wmd['ci_low']:+.3f}, {wmd['ci_high']:+.3f}] (paired p = {wmd['p_value']:.3g}); the "
        f"wide N = {n_w}, L = 1 circuit's train accuracy {syn['width_sweep_train'][n_w]['mean']:.3f} against test "
        f"{syn['width_sweep'][n_w]['mean']:.3f}; on digits wide minus deep {m['digits']['wide_minus_deep']['mean']:+.3f}. "
        f"Repetition R = {rep['R']} minus R = 1 at L = {rep['L']}: {rep['mean']:+.3f} [{rep['ci_low']:+.3f}, "
        f"{rep['ci_high']:+.3f}] (train-accuracy gain {syn['repetition_train_gain_largest_L']['mean']:+.3f}); at every "
        f"L (R = {r_max} minus R = 1, test): "
        + ", ".join(f"L={L}: {dn[f'R{r_max}'][L]['test_acc']['mean'] - v['test_acc']['mean']:+.3f}" for L, v in _by_L(dn["R1"]))
        + ". Exact i.i.d. D2 decays at "
        f"{m['d2']['exact_iid_decay_rate']:.3f} per layer in ln S, against the bound's sigma^2 = {m['d2']['bound_decay_rate']:.3f}.",
        "",
        f"**Measured controls**: trained on permuted labels, the N = {params.narrow_qubits} circuits score "
        + ", ".join(f"L={L}: {a:.3f}" for L, a in _by_L(ctrl["deep_narrow"]["test_acc"]))
        + f" (Spearman {ctrl['deep_narrow']['spearman_L_test_acc']:.2f}; per seed "
        + ", ".join(f"{v:.2f}" for v in ctrl["deep_narrow"]["spearman_per_seed"])
        + f"); wide minus deep at D = {ctrl['wide_minus_deep']['D']}: {ctrl['wide_minus_deep']['mean']:+.3f} "
        f"[{ctrl['wide_minus_deep']['ci_low']:+.3f}, {ctrl['wide_minus_deep']['ci_high']:+.3f}]. The shallowest circuit "
        f"of the family (L = {dn['smallest_L']}): {dn['smallest_L_test_acc']['mean']:.3f}.",
    ]
    shallow = dn.get("shallow_min_test_acc")
    if shallow:
        lines[-1] += (f" Shallow setup check (>= 0.8 at every L <= 2): worst {shallow['mean']:.3f} "
                      f"[{shallow['ci_low']:.3f}, {shallow['ci_high']:.3f}] at L = {shallow['L']}.")
    lines += ["", "**Measured closed-form comparisons**: (i) D2 of the mean state against the bound: largest excess of "
              f"the empirical lower confidence bound {m['d2']['empirical']['max_excess_lcb']:.2e} bits, of the point "
              f"estimates {m['d2']['empirical']['max_excess_point']:.1e} bits; exact i.i.d. mean state "
              f"{m['d2']['exact_iid']['max_excess']:.2e}. (ii) class-mean output gap against its bound: largest excess "
              f"beyond 3 test-set standard errors {gap['max_excess_lcb']:+.3f}."]
    return "\n".join(lines)

