"""The split contract, end to end on a toy paper: params, records, claims, reports, atomicity, runners."""

import contextlib
import json
import os
import threading
from typing import Annotated

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import read_metrics, without_timings
from toy_flow import SMOKE, ToyParams, run_toy

from paperflows.core import report
from paperflows.core.contract import Distinct, Increasing, PaperParams
from paperflows.core.seeding import global_rngs_isolated, global_rngs_seeded, torch_seeded
from paperflows.params import ParamsError, resolve_params
from tasks.data import load_bundled, load_parquet, load_xy, save_bundled, save_parquet
from tasks.train import mlp, predict, torch_single_thread, train

RAW = {"common": {"seed": 0, "max_workers": 2}, "papers": {"toy": {"seeds": 3, "loc": 1.0, "n": 50}}}


def raw(**section):
    return {"common": dict(RAW["common"]), "papers": {"toy": {**RAW["papers"]["toy"], **section}}}


def test_toy_flow_writes_every_output(tmp_path):
    summary = run_toy(RAW, out_root=tmp_path)
    results = tmp_path / "results" / "toy"
    assert {p.name for p in results.iterdir()} == {"metrics.json", "claims.json", "plot.csv", "figure.png", "report.md"}
    assert {p.name for p in (tmp_path / "records" / "toy").iterdir()} == {"means.parquet", "meta.json"}
    document = read_metrics(results)
    assert document["claims"]["mean_positive"]["verdict"] == "reproduced"
    assert document["seeds"] == [0, 1, 2]
    assert summary["verdicts"] == {"reproduced": 1, "not reproduced": 0, "inconclusive": 0}  # claims only
    assert summary["sanity"] == {"reproduced": 1, "not reproduced": 0, "inconclusive": 0}
    control = document["claims"]["mean_positive"]["control"]
    assert control["name"] == "draws centred at -1" and control["failed"] is True and control["passed"] is False and control["observed"] < 0
    assert len(load_parquet(tmp_path / "data" / "toy" / "means.parquet")) == 6  # 3 seeds x 2 arms
    text = (results / "report.md").read_text()
    assert "| mean_positive | reproduced |" in text and "## Sanity checks" in text and "A toy." in text
    assert "Toy notes." in text
    claims_part, sanity_part = text.split("## Sanity checks")
    assert "| draws_counted |" in sanity_part and "| draws_counted |" not in claims_part
    assert "fails strictly, as it should" in claims_part
    # the slim file DVC tracks as metrics: per claim, the observed value and a numeric verdict
    slim = json.loads((results / "claims.json").read_text())
    assert slim == {cid: {"observed": c["observed"], "verdict": 1} for cid, c in document["claims"].items()}
    assert document["title"] == "Toy paper" and document["claims"]["mean_positive"]["text"] == "the mean is positive"


def test_more_seeds_run_only_the_new_seeds_and_score_as_a_fresh_run(tmp_path):
    from paperflows.stages import record_experiment
    from toy_flow import toy_experiment

    run_toy(RAW, out_root=tmp_path / "grown")
    grown = record_experiment(toy_experiment, raw(seeds=5), code="toy", out_root=tmp_path / "grown")
    assert grown["seeds_run"] == [3, 4]
    again = record_experiment(toy_experiment, raw(seeds=5, seed_cap=10), code="toy", out_root=tmp_path / "grown")
    assert again["seeds_run"] == [], "a seed cap changes no record"
    changed = record_experiment(toy_experiment, raw(seeds=5), code="other", out_root=tmp_path / "grown")
    assert changed["seeds_run"] == [0, 1, 2, 3, 4], "records made by other code are never appended to"
    run_toy(raw(seeds=5), out_root=tmp_path / "grown")
    run_toy(raw(seeds=5), out_root=tmp_path / "fresh")
    grown_doc, fresh_doc = (read_metrics(tmp_path / run / "results" / "toy") for run in ("grown", "fresh"))
    assert without_timings(grown_doc) == without_timings(fresh_doc)


def test_evaluation_refuses_records_of_other_params_or_seeds(tmp_path):
    from paperflows.scoring import score_records
    from toy_flow import TOY, toy_evaluate

    run_toy(RAW, out_root=tmp_path)
    for section, message in (({"loc": 2.0}, "papers.toy.loc"), ({"seeds": 4}, "cover seeds")):
        with pytest.raises(ParamsError, match=message):
            score_records(TOY, toy_evaluate, "", raw(**section), model=(ToyParams, SMOKE), out_root=tmp_path)


def test_a_claim_that_does_not_hold_is_reported_as_not_reproduced(tmp_path):
    run_toy(raw(loc=-1.0), out_root=tmp_path)
    assert read_metrics(tmp_path / "results" / "toy")["claims"]["mean_positive"]["verdict"] == "not reproduced"


def test_same_params_give_identical_metrics(tmp_path):
    run_toy(RAW, out_root=tmp_path / "a")
    run_toy(RAW, out_root=tmp_path / "b")
    first, second = (read_metrics(tmp_path / run / "results" / "toy") for run in "ab")
    assert without_timings(first) == without_timings(second)
    assert (tmp_path / "a/results/toy/figure.png").read_bytes() == (tmp_path / "b/results/toy/figure.png").read_bytes()


@pytest.mark.parametrize("section,common,key", [
    ({"bogus": 1}, {}, "papers.toy.bogus"),
    ({"n": "many"}, {}, "papers.toy.n"),
    ({"loc": 11.0}, {}, "papers.toy.loc"),
    ({"seeds": 0}, {}, "papers.toy.seeds"),
    ({}, {"seed": -1}, "common.seed"),
])
def test_invalid_params_name_the_key_and_write_nothing(tmp_path, section, common, key):
    params = raw(**section)
    params["common"].update(common)
    with pytest.raises(ParamsError, match=key.replace(".", r"\.")):
        run_toy(params, out_root=tmp_path)
    assert not any(tmp_path.iterdir())


def test_missing_section_and_overrides():
    model = (ToyParams, SMOKE)
    with pytest.raises(ParamsError, match="papers.toy is missing"):
        resolve_params("toy", {"common": RAW["common"], "papers": {}}, model=model)
    params, common = resolve_params("toy", RAW, smoke=True, overrides=["loc=2.5", "common.seed=7"], model=model)
    assert (params.n, params.loc, common.seed) == (10, 2.5, 7)
    with pytest.raises(ParamsError, match="key=value"):
        resolve_params("toy", RAW, overrides=["loc"], model=model)


def test_the_claims_table_shows_claim_verdict_and_values_first():
    from toy_flow import TOY

    from paperflows.core.claims import check_claims

    results = check_claims(TOY, {"mean": {"mean": 0.5, "ci_low": 0.1, "ci_high": 0.9}, "n_draws": 10,
                                 "control": {"mean": -1.0, "ci_low": -1.2, "ci_high": -0.8}}, 3)
    rows = report.claims_rows(TOY, results)
    assert list(rows[0])[:4] == ["claim", "verdict", "ours", "paper's figure"]
    assert rows[0]["verdict"] == "reproduced" and rows[0]["ours"] == "0.5 [0.1, 0.9]"
    assert results[0].seeds == 3 and "one look" in results[0].seeds_reason and rows[0]["seeds"] == "3"


@pytest.mark.parametrize("comparison,shown", [(">", "\\> 0"), (">=", "≥ 0"), ("<=", "≤ 0"), ("<", "< 0")])
def test_a_threshold_renders_with_its_operator_in_markdown(comparison, shown):
    """A cell that starts with '>' is a blockquote in markdown (Prefect's UI too): the operator would vanish."""
    import markdown_it

    text = report.threshold_text(comparison, 0.0)
    assert text == shown
    html = markdown_it.MarkdownIt().render(text)
    assert "blockquote" not in html and shown.lstrip("\\")[0] in html.replace("&gt;", ">").replace("&lt;", "<")


def test_the_process_runner_passes_typed_params_to_the_method(tmp_path):
    run_toy(RAW, out_root=tmp_path / "threads")
    run_toy(RAW, out_root=tmp_path / "processes", runner="processes")
    threads, processes = (read_metrics(tmp_path / r / "results" / "toy") for r in ("threads", "processes"))
    assert without_timings(threads) == without_timings(processes)


def test_an_interrupted_report_leaves_the_previous_results(tmp_path, monkeypatch):
    run_toy(RAW, out_root=tmp_path)
    results = tmp_path / "results" / "toy"
    before = {p.name: p.read_bytes() for p in results.iterdir()}

    def broken_savefig(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("matplotlib.figure.Figure.savefig", broken_savefig)
    with pytest.raises(Exception, match="disk full"):
        run_toy(raw(loc=3.0), out_root=tmp_path)
    assert {p.name: p.read_bytes() for p in results.iterdir()} == before
    assert [p.name for p in results.parent.iterdir()] == ["toy"]  # no scratch folders left behind


def test_the_dask_runner_gives_the_same_metrics_as_threads(tmp_path, monkeypatch):
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    run_toy(RAW, out_root=tmp_path / "threads")
    run_toy(RAW, out_root=tmp_path / "dask", runner="dask")
    threads, dask = (read_metrics(tmp_path / r / "results" / "toy") for r in ("threads", "dask"))
    assert without_timings(threads) == without_timings(dask)
    assert "MALLOC_TRIM_THRESHOLD_" not in os.environ, "the cluster's nanny exported it into this process"


def test_markdown_table_escapes_pipes():
    table = report.markdown_table([{"a": "x|y", "b": "1"}])
    assert "x\\|y" in table and table.count("\n") == 3
    assert report.fmt(None) == "–" and report.fmt(1234567.0) == "1.235e+06" and report.fmt(0.5) == "0.5"


def test_bundled_data_and_parquet_roundtrip(tmp_path):
    X, y = load_bundled("breast_cancer")
    assert X.shape == (569, 30) and y.shape == (569,)
    with pytest.raises(ValueError, match="unknown bundled dataset"):
        load_bundled("cifar10")
    frame = pd.DataFrame({"a": [1.5, 2.5], "b": ["x", "y"]})
    pd.testing.assert_frame_equal(load_parquet(save_parquet(frame, tmp_path / "d" / "f.parquet")), frame)
    with pytest.raises(FileNotFoundError, match="missing"):
        load_parquet(tmp_path / "nope.parquet")
    X_saved, y_saved = load_xy(save_bundled("wine", tmp_path / "wine.parquet"))
    X_wine, y_wine = load_bundled("wine")
    pd.testing.assert_frame_equal(X_saved, X_wine)
    assert y_saved.tolist() == y_wine.tolist()


class Lists(PaperParams):
    methods: Annotated[list[str], Distinct]
    ns: Annotated[list[int], Increasing]


@pytest.mark.parametrize("values,error", [
    ({"methods": ["a", "b"], "ns": [1, 10]}, None),
    ({"methods": ["a", "b", "a"], "ns": [1, 10]}, "methods.*distinct; repeated: a"),
    ({"methods": ["a"], "ns": [1, 1]}, "ns.*strictly increasing"),
    ({"methods": ["a"], "ns": [10, 1]}, "ns.*strictly increasing"),
])
def test_list_constraints_name_the_key(values, error):
    if error is None:
        Lists.model_validate({"seeds": 1, **values})
        return
    with pytest.raises(ValueError, match="(?s)" + error):
        Lists.model_validate({"seeds": 1, **values})


def test_torch_seeded_initialisation_is_private_to_each_thread():
    weights = {}

    def init(seed):
        with torch_seeded(seed):
            weights[seed] = mlp(4, [8], 2)[0].weight.detach().clone()

    threads = [threading.Thread(target=init, args=(s,)) for s in (1, 2, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with torch_seeded(1):
        reference = mlp(4, [8], 2)[0].weight.detach()
    assert torch.equal(weights[1], reference) and not torch.equal(weights[1], weights[2])


@pytest.mark.parametrize("guarded", [True, False])
def test_a_discarded_global_draw_in_another_thread_shifts_a_seeded_block_unless_isolated(guarded):
    """A module built only to be overwritten still draws from torch's global RNG; another thread's seeded
    initialisation must see none of those draws (the race behind a once-flaky smoke determinism test)."""
    opened, other_done = threading.Event(), threading.Event()
    seeded_draws, other_done_during_block = [], []

    def seeded():
        with torch_seeded(7):
            seeded_draws.append(torch.rand(3))
            opened.set()
            other_done.wait(0.3 if guarded else 5)   # isolated, the other thread waits for this block to close
            other_done_during_block.append(other_done.is_set())
            seeded_draws.append(torch.rand(3))

    def discarded_draw():
        opened.wait(5)
        with global_rngs_isolated() if guarded else contextlib.nullcontext():
            torch.nn.Linear(8, 8)
        other_done.set()

    threads = [threading.Thread(target=seeded), threading.Thread(target=discarded_draw)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with torch_seeded(7):
        reference = torch.rand(6)
    intact = torch.equal(torch.cat(seeded_draws), reference)
    assert intact == guarded and other_done_during_block == [not guarded]


def test_global_rngs_seeded_seeds_both_libraries_and_restores_their_states():
    numpy_before, torch_before = np.random.get_state()[1].copy(), torch.get_rng_state()
    with global_rngs_isolated():
        np.random.rand(2), torch.nn.Linear(8, 8)
    assert np.array_equal(np.random.get_state()[1], numpy_before) and torch.equal(torch.get_rng_state(), torch_before)
    with global_rngs_seeded(3):
        first = np.random.rand(2), torch.rand(2)
    with global_rngs_seeded(3):
        again = np.random.rand(2), torch.rand(2)
    assert np.array_equal(first[0], again[0]) and torch.equal(first[1], again[1])
    assert np.array_equal(np.random.get_state()[1], numpy_before) and torch.equal(torch.get_rng_state(), torch_before)


def test_training_loop_fits_a_separable_problem_deterministically():
    rng = np.random.default_rng(0)
    X = torch.tensor(rng.normal(size=(200, 2)), dtype=torch.float32)
    y = (X[:, 0] + X[:, 1] > 0).long()

    def fit():
        with torch_seeded(0):
            model = mlp(2, [16], 2)
        history = train(model, X, y, loss_fn=torch.nn.functional.cross_entropy, epochs=30, batch_size=32,
                        lr=0.01, seed=0)
        return model, history

    model, history = fit()
    assert history[-1] < 0.5 * history[0]
    assert (predict(model, X).argmax(1) == y).float().mean() > 0.95
    assert fit()[1] == history
    with pytest.raises(ValueError, match="rows"):
        train(model, X, y[:10], loss_fn=torch.nn.functional.cross_entropy, epochs=1, batch_size=8, lr=0.1, seed=0)


def test_single_thread_context_is_counted_and_restores_the_setting():
    before = torch.get_num_threads()
    with torch_single_thread():
        with torch_single_thread():
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_optimiser_warm_up_leaves_dynamo_imported():
    import subprocess
    import sys

    code = ("import sys; from tasks.train import warm_up_optimiser; "
            "before = 'torch._dynamo' in sys.modules; warm_up_optimiser(); print(before, 'torch._dynamo' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["False", "True"]


def test_the_test_session_refuses_the_network_beyond_loopback():
    """conftest's guard, on which the smoke runs' "no network" rests: refuses an outside address, allows loopback."""
    import socket

    with socket.socket() as outside, pytest.raises(OSError, match="only loopback"):
        outside.connect(("192.0.2.1", 80))   # TEST-NET-1, never routed
    with socket.socket() as server, socket.socket() as client:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        client.connect(server.getsockname())
