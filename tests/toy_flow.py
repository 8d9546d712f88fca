"""A toy paper that exercises the split contract: an experiment that records the mean of seeded normal draws,
and an evaluation that scores them."""

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from pydantic import Field

from paperflows.core import estimates as est
from paperflows.core.contract import Claim, Control, Paper, PaperParams, RunContext, RunOutput
from paperflows.core.experiment import over_seeds, paper_experiment
from paperflows.core.records import Records
from tasks.data import save_parquet

TOY = Paper(
    slug="toy", title="Toy paper", method="Mean", paper_class="A", source="tests", official_code=None,
    claims=(
        Claim(id="mean_positive", text="the mean is positive", source="test", metric="mean.mean",
              comparison=">", threshold=0.0, kind="direction", role="claim", interval=("mean.ci_low", "mean.ci_high"),
              control=Control(name="draws centred at -1", metric="control.mean",
                              interval=("control.ci_low", "control.ci_high"))),
        Claim(id="draws_counted", text="every draw is counted", source="test", metric="n_draws",
              comparison=">=", threshold=10, kind="exact", role="sanity"),
    ),
    limitations="A toy.",
)
SMOKE = {"n": 10}


class ToyParams(PaperParams):
    loc: float = Field(ge=-10, le=10)
    n: int = Field(ge=1)


def draw_means(p: "ToyParams", seed: int) -> list[dict]:
    """Mean of ``p.n`` normal draws centred at ``p.loc`` (arm "method") and at -1 (arm "control")."""
    rng = np.random.default_rng(seed)
    return [{"seed": seed, "arm": arm, "mean": float(rng.normal(centre, 1.0, size=p.n).mean())}
            for arm, centre in (("method", p.loc), ("control", -1.0))]


@paper_experiment("toy", ToyParams, smoke=SMOKE, seed_separable=True)
def toy_experiment(params: ToyParams, ctx: RunContext) -> dict[str, pd.DataFrame]:
    means = pd.DataFrame([row for rows in over_seeds(draw_means, ctx.seeds, p=params) for row in rows])
    save_parquet(means, ctx.data_dir / "means.parquet")
    return {"means": means}


def toy_evaluate(params: ToyParams, records: Records) -> RunOutput:
    means = records["means"]
    method = est.per_seed(means, "mean", arm="method")
    figure, axis = plt.subplots()
    axis.plot(records.seeds, method)
    plot = pd.DataFrame({"x": records.seeds, "y": method, "series": "mean"})
    return RunOutput(metrics={"mean": est.summary(means, "mean", arm="method"),
                              "control": est.summary(means, "mean", arm="control"), "n_draws": params.n},
                     tables={"plot": plot}, figure=figure, setup="Draw normals.")


def run_toy(raw: dict, out_root, runner: str = "threads") -> dict:
    """Both stages of the toy under ``out_root``, as ``paperflows run`` runs a paper's."""
    from paperflows.scoring import score_records
    from paperflows.stages import record_experiment

    record_experiment(toy_experiment, raw, code="toy", out_root=out_root, runner=runner)
    return score_records(TOY, toy_evaluate, "Toy notes.", raw, model=(ToyParams, SMOKE), out_root=out_root)
