"""Activation communication, the experiment: one small GPT trained from scratch on a Countries-game world per
seed plays agents A and B; AC (last-token grafting of A's layer-k residual into B's layer j through f) against
B alone, natural-language messages and full information, with FLOPs counted per protocol.

Records: ``protocols`` (one row per seed: the chosen (k, j, f), every protocol's test accuracy and FLOPs per
episode, the hook and FLOP-counter sanity checks, the timings), ``nl`` (one row per seed and message cap: the NL
protocol's accuracy, FLOPs and messages) and ``validation_grid`` (one row per seed and (k, j, f): its validation
accuracy). Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.act_comm import method
from flows.act_comm.params import SMOKE, Params
from tasks.contract import RunContext
from tasks.experiment import over_seeds, paper_experiment


# Seed-separable: each seed draws its own world and trains its own model.
@paper_experiment("act_comm", Params, smoke=SMOKE, seed_separable=True)
def act_comm_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """Every protocol of the Countries game on each seed's stand-in model."""
    rows = over_seeds(method.run_seed, ctx.seeds, p=params, data_dir=str(ctx.data_dir), smoke=ctx.smoke)
    protocols = pd.DataFrame([_protocol_row(params, r) for r in rows])
    nl = pd.DataFrame([{"seed": r["seed"], "message_length": m, **r["nl"][m]}
                       for r in rows for m in params.message_lengths])
    grid = pd.DataFrame([{"seed": r["seed"], "k": k, "j": j, "f": f, "val_accuracy": acc}
                         for r in rows for (k, j, f), acc in r["val_grid"].items()])
    return {"protocols": protocols, "nl": nl, "validation_grid": grid}


def _protocol_row(params: Params, r: dict) -> dict:
    """One seed's result as a flat row; the model's vocabulary size and the FLOP-counter check of its
    configuration come with it."""
    config = method.gpt_config(params, len(method.tokenizer_for(method.make_world(params, r["seed"]))))
    return {"seed": r["seed"], "k": r["chosen"][0], "j": r["chosen"][1], "f": r["chosen"][2],
            "b_alone": r["b_alone"], "full_info": r["full_info"], "ac": r["ac"], "mismatched": r["mismatched"],
            **{f"ac_{f}": v for f, v in r["ac_per_f"].items()},
            **{f"flops_{name}": r["flops"][name] for name in ("ac", "b_alone", "full_info")},
            "hook_identity_error": r["hook_identity_error"], "vocab_size": config.vocab_size,
            "dense_flops_rel_error": method.dense_flops_error(config, 7),
            "train_cpu_s": r["train_cpu_s"], "ac_s": r["timings"]["ac_s"], "nl_s": r["timings"]["nl_s"]}
