"""The import structure of src/: no import cycle, every layer imports only what it may, and
a package's modules are private behind its door.

The checker is tests/support/architecture.py (``scripts/imports`` prints the same findings); the
second half of this file runs it on small trees written here, so a broken checker fails too.
The domain's freedom from third-party libraries is tests/domain/test_domain_purity.py.
"""

import importlib
import os
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.architecture import DOORS, PUBLIC_MODULES, doors_passed_by, public_modules, read_graph

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_src_has_no_import_cycle():
    cycles = read_graph().cycles()
    assert not cycles, "import cycles in src/:\n" + "\n".join(f"  {cycle}" for cycle in cycles)


def test_no_two_packages_of_src_import_each_other():
    """Modules may form no cycle while their packages do (a module of one imports the other's
    and back): every package sits on a floor above those it imports."""
    cycles = read_graph().packages().cycles()
    assert not cycles, "package cycles in src/:\n" + "\n".join(f"  {cycle}" for cycle in cycles)


def test_src_breaks_no_layering_rule():
    violations = read_graph().violations()
    assert not violations, "layering violations in src/:\n" + "\n".join(f"  {v}" for v in violations)


def test_code_outside_a_package_with_a_door_imports_through_the_door():
    """src/, the tests, the benches and the scripts import the domain as ``from domain import
    …`` (and each adapter package with a door likewise): its ``__init__`` is the one place that
    says what the package offers."""
    files = [*(REPO_ROOT / "src").rglob("*.py")]
    for folder in ("tests", "bench", "scripts", "deploy"):
        files += (REPO_ROOT / folder).rglob("*.py")
    found = [v for f in sorted(files) for v in doors_passed_by(f, module_name(f))]
    assert not found, f"imports around the doors of {', '.join(DOORS)}:\n" + "\n".join(f"  {v}" for v in found)


def test_the_modules_inside_a_door_are_private_but_those_the_world_names():
    """A package offers what its ``__init__`` exports: every other module is ``_``-prefixed
    (``domain/_rules.py``), so its name says no one outside imports it. The few the world
    outside the code names (a console script, ``python -m``, spark-submit's file) are
    ``PUBLIC_MODULES``."""
    public = public_modules()
    assert not public, "public modules inside a door (make them _-prefixed):\n" + "\n".join(f"  {m}" for m in public)


def test_every_module_kept_public_exists():
    assert set(PUBLIC_MODULES) <= set(read_graph().paths)


def module_name(path: Path) -> str:
    """The dotted name of a file of src/ (``domain._rules``), its path from the repository otherwise."""
    src = REPO_ROOT / "src"
    if src in path.parents:
        parts = path.relative_to(src).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    return str(path.relative_to(REPO_ROOT))


FIRST_IMPORTS = """
import importlib, sys
failed = []
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m.split(".")[0] in ("domain", "adapters", "app")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed.append(f"{name}: {type(exc).__name__}: {exc}")
print("\\n".join(failed))
"""


def test_every_module_imports_when_it_is_the_first_one_imported():
    """A package's ``__init__`` runs before its modules: an eager one can close a cycle the
    module graph above does not show, which only an import order reveals."""
    modules = sorted(name for name in read_graph().paths if not name.startswith("app.__main__"))
    src = Path(__file__).resolve().parents[2] / "src"
    result = subprocess.run(
        [sys.executable, "-c", FIRST_IMPORTS, *modules],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(src)},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "", "modules that fail to import first:\n" + result.stdout


def test_the_checker_reads_the_real_tree():
    graph = read_graph()
    assert {"domain", "domain._errors", "adapters", "app._container"} <= set(graph.paths)
    assert graph.arrow_count() > 100


# --- the checker itself, on trees written to tmp_path ---------------------------------------


def write_tree(root, files):
    """Write ``{relative path: source}`` under ``root``; every folder gets an empty ``__init__.py``."""
    for relative, source in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
        for folder in path.relative_to(root).parents:
            if folder.parts and not (root / folder / "__init__.py").exists():
                (root / folder / "__init__.py").write_text("")
    return read_graph(root)


DEFERRED_IMPORTS = {
    "inside a function": """
        def later():
            import adapters.a
        """,
    "inside a method": """
        class B:
            def later(self):
                from adapters.a import A
        """,
    "under TYPE_CHECKING": """
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from adapters import a
        """,
    "in a try/except": """
        try:
            from .a import A
        except ImportError:
            A = None
        """,
}


@pytest.mark.parametrize("form", DEFERRED_IMPORTS)
def test_a_cycle_closed_by_a_deferred_import_is_found(tmp_path, form):
    graph = write_tree(
        tmp_path,
        {
            "adapters/a.py": "from adapters.b import B\n",
            "adapters/b.py": DEFERRED_IMPORTS[form],
        },
    )
    assert [cycle.path for cycle in graph.cycles()] == [("adapters.a", "adapters.b", "adapters.a")]


def test_a_loop_between_packages_is_a_package_cycle_though_no_module_cycle(tmp_path):
    graph = write_tree(
        tmp_path,
        {
            "adapters/p/a.py": "from adapters.q.b import B\n",
            "adapters/q/b.py": "B = 1\n",
            "adapters/q/c.py": "from adapters.p.d import D\n",
            "adapters/p/d.py": "D = 1\n",
        },
    )
    assert graph.cycles() == []
    assert [cycle.path for cycle in graph.packages().cycles()] == [("adapters.p", "adapters.q", "adapters.p")]


def test_relative_imports_are_resolved_against_the_importing_module(tmp_path):
    graph = write_tree(
        tmp_path,
        {
            "adapters/kafka/config.py": "",
            "adapters/kafka/source.py": "from . import config\n",
            "adapters/kafka/sink.py": "from .config import Settings\n",
            "adapters/kafka/engine.py": "from ..memory import state_store\n",
            "adapters/kafka/__init__.py": "from .source import Source\n",
            "adapters/memory/state_store.py": "",
        },
    )
    assert set(graph.arrows["adapters.kafka.source"]) == {"adapters.kafka", "adapters.kafka.config"}
    assert set(graph.arrows["adapters.kafka.sink"]) == {"adapters.kafka.config"}
    assert set(graph.arrows["adapters.kafka.engine"]) == {"adapters.memory", "adapters.memory.state_store"}
    assert set(graph.arrows["adapters.kafka"]) == {"adapters.kafka.source"}


def test_only_imports_of_modules_of_the_tree_are_arrows(tmp_path):
    graph = write_tree(
        tmp_path,
        {
            "domain/rules.py": "import json\nfrom domain import rules\nimport domain.rules\n",
            "app/cli.py": "import domain.rules.Rule\nfrom pyspark.sql import DataFrame\n",
        },
    )
    assert graph.arrows["domain.rules"] == {"domain": 2}  # json is outside, itself is no arrow
    assert set(graph.arrows["app.cli"]) == {"domain.rules"}
    assert graph.cycles() == []


# Every arrow here is allowed: each layer inward, a private module from its own package.
LAYERED_TREE = {
    "domain/rules.py": "import domain\n",
    "adapters/memory/engine.py": "from domain.rules import Rule\n",
    "adapters/spark/checkpoint/_paths.py": "",
    "adapters/spark/checkpoint/logs.py": "from . import _paths\n",
    "adapters/kafka/source.py": "from adapters.memory import engine\n",
    "app/cli.py": "from adapters.memory.engine import Engine\nfrom domain.rules import Rule\n",
}


@pytest.mark.parametrize(
    "importer, source, broken",
    [
        ("domain/rules.py", "from adapters.memory.engine import Engine", "domain may import only domain"),
        ("domain/rules.py", "def later():\n    import app.cli", "domain may import only domain"),
        ("adapters/memory/engine.py", "from app.cli import main", "adapters may import only adapters, domain"),
        (
            "adapters/kafka/source.py",
            "from adapters.spark.checkpoint import _paths",
            "a private module of adapters.spark.checkpoint, imported from outside it",
        ),
        (
            "app/cli.py",
            "import adapters.spark.checkpoint._paths",
            "a private module of adapters.spark.checkpoint, imported from outside it",
        ),
    ],
)
def test_a_forbidden_import_is_a_violation(tmp_path, importer, source, broken):
    graph = write_tree(tmp_path, {**LAYERED_TREE, importer: source + "\n"})
    assert [violation.rule for violation in graph.violations()] == [broken]


def test_allowed_imports_are_no_violation(tmp_path):
    assert write_tree(tmp_path, LAYERED_TREE).violations() == []


def test_floors_count_the_layers_and_a_cycle_shares_one_floor(tmp_path):
    graph = write_tree(
        tmp_path,
        {
            "domain/rules.py": "",
            "domain/dedup.py": "from domain import rules\n",
            "adapters/a.py": "import domain.dedup\nimport adapters.b\n",
            "adapters/b.py": "def later():\n    import adapters.a\n",
            "app/cli.py": "import adapters.a\n",
        },
    )
    floors = graph.floors()
    assert floors["domain"] == floors["domain.rules"] == floors["adapters"] == 0
    assert floors["domain.dedup"] == 1
    assert floors["adapters.a"] == floors["adapters.b"] == 2
    assert floors["app.cli"] == 3


def test_a_cycle_names_every_module_of_its_group_even_off_its_path(tmp_path):
    # Two cycles share b -> c: a -> b -> c -> a and b -> c -> d -> b; no one path visits all four.
    graph = write_tree(
        tmp_path,
        {
            "adapters/a.py": "import adapters.b\n",
            "adapters/b.py": "import adapters.c\n",
            "adapters/c.py": "import adapters.a\nimport adapters.d\n",
            "adapters/d.py": "import adapters.b\n",
        },
    )
    [cycle] = graph.cycles()
    assert cycle.modules == ("adapters.a", "adapters.b", "adapters.c", "adapters.d")
    assert cycle.path == ("adapters.a", "adapters.b", "adapters.c", "adapters.a")
    assert str(cycle).endswith("(also in this cycle, through other arrows: adapters.d)")


def test_the_longest_cycle_through_a_group_is_chosen(tmp_path):
    graph = write_tree(
        tmp_path,
        {
            "adapters/a.py": "import adapters.b\n",
            "adapters/b.py": "import adapters.a\nimport adapters.c\n",
            "adapters/c.py": "import adapters.a\n",
        },
    )
    assert [cycle.path for cycle in graph.cycles()] == [("adapters.a", "adapters.b", "adapters.c", "adapters.a")]


def test_within_keeps_a_package_and_the_arrows_among_its_modules(tmp_path):
    graph = write_tree(
        tmp_path,
        {
            "adapters/spark/engine.py": "from adapters.spark import plan\nfrom domain import rules\n",
            "adapters/spark/plan.py": "",
            "adapters/sparkle.py": "",
            "domain/rules.py": "",
        },
    ).within("adapters.spark")
    assert set(graph.paths) == {"adapters.spark", "adapters.spark.engine", "adapters.spark.plan"}
    assert graph.arrows["adapters.spark.engine"] == {"adapters.spark": 1, "adapters.spark.plan": 1}
    assert graph.arrow_count() == 2


def test_an_import_into_a_door_from_outside_is_found_and_one_inside_is_not(tmp_path):
    (tmp_path / "outside.py").write_text(
        "from domain import RuleSet\nfrom domain._rules import DedupRule\ndef f():\n    import domain._keys\n"
        "from adapters.kafka import KafkaSource\nfrom adapters._system import SystemClock\n"
    )
    (tmp_path / "inside.py").write_text("from domain._rules import DedupRule\n")
    found = doors_passed_by(tmp_path / "outside.py", "app.x")
    # a subpackage (adapters.kafka) is a door of its own, not a module inside adapters
    assert sorted((v.line, v.imported) for v in found) == [
        (2, "domain._rules"),
        (4, "domain._keys"),
        (6, "adapters._system"),
    ]
    assert doors_passed_by(tmp_path / "inside.py", "domain._state") == []


def test_a_public_module_inside_a_door_is_found_and_a_private_or_kept_one_is_not(tmp_path):
    write_tree(
        tmp_path,
        {
            "domain/_rules.py": "",
            "domain/rules.py": "",  # public: found
            "adapters/kafka/_engine.py": "",
            "adapters/kafka/source.py": "",  # public: found
            "adapters/spark/checkpoint/_paths.py": "",
            "app/__main__.py": "",  # kept public: PUBLIC_MODULES
            "app/cli.py": "",
            "app/spark_submit.py": "",
            "tools/helper.py": "",  # a package without a door
        },
    )
    assert public_modules(tmp_path) == ["adapters.kafka.source", "domain.rules"]


def test_importing_the_spark_door_or_the_app_does_not_load_pyspark():
    # a process of its own: this one may have loaded pyspark already
    probe = "import sys, app, adapters.spark; print('pyspark' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")},
    )
    assert done.stdout.strip() == "False", done.stderr


def test_a_lazy_name_of_the_spark_door_is_its_module_s():
    from adapters import spark

    engine = importlib.import_module("adapters.spark._engine")
    assert spark.build_spark_engine is engine.build_spark_engine
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        spark.nothing_here  # noqa: B018


def test_a_door_exports_no_name_that_two_of_its_modules_define():
    # such a name would be one module's under the door and the other's where imported from its
    # module (the Spark dead letter's and duplicate report's columns): export the modules instead
    clashes = []
    for door in DOORS:
        package = importlib.import_module(door)
        defined: dict[str, set[str]] = {}
        for info in pkgutil.iter_modules(package.__path__, door + "."):
            if info.ispkg or info.name.endswith(".__main__"):
                continue
            for name, value in vars(importlib.import_module(info.name)).items():
                if not name.startswith("_") and getattr(value, "__module__", None) == info.name:
                    defined.setdefault(name, set()).add(info.name)
        exported = set(getattr(package, "__all__", ()))
        for name, modules in defined.items():  # exported as one module's definition (a module exported is no clash)
            if len(modules) > 1 and name in exported and getattr(getattr(package, name), "__module__", None) in modules:
                clashes.append((door, name, sorted(modules)))
    assert clashes == []
