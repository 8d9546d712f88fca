"""GBRL as a Prefect flow: PPO with gbrl's gradient-boosted-trees actor-critic against PPO with an MLP
actor-critic, at equal environment steps, on CartPole, two MiniGrid tasks with categorical observations
and a synthetic categorical task with an irregular lookup-table reward (plus a nuisance-feature OOD test)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.gbrl_rl import method
from flows.gbrl_rl.params import MINIGRID, SMOKE, Params
from tasks import stats
from tasks.contract import Claim, Control, Paper, RunContext, RunOutput, ci
from tasks.data import save_parquet
from tasks.paper import paper_flow, run_mapped

# The code trains only GBRL and the NN; no trained ablation of GBRL (e.g. without categorical splits) exists
# here, so the only null is a strawman that fails by a mile and shows only that the comparison can fail.
STRAWMAN = "uniform random policy in GBRL's place (a strawman: no trained, ablated GBRL exists in this code)"

PAPER = Paper(
    slug="gbrl_rl",
    title="Gradient Boosting Reinforcement Learning",
    method="GBRL (PPO with a shared gradient-boosted-trees actor-critic, NVlabs/gbrl)",
    paper_class="B",
    source="abstracts-004.txt #15",
    official_code="NVlabs/gbrl (C++/CUDA core, PyPI gbrl==1.1.9, used here) and NVlabs/gbrl_sb3 (SB3 algorithms, config/defaults.yaml)",
    claims=(
        Claim(id="minigrid_gbrl_ge_nn",
              text="GBRL outperforms NNs in domains with structured observations and categorical features: on the "
                   "MiniGrid categorical envs (Empty-5x5, DoorKey-5x5), PPO-GBRL final greedy return >= PPO-NN "
                   "(mean over envs and seeds; interval: bootstrap over seeds; a tie touches the threshold and "
                   "is inconclusive)",
              source="abstract; plan claim 1", metric="minigrid.diff.mean", comparison=">=", threshold=0.0,
              kind="direction", role="claim", interval=ci("minigrid.diff"),
              control=Control(name=STRAWMAN, metric="minigrid.control_diff.mean",
                              interval=ci("minigrid.control_diff")),
              per_setting="minigrid.per_env_diff_mean",
              scaled="paper: 1M+ steps per env; plan: 40k; here the step budget of params (by default 6,144 on "
                     "Empty-5x5 and 4,096 on DoorKey-5x5)"),
        Claim(id="cartpole_competitive",
              text="while maintaining competitive performance on standard control benchmarks: on CartPole, "
                   "PPO-GBRL reaches >= 90% of PPO-NN's final greedy return (ratio of seed means, paired bootstrap)",
              source="abstract; plan claim 2", metric="cartpole.ratio.ratio", comparison=">=", threshold=0.9,
              kind="magnitude", role="claim", interval=ci("cartpole.ratio"),
              control=Control(name=STRAWMAN, metric="cartpole.control_ratio.ratio",
                              interval=ci("cartpole.control_ratio")),
              scaled="paper: continuous-control suites at 1M+ steps; plan: CartPole at 50k steps; here 8,192 steps"),
        Claim(id="ood_drop_smaller",
              text="GBRL demonstrates superior robustness to out-of-distribution samples: under an unseen category in "
                   "the nuisance features, GBRL's relative return drop is smaller than NN's "
                   "(NN drop - GBRL drop > 0; interval: bootstrap over seeds)",
              source="abstract; plan claim 3", metric="ood.drop_diff.mean", comparison=">", threshold=0.0,
              kind="direction", role="claim", interval=ci("ood.drop_diff"),
              control_reason="no cheap policy is known to be fragile to an unseen nuisance category: a random "
                             "policy ignores its input (drop 0 by construction, so it would 'beat' any policy that "
                             "uses its features), and the in-distribution version of the test (nuisance codes "
                             "permuted among seen values) is a bijection of the enumerated contexts, giving exactly "
                             "the same return for both methods. The two methods face identical perturbations, and "
                             "the verdict can and does fail (both drops are near zero)."),
    ),
    limitations=(
        "Step budgets are about 100-1000x below the paper's (thousands instead of millions of environment steps, "
        "3 seeds), so these are early-training comparisons, not the paper's asymptotic returns. CartPole stands in "
        "for the paper's continuous-control suites, two 5x5 MiniGrid tasks for its categorical domains, and a "
        "synthetic one-step categorical task with a random lookup-table reward for its 'irregular state-action "
        "relationships'; the OOD test perturbs nuisance features of that synthetic task only, not the paper's "
        "spurious-correlation and noise MiniGrid variants. Both PPO loops are this project's (not stable-baselines3 "
        "or gbrl_sb3), with each algorithm's official hyperparameters except the rollout shape; gbrl runs on CPU, "
        "one thread per run. DoorKey-5x5 needs far more steps than the budget allows, so both methods typically "
        "score 0 there and that environment cannot separate them; Empty-5x5 is at its ceiling for both, so the "
        "MiniGrid claim has little power at this budget (see the notes on the step budgets)."
    ),
)


def _jobs(envs: list[str], seeds: list[int]) -> list[tuple[str, str, int]]:
    """(env, algo, seed) runs, the costliest first so two workers finish together."""
    cost = {"minigrid_doorkey": 0, "minigrid_empty": 1, "cartpole": 2, "irregular": 3}
    return [(e, a, s) for e in sorted(envs, key=cost.get) for a in method.ALGOS for s in seeds]


@paper_flow(PAPER, Params, smoke=SMOKE)
def gbrl_rl_flow(params: Params, ctx: RunContext) -> RunOutput:
    jobs = _jobs(list(params.envs), ctx.seeds)
    results = run_mapped(method.run_one, {"env_name": [j[0] for j in jobs], "algo": [j[1] for j in jobs],
                                          "seed": [j[2] for j in jobs]}, p=params)

    runs = pd.DataFrame([{k: v for k, v in r.items() if k != "curve"} for r in results])
    curves = pd.DataFrame([row for r in results for row in r["curve"]])
    save_parquet(runs, ctx.data_dir / "runs.parquet")
    save_parquet(curves, ctx.data_dir / "curves.parquet")

    def final(env: str, algo: str, col: str = "final_return") -> np.ndarray:
        sel = runs[(runs["env"] == env) & (runs["algo"] == algo)].sort_values("seed")
        return sel[col].to_numpy(dtype=float)

    # Negative control: the uniform random policy on the same evaluation episodes, in GBRL's place.
    control_envs = [e for e in params.envs if e != "irregular"]
    control_jobs = [(e, s) for e in control_envs for s in ctx.seeds]
    control_returns = run_mapped(method.random_policy_return, {"env_name": [j[0] for j in control_jobs],
                                                               "seed": [j[1] for j in control_jobs]}, p=params)
    random_return = {e: np.array([r for (ee, _), r in zip(control_jobs, control_returns) if ee == e])
                     for e in control_envs}

    by_seed = runs.sort_values("seed", kind="stable")  # the bootstrap resamples seeds in this order
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
                     setup=_setup(params), notes=_notes(params, metrics))


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


def _notes(params: Params, metrics: dict) -> str:
    fr = metrics["final_return"]
    both_zero = [e for e in metrics["minigrid"]["per_env_diff"]
                 if max(fr[e]["gbrl"]["mean"], fr[e]["nn"]["mean"]) == 0.0]
    text = (
        "**Confirmed against the official code** (NVlabs/gbrl_sb3 `config/defaults.yaml`, `algos/ppo.py`, "
        "`policies/actor_critic_policy.py`, `env/wrappers.py`; gbrl 1.1.9 sources): oblivious trees of depth 4, "
        "250 quantile bins, cosine split score, one tree per PPO minibatch step fitted to the output gradients "
        "times the batch size, shared actor-critic tree structure with output slices logits / value, SGD learning "
        "rates 0.17 / 0.01, `ppo_gbrl` clip 0.62, entropy 0.08, value coefficient 0.871923, batch 512, 20 epochs, "
        "norm_reward on, norm_obs off; `ppo_nn` batch 64, 10 epochs, clip 0.2, entropy 0, value coefficient 0.5, "
        "gradient norm 0.5, norm_obs and norm_reward on; the categorical MiniGrid encoding \"object,color,state\" per "
        "cell plus the direction; evaluation with deterministic actions.\n\n"
        "**Deviations** (all for the 2-core budget unless said): environment steps per run are "
        f"{', '.join(f'{e} {s:,}' for e, s in metrics['steps'].items())} (paper: 1M-10M; plan: CartPole 50k, "
        f"MiniGrid 40k); rollouts are {params.gbrl.n_envs} x {params.gbrl.n_steps} for GBRL and "
        f"{params.nn.n_envs} x {params.nn.n_steps} for the NN (official 16 x 256 and 16 x 128) so that several "
        f"policy iterations fit in the budget; {params.seeds} seeds (paper: 5). The PPO loop, the MLP and the reward/observation normalisers "
        "are this project's re-implementations of the stable-baselines3 pieces (the NN normalises observations "
        "with the current running statistics at update time, SB3 stores them normalised at collection time). The "
        "MiniGrid mission string is constant in both tasks and left out. The network sees MiniGrid and the "
        f"irregular task as `{params.nn_encoding}` features; whether the paper's NN baseline used one-hot or "
        "the flat integer-code image of MiniGrid's FlatObsWrapper could not be confirmed (`nn_encoding: codes` "
        "runs the latter). gbrl's Python preprocessing re-encodes categorical arrays on every call; a "
        "pass-through for arrays that are already S128 (same bytes, tested) makes the categorical runs ~5x faster.\n\n"
        "**Not from the paper**: the irregular lookup-table task and the nuisance-category OOD test are this "
        "project's stand-ins (the plan's) for the paper's irregular-relationship, noise and spurious-correlation "
        "experiments, whose exact protocols could not be read here (only the abstract and the code were "
        "available). CartPole has discrete actions: it stands in for 'standard continuous control benchmarks'.\n\n"
    )
    per_env = metrics["minigrid"]["per_env_diff"]
    ties = [e for e in per_env if e not in both_zero and per_env[e]["std"] == 0 and per_env[e]["mean"] == 0.0]
    diff = metrics["minigrid"]["diff"]["mean"]
    text += ("**Step budgets** (issue #11: 5-10x below the plan's CartPole 50k / MiniGrid 40k): kept as they were, "
             "decided before this run. The 24 runs cost ~130 CPU-s (~100 s of flow body on 2 cores); the plan's "
             "budgets are 6x (CartPole) and 7-10x (MiniGrid) more steps, and gbrl's cost per step also grows with "
             "the ensemble (one tree per minibatch step, every prediction walks all trees), so they would take "
             "roughly 10-15 minutes, beyond the ~2-minute default. What the shortfall costs: DoorKey-5x5 stays at 0 "
             "for both methods (it needs far more than 40k steps too, so even the plan's budget would likely not "
             "separate them); Empty-5x5 was already at its ceiling for both in the run before this change (optimal "
             "return 0.955: 5 steps of 100), so more steps would not separate them either; on CartPole the NN was "
             "still learning (396/500) and GBRL further behind (262), so the 'competitive' ratio is an early-training reading with a wide interval, where the "
             "plan's 50k would likely put both near the 500 ceiling. `--set` can run the plan's budgets "
             "(`steps.cartpole=50000` etc.) outside the default.\n\n")
    cd = metrics["minigrid"]["control_diff"]
    text += ("**Reading claim 1**: a tie (interval touching 0) is inconclusive under the strict-interval rule. "
             "Negative control, the uniform random policy in GBRL's place (a strawman, the only null this code "
             "has: it fails by construction and shows only that the check can fail): mean difference to the NN "
             f"{cd['mean']:+.3f} [{cd['ci_low']:+.3f}, {cd['ci_high']:+.3f}]. Final greedy returns GBRL vs NN: "
             + "; ".join(f"{e} {fr[e]['gbrl']['mean']:.3f} vs {fr[e]['nn']['mean']:.3f}" for e in per_env) + ". "
             + (f"Both methods score 0 on {', '.join(both_zero)} at this budget (no signal there). " if both_zero else "")
             + (f"On {', '.join(ties)} the final returns are identical in every seed. " if ties else "")
             + (f"The mean difference {diff:+.3f} is below 0.02 (2% of the maximum return): in substance a tie, not "
                "evidence that GBRL is better. " if abs(diff) < 0.02 else "")
             + "`learning_curve_mean` (mean training return over the run, a sample-efficiency reading, not gated): "
             + "; ".join(f"{e} {metrics['learning_curve_mean'][e]['gbrl']['mean']:.3f} vs "
                         f"{metrics['learning_curve_mean'][e]['nn']['mean']:.3f}" for e in per_env) + ".\n\n")
    o = metrics["ood"]
    if max(abs(o["gbrl"]["relative_drop"]["mean"]), abs(o["nn"]["relative_drop"]["mean"])) < 0.05:
        text += ("**Reading claim 3**: neither method loses more than 5% of its return when the nuisance features "
                 "take an unseen category (both learned to ignore them at this budget), so the test does not show the "
                 "paper's robustness gap in either direction; the verdict compares two near-zero drops.\n\n")
    ratio, cr = metrics["cartpole"]["ratio"], metrics["cartpole"]["control_ratio"]
    text += (f"**Measured**: CartPole GBRL/NN final-return ratio {ratio['ratio']:.2f} "
             f"[{ratio['ci_low']:.2f}, {ratio['ci_high']:.2f}] (control, random policy / NN: {cr['ratio']:.2f} "
             f"[{cr['ci_low']:.2f}, {cr['ci_high']:.2f}]); MiniGrid mean difference GBRL - NN "
             f"{metrics['minigrid']['diff']['mean']:+.3f}; irregular task in-distribution return GBRL "
             f"{metrics['ood']['gbrl']['in_distribution']['mean']:.3f} vs NN {metrics['ood']['nn']['in_distribution']['mean']:.3f}, "
             f"relative OOD drop GBRL {metrics['ood']['gbrl']['relative_drop']['mean']:+.3f} vs NN "
             f"{metrics['ood']['nn']['relative_drop']['mean']:+.3f}. With {params.seeds} seed(s) the bootstrap intervals are coarse.")
    return text
