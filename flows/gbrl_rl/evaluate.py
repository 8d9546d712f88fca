"""GBRL, the evaluation: final greedy returns GBRL against NN per environment (seeds paired), the CartPole ratio,
the OOD drops, the random-policy control, the figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.gbrl_rl import method
from flows.gbrl_rl.params import MINIGRID, Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records


def evaluate(params: Params, records: Records) -> RunOutput:
    runs, curves, control = records["runs"], records["curves"], records["control"]

    def final(env: str, algo: str, col: str = "final_return") -> np.ndarray:
        return est.per_seed(runs, col, env=env, algo=algo)

    control_envs = [e for e in params.envs if e != "irregular"]
    random_return = {e: est.per_seed(control, "return", env=e) for e in control_envs}

    by_seed = runs.sort_values("seed", kind="stable")  # seeds in order (the Student-t intervals do not depend on it)
    final_return = stats.summarize_by(by_seed, ["env", "algo"], "final_return")
    curve_mean = stats.summarize_by(by_seed, ["env", "algo"], "curve_mean")
    minigrid_envs = [e for e in params.envs if e in MINIGRID]
    per_seed_diff = np.mean([final(e, "gbrl") - final(e, "nn") for e in minigrid_envs], axis=0)
    control_diff = np.mean([random_return[e] - final(e, "nn") for e in minigrid_envs], axis=0)
    per_env = {e: stats.paired_difference(final(e, "gbrl"), final(e, "nn")) for e in minigrid_envs}
    minigrid = {"envs": len(minigrid_envs), "diff": stats.summarize(per_seed_diff),
                "control_diff": stats.summarize(control_diff),
                "per_env_diff": per_env, "per_env_diff_mean": {e: per_env[e]["mean"] for e in minigrid_envs}}
    cart_g, cart_n = final("cartpole", "gbrl"), final("cartpole", "nn")
    cartpole = {"ratio": stats.ratio_of_means(cart_g, cart_n) if cart_n.mean() > 0 else
                {"ratio": float("nan"), "ci_low": float("nan"), "ci_high": float("nan")},
                "gbrl_minus_nn": stats.paired_difference(cart_g, cart_n),
                "control_ratio": stats.ratio_of_means(random_return["cartpole"], cart_n) if cart_n.mean() > 0 else
                {"ratio": float("nan"), "ci_low": float("nan"), "ci_high": float("nan")}}
    drops = {}
    for algo in method.ALGOS:
        ins, oods = final("irregular", algo), final("irregular", algo, "ood_return")
        drops[algo] = np.where(ins > 0, (ins - oods) / np.maximum(ins, 1e-12), 0.0)
    ood = {a: {"in_distribution": stats.summarize(final("irregular", a)),
               "ood": stats.summarize(final("irregular", a, "ood_return")),
               "relative_drop": stats.summarize(drops[a])} for a in method.ALGOS}
    ood["drop_diff"] = stats.summarize(drops["nn"] - drops["gbrl"])
    gb = runs[runs["algo"] == "gbrl"]
    metrics = {
        "final_return": final_return,
        "learning_curve_mean": curve_mean,
        "minigrid": minigrid,
        "cartpole": cartpole,
        "ood": ood,
        "irregular_reference": {"optimal": 1.0, "random": 1.0 / params.irregular.n_actions},
        "random_policy_return": {e: stats.summarize(v) for e, v in random_return.items()},
        "steps": {e: int(runs[runs["env"] == e]["steps"].iloc[0]) for e in params.envs},
        "gbrl_trees": {e: float(gb[gb["env"] == e]["n_trees"].mean()) for e in params.envs},
        "timings": {
            "run_wall_s_total": float(runs["wall_s"].sum()),
            "run_cpu_s_total": float(runs["cpu_s"].sum()),
            "cpu_s_by_env_algo": {f"{e}/{a}": float(runs[(runs["env"] == e) & (runs["algo"] == a)]["cpu_s"].mean())
                                  for e in params.envs for a in method.ALGOS},
        },
    }

    plot = (curves.groupby(["env", "algo", "steps"])["train_return"]
            .agg(y="mean", y_low="min", y_high="max").reset_index())
    plot["series"] = plot["env"] + "/" + plot["algo"]
    plot = plot.rename(columns={"steps": "x"})[["x", "y", "y_low", "y_high", "series"]]
    finals = pd.DataFrame([{"env": e, "algo": a, "mean": final_return[e][a]["mean"], "ci_low": final_return[e][a]["ci_low"],
                            "ci_high": final_return[e][a]["ci_high"]} for e in params.envs for a in method.ALGOS])
    return RunOutput(metrics=metrics, tables={"plot": plot, "final_returns": finals, "runs": runs},
                     figure=_figure(plot, finals, ood, list(params.envs)),
                     setup=_setup(params), notes=_measured(params, metrics))


COLORS = {"gbrl": "tab:green", "nn": "tab:blue"}
SHORT = {"cartpole": "CartPole", "minigrid_empty": "Empty-5x5", "minigrid_doorkey": "DoorKey-5x5",
         "irregular": "Irregular"}
TITLES = {"cartpole": "CartPole-v1", "minigrid_empty": "MiniGrid-Empty-5x5 (categorical)",
          "minigrid_doorkey": "MiniGrid-DoorKey-5x5 (categorical)", "irregular": "Irregular lookup-table task"}


def _figure(plot: pd.DataFrame, finals: pd.DataFrame, ood: dict, envs: list[str]):
    fig, axes = plt.subplots(2, 3, figsize=(14, 7.5))
    for ax, env in zip(axes.ravel(), envs):
        for algo in method.ALGOS:
            g = plot[plot["series"] == f"{env}/{algo}"]
            ax.plot(g["x"], g["y"], marker="o", ms=3, color=COLORS[algo], label=f"PPO-{algo.upper()}")
            ax.fill_between(g["x"], g["y_low"], g["y_high"], color=COLORS[algo], alpha=0.2)
        ax.set(title=TITLES[env], xlabel="environment steps", ylabel="training return (mean; band: min-max over seeds)")
        ax.legend(fontsize=8)
    for ax in axes.ravel()[len(envs):4]:
        ax.axis("off")
    ax = axes.ravel()[4]
    x = np.arange(len(envs))
    for k, algo in enumerate(method.ALGOS):
        f = finals[finals["algo"] == algo].set_index("env").loc[envs]
        norm = np.array([500.0 if e == "cartpole" else 1.0 for e in envs])
        ax.bar(x + (k - 0.5) * 0.38, f["mean"] / norm, 0.38, color=COLORS[algo], label=f"PPO-{algo.upper()}",
               yerr=[(f["mean"] - f["ci_low"]) / norm, (f["ci_high"] - f["mean"]) / norm], capsize=3)
    ax.set_xticks(x, [SHORT[e] for e in envs], fontsize=9)
    ax.set(title="Final greedy return (CartPole / 500)", ylabel="normalised return")
    ax.legend(fontsize=8)
    ax = axes.ravel()[5]
    for k, algo in enumerate(method.ALGOS):
        vals = [ood[algo]["in_distribution"]["mean"], ood[algo]["ood"]["mean"]]
        ax.bar(np.arange(2) + (k - 0.5) * 0.38, vals, 0.38, color=COLORS[algo], label=f"PPO-{algo.upper()}")
    ax.set_xticks(np.arange(2), ["in distribution", "unseen nuisance category"])
    ax.set(title="Irregular task: expected return, OOD test", ylabel="expected return (optimum 1)", ylim=(0, 1.05))
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _setup(params: Params) -> str:
    g, n, ir = params.gbrl, params.nn, params.irregular
    steps = ", ".join(f"{e}: {params.steps[e]:,}" for e in params.envs)
    return (
        f"{params.seeds} seeds x {len(params.envs)} environments x 2 algorithms, equal environment steps per run "
        f"({steps}); every run ends with a greedy (argmax) evaluation: {params.eval_episodes} fresh episodes on the gym "
        "environments, the exact expected return over all observations on the irregular task.\n\n"
        f"- **PPO-GBRL** (the paper's method): `gbrl.models.actor_critic.ActorCritic` (gbrl 1.1.9, CPU), one shared "
        f"ensemble of oblivious trees (depth {g.max_depth}, {g.n_bins} quantile bins, cosine split score) whose "
        f"outputs are the policy logits and the value; each PPO minibatch step ({g.batch_size} samples, "
        f"{g.n_epochs} epochs) fits one tree to the per-sample gradients of the PPO loss w.r.t. those outputs "
        f"(SGD, policy lr {g.policy_lr}, value lr {g.value_lr}); clip {g.clip_range}, entropy {g.ent_coef}, value "
        f"coefficient {g.vf_coef}, rewards normalised, observations not (gbrl_sb3 `ppo_gbrl` defaults); rollouts "
        f"{g.n_envs} envs x {g.n_steps} steps. MiniGrid cells are categorical strings \"object,color,state\" plus the "
        "direction (the official categorical wrapper); the irregular task's features are strings too.\n"
        f"- **PPO-NN**: separate tanh MLPs ({n.hidden}-{n.hidden}) for policy and value, orthogonal init, Adam "
        f"lr {n.lr}, batch {n.batch_size}, {n.n_epochs} epochs, clip {n.clip_range}, entropy {n.ent_coef}, value "
        f"coefficient {n.vf_coef}, gradient norm {n.max_grad_norm}, observations and rewards normalised "
        f"(gbrl_sb3 `ppo_nn` / stable-baselines3 defaults); rollouts {n.n_envs} envs x {n.n_steps} steps; "
        f"categorical features as `{params.nn_encoding}`.\n"
        f"- Shared: gamma {params.gamma}, GAE lambda {params.gae_lambda}, advantages standardised per minibatch, "
        "time-limit truncations bootstrapped with V(final observation). The learning curves show the training "
        "return after each rollout: the mean over the episodes that finished in it (at least the last 20), like "
        "SB3's `ep_rew_mean`; the first DoorKey points are biased towards the quick (successful) episodes, the only "
        "ones that can end that early.\n"
        f"- **Irregular task** [ours]: {ir.n_relevant} relevant categorical features ({ir.n_categories} values) and "
        f"{ir.n_nuisance} nuisance features ({ir.n_nuisance_categories} values), uniform; one decision per episode "
        f"among {ir.n_actions} actions, reward 1 iff the action equals a random lookup table of the relevant "
        "features (a new table per seed). OOD test: the nuisance features take a category never seen in training "
        "(a new string for the trees, an all-zero one-hot block for the network)."
    )


def _measured(params: Params, metrics: dict) -> str:
    """The measured numbers behind the claims, for the notes (interpretation is in NOTES.md)."""
    fr, curve = metrics["final_return"], metrics["learning_curve_mean"]
    per_env = metrics["minigrid"]["per_env_diff"]
    both_zero = [e for e in per_env if max(fr[e]["gbrl"]["mean"], fr[e]["nn"]["mean"]) == 0.0]
    ties = [e for e in per_env if e not in both_zero and per_env[e]["std"] == 0 and per_env[e]["mean"] == 0.0]
    cd = metrics["minigrid"]["control_diff"]
    ratio, cr = metrics["cartpole"]["ratio"], metrics["cartpole"]["control_ratio"]
    o = metrics["ood"]
    return (f"**Measured**: MiniGrid final greedy returns GBRL vs NN: "
            + "; ".join(f"{e} {fr[e]['gbrl']['mean']:.3f} vs {fr[e]['nn']['mean']:.3f}" for e in per_env)
            + f"; environments where both score 0: {', '.join(both_zero) or 'none'}; environments with identical "
            f"final returns in every seed: {', '.join(ties) or 'none'}; mean difference GBRL - NN "
            f"{metrics['minigrid']['diff']['mean']:+.3f} (random policy - NN: {cd['mean']:+.3f} [{cd['ci_low']:+.3f}, "
            f"{cd['ci_high']:+.3f}]); `learning_curve_mean` GBRL vs NN: "
            + "; ".join(f"{e} {curve[e]['gbrl']['mean']:.3f} vs {curve[e]['nn']['mean']:.3f}" for e in per_env)
            + f". CartPole GBRL/NN final-return ratio {ratio['ratio']:.2f} [{ratio['ci_low']:.2f}, "
            f"{ratio['ci_high']:.2f}] (control, random policy / NN: {cr['ratio']:.2f} [{cr['ci_low']:.2f}, "
            f"{cr['ci_high']:.2f}]). Irregular task in-distribution return GBRL "
            f"{o['gbrl']['in_distribution']['mean']:.3f} vs NN {o['nn']['in_distribution']['mean']:.3f}, relative OOD "
            f"drop GBRL {o['gbrl']['relative_drop']['mean']:+.3f} vs NN {o['nn']['relative_drop']['mean']:+.3f}. "
            f"{params.seeds} seed(s).")
