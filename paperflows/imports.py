"""What a stage's code is: the repo files a module reaches through its imports, read from the source (``ast``),
function-local imports included, without running anything.

:mod:`paperflows.dvcgen` makes a stage's deps from it, and :func:`paperflows.stages.code_digest` the digest that
keys a paper's stored records, so the two always name the same files (a digest of whatever modules a process
happened to have loaded would differ between a DVC stage, a robustness run and a Dask worker). It also checks
the layers: papers, then the domain toolkits (``tasks/``), then the framework core (:mod:`paperflows.core`).
"""

from __future__ import annotations

import ast
import functools
import hashlib
from pathlib import Path
from typing import Iterable

from paperflows.params import FLOWS_DIR

REPO = FLOWS_DIR.parent
FOLLOWED_PACKAGES = ("tasks", "paperflows", "flows")
CORE_PACKAGE = "paperflows.core"
RECORD_ENTRY = "paperflows/stages.py"
EVALUATION_FILES = ("claims.py", "evaluate.py")  # a split paper's evaluation code; the rest of flows/<slug> records


def _module_path(name: str) -> Path | None:
    """The repo file of a dotted module name in one of our packages (``tasks.train`` -> tasks/train.py)."""
    if name.split(".")[0] not in FOLLOWED_PACKAGES:
        return None
    base = REPO.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _package_inits(name: str) -> list[Path]:
    """``__init__.py`` of every package on the way to ``name`` (importing paperflows.core.stats runs
    paperflows/__init__.py and paperflows/core/__init__.py)."""
    parts = name.split(".")
    return [p for i in range(1, len(parts)) if (p := REPO.joinpath(*parts[:i], "__init__.py")).is_file()]


def imported_modules(path: Path) -> set[str]:
    """Dotted names ``path`` imports anywhere in its source; ``from a import b`` yields ``a`` and ``a.b``."""
    stat = path.stat()
    return set(_parsed_imports(path, stat.st_mtime_ns, stat.st_size))


@functools.cache
def _parsed_imports(path: Path, mtime_ns: int, size: int) -> frozenset[str]:
    """:func:`imported_modules` of one version of the file (``mtime_ns``, ``size``): generating ``dvc.yaml``
    visits the shared modules once per paper, and parsing them each time was most of its 15 s."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(anchor + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return frozenset(names)


def import_closure(files: Iterable[Path], slug: str | None = None) -> set[Path]:
    """Every repo file reached from ``files`` through imports, checking the layers on the way: a paper may
    import its own folder, ``tasks`` and :mod:`paperflows.core`; ``tasks`` only itself and the core; the core
    only itself. Anything else (another paper, the application) is an error naming the file and the import."""
    seen: set[Path] = set()
    todo = [Path(f).resolve() for f in files]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        in_paper = slug is not None and path.is_relative_to(FLOWS_DIR / slug)
        in_tasks = path.is_relative_to(REPO / "tasks")
        in_core = path.is_relative_to(REPO / CORE_PACKAGE.replace(".", "/"))
        for name in sorted(imported_modules(path)):
            target = _module_path(name)
            if target is None:
                continue
            top = name.split(".")[0]
            of_core = name == CORE_PACKAGE or name.startswith(CORE_PACKAGE + ".")
            if (in_paper or in_tasks or in_core) and top == "paperflows" and not of_core:
                raise ValueError(f"{path.relative_to(REPO)} imports {name}: papers, tasks/ and the core must not "
                                 "import the app (the rest of paperflows/)")
            if in_core and top == "tasks":
                raise ValueError(f"{path.relative_to(REPO)} imports {name}: the core must not import tasks/")
            if (in_tasks or in_core) and top == "flows":
                raise ValueError(f"{path.relative_to(REPO)} imports {name}: tasks/ and the core must not import flows/")
            if in_paper and top == "flows" and not name.startswith(f"flows.{slug}"):
                raise ValueError(f"{path.relative_to(REPO)} imports {name}: a flow never imports another flow")
            todo += [target.resolve(), *(p.resolve() for p in _package_inits(name))]
    return seen


def record_files(slug: str) -> list[Path]:
    """The code of stage ``<slug>`` (the paper's records), sorted: every file of ``flows/<slug>`` but the
    evaluation's, :mod:`paperflows.stages`, and what they import."""
    own = [p.resolve() for p in sorted((FLOWS_DIR / slug).rglob("*.py")) if p.name not in EVALUATION_FILES]
    return sorted(set(own) | import_closure([*own, REPO / RECORD_ENTRY], slug=slug))


def files_digest(paths: Iterable[Path]) -> str:
    """16 hex digits of sha256 over each file's repo path and bytes, in the order given."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]
