"""``paperflows new <slug>``: a runnable paper folder, its params section and a test skeleton."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from paperflows.core.io import atomic_write_text
from paperflows.dvcgen import RESERVED_STAGES

FILES = {"params.py.tmpl": "flows/{slug}/params.py", "method.py.tmpl": "flows/{slug}/method.py",
         "flow.py.tmpl": "flows/{slug}/flow.py", "claims.py.tmpl": "flows/{slug}/claims.py",
         "evaluate.py.tmpl": "flows/{slug}/evaluate.py", "NOTES.md.tmpl": "flows/{slug}/NOTES.md",
         "test.py.tmpl": "tests/test_{slug}.py"}
SECTION = "  {slug}:\n    seeds: 5\n    n_samples: 100\n    effect: 0.5\n"


def new_paper(slug: str, root: Path = Path(".")) -> list[Path]:
    """Write ``flows/<slug>/`` (params.py, method.py, flow.py: the experiment; claims.py, evaluate.py, NOTES.md:
    the evaluation), ``tests/test_<slug>.py`` and a
    ``papers.<slug>`` section at the end of ``params.yaml``; refuse to overwrite anything."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", slug) or slug in RESERVED_STAGES:
        raise ValueError(f"slug '{slug}' must be lowercase letters, digits and underscores (and not a stage's name: "
                         f"{', '.join(RESERVED_STAGES)})")
    root = Path(root)
    targets = [root / pattern.format(slug=slug) for pattern in FILES.values()]
    existing = [str(t) for t in targets if t.exists()]
    params_file = root / "params.yaml"
    text = params_file.read_text()
    if re.search(rf"^  {slug}:", text, flags=re.MULTILINE):
        existing.append(f"papers.{slug} in {params_file}")
    if existing:
        raise FileExistsError(f"already there: {', '.join(existing)}")
    templates = resources.files("paperflows") / "templates"
    for name, target in zip(FILES, targets):
        atomic_write_text(target, (templates / name).read_text().format(slug=slug))
    atomic_write_text(targets[0].parent / "__init__.py", "")
    atomic_write_text(params_file, text.rstrip("\n") + "\n" + SECTION.format(slug=slug))
    return [*targets, params_file]
