"""One broken field in a well-formed encoded message: the strategies and assertions the
codec, message, admin and record tests share (each decoder must give one clear error
naming the field, or the field's default)."""

from __future__ import annotations

import dataclasses
from typing import Any

import msgpack
from hypothesis import strategies as st

Path_ = tuple[str | int, ...]
UNKNOWN_KEY = "zz_not_a_field"


def render(path: Path_) -> str:
    """(a, 0, b) -> ".a[0].b", as CodecError paths read."""
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def _walk(node: Any, path: Path_) -> list[tuple[Path_, Any]]:
    found = [(path, node)] if path else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += _walk(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _walk(value, (*path, index))
    return found


def value_paths(body: Any) -> list[Path_]:
    """The path of every value in a decoded msgpack `body` (depth first), the body itself
    left out."""
    return [path for path, _ in _walk(body, ())]


def parent_of(body: Any, path: Path_) -> Any:
    """The map or list in `body` that holds the value at `path` (a path not empty)."""
    parent = body
    for step in path[:-1]:
        parent = parent[step]
    return parent


def _wrong_type(draw: Any, value: Any) -> Any:
    """A value of another wire type (never None: nil is valid for optional fields)."""
    choices = ["x", 7, True, b"\x01", 1.5, [], {}]
    return draw(st.sampled_from([c for c in choices if type(c) is not type(value)]))


def _at_any_depth(places: list[tuple[Path_, Any]]) -> st.SearchStrategy[tuple[Path_, Any]]:
    """A depth first, then a place at it: deep fields are few but get broken as often."""
    depths = sorted({len(path) for path, _ in places})
    return st.sampled_from(depths).flatmap(
        lambda depth: st.sampled_from([p for p in places if len(p[0]) == depth]))


@st.composite
def mutations(draw: Any, body: dict[str, Any], skip: frozenset[str] = frozenset()
              ) -> tuple[str, Path_, dict[str, Any]]:
    """(kind, path, broken copy of `body`): one value given a wrong type ("retype"), one
    map key removed ("remove") or one unknown key added to a map ("add", the path ends
    with UNKNOWN_KEY). Top-level keys in `skip` are left alone."""
    broken = msgpack.unpackb(msgpack.packb(body), raw=False)  # a deep copy, as received
    places = [(p, v) for p, v in _walk(broken, ()) if p[0] not in skip]
    maps = [((), broken)] + [(p, v) for p, v in places if isinstance(v, dict)]
    keyed = [(p, v) for p, v in places if isinstance(p[-1], str)]
    kind = draw(st.sampled_from(["retype", "remove", "add"] if keyed else ["add"]))
    if kind == "add":
        path, target = draw(_at_any_depth(maps))
        target[UNKNOWN_KEY] = 0
        return kind, (*path, UNKNOWN_KEY), broken
    path, value = draw(_at_any_depth(places if kind == "retype" else keyed))
    parent = parent_of(broken, path)
    if kind == "retype":
        parent[path[-1]] = _wrong_type(draw, value)
    else:
        del parent[path[-1]]
    return kind, path, broken


def field_default(obj: Any, path: Path_) -> tuple[bool, Any]:
    """(required, the message with the field at `path` set to its default)."""
    *outer, name = path
    parent = obj
    for step in outer:
        parent = parent[step] if isinstance(step, int) else getattr(parent, step)
    field = {f.name: f for f in dataclasses.fields(parent)}[name]
    if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
        return True, None
    default = field.default if field.default is not dataclasses.MISSING \
        else field.default_factory()  # type: ignore[misc]
    return False, _replaced(obj, path, default)


def _replaced(obj: Any, path: Path_, value: Any) -> Any:
    if not path:
        return value
    step, rest = path[0], path[1:]
    if isinstance(step, int):
        return (*obj[:step], _replaced(obj[step], rest, value), *obj[step + 1:])
    return dataclasses.replace(obj, **{step: _replaced(getattr(obj, step), rest, value)})


def assert_names_path(error: Exception, root: str, path: Path_, reason: str = "") -> None:
    """The error names the broken field (or, for a junk map, a field inside it)."""
    text, prefix = str(error), f"{root}{render(path)}"
    assert text.startswith((f"{prefix}: ", f"{prefix}.", f"{prefix}[")), (text, prefix)
    assert reason in text, (text, reason)
