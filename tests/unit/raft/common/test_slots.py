"""raft.common.slots: a plain slotted dataclass built through its slots is the object its
`__init__` would have built; any other class is built by calling it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from raft.common.slots import positional_constructor, slot_setters


@dataclass(frozen=True, slots=True, kw_only=True)
class Plain:
    a: int
    b: tuple[int, ...] = ()
    c: str | None = None
    d: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class Checked:
    n: int

    def __post_init__(self) -> None:
        if self.n < 0:
            raise ValueError("negative")


@dataclass(frozen=True, kw_only=True)
class NoSlots:
    n: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Memo:
    n: int
    memo: list[int] = field(default_factory=list, init=False, compare=False)


@dataclass(frozen=True, slots=True)
class OwnInit:
    n: int

    def __init__(self, n: int) -> None:
        object.__setattr__(self, "n", n * 2)


@dataclass(frozen=True, slots=True, kw_only=True)
class Child(Plain):
    e: int = 0


def test_slot_setters_are_given_only_when_the_class_is_plain() -> None:
    assert slot_setters(Plain) is not None
    for cls in (Checked, NoSlots, Memo, OwnInit, int):
        assert slot_setters(cls) is None, cls


@given(st.integers(), st.lists(st.integers(), max_size=3).map(tuple),
       st.none() | st.text(max_size=3), st.lists(st.integers(), max_size=2))
def test_a_plain_object_built_by_slots_equals_the_one_init_builds_when_compared(
        a: int, b: tuple[int, ...], c: str | None, d: list[int]) -> None:
    made = positional_constructor(Plain)(a, b, c, d)
    assert type(made) is Plain
    assert made == Plain(a=a, b=b, c=c, d=d)
    assert made.b is b  # stored as given, as __init__ stores them
    assert made.d is d
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.a = 1  # type: ignore[misc]


@pytest.mark.parametrize(("cls", "args", "expected"), [
    (NoSlots, (3,), NoSlots(n=3)),
    (OwnInit, (3,), OwnInit(3)),
    (Child, (1, (), None, [], 5), Child(a=1, e=5)),  # the parent's slots live elsewhere
])
def test_other_classes_are_built_by_calling_them_when_not_plain(
        cls: type, args: tuple[Any, ...], expected: Any) -> None:
    assert positional_constructor(cls)(*args) == expected


def test_a_class_that_checks_its_values_still_refuses_them_when_built() -> None:
    make = positional_constructor(Checked)
    assert make(1) == Checked(n=1)
    with pytest.raises(ValueError, match="negative"):
        make(-1)
