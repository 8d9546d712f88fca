"""VI-Net, the experiment: per seed, a digits CNN truncated after block L, per-class VCA generators of the latent's
approximate vanishing ideals, one polynomial layer |g| and a linear head, against the full CNN, the truncated CNN
+ linear head and the ablations; then the throughput of the full CNN and the VI-Net, timed side by side (interleaved).

Records: ``runs`` (one row per seed, L and method: accuracy, parameters, weight layers, generators),
``profiles`` (one row per seed and L: the vanishing diagnostics of the headline VI-Net) and ``throughput`` (one
row per seed: images/s of the full CNN, the VI-Net and the full CNN again). Scored by ``evaluate.py`` against the
claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd
from threadpoolctl import threadpool_limits

from flows.vi_net import method
from flows.vi_net.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment, run_task
from tasks.data import save_parquet


# Not seed-separable: the throughput of every seed's models is timed in one task after all seeds have trained,
# so the timings of a run compare with each other, not with another run's.
@paper_experiment("vi_net", Params, smoke=SMOKE)
def vi_net_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """VI-Net against the full CNN, the truncated CNN + linear head and the ablations on digits."""
    with threadpool_limits(limits=1):  # one BLAS thread per task: the seeds are the parallelism
        outs = over_seeds(method.run_seed, ctx.seeds, p=params)
        # timed alone, after every seed has finished, so that no training competes for the cores
        speed = run_task(method.time_models, p=params, seed_outputs=outs)
    rows = pd.DataFrame([r for o in outs for r in o["rows"]])
    save_parquet(rows, ctx.data_dir / "per_seed.parquet")
    profiles = pd.DataFrame([{"seed": seed, "layer": layer, **profile} for seed, o in zip(ctx.seeds, outs)
                             for layer, profile in o["profiles"].items()])
    throughput = pd.DataFrame([{"seed": seed, **s} for seed, s in zip(ctx.seeds, speed)])
    return {"runs": rows, "profiles": profiles, "throughput": throughput}
