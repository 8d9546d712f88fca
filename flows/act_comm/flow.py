"""Activation communication, the experiment: SmolLM2-135M-Instruct (agent A) tells Gemma-3-270M (agent B) where a
person is; AC (A's last-token block-k residual, mapped by W into B's space and combined into B's last token after
block j by f) against B alone, natural-language messages and full information, with FLOPs counted per protocol.

Records: ``protocols`` (one row per seed: the chosen depth and f, every protocol's test accuracy and FLOPs per
episode, the map's R^2, A's first message, the sanity checks) and ``validation_grid`` (one row per seed, depth and
f: its validation accuracy). Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.act_comm import method
from flows.act_comm.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment


# Seed-separable: the shared-text activations are the same for every seed (cached, not drawn); each seed draws its
# own episodes, map split and controls.
@paper_experiment("act_comm", Params, smoke=SMOKE, seed_separable=True)
def act_comm_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """Every protocol of the Countries game between the two real models, per seed."""
    shared = method.shared_activations(params, ctx.data_dir)
    rows = over_seeds(method.run_seed, ctx.seeds, p=params, shared_path=str(shared))
    protocols = pd.DataFrame([_protocol_row(params, r) for r in rows])
    grid = pd.DataFrame([{"seed": r["seed"], "depth": d, "f": f, "val_accuracy": acc}
                         for r in rows for (d, f), acc in r["grid"].items()])
    return {"protocols": protocols, "validation_grid": grid}


def _protocol_row(params: Params, r: dict) -> dict:
    best = r["maps"][r["best_depth"]]
    return {"seed": r["seed"], "depth": r["best_depth"], "k": r["k"], "j": r["j"], "f": r["best_f"],
            **r["accuracy"], **{f"flops_{name}": v for name, v in r["flops"].items()},
            "r2_heldout": best["r2_heldout"], "r2_train": best["r2_train"],
            "r2_heldout_min": min(m["r2_heldout"] for m in r["maps"].values()),
            **{key: r[key] for key in ("message_tokens", "message_names_city", "message_names_country",
                                       "example_message", "example_fact", "hook_identity_error",
                                       "flops_counter_rel_error")}}
