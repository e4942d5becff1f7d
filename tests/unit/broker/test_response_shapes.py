"""Every handler the dispatcher serves declares a typed answer (`broker.kafka.response_shapes`,
`broker.kafka.group_shapes`), and each key of the group, SASL and ApiVersions shapes,
nested ones included, is a field of kio's response entity at one of the api's versions
at least: `build` drops a key the entity lacks, so a misspelt one would reach no client
and fail nothing else."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, NotRequired, get_args, get_origin, get_type_hints, is_typeddict

import pytest

from broker.kafka.api_versions import SUPPORTED
from broker.kafka.listener import HANDLERS
from raft.common.kafka.codec import response_class
from raft.common.kafka.ordered_schemas import CONSUMER_GROUP_POSITION, PARTITION_LEADER_EPOCHS


def _inner(hint: Any) -> Any:
    """`NotRequired[list[X] | None]` -> X; `tuple[X, ...] | None` -> X."""
    while True:
        if get_origin(hint) is NotRequired:
            hint = get_args(hint)[0]
        elif get_origin(hint) in (typing.Union, types.UnionType):
            hint = next(a for a in get_args(hint) if a is not type(None))
        elif get_origin(hint) in (list, tuple):
            hint = get_args(hint)[0]
        else:
            return hint


def unknown_keys(shape: Any, entity: type[Any], where: str) -> list[str]:
    """The shape's keys kio's entity lacks, as dotted paths."""
    fields = {f.name: f for f in dataclasses.fields(entity)}
    entity_hints = get_type_hints(entity)
    missing = []
    for key, hint in get_type_hints(shape, include_extras=True).items():
        if key not in fields:
            missing.append(f"{where}.{key}")
            continue
        nested, nested_entity = _inner(hint), _inner(entity_hints[key])
        if is_typeddict(nested) and dataclasses.is_dataclass(nested_entity):
            missing += unknown_keys(nested, nested_entity, f"{where}.{key}")  # type: ignore[arg-type]
    return missing


def answer_shapes(handler: Any) -> list[Any]:
    returned = get_type_hints(handler)["return"]
    return [a for a in (get_args(returned) or (returned,)) if a is not type(None)]


@pytest.mark.parametrize("api_key", sorted(HANDLERS))
def test_every_handler_declares_a_typed_answer(api_key: int) -> None:
    shapes = answer_shapes(HANDLERS[api_key])
    assert shapes
    assert all(is_typeddict(s) for s in shapes), shapes


# the group, membership, ordered-delivery, SASL and ApiVersions answers: one shape each
# (the admin and partition APIs share shapes across APIs, e.g. TopicResult)
OWN_SHAPES = (8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 36, 42, 47,
              CONSUMER_GROUP_POSITION, PARTITION_LEADER_EPOCHS)


@pytest.mark.parametrize("api_key", OWN_SHAPES)
def test_each_key_of_an_answer_is_a_field_of_some_version(api_key: int) -> None:
    low, high = SUPPORTED[api_key]
    for shape in answer_shapes(HANDLERS[api_key]):
        unknown_to_all = set.intersection(*(
            set(unknown_keys(shape, response_class(api_key, version), shape.__name__))
            for version in range(low, high + 1)))
        assert unknown_to_all == set()


def test_a_misspelt_key_is_found_when_the_entity_lacks_it() -> None:
    class Misspelt(typing.TypedDict):
        throttle_time: int
        error_cod: int

    assert unknown_keys(Misspelt, response_class(12, 4), "Misspelt") == ["Misspelt.error_cod"]
