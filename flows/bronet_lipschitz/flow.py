"""BRONet, the experiment: BRO and LA against Cayley / SOC layers and CE / offset-CE losses on 8x8 digits, each
configuration (and two A/A twins) trained on every seed and certified by the Lipschitz margin; then the training
step of each layer family timed alone.

Records: ``runs`` (one row per seed and configuration: clean accuracy, certified and PGD accuracy at each radius,
Lipschitz bound, orthogonality errors, training time) and ``step_times`` (one row per layer family and timing
repeat). Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.bronet_lipschitz import method
from flows.bronet_lipschitz.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import paper_experiment, run_mapped, run_task
from tasks.data import save_parquet

CONFIGS = ("bro_la", "bro_ce", "bro_xent", "cayley_ce", "soc_ce", "cayley_la", "cayley_ce_twin", "bro_ce_twin")


def _flatten(results: list[dict]) -> pd.DataFrame:
    """One row per (seed, configuration) with columns cert_<r>, pgd_<r>."""
    flat = []
    for r in results:
        row = {k: v for k, v in r.items() if k not in ("cert", "pgd", "orthogonality")}
        row.update({f"cert_{k}": v for k, v in r["cert"].items()})
        row.update({f"pgd_{k}": v for k, v in r["pgd"].items()})
        if "orthogonality" in r:
            row.update({f"orth_{k}": v for k, v in r["orthogonality"].items()})
        flat.append(row)
    return pd.DataFrame(flat)


# Not seed-separable: the step timing runs once, on the first seed of the run, after all training.
@paper_experiment("bronet_lipschitz", Params, smoke=SMOKE)
def bronet_lipschitz_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """BRO + LA against Cayley and SOC layers with CE and offset-CE losses, certified accuracy and step time."""
    pairs = [(s, c) for s in ctx.seeds for c in CONFIGS]
    results = run_mapped(method.run_config, {"seed": [s for s, _ in pairs], "config": [c for _, c in pairs]}, p=params)
    times = run_task(method.time_steps, p=params, seed=ctx.seeds[0])  # alone, after the training runs
    rows = _flatten(results)
    save_parquet(rows, ctx.data_dir / "runs.parquet")
    step_times = pd.DataFrame([{"seed": ctx.seeds[0], "layer": name, "repeat": i, "seconds": t}
                               for name, values in times.items() for i, t in enumerate(values)])
    return {"runs": rows, "step_times": step_times}
