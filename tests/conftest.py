import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the toy paper


@pytest.fixture(scope="session", autouse=True)
def prefect_harness():
    """One temporary Prefect API for the whole session (starting one costs ~14 s)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(scope="session")
def prefect_api_url(prefect_harness) -> str:
    from prefect.settings import PREFECT_API_URL

    return PREFECT_API_URL.value()


def without_timings(value):
    """A metrics document with every runtime removed: what the determinism checks compare.

    Claims on runtimes go too, and so do the verdict counts, which include them.
    """
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items()
                if k not in ("timings", "verdicts")
                and not (isinstance(v, dict) and str(v.get("metric", "")).startswith("timings."))}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


def read_metrics(results_dir: Path) -> dict:
    return json.loads((Path(results_dir) / "metrics.json").read_text())
