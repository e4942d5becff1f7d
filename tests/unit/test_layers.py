"""The packages form strict layers, bottom to top: `raft.common` (Uuid, error codes,
framing, the codec, durable files) <- `raft` <- `metadata` <- `broker` <- `tools`, and
`tools` is layered inside, bottom to top:

1. tools.base: configuration and what every program shares (`tools.config`,
   `config_basics`, `properties`, `tls_certs`, `errors`, `logs`, `progress`, `ports`);
2. tools.client (`tools.client`, `admin_client`, `quorum_client`, `voter_changes`,
   `access_probes`) beside tools.server, the node's runtime (`tools.server`, `metrics`);
3. tools.launcher: the local multi-process cluster (`tools.cluster`, `addresses`);
4. tools.chaos (`tools.chaos`) beside tools.replay, the readers of logs (`tools.replay`,
   `log_dump`, `metadata_shell`);
5. tools.verbs: the `kraft` command line (`tools.cli`, `tools.commands`) and the other
   entry points, `tools.replay.__main__` (spark-submit's) and `tools.chaos.planted` (a
   chaos run's brokers with a planted bug, which wraps the command line); beside it
   tools.suite, the manual run of librdkafka's test suite (`tools.librdkafka_suite`).

A module imports only from its own group or a lower level (imports inside functions and
under `TYPE_CHECKING` included): never a higher one, nor a sibling on its own level
(client and server, chaos and replay, know nothing of each other). Every module of a
layered package has a group. No two modules import each other, directly or in a ring.
Nothing but the command line imports a verb (`tools.commands`): not the lower groups,
and not `bench/`, which sits outside the layers.

What `pyproject.toml` ships is these packages only, and each shipped module is reached
from an entry point: a module only tests or benches use belongs in `tests/support/` or
`bench/`.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from fnmatch import fnmatch
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERED = ("raft", "metadata", "broker", "tools")
# (group, its level, the modules in it: each a module or a package prefix)
GROUPS: tuple[tuple[str, int, tuple[str, ...]], ...] = (
    ("raft.common", 0, ("raft.common",)),
    ("raft", 1, ("raft",)),
    ("metadata", 2, ("metadata",)),
    ("broker", 3, ("broker",)),
    ("tools.base", 4, ("tools.config", "tools.config_basics", "tools.properties",
                       "tools.tls_certs", "tools.errors", "tools.logs", "tools.progress",
                       "tools.ports", "tools.kafka_json")),
    ("tools.client", 5, ("tools.client", "tools.admin_client", "tools.quorum_client",
                         "tools.voter_changes", "tools.access_probes")),
    ("tools.server", 5, ("tools.server", "tools.metrics")),
    ("tools.launcher", 6, ("tools.cluster", "tools.addresses")),
    ("tools.chaos", 7, ("tools.chaos",)),
    ("tools.replay", 7, ("tools.replay", "tools.log_dump", "tools.metadata_shell")),
    ("tools.verbs", 8, ("tools.cli", "tools.commands", "tools.replay.__main__",
                        "tools.chaos.planted")),
    ("tools.suite", 8, ("tools.librdkafka_suite",)),
)
LEVELS = {name: level for name, level, _ in GROUPS}
VERBS = "tools.commands"
COMMAND_LINE = ("tools.cli", VERBS)
# started by name, not imported: `python -m` (the chaos group's members, the librdkafka suite),
# spark-submit's script; the CLI imports each verb (`tools.commands.*`) by name too
MODULE_ENTRY_POINTS = ("tools.chaos.group_workload", "tools.replay.__main__",
                       "tools.librdkafka_suite.__main__")


def layer_of(module: str) -> str | None:
    """The group of the most specific member `module` belongs to (None: none)."""
    best: tuple[int, str] | None = None
    for name, _, members in GROUPS:
        for member in members:
            if (module == member or module.startswith(member + ".")) and \
                    (best is None or best[0] < len(member)):
                best = (len(member), name)
    return None if best is None else best[1]


def project_modules(tops: tuple[str, ...] = LAYERED) -> dict[str, Path]:
    modules = {}
    for top in tops:
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def imports_of(module: str, path: Path, known: set[str]) -> Iterator[str]:
    """Project modules `module` imports, wherever the import statement is: for `from P
    import a, b`, each of `P.a`, `P.b` that is a module, and `P` for the names that are
    not."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if base else alias.name for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != module:
                yield target


def import_graph(tops: tuple[str, ...] = LAYERED) -> dict[str, set[str]]:
    modules = project_modules(tops)
    known = set(modules)
    return {m: set(imports_of(m, p, known)) for m, p in modules.items()}


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Imports of a higher level, or of a sibling group on the same level."""
    found = []
    for module, targets in sorted(graph.items()):
        own = layer_of(module)
        for target in sorted(targets):
            other = layer_of(target)
            if own is None or other is None or other == own:
                continue
            if LEVELS[other] >= LEVELS[own]:
                found.append(f"{module} ({own}) imports {target} ({other})")
    return found


def verb_imports(graph: dict[str, set[str]]) -> list[str]:
    """Imports of a verb by anything but the command line."""
    def is_command_line(module: str) -> bool:
        return any(module == m or module.startswith(m + ".") for m in COMMAND_LINE)
    return [f"{module} imports {target}" for module, targets in sorted(graph.items())
            if not is_command_line(module)
            for target in sorted(targets) if target == VERBS or target.startswith(VERBS + ".")]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_a_higher_layer_when_the_tree_is_scanned() -> None:
    assert upward_imports(import_graph()) == []


def test_every_module_has_a_layer_when_the_tree_is_scanned() -> None:
    """A new module must be placed in GROUPS (an empty package `__init__` imports
    nothing and needs no place)."""
    unplaced = [m for m, path in project_modules().items()
                if layer_of(m) is None and path.read_text().strip()]
    assert unplaced == []


def test_no_import_cycle_between_files_when_the_tree_is_scanned() -> None:
    assert cycles(import_graph()) == []


def test_only_the_command_line_imports_a_verb_when_tools_and_bench_are_scanned() -> None:
    assert verb_imports(import_graph(LAYERED + ("bench",))) == []


@pytest.mark.parametrize(("module", "source", "expected"), [
    ("raft.x", "from tools.config import NodeConfig\n",
     ["raft.x (raft) imports tools.config (tools.base)"]),
    ("raft.x", "from raft.types import Batch\n", []),
    ("raft.x", "if TYPE_CHECKING:\n    from metadata.image import MetadataImage\n",
     ["raft.x (raft) imports metadata.image (metadata)"]),
    ("raft.x", "def f():\n    import broker.kafka\n",
     ["raft.x (raft) imports broker.kafka (broker)"]),
    ("tools.chaos.x", "from tools.commands.quorum_voters import add_controller\n",
     ["tools.chaos.x (tools.chaos) imports tools.commands.quorum_voters (tools.verbs)"]),
    ("tools.chaos.x", "from tools.cluster import Cluster\nfrom tools.commands import demo, "
     "quorum_voters\n",
     ["tools.chaos.x (tools.chaos) imports tools.commands.demo (tools.verbs)",
      "tools.chaos.x (tools.chaos) imports tools.commands.quorum_voters (tools.verbs)"]),
    ("tools.chaos.x", "from tools.replay.load import load_logs\n",
     ["tools.chaos.x (tools.chaos) imports tools.replay.load (tools.replay)"]),
    ("tools.chaos.x", "from tools.cluster import Cluster\n", []),
    ("tools.metrics", "def f():\n    from tools.client.admin import BrokerAdminClient\n",
     ["tools.metrics (tools.server) imports tools.client.admin (tools.client)"]),
    ("tools.config.x", "from tools.admin_client import exchange\n",
     ["tools.config.x (tools.base) imports tools.admin_client (tools.client)"]),
])
def test_an_upward_import_is_reported_when_a_module_adds_one(
        tmp_path: Path, module: str, source: str, expected: list[str]) -> None:
    """The checker itself: one planted upward or sideways import is found, wherever it
    sits."""
    path = tmp_path / "x.py"
    path.write_text(source)
    known = {"tools.config", "raft.types", "metadata.image", "broker.kafka", "raft.x",
             "tools.commands.quorum_voters", "tools.replay.load", "tools.cluster",
             "tools.client.admin", "tools.admin_client", "tools.commands.demo", module}
    graph = {module: set(imports_of(module, path, known))}
    assert upward_imports(graph) == expected


def test_a_verb_import_is_reported_when_the_chaos_package_or_a_bench_adds_one() -> None:
    graph = {"tools.chaos.nemesis": {"tools.commands.quorum_voters", "tools.cluster"},
             "bench.x_bench": {"tools.commands.topics"},
             "tools.commands.features": {"tools.commands.quorum_voters"},
             "tools.cli": {"tools.commands"}}
    assert verb_imports(graph) == [
        "bench.x_bench imports tools.commands.topics",
        "tools.chaos.nemesis imports tools.commands.quorum_voters"]
    assert upward_imports(graph) == [
        "tools.chaos.nemesis (tools.chaos) imports tools.commands.quorum_voters (tools.verbs)"]


def shipped_packages() -> list[str]:
    """The top-level packages pyproject.toml's `packages.find` include patterns select."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["packages"]["find"]["include"]
    return sorted(d.name for d in ROOT.iterdir() if (d / "__init__.py").is_file()
                  and any(fnmatch(d.name, pattern) for pattern in patterns))


def reached_from(graph: dict[str, set[str]], roots: list[str]) -> set[str]:
    """Every module importing `roots` loads (a module's parent packages included)."""
    reached: set[str] = set()
    pending = list(roots)
    while pending:
        module = pending.pop()
        if module in reached:
            continue
        reached.add(module)
        parts = module.split(".")
        pending.extend(".".join(parts[:i]) for i in range(1, len(parts)))
        pending.extend(graph.get(module, ()))
    return reached


def entry_points() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    scripts = [target.partition(":")[0] for target in config["project"]["scripts"].values()]
    verbs = [m for m in project_modules(("tools",)) if m.startswith(VERBS + ".")]
    return scripts + verbs + list(MODULE_ENTRY_POINTS)


def test_only_the_layered_packages_ship_when_pyproject_is_read() -> None:
    assert shipped_packages() == sorted(LAYERED)


def test_every_shipped_module_is_reached_from_an_entry_point_when_the_tree_is_scanned(
        ) -> None:
    graph = import_graph(tuple(shipped_packages()))
    known = set(graph)
    reached = reached_from(graph, entry_points())
    assert sorted(known - reached) == []


def test_a_module_only_a_test_imports_is_reported_when_it_ships() -> None:
    graph = {"tools.cli": {"tools.commands.topics"}, "tools.commands.topics": {"tools.errors"},
             "tools.errors": set(), "tools": set(), "tools.commands": set(),
             "tools.replay.synthetic": {"tools.errors"}}
    assert set(graph) - reached_from(graph, ["tools.cli"]) == {"tools.replay.synthetic"}


def test_a_ring_of_imports_is_reported_when_three_modules_close_it() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
