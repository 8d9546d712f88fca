"""Every paper's flow at smoke scale, through the same code path as a full run."""

import fcntl
import hashlib
import json
import os
import re

import numpy as np
import pytest
import torch
import yaml
from conftest import ROOT, read_metrics, without_timings

from paperflows.core.fingerprint import fingerprint_digest
from paperflows.params import paper_slugs, read_params_file, resolve_params
from paperflows.pipeline import load_paper, load_params_model, run_paper
from paperflows.summary import README_END, README_START

SLUGS = paper_slugs()
# each paper's smoke metrics (timings aside) as recorded by an earlier run, under the fingerprint of the kernels
# that computed them (CPUs whose pinned bits differ keep a set each); `PAPERFLOWS_UPDATE_SMOKE_DIGESTS=1 make test`
# records them anew after an intended change
SMOKE_DIGESTS = ROOT / "tests" / "smoke_digests.json"
UPDATE_SMOKE_DIGESTS = os.environ.get("PAPERFLOWS_UPDATE_SMOKE_DIGESTS") == "1"


def test_every_paper_has_a_params_section_and_every_section_a_flow():
    papers = set(yaml.safe_load((ROOT / "params.yaml").read_text())["papers"])
    assert papers == set(SLUGS)


@pytest.mark.parametrize("slug", SLUGS)
def test_default_and_smoke_params_validate(slug):
    raw = read_params_file(ROOT / "params.yaml")
    default, _ = resolve_params(slug, raw)
    smoke, _ = resolve_params(slug, raw, smoke=True)
    assert smoke != default, "SMOKE must shrink the run"
    assert load_params_model(slug) is type(default), "the flow runs with the model of flows/<slug>/params.py"


@pytest.mark.parametrize("slug", SLUGS)
def test_no_flow_feeds_its_method_a_dumped_dict(slug):
    """Params stay typed down to the method: no ``model_dump()`` and no string-keyed config in a paper's code."""
    for path in (ROOT / "flows" / slug).glob("*.py"):
        text = path.read_text()
        assert "model_dump(" not in text, f"{path.name} dumps its params"
        assert not re.search(r"\b(config|cfg)\[[\"']", text), f"{path.name} reads params by string key"


def test_readme_holds_the_generated_papers_table():
    text = (ROOT / "README.md").read_text()
    assert README_START in text and README_END in text
    for slug in SLUGS:
        assert f"`{slug}`" in text


def global_rng_states() -> tuple[torch.Tensor, np.ndarray]:
    return torch.get_rng_state(), np.random.get_state()[1].copy()


def smoke_digest(metrics: dict) -> str:
    return hashlib.sha256(json.dumps(without_timings(metrics), sort_keys=True).encode()).hexdigest()[:16]


def recorded_smoke_digest(slug: str) -> str | None:
    """``slug``'s recorded digest where it was computed by kernels that give this machine's bits, else None."""
    return json.loads(SMOKE_DIGESTS.read_text()).get(fingerprint_digest(), {}).get(slug)


def record_smoke_digest(slug: str, digest: str) -> None:
    """Write ``slug``'s digest under this machine's fingerprint and drop it under the others, which an intended
    change has made stale (test workers in parallel: one at a time)."""
    with open(SMOKE_DIGESTS, "r+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        recorded = json.load(handle)
        for papers in recorded.values():
            papers.pop(slug, None)
        recorded.setdefault(fingerprint_digest(), {})[slug] = digest
        recorded = {fingerprint: dict(sorted(papers.items())) for fingerprint, papers in sorted(recorded.items())
                    if papers}
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(recorded, indent=1) + "\n")


def test_the_smoke_digest_sees_every_non_timing_value():
    metrics = {"claims": {"c": {"observed": 0.5, "verdict": "reproduced"}}, "sanity": {},
               "timings": {"body_s": 1.0}, "smoke": True}
    assert smoke_digest(metrics) == smoke_digest({**metrics, "timings": {"body_s": 2.0}})
    assert smoke_digest(metrics) != smoke_digest({**metrics, "claims": {"c": {"observed": 0.5000001,
                                                                                "verdict": "reproduced"}}})


@pytest.mark.parametrize("slug", SLUGS)
def test_paper_flow_at_smoke_scale_is_deterministic(slug, tmp_path):
    """A smoke run equals the run recorded in ``tests/smoke_digests.json`` (another process, earlier), or, on a
    machine whose kernels give other bits (or for a paper not recorded yet), a second run in this process."""
    paper = load_paper(slug)
    torch_before, numpy_before = global_rng_states()
    run_paper(slug, params_file=ROOT / "params.yaml", out_root=tmp_path / "a", smoke=True)
    torch_after, numpy_after = global_rng_states()
    # seeds run in threads: a draw from a global RNG outside ``paperflows.core.seeding``'s lock can shift a concurrent
    # seed's initial weights, a rare race that a second run would only catch by chance
    assert torch.equal(torch_before, torch_after), "the flow drew from torch's global RNG outside paperflows.core.seeding"
    assert np.array_equal(numpy_before, numpy_after), "the flow drew from np.random outside paperflows.core.seeding"
    first = read_metrics(tmp_path / "a" / "results" / slug)
    assert set(first["claims"]) == {c.id for c in paper.claims}
    assert all(c["verdict"] in ("reproduced", "not reproduced", "inconclusive") for c in first["claims"].values())
    assert first["smoke"] is True
    for name in ("plot.csv", "figure.png", "report.md"):
        assert (tmp_path / "a" / "results" / slug / name).is_file()
    assert any((tmp_path / "a" / "data" / slug).iterdir()), "the flow saves its dataset under data/<slug>/"

    recorded = None if UPDATE_SMOKE_DIGESTS else recorded_smoke_digest(slug)
    if recorded is not None:
        assert smoke_digest(first) == recorded, (
            f"{slug}'s smoke metrics differ from the run recorded in {SMOKE_DIGESTS.name}: the flow is not "
            "deterministic, or its results changed on purpose (then PAPERFLOWS_UPDATE_SMOKE_DIGESTS=1 make test)")
        return
    run_paper(slug, params_file=ROOT / "params.yaml", out_root=tmp_path / "b", smoke=True)
    assert without_timings(first) == without_timings(read_metrics(tmp_path / "b" / "results" / slug))
    if UPDATE_SMOKE_DIGESTS:
        record_smoke_digest(slug, smoke_digest(first))
