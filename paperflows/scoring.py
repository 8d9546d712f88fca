"""The evaluation stage of a split paper: score its stored records (no training, no Prefect).

Its records stage is :mod:`paperflows.stages`; :func:`run_split` runs both, as ``paperflows run`` does.
"""

from __future__ import annotations

import importlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from paperflows.params import FLOWS_DIR, ParamsError, read_params_file, resolve_params

if TYPE_CHECKING:
    from paperflows.core.contract import Paper
    from paperflows.core.evaluation import Evaluate
from paperflows.stages import NOTES_FILE, SEED_COUNTS, known_split, record_paper, records_dir


def load_evaluation(slug: str):
    """``(PAPER, evaluate, notes)`` of a split paper."""
    known_split(slug)
    paper = importlib.import_module(f"flows.{slug}.claims").PAPER
    if paper.slug != slug:
        raise RuntimeError(f"flows/{slug}/claims.py declares slug '{paper.slug}'")
    evaluate = importlib.import_module(f"flows.{slug}.evaluate").evaluate
    return paper, evaluate, (FLOWS_DIR / slug / NOTES_FILE).read_text()


def evaluate_paper(slug: str, *, params_file: Path = Path("params.yaml"), **options: Any) -> dict[str, Any]:
    """Score the stored records of ``flows/<slug>`` (see :func:`score_records`) with ``params_file``."""
    raw = read_params_file(params_file)
    resolve_params(slug, raw, options.get("smoke", False), options.get("overrides", ()))
    paper, evaluate, notes = load_evaluation(slug)
    return score_records(paper, evaluate, notes, raw, **options)


def score_records(paper: Paper, evaluate: Evaluate, notes: str, raw: dict[str, Any], *,
                  model: tuple[type, dict[str, Any]] | None = None, out_root: Path = Path("."), smoke: bool = False,
                  overrides: Sequence[str] = ()) -> dict[str, Any]:
    """Score the records under ``out_root`` of ``paper`` with ``evaluate``: estimates, claims, tables, figure and
    report; ``model``: its params model and smoke values when not those of ``flows/<slug>/params.py``. Records
    made at another scale, with other params or other seeds are refused, naming what differs."""
    from paperflows.core.evaluation import evaluate_records
    from paperflows.core.records import load_records

    slug = paper.slug
    params, common = resolve_params(slug, raw, smoke, overrides, model=model)
    started = time.perf_counter()
    data_dir = Path(out_root).resolve() / "data" / slug
    folder = records_dir(out_root, slug)
    records = load_records(folder)
    made = records.meta.get("key", {})
    if made.get("smoke") != smoke:
        raise ParamsError(f"the records in {folder} were made at "
                          f"{'smoke' if made.get('smoke') else 'default'} scale")
    changed = sorted(k for k, v in params.model_dump(mode="json").items()
                     if k not in SEED_COUNTS and made.get("params", {}).get(k) != v)
    if changed:
        raise ParamsError(f"the records in {folder} were made with other values of "
                          f"{', '.join(f'papers.{slug}.{k}' for k in changed)}: run `paperflows record {slug}` first")
    if len(records.seeds) != params.all_seeds or made.get("base_seed") != common.seed:
        raise ParamsError(f"the records in {folder} cover seeds {records.seeds}, params ask for "
                          f"{params.all_seeds} seeds from {common.seed}: run `paperflows record {slug}` first")
    summary = evaluate_records(paper, params, records, evaluate, notes, data_dir,
                               Path(out_root).resolve() / "results" / slug, smoke)
    return {**summary, "wall_s": time.perf_counter() - started}


def claim_problems(slug: str, root: Path = Path("."), params_file: Path = Path("params.yaml")) -> list[str]:
    """What keeps the claims of ``slug`` from being checked on its committed records: its ``evaluate`` run on
    them in memory (nothing written), then every metric, interval, per-seed, per-setting and control path of
    ``claims.py`` looked up. Empty when every claim can be checked; catches a renamed or mistyped path before
    any run."""
    from paperflows.core.claims import check_claims
    from paperflows.core.records import load_records

    paper, evaluate, _ = load_evaluation(slug)
    params, _ = resolve_params(slug, read_params_file(params_file))
    try:
        records = load_records(records_dir(root, slug))
        output = evaluate(params, records)
        import matplotlib.pyplot as plt

        plt.close(output.figure)
        check_claims(paper, output.metrics, len(records.seeds))
    except (KeyError, TypeError, ValueError, FileNotFoundError) as err:
        return [f"{slug}: {type(err).__name__}: {err}"]
    return []


def extension(slug: str, root: Path = Path("."), params_file: Path = Path("params.yaml")) -> int | None:
    """The ``extra_seeds`` look 1 asks for on the committed records: when a claim is undecided at look 1, as many
    as the seed cap and ``common.extension_budget_s`` allow (at the records' time per seed), else 0; None for a
    paper without a ``seed_cap``. A look 2 already opened keeps its size: it was fixed when look 1 was scored, and
    the time per seed measured again (on the look-2 seeds, under another load) must not resize it."""
    from paperflows.core.evaluation import score
    from paperflows.core.records import load_records, select_seeds

    paper, evaluate, _ = load_evaluation(slug)
    params, common = resolve_params(slug, read_params_file(params_file))
    if params.seed_cap is None:
        return None
    if params.extra_seeds:
        return params.extra_seeds
    records = load_records(records_dir(root, slug))
    per_seed_s = records.meta["experiment_s"] / max(1, len(records.meta.get("seeds_run") or records.seeds))
    affordable = int(common.extension_budget_s // per_seed_s)
    first_look = params.model_copy(update={"extra_seeds": 0})
    output, _ = score(paper, first_look, select_seeds(records, records.seeds[:params.seeds]), evaluate)
    import matplotlib.pyplot as plt

    plt.close(output.figure)
    wanted = params.seed_cap - params.seeds if output.metrics["looks"]["undecided_at_look_1"] else 0
    return min(wanted, affordable)


def run_split(slug: str, **options: Any) -> dict[str, Any]:
    """Both stages of a split paper, one after the other (what ``paperflows run`` does for it)."""
    evaluate_options = {k: options[k] for k in ("params_file", "out_root", "smoke", "overrides") if k in options}
    recorded = record_paper(slug, **options)
    summary = evaluate_paper(slug, **evaluate_options)
    return {**summary, "wall_s": recorded["wall_s"] + summary["wall_s"]}
