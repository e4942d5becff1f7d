"""Building plain slotted dataclasses without calling their `__init__`.

A frozen dataclass's generated `__init__` stores each argument with
`object.__setattr__`, a lookup and a call per field: about 2 us for a record or a
partition image of nine fields, which is a second or two of every replay of a million
partitions. For a *plain* class (below) storing the slots directly is exactly what that
`__init__` does, at about a third of the cost. Used where objects are made by the million:
the codec's decoders (`raft.common.codec`) and image replay (`metadata.delta`).

Plain: a dataclass with `__slots__`, whose `__init__` is the one dataclasses generated
(it checks nothing), with no `__post_init__` and no field left out of `__init__`. Any
other class is built by calling it, so nothing a class checks is ever skipped.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
Setter = Callable[[Any, Any], None]


def slot_setters(cls: type) -> list[Setter] | None:
    """The setters of a plain class's fields (`__set__` of its slot descriptors), in field
    order; None when `cls` is not plain (see the module docstring)."""
    if not dataclasses.is_dataclass(cls) or "__slots__" not in cls.__dict__ \
            or hasattr(cls, "__post_init__"):
        return None
    code = getattr(getattr(cls, "__init__", None), "__code__", None)
    if code is None or code.co_filename != "<string>":  # dataclasses exec()s its __init__
        return None
    setters = []
    for field in dataclasses.fields(cls):
        slot = cls.__dict__.get(field.name)
        if not field.init or type(slot) is not types.MemberDescriptorType:
            return None
        setters.append(slot.__set__)
    return setters


def positional_constructor(cls: type[T]) -> Callable[..., T]:
    """A function that takes every field of the dataclass `cls` positionally, in
    declaration order (defaults included: none may be left out), and returns
    `cls(**fields)`; for a plain class, without calling `__init__`."""
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    args = ", ".join(f"a{index}" for index in range(len(names)))
    setters = slot_setters(cls)
    env: dict[str, Any] = {"cls": cls, "new": object.__new__}
    if setters is None:
        body = ["  return cls(" + ", ".join(f"{n}=a{i}" for i, n in enumerate(names)) + ")"]
    else:
        env.update({f"_s{index}": setter for index, setter in enumerate(setters)})
        body = ["  obj = new(cls)", *(f"  _s{i}(obj, a{i})" for i in range(len(names))),
                "  return obj"]
    exec("\n".join([f"def make({args}):", *body]), env)
    make: Callable[..., T] = env["make"]
    make.__qualname__ = f"positional_constructor({cls.__qualname__})"
    return make
