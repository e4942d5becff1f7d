"""Paths in the shell's tree: resolved against the working directory, then looked up.

Resolution works on the text alone, before any look-up: `.` and empty parts are dropped
and `..` removes the part before it (never above `/`), so `/image/provenance/../topics`
is `/image/topics` although `provenance` is a file. A resolved path is therefore the one
name of its node, which is what `pwd` prints and `find` lists.
"""

from __future__ import annotations

from collections.abc import Sequence

from tools.metadata_shell.tree import Directory, Node

ROOT = "/"


def resolve(cwd: str, path: str) -> str:
    """`path` as typed in `cwd` (absolute and resolved) -> its absolute, resolved form."""
    parts = [] if path.startswith("/") else split(cwd)
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return join(parts)


def split(path: str) -> list[str]:
    return [part for part in path.split("/") if part]


def join(parts: Sequence[str]) -> str:
    return ROOT + "/".join(parts)


def child_path(parent: str, name: str) -> str:
    return parent.rstrip("/") + "/" + name


def lookup(root: Directory, path: str) -> Node | None:
    """The node at a resolved absolute `path`; None when there is none (a missing entry,
    or a part below a file)."""
    node: Node = root
    for part in split(path):
        if not isinstance(node, Directory):
            return None
        found = node.child(part)
        if found is None:
            return None
        node = found
    return node
