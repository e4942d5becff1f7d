"""The packages form strict layers, bottom to top: `raft.common` (Uuid, error codes,
framing, the codec, durable files) <- `raft` <- `metadata` <- `broker` <- `tools`.
No module imports one of a higher layer (imports inside functions and under
`TYPE_CHECKING` included), and no two modules import each other, directly or in a ring.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("raft.common", "raft", "metadata", "broker", "tools")


def layer_of(module: str) -> int | None:
    """Index in LAYERS of the most specific layer `module` belongs to."""
    best = None
    for index, layer in enumerate(LAYERS):
        if module == layer or module.startswith(layer + "."):
            if best is None or len(LAYERS[best]) < len(layer):
                best = index
    return best


def project_modules() -> dict[str, Path]:
    modules = {}
    for top in ("raft", "metadata", "broker", "tools"):
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def imports_of(module: str, path: Path, known: set[str]) -> Iterator[str]:
    """Project modules `module` imports, wherever the import statement is."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != module:
                yield target
                break


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    known = set(modules)
    return {m: set(imports_of(m, p, known)) for m, p in modules.items()}


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for module, targets in sorted(graph.items()):
        own = layer_of(module)
        for target in sorted(targets):
            other = layer_of(target)
            if own is not None and other is not None and other > own:
                found.append(f"{module} ({LAYERS[own]}) imports {target} ({LAYERS[other]})")
    return found


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


def test_no_import_cycle_between_files_when_the_tree_is_scanned() -> None:
    assert cycles(import_graph()) == []


@pytest.mark.parametrize(("source", "expected"), [
    ("from tools.config import NodeConfig\n", ["raft.x (raft) imports tools.config (tools)"]),
    ("from raft.types import Batch\n", []),
    ("if TYPE_CHECKING:\n    from metadata.image import MetadataImage\n",
     ["raft.x (raft) imports metadata.image (metadata)"]),
    ("def f():\n    import broker.kafka\n", ["raft.x (raft) imports broker.kafka (broker)"]),
])
def test_an_upward_import_is_reported_when_a_module_adds_one(
        tmp_path: Path, source: str, expected: list[str]) -> None:
    """The checker itself: one planted upward import is found, wherever it sits."""
    path = tmp_path / "x.py"
    path.write_text(source)
    known = {"tools.config", "raft.types", "metadata.image", "broker.kafka", "raft.x"}
    graph = {"raft.x": set(imports_of("raft.x", path, known))}
    assert upward_imports(graph) == expected


def test_a_ring_of_imports_is_reported_when_three_modules_close_it() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
