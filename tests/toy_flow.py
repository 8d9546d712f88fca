"""A toy paper that exercises the flow contract: the mean of seeded normal draws."""

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from pydantic import Field

from tasks import stats
from tasks.contract import Claim, Control, Paper, PaperParams, RunContext, RunOutput
from tasks.data import save_parquet
from tasks.paper import over_seeds, paper_flow

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


class ToyParams(PaperParams):
    loc: float = Field(ge=-10, le=10)
    n: int = Field(ge=1)


def draw_mean(p: "ToyParams", seed: int, centre: float | None = None) -> float:
    """Mean of ``p.n`` normal draws centred at ``p.loc`` (or at ``centre``)."""
    return float(np.random.default_rng(seed).normal(p.loc if centre is None else centre, 1.0, size=p.n).mean())


@paper_flow(TOY, ToyParams, smoke={"n": 10})
def toy_flow(params: ToyParams, ctx: RunContext) -> RunOutput:
    means = over_seeds(draw_mean, ctx.seeds, p=params)
    control = over_seeds(draw_mean, ctx.seeds, p=params, centre=-1.0)
    save_parquet(pd.DataFrame({"seed": ctx.seeds, "mean": means}), ctx.data_dir / "means.parquet")
    figure, axis = plt.subplots()
    axis.plot(ctx.seeds, means)
    plot = pd.DataFrame({"x": ctx.seeds, "y": means, "series": "mean"})
    return RunOutput(metrics={"mean": stats.summarize(means), "control": stats.summarize(control),
                                                "n_draws": params.n},
                     tables={"plot": plot}, figure=figure, setup="Draw normals.")
