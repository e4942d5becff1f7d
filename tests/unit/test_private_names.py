"""A private name (one leading underscore, not a dunder) does not cross a file boundary:
a module's `_name` is used in that module only, and a package's (`__init__.py`) only by
the modules of that package's own folder. A name another file needs gets a public
spelling, or the code moves. Checked on every module under raft/, metadata/, broker/,
tools/ and bench/, for `from X import _name` (imports inside functions and under
`TYPE_CHECKING` included) and for `X._name` where `X` is a name bound to an imported
project module.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOPS = ("raft", "metadata", "broker", "tools", "bench")


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def project_modules(root: Path = ROOT) -> dict[str, Path]:
    modules = {}
    for top in TOPS:
        for path in sorted((root / top).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def may_use(importer: Path, owner: Path) -> bool:
    """Whether the file `importer` may use a private name of the file `owner`: its own,
    or its package's (an `__init__.py` in the importer's folder)."""
    return importer == owner or (owner.name == "__init__.py" and importer.parent == owner.parent)


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    base = node.module or ""
    if not node.level:
        return base
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    parts = package.split(".")
    anchor = parts[:len(parts) - node.level + 1]
    return ".".join(anchor + ([base] if base else []))


def _dotted(node: ast.expr) -> str | None:
    """`a.b.c` for a chain of attributes on a plain name, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


def private_imports(module: str, path: Path, tree: ast.AST, modules: dict[str, Path]
                    ) -> Iterator[tuple[str, str]]:
    """(project module, private name) for each `from X import _name`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = _resolve(module, path, node)
            for alias in node.names:
                if is_private(alias.name) and base in modules:
                    yield base, alias.name


def module_bindings(module: str, path: Path, tree: ast.AST, modules: dict[str, Path]
                    ) -> dict[str, str]:
    """Local name -> the module it stands for, for every import that binds a module."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:  # `import a.b` binds `a`
                    bound[alias.name.partition(".")[0]] = alias.name.partition(".")[0]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, path, node)
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    bound[alias.asname or alias.name] = f"{base}.{alias.name}"
    return bound


def private_uses(module: str, path: Path, source: str,
                 modules: dict[str, Path]) -> Iterator[tuple[str, str]]:
    """(owning module, private name) for each private name `module` takes from another
    project module: imported by name, or read as an attribute of an imported module."""
    tree = ast.parse(source, str(path))
    yield from private_imports(module, path, tree, modules)
    bound = module_bindings(module, path, tree, modules)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and is_private(node.attr)):
            continue
        head, _, rest = (_dotted(node.value) or "").partition(".")
        if head in bound and (owner := ".".join(filter(None, (bound[head], rest)))) in modules:
            yield owner, node.attr


def crossings(modules: dict[str, Path], sources: dict[str, str] | None = None) -> list[str]:
    """`importer: owner.name` for every private name used where it may not be."""
    found = []
    for module, path in sorted(modules.items()):
        source = path.read_text() if sources is None else sources[module]
        for owner, name in private_uses(module, path, source, modules):
            if not may_use(path, modules[owner]):
                found.append(f"{module}: {owner}.{name}")
    return sorted(set(found))


def test_no_private_name_crosses_a_file_boundary_when_the_tree_is_scanned() -> None:
    assert crossings(project_modules()) == []


PLANTED_MODULES = {
    "raft": ROOT / "raft" / "__init__.py",
    "raft.messages": ROOT / "raft" / "messages.py",
    "raft.node": ROOT / "raft" / "node.py",
    "raft.core": ROOT / "raft" / "core" / "__init__.py",
    "raft.core._base": ROOT / "raft" / "core" / "_base.py",
    "broker.kafka.admin.admin_api": ROOT / "broker" / "kafka" / "admin" / "admin_api.py",
    "broker.kafka.admin.acls_api": ROOT / "broker" / "kafka" / "admin" / "acls_api.py",
    "tools.commands.acls": ROOT / "tools" / "commands" / "acls.py",
}


@pytest.mark.parametrize(("importer", "source", "expected"), [
    ("tools.commands.acls", "from broker.kafka.admin.admin_api import _forward\n",
     ["tools.commands.acls: broker.kafka.admin.admin_api._forward"]),
    ("broker.kafka.admin.acls_api", "from .admin_api import _forward\n",  # one folder, two files
     ["broker.kafka.admin.acls_api: broker.kafka.admin.admin_api._forward"]),
    ("tools.commands.acls", "def f():\n    from raft.messages import _CLASS_BY_API\n",
     ["tools.commands.acls: raft.messages._CLASS_BY_API"]),
    ("raft.node", "from raft import messages\nx = messages._CLASS_BY_API\n",
     ["raft.node: raft.messages._CLASS_BY_API"]),
    ("raft.node", "import raft.messages as m\nm._CLASS_BY_API\n",
     ["raft.node: raft.messages._CLASS_BY_API"]),
    ("raft.node", "import raft.messages\nraft.messages._CLASS_BY_API\n",
     ["raft.node: raft.messages._CLASS_BY_API"]),
    ("raft.node", "from raft.core import _base\n", ["raft.node: raft.core._base"]),
    ("raft.core._base", "from raft.core import _base\nfrom . import _OWN\n", []),  # its package's
    ("raft.node", "from raft.messages import CLASS_BY_API, __all__\n", []),
    ("raft.node", "x = object()\nx._private\n", []),  # not a module
])
def test_a_private_name_is_reported_when_another_file_takes_it(
        importer: str, source: str, expected: list[str]) -> None:
    """The checker itself, on a planted source: it finds what it must and no more."""
    modules = dict(PLANTED_MODULES)
    sources = {module: "" for module in modules}
    sources[importer] = source
    assert crossings(modules, sources) == expected
