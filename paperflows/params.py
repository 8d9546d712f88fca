"""``params.yaml``: read, validate and override, without importing Prefect or any paper's method.

A paper's params model lives in ``flows/<slug>/params.py``, which imports only pydantic and the
contract, so ``paperflows check`` and a bad ``--set`` answer in well under a second.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Sequence

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from paperflows.core.contract import PaperParams
from paperflows.core.io import atomic_write_text

FLOWS_DIR = Path(__file__).resolve().parent.parent / "flows"  # the code; data, results and params live in the working directory
CRON_FIELDS = 5
TOP_LEVEL_KEYS = ("common", "papers", "schedules")
STAGE_PARAMS_DIR = Path("params")  # params/<slug>.yaml: what each DVC stage reads (see dvcgen)


class ParamsError(ValueError):
    """Invalid params: the message names the key (``papers.lapsum.k ...``)."""


class CommonParams(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    seed: int = Field(ge=0, description="base seed; a paper's seeds are seed, seed+1, ...")
    max_workers: int = Field(ge=1, le=256, description="parallel tasks (threads, processes or Dask workers)")
    extension_budget_s: float = Field(120.0, gt=0, description="the most seconds `paperflows extend` may add to one "
                                      "paper's records stage for a second look, from its recorded time per seed")


def paper_slugs() -> list[str]:
    """Every folder of ``flows/`` that holds a ``flow.py``."""
    return sorted(p.name for p in FLOWS_DIR.iterdir() if (p / "flow.py").is_file() and not p.name.startswith(("_", ".")))


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader that rejects a key repeated in one mapping, as DVC's parser does (PyYAML would keep the
    last value silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key '{key}' (line {key_node.start_mark.line + 1})", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def read_params_file(path: Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise ParamsError(f"params file {path} not found")
    try:
        raw = yaml.load(path.read_text(), Loader=_UniqueKeyLoader) or {}
    except yaml.YAMLError as err:
        raise ParamsError(f"{path} is not valid YAML: {err}") from err
    if not isinstance(raw, dict):
        raise ParamsError(f"{path}: expected a mapping with keys {', '.join(TOP_LEVEL_KEYS)}")
    unknown = set(raw) - set(TOP_LEVEL_KEYS)
    if unknown:
        raise ParamsError(f"{path}: unknown top-level key(s) {sorted(unknown)}; expected {', '.join(TOP_LEVEL_KEYS)}")
    return raw


def configured_slugs(params_file: Path = Path("params.yaml")) -> list[str]:
    """The papers of ``params.yaml`` (what ``dvc.yaml`` runs), in file order."""
    return list((read_params_file(params_file).get("papers") or {}))


def load_params_model(slug: str) -> tuple[type[PaperParams], dict[str, Any]]:
    """``Params`` and ``SMOKE`` of ``flows/<slug>/params.py`` (a light import: no method, no Prefect)."""
    if slug not in paper_slugs():
        raise ParamsError(f"unknown paper '{slug}'; known: {', '.join(paper_slugs())}")
    if not (FLOWS_DIR / slug / "params.py").is_file():
        raise ParamsError(f"flows/{slug}/params.py is missing: it holds the paper's Params model and SMOKE")
    module = importlib.import_module(f"flows.{slug}.params")
    model, smoke = getattr(module, "Params", None), getattr(module, "SMOKE", None)
    if not (isinstance(model, type) and issubclass(model, PaperParams)) or not isinstance(smoke, dict):
        raise RuntimeError(f"flows/{slug}/params.py must define Params (a PaperParams) and SMOKE (a dict)")
    return model, smoke


def _explain(prefix: str, err: ValidationError) -> str:
    messages = []
    for e in err.errors():
        key = ".".join([prefix, *map(str, e["loc"])])
        got = "" if e["type"] == "missing" else f" (got {e['input']!r})"
        messages.append(f"{key}: {e['msg']}{got}")
    return "; ".join(messages)


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"k=200"`` or ``"common.seed=3"`` -> (key path, YAML-parsed value)."""
    if "=" not in text:
        raise ParamsError(f"override '{text}' must look like key=value")
    key, value = text.split("=", 1)
    return key.strip().split("."), yaml.safe_load(value)


def apply_overrides(section: dict[str, Any], common: dict[str, Any], overrides: Sequence[str]) -> None:
    for text in overrides:
        path, value = parse_override(text)
        target = common if path[0] == "common" else section
        path = path[1:] if path[0] == "common" else path
        for part in path[:-1]:
            target = target.setdefault(part, {})
        target[path[-1]] = value


def resolve_params(slug: str, raw: dict[str, Any], smoke: bool = False, overrides: Sequence[str] = (),
                   model: tuple[type[PaperParams], dict[str, Any]] | None = None) -> tuple[PaperParams, CommonParams]:
    """Validate ``papers.<slug>`` (with smoke values and ``key=value`` overrides applied) and ``common``.

    ``model``: the params model and smoke values, when not those of ``flows/<slug>/params.py``.
    """
    model_class, smoke_values = model or load_params_model(slug)
    papers = raw.get("papers") or {}
    if slug not in papers:
        raise ParamsError(f"papers.{slug} is missing from params.yaml")
    section = dict(papers[slug] or {})
    common = dict(raw.get("common") or {})
    if smoke:
        section.update(smoke_values)
    apply_overrides(section, common, overrides)
    try:
        common_params = CommonParams.model_validate(common)
    except ValidationError as err:
        raise ParamsError(_explain("common", err)) from None
    try:
        params = model_class.model_validate(section)
    except ValidationError as err:
        raise ParamsError(_explain(f"papers.{slug}", err)) from None
    return params, common_params


def validate_schedules(raw: dict[str, Any]) -> dict[str, str]:
    schedules = raw.get("schedules") or {}
    known = set(raw.get("papers") or {})
    for slug, cron in schedules.items():
        if slug not in known:
            raise ParamsError(f"schedules.{slug}: no such paper")
        if not isinstance(cron, str) or len(cron.split()) != CRON_FIELDS:
            raise ParamsError(f"schedules.{slug}: expected a 5-field cron string, got {cron!r}")
    return dict(schedules)


def check_params_file(path: Path = Path("params.yaml")) -> list[str]:
    """Every problem of ``params.yaml`` and the flow registry, one line each (empty when all is well):
    each section against its paper's model at default and smoke scale, sections without a flow and
    flows without a section, and the schedules."""
    try:
        raw = read_params_file(path)
    except ParamsError as err:
        return [str(err)]
    problems = []
    configured, known = list(raw.get("papers") or {}), paper_slugs()
    problems += [f"papers.{s}: no flows/{s}/flow.py" for s in configured if s not in known]
    problems += [f"flows/{s}/ has no papers.{s} section in {path}" for s in known if s not in configured]
    for slug in (s for s in configured if s in known):
        for smoke in (False, True):
            try:
                resolve_params(slug, raw, smoke=smoke)
            except (ParamsError, RuntimeError) as err:
                problems.append(f"{err}{' (at smoke scale)' if smoke else ''}")
    try:
        validate_schedules(raw)
    except ParamsError as err:
        problems.append(str(err))
    try:
        CommonParams.model_validate(raw.get("common") or {})
    except ValidationError as err:
        problems.append(_explain("common", err))
    return list(dict.fromkeys(problems))


def stage_params_text(raw: dict[str, Any], slug: str) -> str:
    """The content of ``params/<slug>.yaml``: ``common`` and the paper's own section, under the same keys as in
    ``params.yaml`` (so ``dvc.lock`` names them as before)."""
    return yaml.safe_dump({"common": raw.get("common"), "papers": {slug: raw["papers"][slug]}}, sort_keys=False)


def write_stage_params(root: Path = Path(".")) -> list[str]:
    """Write ``root/params/<slug>.yaml`` for every paper of ``root/params.yaml``, each only when its content
    changed (an untouched file keeps its timestamp and hash); returns the slugs whose file was written."""
    raw = read_params_file(root / "params.yaml")
    written = []
    for slug in configured_slugs(root / "params.yaml"):
        target = root / STAGE_PARAMS_DIR / f"{slug}.yaml"
        text = stage_params_text(raw, slug)
        if not target.is_file() or target.read_text() != text:
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(target, text)
            written.append(slug)
    return written


def set_paper_value(path: Path, slug: str, key: str, value: int) -> None:
    """Set ``papers.<slug>.<key>: value`` in the params file, editing that one line (or adding it after the
    section's ``seeds`` line), so comments and layout stay; the result must still validate."""
    lines = Path(path).read_text().splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.rstrip() == f"  {slug}:"), None)
    if start is None:
        raise ParamsError(f"papers.{slug} is missing from {path}")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].strip() and not lines[i].startswith("    ")),
               len(lines))
    entry = f"    {key}: {value}\n"
    found = [i for i in range(start + 1, end) if lines[i].startswith(f"    {key}:")]
    if found:
        lines[found[0]] = entry
    else:
        seeds = next(i for i in range(start + 1, end) if lines[i].startswith("    seeds:"))
        lines.insert(seeds + 1, entry)
    text = "".join(lines)
    resolve_params(slug, yaml.load(text, Loader=_UniqueKeyLoader))
    atomic_write_text(Path(path), text)
