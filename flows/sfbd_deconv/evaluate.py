"""SFBD, the evaluation: paired differences of the sample scores over seeds, the rounds, the denoised-set
diagnostics, the figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.sfbd_deconv.claims import KINDS, PRIMARY
from flows.sfbd_deconv.params import Params
from paperflows.core import estimates as est
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records
from paperflows.core.report import fmt_estimate

LABEL = {"toy": "2-D density (sliced W2 to held-out clean data)", "digits": "8x8 digits (digits-FID)"}


def evaluate(params: Params, records: Records) -> RunOutput:
    rows, denoise = records["metric_rows"], records["denoised_sets"]
    metrics = _aggregate(records, params)
    first = _shown(records["shown"], records.seeds[0])

    primary = rows[rows["metric"] == rows["data"].map(PRIMARY)]
    plot = (primary.groupby(["data", "method", "round"])["value"].mean().reset_index()
            .assign(series=lambda f: f["data"] + ":" + f["method"]).rename(columns={"round": "x", "value": "y"}))
    tables = {"plot": plot[["x", "y", "series"]], "metric_rows": rows, "denoised_sets": denoise,
              "digit_samples": _digit_strip(first["digits"], params)}
    return RunOutput(metrics=metrics, tables=tables, figure=_figure(rows, first, metrics, params),
                     setup=_setup(params), notes=_measured(params, metrics))


def _shown(table: pd.DataFrame, seed: int) -> dict[str, dict[str, list]]:
    """The points and digits shown of one seed: data type -> panel key -> list of points (lists)."""
    rows = table[table["seed"] == seed]
    return {kind: {key: [list(point) for point in g["point"]] for key, g in rows_kind.groupby("key", sort=False)}
            for kind, rows_kind in rows.groupby("data", sort=False)}


def _aggregate(records: Records, params: Params) -> dict:
    rows, denoise, reference, tasks = (records[name] for name in ("metric_rows", "denoised_sets", "reference", "tasks"))
    metrics: dict = {}
    K = params.rounds
    for kind in KINDS:
        def arm(method_name: str, round_: int, metric: str = PRIMARY[kind], kind: str = kind) -> dict:
            return {"data": kind, "method": method_name, "round": round_, "metric": metric}

        def summary(method_name: str, round_: int, metric: str = PRIMARY[kind]) -> dict[str, float]:
            return est.summary(rows, "value", **arm(method_name, round_, metric))

        def diff(a: dict, b: dict) -> dict[str, float]:
            return est.paired(rows, "value", a, b)

        final = {"oracle": 0, "noisy_naive": 0, "clean_only_low": 0, "clean_only_high": 0,
                 "sfbd_low": K, "sfbd_high": K, "sfbd_noclean": K, "noisy_finetune_low": K}
        scores = sorted(rows.loc[rows["data"] == kind, "metric"].unique())
        methods = {m: {metric: summary(m, r, metric) for metric in scores} for m, r in final.items()}
        rounds = {m: {f"round_{r}": summary(m, r) for r in range(K + 1)}
                  for m in ("sfbd_low", "sfbd_high", "sfbd_noclean")}
        sfbd_low, ablated = arm("sfbd_low", K), arm("noisy_finetune_low", K)
        diff_ = {
            "sfbd_low_minus_clean_only_low": diff(sfbd_low, arm("clean_only_low", 0)),
            "sfbd_low_minus_noisy_naive": diff(sfbd_low, arm("noisy_naive", 0)),
            "sfbd_high_minus_sfbd_low": diff(arm("sfbd_high", K), sfbd_low),
            "sfbd_low_minus_sfbd_noclean": diff(sfbd_low, arm("sfbd_noclean", K)),
            "sfbd_low_last_minus_first_round": diff(sfbd_low, arm("sfbd_low", 1)),
            "sfbd_high_minus_clean_only_high": diff(arm("sfbd_high", K), arm("clean_only_high", 0)),
            "sfbd_low_minus_oracle": diff(sfbd_low, arm("oracle", 0)),
            # the controls: the same differences for the ablation without the denoising step
            "noisy_finetune_low_minus_clean_only_low": diff(ablated, arm("clean_only_low", 0)),
            "noisy_finetune_low_minus_noisy_naive": diff(ablated, arm("noisy_naive", 0)),
            "noisy_finetune_low_last_minus_first_round": diff(ablated, arm("noisy_finetune_low", 1)),
            "noisy_finetune_low_minus_sfbd_low": diff(ablated, sfbd_low),  # reported, not gated
        }
        dn = denoise[denoise["data"] == kind]
        references = list(dict.fromkeys(reference.loc[reference["data"] == kind, "metric"]))
        metrics[kind] = {
            "primary_metric": PRIMARY[kind], "methods": methods, "rounds": rounds, "diff": diff_,
            "reference": {k: est.summary(reference, "value", data=kind, metric=k) for k in references},
            "denoised_mse": {m: {f"round_{r}": float(g["mse_to_truth"].mean()) for r, g in gm.groupby("round")}
                             for m, gm in dn.groupby("method")},
            "noisy_mse": float(np.mean(est.per_seed(tasks, "noisy_mse", data=kind))),
            "denoise_grid": est.seed_series(tasks, "denoise_grid", {"data": kind}).iloc[0].tolist(),
        }
        if kind == "digits":
            metrics[kind]["classifier_train_accuracy"] = float(np.mean(est.per_seed(tasks, "classifier_accuracy",
                                                                                    data=kind)))
    metrics["timings"] = {f"{t['data']}_seed{t['seed']}_{k}": t[k] for _, t in tasks.iterrows()
                          for k in ("wall_s", "cpu_s")}
    return metrics


def _figure(rows: pd.DataFrame, shown: dict[str, dict], metrics: dict, params: Params):
    fig = plt.figure(figsize=(17, 9))
    grid = fig.add_gridspec(2, 4)
    styles = {"sfbd_low": ("C0", "SFBD, low clean fraction"), "sfbd_high": ("C1", "SFBD, high clean fraction"),
              "sfbd_noclean": ("C2", "SFBD without clean pretraining")}
    baselines = {"oracle": ("k", "oracle (all clean)"), "noisy_naive": ("C3", "noisy-only naive"),
                 "clean_only_low": ("C0", "clean-only (low)"), "clean_only_high": ("C1", "clean-only (high)")}
    for col, kind in enumerate(KINDS):
        ax = fig.add_subplot(grid[0, 2 * col:2 * col + 2])
        m = metrics[kind]
        for name, (color, label) in styles.items():
            r = m["rounds"][name]
            x = np.arange(params.rounds + 1)
            y = np.array([r[f"round_{k}"]["mean"] for k in x])
            lo = np.array([r[f"round_{k}"]["ci_low"] for k in x])
            hi = np.array([r[f"round_{k}"]["ci_high"] for k in x])
            ax.plot(x, y, "o-", color=color, label=label)
            ax.fill_between(x, lo, hi, color=color, alpha=0.15)
        for name, (color, label) in baselines.items():
            ax.axhline(m["methods"][name][PRIMARY[kind]]["mean"], color=color, ls="--" if "clean" in name else ":",
                       lw=1, label=label)
        ax.axhline(m["reference"][PRIMARY[kind]]["mean"], color="grey", lw=0.8, label="clean train vs test (floor)")
        ax.set(xlabel="SFBD round k (0 = initial model)", ylabel=PRIMARY[kind], title=LABEL[kind] + f", {params.seeds} seeds")
        ax.legend(fontsize=7)
    toy = shown["toy"]
    panels = [("clean_data", "held-out clean"), ("noisy_data", "noisy data y"), ("clean_only_low@0", "clean-only (low)"),
              (f"sfbd_low@{params.rounds}", f"SFBD (low), round {params.rounds}")]
    for i, (key, title) in enumerate(panels):
        ax = fig.add_subplot(grid[1, i])
        pts = np.asarray(toy[key])
        ax.scatter(pts[:, 0], pts[:, 1], s=2, alpha=0.6)
        ax.set(title=f"{params.toy_name}: {title}", xlim=(-3.5, 3.5), ylim=(-3.5, 3.5), aspect="equal")
    fig.tight_layout()
    return fig


def _digit_strip(shown: dict, params: Params):
    keys = [("clean_data", "clean"), ("noisy_data", "noisy y"), ("oracle@0", "oracle"), ("noisy_naive@0", "naive"),
            ("clean_only_low@0", "clean-only low"), (f"sfbd_low@{params.rounds}", "SFBD low"),
            (f"sfbd_noclean@{params.rounds}", "SFBD no-clean")]
    return pd.DataFrame([{"panel": label, "index": i, **{f"p{j}": v for j, v in enumerate(image)}}
                         for key, label in keys for i, image in enumerate(shown[key])])


def _setup(p: Params) -> str:
    return (
        f"**Data.** (a) 2-D `{p.toy_name}` (tasks.data.make_toy_2d, unit std): {p.toy_n_train} training points and "
        f"{p.toy_n_test} held-out clean test points per seed; measurement noise sigma_zeta = {p.toy_sigma_zeta:g}. "
        f"(b) scikit-learn 8x8 digits in [-1, 1]: {p.digits_n_test} held out, the other {1797 - p.digits_n_test} "
        f"for training; sigma_zeta = {p.digits_sigma_zeta:g}. Of the training points a nested random fraction "
        f"({p.clean_fraction_low:.0%} or {p.clean_fraction_high:.0%}) is clean; the rest is only seen as "
        "y = x + sigma_zeta eps, one noise draw per point, the same draw in both settings.\n\n"
        f"**Denoiser.** EDM preconditioning (tasks.diffusion.EDMPrecond; sigma_data {p.toy_sigma_data:g} for 2-D, "
        f"{p.digits_sigma_data:g} for digits) around an MLP ({p.toy_depth}x{p.toy_width} for 2-D, "
        f"{p.digits_depth}x{p.digits_width} for digits, SiLU, {p.embedding_dim}-d sinusoidal c_noise embedding), "
        f"EDM loss (ln sigma ~ N(-1.2, 1.2^2)), Adam lr {p.lr:g}, batch {p.batch_size}: {p.toy_base_steps} / "
        f"{p.digits_base_steps} steps for every model trained from scratch (2-D / digits), {p.toy_finetune_steps} / "
        f"{p.digits_finetune_steps} steps for each SFBD update (fine-tuning the previous model, as the official "
        "code's TRANSFER does).\n\n"
        f"**SFBD.** Pretrain on the clean fraction; then K = {p.rounds} rounds of (i) denoising every noisy point "
        f"with the deterministic Heun sampler (tasks.diffusion.heun_sample) on the {p.denoise_steps}-level EDM grid "
        "(sigma_max 80, sigma_min 0.002, rho 7) truncated to start at sigma_zeta and end at 0, (ii) fine-tuning on "
        "the denoised set only. Digits are clipped to [-1, 1] after denoising (the official code saves them as 8-bit "
        "images).\n\n"
        "**Methods.** clean-only (the pretrained model, both fractions), noisy-only naive (trained on the noisy "
        "version of every training point as if clean), SFBD at both fractions, SFBD without clean pretraining (the loop started from the naive model, "
        "on the low-fraction noisy set), oracle (all training points clean).\n\n"
        f"**Metrics.** Samples from each model by the {p.sample_steps}-step EDM Heun sampler from sigma = 80: "
        f"2-D: sliced Wasserstein-2 ({p.sw_projections} directions, {p.toy_n_generate} samples vs the test set, "
        f"tasks.two_sample.sliced_wasserstein) and RBF-MMD^2 ({p.mmd_points} points per side, median bandwidth); "
        f"digits: digits-FID = tasks.two_sample.frechet_distance between the penultimate-layer features "
        f"(64-{'-'.join(map(str, p.classifier_hidden))}-10 ReLU MLP trained {p.classifier_epochs} epochs on the clean "
        f"training digits) of {p.digits_n_generate} generated digits (clipped to [-1, 1]) and of the test digits. "
        f"{p.seeds} seeds (a seed draws the split, the noise, the initialisations and the sampler noise); means "
        "with Student-t 95% intervals over seeds, claims on paired differences over seeds."
    )


def _measured(p: Params, m: dict) -> str:
    """The measured numbers behind the claims, for the notes (interpretation is in NOTES.md)."""
    lines = []
    for kind in KINDS:
        k = m[kind]
        pm = k["primary_metric"]
        table = ", ".join(f"{name} {v[pm]['mean']:.4g}" for name, v in k["methods"].items())
        mse = k["denoised_mse"].get("sfbd_low", {})
        lines.append(
            f"- **{LABEL[kind]}**: final {pm} by method: {table}; floor (clean train vs test) "
            f"{k['reference'][pm]['mean']:.4g}. SFBD(low) minus clean-only(low) {fmt_estimate(k['diff']['sfbd_low_minus_clean_only_low'])}; "
            f"minus oracle {fmt_estimate(k['diff']['sfbd_low_minus_oracle'])}. Per-coordinate MSE of the denoised sets to "
            f"the true clean points (SFBD low, by round): "
            + ", ".join(f"{r} {v:.4f}" for r, v in mse.items())
            + f" (noisy data: {k['noisy_mse']:.4f}). Control (denoising ablated: the low-fraction pretrained model "
            f"fine-tuned for the same {p.rounds} rounds on the raw noisy rows): minus clean-only(low) "
            f"{fmt_estimate(k['diff']['noisy_finetune_low_minus_clean_only_low'])}, minus noisy-only naive "
            f"{fmt_estimate(k['diff']['noisy_finetune_low_minus_noisy_naive'])}, round {p.rounds} minus round 1 "
            f"{fmt_estimate(k['diff']['noisy_finetune_low_last_minus_first_round'])}, minus SFBD(low) "
            f"{fmt_estimate(k['diff']['noisy_finetune_low_minus_sfbd_low'])} (negative: skipping the denoising did better).")
    return "**Measured.**\n" + "\n".join(lines)
