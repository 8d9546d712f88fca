"""GBRL, the experiment: PPO with gbrl's gradient-boosted-trees actor-critic against PPO with an MLP actor-critic,
at equal environment steps, on CartPole, two MiniGrid tasks with categorical observations and a synthetic
categorical task with an irregular lookup-table reward (plus a nuisance-feature OOD test).

Records: ``runs`` (one row per environment, algorithm and seed: final, OOD and curve-mean returns, steps, trees,
wall times), ``curves`` (the training return after each rollout) and ``control`` (the uniform random policy's
return per environment and seed). Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.gbrl_rl import method
from flows.gbrl_rl.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import paper_experiment, run_mapped
from tasks.data import save_parquet


def _jobs(envs: list[str], seeds: list[int]) -> list[tuple[str, str, int]]:
    """(env, algo, seed) runs, the costliest first so two workers finish together."""
    cost = {"minigrid_doorkey": 0, "minigrid_empty": 1, "cartpole": 2, "irregular": 3}
    return [(e, a, s) for e in sorted(envs, key=cost.get) for a in method.ALGOS for s in seeds]


@paper_experiment("gbrl_rl", Params, smoke=SMOKE, seed_separable=True)
def gbrl_rl_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """PPO-GBRL and PPO-NN at equal steps on every environment and seed, and the random-policy control."""
    jobs = _jobs(list(params.envs), ctx.seeds)
    results = run_mapped(method.run_one, {"env_name": [j[0] for j in jobs], "algo": [j[1] for j in jobs],
                                          "seed": [j[2] for j in jobs]}, p=params)

    runs = pd.DataFrame([{k: v for k, v in r.items() if k != "curve"} for r in results])
    curves = pd.DataFrame([row for r in results for row in r["curve"]])
    save_parquet(runs, ctx.data_dir / "runs.parquet")
    save_parquet(curves, ctx.data_dir / "curves.parquet")

    # Negative control: the uniform random policy on the same evaluation episodes, in GBRL's place.
    control_jobs = [(e, s) for e in params.envs if e != "irregular" for s in ctx.seeds]
    control_returns = run_mapped(method.random_policy_return, {"env_name": [j[0] for j in control_jobs],
                                                               "seed": [j[1] for j in control_jobs]}, p=params)
    control = pd.DataFrame([{"env": e, "seed": s, "return": r} for (e, s), r in zip(control_jobs, control_returns)])
    return {"runs": runs, "curves": curves, "control": control}
