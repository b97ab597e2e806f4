"""The import structure of src/: who imports whom, import cycles, floors, layering rules and
the packages' doors (what they offer) behind which their modules are private.

Standard library only, so ``scripts/imports`` runs with a plain ``python3``; the tests in
``tests/project/test_architecture.py`` use the same code.

What counts as an import arrow from module ``m`` (module names as Python spells them,
``adapters.spark._engine``; a package's ``__init__.py`` is the package's name):

* every ``import`` statement in ``m`` at any depth: inside functions, methods,
  ``if TYPE_CHECKING:`` blocks and ``try``/``except`` all count (a deferred import is still
  an import);
* ``import a.b.c`` is an arrow to ``a.b.c`` (or to the longest prefix that is a module of src/);
* ``from pkg import name`` is an arrow to ``pkg`` (its ``__init__`` runs and ``name`` is read
  from it) and, when ``pkg.name`` is a module, also to ``pkg.name``;
* relative imports (``from . import x``, ``from ..pkg import y``) are resolved against ``m``;
* only arrows between modules of src/ are kept, and a module importing itself is no arrow.

Not seen: imports built from strings (``importlib.import_module``); src/ has none today.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

# What each layer may import; a layer missing here (app) may import anything.
ALLOWED_LAYERS = {"domain": {"domain"}, "adapters": {"domain", "adapters"}}

# Packages with a door: code outside one (in src/, the tests, the benches) imports from the
# package itself (``from domain import RuleSet``), whose ``__init__`` exports every public
# name, and never names a module inside it (``from domain._rules import RuleSet``). Their
# modules are private (``_rules.py``), but for ``PUBLIC_MODULES``.
DOORS = (
    "domain",
    "adapters",
    "adapters.files",
    "adapters.json",
    "adapters.kafka",
    "adapters.memory",
    "adapters.metrics",
    "adapters.redis",
    "adapters.spark",
    "adapters.spark.batch",
    "adapters.spark.checkpoint",
    "adapters.spark.metrics",
    "adapters.spark.output",
    "adapters.spark.runtime",
    "adapters.spark.shared",
    "adapters.spark.stream",
    "adapters.testing",
    "app",
)

# The modules inside a door that keep a public name: the world outside the code names them.
PUBLIC_MODULES = (
    "app.__main__",  # python -m app
    "app.cli",  # the dedup console script (pyproject.toml: dedup = "app.cli:main"); python -m app.cli
    "app.spark_submit",  # the file spark-submit runs (deploy/Dockerfile, deploy/k8s, the Spark engine's docs)
    "app.spark_class_archive",  # python -m app.spark_class_archive (scripts/bootstrap)
)

# A cycle search stops after this many steps and keeps the longest cycle found so far.
CYCLE_SEARCH_STEPS = 100_000


@dataclass(frozen=True)
class Violation:
    """An import arrow that breaks a layering rule; ``line`` is where the import is in ``importer``."""

    importer: str
    imported: str
    line: int
    rule: str

    def __str__(self) -> str:
        return f"{self.importer}:{self.line} imports {self.imported}: {self.rule}"


@dataclass(frozen=True)
class Cycle:
    """A group of modules that import each other (a strongly connected component of two or
    more), and one concrete cycle among them: ``path`` starts and ends with the same module."""

    modules: tuple[str, ...]
    path: tuple[str, ...]

    def __str__(self) -> str:
        text = f"{len(self.modules)} modules: " + " -> ".join(self.path)
        rest = sorted(set(self.modules) - set(self.path))
        return text + (f" (also in this cycle, through other arrows: {', '.join(rest)})" if rest else "")


@dataclass(frozen=True)
class ImportGraph:
    """The modules of a source tree and the import arrows among them.

    ``arrows[m]`` maps each module ``m`` imports to the line of its first import there.
    """

    paths: dict[str, Path]
    arrows: dict[str, dict[str, int]]

    def arrow_count(self) -> int:
        return sum(len(targets) for targets in self.arrows.values())

    def within(self, prefix: str) -> ImportGraph:
        """The modules named ``prefix`` or under it, and only the arrows among them."""
        kept = {name: path for name, path in self.paths.items() if is_under(name, prefix)}
        arrows = {name: {target: line for target, line in self.arrows[name].items() if target in kept} for name in kept}
        return ImportGraph(kept, arrows)

    def cycles(self) -> list[Cycle]:
        """Every group of modules that import each other, with one concrete cycle through its
        first module: through every module of the group when such a cycle exists (and the
        search finds it within ``CYCLE_SEARCH_STEPS``), else the longest one found."""
        return sorted(
            Cycle(tuple(component), tuple(cycle_path(self.arrows, component)))
            for component in components(self.arrows)
            if len(component) > 1
        )

    def floors(self) -> dict[str, int]:
        """Each module's floor: 0 when it imports no module of the graph, else one more than
        the highest floor it imports. The modules of one cycle share a floor."""
        parts = components(self.arrows)
        home = {name: index for index, component in enumerate(parts) for name in component}
        floor_of: dict[int, int] = {}
        for index, component in enumerate(parts):  # Tarjan's order: what a component imports comes first
            below = {home[target] for name in component for target in self.arrows[name]} - {index}
            floor_of[index] = 1 + max(floor_of[other] for other in below) if below else 0
        return {name: floor_of[home[name]] for name in self.paths}

    def packages(self) -> ImportGraph:
        """The graph of packages: each module stands for its package (a package's ``__init__``
        for the package itself), and an arrow joins two packages when a module of one imports a
        module of the other. A cycle here is a loop between packages, though their modules may
        form none."""
        home = {name: package_of(name, path) for name, path in self.paths.items()}
        paths = {package: self.paths[package] for package in set(home.values()) if package in self.paths}
        arrows: dict[str, dict[str, int]] = {package: {} for package in paths}
        for importer, targets in self.arrows.items():
            for imported, line in targets.items():
                source, target = home[importer], home[imported]
                if source != target and source in arrows and target in paths:
                    arrows[source].setdefault(target, line)
        return ImportGraph(paths, arrows)

    def violations(self) -> list[Violation]:
        """Every arrow that breaks a layering rule, in importer order."""
        return [
            violation
            for importer in sorted(self.arrows)
            for imported, line in sorted(self.arrows[importer].items())
            if (violation := broken_rule(importer, imported, line)) is not None
        ]


def read_graph(src: Path = SRC) -> ImportGraph:
    """Parse every module under ``src`` and build the import graph among them."""
    paths = module_paths(src)
    arrows = {name: imports_of(name, path, set(paths)) for name, path in paths.items()}
    return ImportGraph(paths, arrows)


def module_paths(src: Path) -> dict[str, Path]:
    """Module name of every importable ``.py`` file under ``src`` (egg-info and the like are skipped)."""
    paths = {}
    for path in sorted(src.rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if parts and all(part.isidentifier() for part in parts):
            paths[".".join(parts)] = path
    return paths


def imports_of(name: str, path: Path, known: set[str]) -> dict[str, int]:
    """The modules of ``known`` that module ``name`` imports anywhere in its file, with the first line."""
    is_package = path.name == "__init__.py"
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        for target in targets_of(node, name, is_package, known):
            if target != name and (target not in found or node.lineno < found[target]):
                found[target] = node.lineno
    return found


def targets_of(node: ast.AST, importer: str, is_package: bool, known: set[str]) -> list[str]:
    """The modules of ``known`` that one AST node imports (none when it is no import)."""
    if isinstance(node, ast.Import):
        return [module for alias in node.names if (module := longest_known(alias.name, known))]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = absolute_name(node, importer, is_package)
    if base is None:
        return []
    candidates = [base] + [f"{base}.{alias.name}" for alias in node.names if alias.name != "*"]
    return [module for module in candidates if module in known]


def absolute_name(node: ast.ImportFrom, importer: str, is_package: bool) -> str | None:
    """The absolute module a ``from … import`` reads from; None when a relative one leaves the tree."""
    if node.level == 0:
        return node.module
    package = importer.split(".") if is_package else importer.split(".")[:-1]
    if node.level - 1 >= len(package):
        return None
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def longest_known(dotted: str, known: set[str]) -> str | None:
    """``a.b.c`` itself, or its longest prefix that is a module of ``known``."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        if (candidate := ".".join(parts[:end])) in known:
            return candidate
    return None


def components(arrows: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components (Tarjan), each sorted; a component comes after every
    component it imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(name: str) -> None:
        index[name] = low[name] = len(index)
        stack.append(name)
        for target in sorted(arrows[name]):
            if target not in index:
                visit(target)
                low[name] = min(low[name], low[target])
            elif target in stack:
                low[name] = min(low[name], index[target])
        if low[name] == index[name]:
            component = stack[stack.index(name) :]
            del stack[stack.index(name) :]
            found.append(sorted(component))

    for name in sorted(arrows):
        if name not in index:
            visit(name)
    return found


def cycle_path(arrows: dict[str, dict[str, int]], component: list[str]) -> list[str]:
    """A cycle through the first module of ``component``: one through every module of the
    component if the search finds it, else the longest found."""
    start, members = component[0], set(component)
    best: list[str] = []
    steps = 0

    def extend(path: list[str]) -> None:
        nonlocal best, steps
        steps += 1
        for target in sorted(set(arrows[path[-1]]) & members):
            if target == start and len(path) + 1 > len(best):
                best = path + [start]
            elif target != start and target not in path and steps < CYCLE_SEARCH_STEPS:
                extend(path + [target])
            if len(best) == len(members) + 1:  # through every module: no longer one exists
                return

    extend([start])
    return best


def doors_passed_by(path: Path, name: str) -> list[Violation]:
    """Every import statement of the file ``path`` (module ``name``: its dotted name in src/, or
    any label outside it) that names a module inside a package of ``DOORS`` from outside that
    package (a subpackage is no such module: it has a door of its own)."""
    packages = src_packages()
    found = []
    for module, line in absolute_imports(path):
        door = module.rpartition(".")[0]
        if door in DOORS and module not in packages and not is_under(name, door):
            found.append(Violation(name, module, line, f"a module inside {door}: import from {door} itself"))
    return found


def absolute_imports(path: Path) -> list[tuple[str, int]]:
    """The module each absolute import statement of the file ``path`` names, and its line
    (``from a.b import c`` names ``a.b``; ``import a.b, d`` names ``a.b`` and ``d``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module, node.lineno))
        elif isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
    return found


def public_modules(src: Path = SRC) -> list[str]:
    """The modules inside a package of ``DOORS`` that are neither private (``_``-prefixed) nor
    among ``PUBLIC_MODULES``: a package offers what its door exports, and nothing else."""
    return [
        name
        for name, path in module_paths(src).items()
        if path.name != "__init__.py"
        and package_of(name, path) in DOORS
        and private_owner(name) is None
        and name not in PUBLIC_MODULES
    ]


def src_packages(src: Path = SRC) -> set[str]:
    """The packages of ``src``: the dotted names of its directories with an ``__init__.py``."""
    return {name for name, path in module_paths(src).items() if path.name == "__init__.py"}


def imports_around_doors(root: Path, src: Path = SRC) -> dict[str, int]:
    """Per package of ``src``: how many import statements in the repository at ``root`` (its
    ``src/``, ``tests/``, ``bench/``, ``scripts/`` and ``deploy/``) name a module inside the
    package (not a subpackage: that is the subpackage's door) from outside it. A package of
    ``DOORS`` holds at 0; for the others it is the work a door would take."""
    packages = src_packages(src)
    counts = dict.fromkeys(sorted(packages), 0)
    files = [*src.rglob("*.py")]
    for folder in ("tests", "bench", "scripts", "deploy"):
        files += (root / folder).rglob("*.py")
    for path in sorted(files):
        importer = ".".join(path.relative_to(src).with_suffix("").parts) if src in path.parents else ""
        importer = importer.removesuffix(".__init__")
        for module, _ in absolute_imports(path):
            owner = module.rpartition(".")[0]
            if module not in packages and owner in packages and not (importer and is_under(importer, owner)):
                counts[owner] += 1
    return counts


def broken_rule(importer: str, imported: str, line: int) -> Violation | None:
    """The layering rule the arrow ``importer -> imported`` breaks, if any."""
    layer, target_layer = importer.split(".")[0], imported.split(".")[0]
    allowed = ALLOWED_LAYERS.get(layer)
    if allowed is not None and target_layer not in allowed:
        return Violation(importer, imported, line, f"{layer} may import only {', '.join(sorted(allowed))}")
    owner = private_owner(imported)
    if owner is not None and not is_under(importer, owner):
        return Violation(importer, imported, line, f"a private module of {owner}, imported from outside it")
    return None


def private_owner(module: str) -> str | None:
    """The package that owns a private module (a name part starting with ``_``), if ``module`` is one."""
    parts = module.split(".")
    for depth, part in enumerate(parts):
        if part.startswith("_") and not part.endswith("__"):  # __main__ is no private module
            return ".".join(parts[:depth])
    return None


def package_of(name: str, path: Path) -> str:
    """The package module ``name`` belongs to: itself for a package's ``__init__``."""
    return name if path.name == "__init__.py" else name.rpartition(".")[0] or name


def is_under(name: str, prefix: str) -> bool:
    """Whether module ``name`` is ``prefix`` or inside it (``adapters.spark.jvm`` is under ``adapters.spark``)."""
    return not prefix or name == prefix or name.startswith(prefix + ".")
