"""raft.common.codec: dataclasses <-> msgpack-ready maps, and one clear CodecError naming
the field for any malformed input.

The helpers that break one field of a valid encoded message live in
tests/support/codec_mutations.py (the message, admin and record tests use them too).
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NewType, Optional

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from raft.common import codec as codec_module
from raft.common.codec import INT64_MAX, INT64_MIN, Codec, CodecError
from tests.support.codec_mutations import assert_names_path, field_default, mutations
from tests.support.codec_reference import outcome, reference_decode

ROOT = Path(__file__).resolve().parents[4]


class Color(enum.IntEnum):
    RED = 1
    BLUE = -2


class Token:
    """A leaf type the codec only knows through an adapter (as metadata's Uuid is)."""

    def __init__(self, text: str) -> None:
        if not text.isalpha():
            raise ValueError(f"not a token: {text!r}")
        self.text = text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Token) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


Id = NewType("Id", int)


@dataclass(frozen=True, slots=True, kw_only=True)
class Leaf:
    value: int
    label: str = "leaf"


@dataclass(frozen=True, slots=True, kw_only=True)
class Node:
    id: Id
    flag: bool
    blob: bytes
    ratio: float = 0.5
    color: Color = Color.RED
    token: Token | None = None
    maybe: Optional[int] = None  # noqa: UP045 (the old spelling is supported too)
    leaves: tuple[Leaf, ...] = ()
    grid: tuple[tuple[int, ...], ...] = ()
    child: Leaf | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Positive:
    n: int

    def __post_init__(self) -> None:
        if self.n <= 0:
            raise ValueError("n must be positive")


@dataclass(frozen=True, slots=True, kw_only=True)
class Tree:
    """A recursive type: its plan refers to itself."""

    name: str
    children: tuple[Tree, ...] = ()


def make_codec(**options: bool) -> Codec:
    codec = Codec(**options)
    codec.register(Token, wire=str, encode=lambda t: t.text, decode=Token, name="a token")
    return codec


STRICT = make_codec()
LENIENT = make_codec(omit_none=True, envelope=("type", "version"))
SAMPLE = Node(id=Id(7), flag=True, blob=b"\x00\xff", ratio=2.25, color=Color.BLUE,
              token=Token("abc"), maybe=-3, leaves=(Leaf(value=1), Leaf(value=2, label="b")),
              grid=((1, 2), (), (3,)), child=Leaf(value=INT64_MIN))


# --- encoding -------------------------------------------------------------------------


def test_encode_gives_field_order_maps_and_arrays_when_all_types_are_used() -> None:
    """Field names as keys in declaration order, tuples as lists, enums as ints."""
    body = STRICT.encode(SAMPLE)
    assert list(body) == [f.name for f in dataclasses.fields(Node)]
    assert body == {"id": 7, "flag": True, "blob": b"\x00\xff", "ratio": 2.25, "color": -2,
                    "token": "abc", "maybe": -3,
                    "leaves": [{"value": 1, "label": "leaf"}, {"value": 2, "label": "b"}],
                    "grid": [[1, 2], [], [3]], "child": {"value": INT64_MIN, "label": "leaf"}}
    assert type(body["color"]) is int


def test_none_fields_are_nil_or_absent_when_the_codec_says_so() -> None:
    """omit_none leaves None fields out (the reader takes the default)."""
    node = Node(id=Id(1), flag=False, blob=b"")
    assert STRICT.encode(node)["token"] is None
    assert set(LENIENT.encode(node)).isdisjoint({"token", "maybe", "child"})
    assert LENIENT.decode(Node, LENIENT.encode(node)) == node


@given(st.builds(
    Node, id=st.integers(INT64_MIN, INT64_MAX).map(Id), flag=st.booleans(),
    blob=st.binary(max_size=8), ratio=st.floats(allow_nan=False), color=st.sampled_from(Color),
    token=st.none() | st.text("abcXYZ", min_size=1, max_size=5).map(Token),
    maybe=st.none() | st.integers(INT64_MIN, INT64_MAX),
    leaves=st.lists(st.builds(Leaf, value=st.integers(-5, 5), label=st.text(max_size=3)),
                    max_size=3).map(tuple),
    grid=st.lists(st.lists(st.integers(-9, 9), max_size=3).map(tuple), max_size=3).map(tuple),
    child=st.none() | st.builds(Leaf, value=st.integers(-5, 5))))
def test_any_value_round_trips_when_sent_through_msgpack(node: Node) -> None:
    for codec in (STRICT, LENIENT):
        wire = msgpack.unpackb(msgpack.packb(codec.encode(node)), raw=False)
        assert codec.decode(Node, wire) == node


def test_a_recursive_dataclass_round_trips_when_nested() -> None:
    tree = Tree(name="a", children=(Tree(name="b"), Tree(name="c", children=(Tree(name="d"),))))
    assert STRICT.decode(Tree, STRICT.encode(tree)) == tree


# --- decoding errors ------------------------------------------------------------------


def body(**changes: Any) -> dict[str, Any]:
    return {**STRICT.encode(SAMPLE), **changes}


@pytest.mark.parametrize(("data", "message"), [
    (body(id="7"), "Node.id: expected a 64-bit integer, got str '7'"),
    (body(id=True), "Node.id: expected a 64-bit integer, got bool True"),
    (body(id=INT64_MAX + 1), "Node.id: expected a 64-bit integer, got int 9223372036854775808"),
    (body(flag=1), "Node.flag: expected a boolean, got int 1"),
    (body(blob="x"), "Node.blob: expected bytes, got str 'x'"),
    (body(ratio=1), "Node.ratio: expected a float, got int 1"),
    (body(color=3), "Node.color: unknown Color 3"),
    (body(color=False), "Node.color: expected a 64-bit integer, got bool False"),
    (body(token="a1"), "Node.token: expected a token, got str 'a1'"),
    (body(token=b"ab"), "Node.token: expected a token, got bytes b'ab'"),
    (body(leaves={"value": 1}), "Node.leaves: expected an array, got dict {'value': 1}"),
    (body(leaves=[{"value": 1}, {"value": "x"}]),
     "Node.leaves[1].value: expected a 64-bit integer, got str 'x'"),
    (body(leaves=[{"value": 1}, {"label": "x"}]), "Node.leaves[1].value: missing required field"),
    (body(leaves=[{"value": 1, "extra": 0}]), "Node.leaves[0].extra: unknown field"),
    (body(grid=[[1], [2, None]]), "Node.grid[1][1]: expected a 64-bit integer, got NoneType None"),
    (body(child=[]), "Node.child: expected a map, got list []"),
    (body(surprise=1), "Node.surprise: unknown field"),
    ({"flag": True, "blob": b""}, "Node.id: missing required field"),
    ([1, 2], "Node: expected a map, got list [1, 2]"),
])
def test_decode_raises_one_error_naming_the_field_when_a_value_is_wrong(
        data: Any, message: str) -> None:
    with pytest.raises(CodecError) as caught:
        STRICT.decode(Node, data)
    assert str(caught.value) == message
    assert isinstance(caught.value, ValueError)


def test_defaults_apply_and_envelope_keys_pass_when_decoded() -> None:
    """A key left out takes the field's default; the envelope's keys (a record's type and
    version) pass; any other unknown key is an error even on that codec."""
    decoded = LENIENT.decode(Node, {"id": 1, "flag": False, "blob": b"", "type": 3,
                                    "version": 0})
    assert decoded == Node(id=Id(1), flag=False, blob=b"")
    with pytest.raises(CodecError, match=r"^Node\.future: unknown field$"):
        LENIENT.decode(Node, {"id": 1, "flag": False, "blob": b"", "future": [1]})


def test_the_class_refusing_a_value_is_a_codec_error_when_decoded() -> None:
    """__post_init__'s ValueError is peer input gone wrong, not a crash."""
    with pytest.raises(CodecError, match="^Positive: n must be positive$"):
        STRICT.decode(Positive, {"n": 0})


def test_error_path_and_reason_are_attributes_when_raised() -> None:
    with pytest.raises(CodecError) as caught:
        STRICT.decode(Node, body(grid=[[1, "x"]]))
    assert (caught.value.path, caught.value.reason) == (
        "Node.grid[0][1]", "expected a 64-bit integer, got str 'x'")


@pytest.mark.parametrize("hint", [dict[str, int], int | str, tuple[int, str], list[int]])
def test_unsupported_annotations_are_a_type_error_when_first_used(hint: Any) -> None:
    """A programming error, found on the first encode or decode, never a CodecError."""
    cls = dataclasses.make_dataclass("Odd", [("odd", hint)], frozen=True)
    with pytest.raises(TypeError, match="the codec"):
        Codec().decode(cls, {"odd": 1})


def test_register_replaces_a_plan_when_a_type_gets_an_adapter() -> None:
    codec = Codec()
    assert codec.encode(Leaf(value=1)) == {"value": 1, "label": "leaf"}
    codec.register(Leaf, wire=int, encode=lambda leaf: leaf.value,
                   decode=lambda v: Leaf(value=v))
    assert codec.encode(Tree(name="t")) == {"name": "t", "children": []}
    wrapped = dataclasses.make_dataclass("Wrapped", [("leaf", Leaf)], frozen=True)
    assert codec.encode(wrapped(leaf=Leaf(value=4))) == {"leaf": 4}
    assert codec.decode(wrapped, {"leaf": 4}) == wrapped(leaf=Leaf(value=4))


# --- layering -------------------------------------------------------------------------


def test_raft_common_imports_no_project_package_when_read() -> None:
    """raft.common is the lowest layer: raft, metadata, broker and tools build on it."""
    for path in (ROOT / "raft" / "common").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for name in names:
                top = name.split(".")[0]
                assert top not in {"raft", "metadata", "broker", "tools"} \
                    or name.startswith("raft.common"), f"{path.name} imports {name}"


def test_importing_the_codec_loads_no_other_project_module_when_run_alone() -> None:
    code = ("import sys, raft.common.codec; print(sorted(m for m in sys.modules "
            "if m.split('.')[0] in ('raft', 'metadata', 'broker', 'tools')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "['raft', 'raft.common', 'raft.common.codec', 'raft.common.slots']"


@given(st.data())
def test_one_broken_field_is_one_clear_error_when_decoded(data: Any) -> None:
    """The shared helpers, on the codec alone: retyped -> error at that path; removed ->
    the default, or "missing" when there is none; unknown key -> error."""
    codec = data.draw(st.sampled_from([STRICT, LENIENT]))
    kind, path, broken = data.draw(mutations(codec.encode(SAMPLE)))
    if kind == "remove":
        required, expected = field_default(SAMPLE, path)
        if not required:
            assert codec.decode(Node, broken) == expected
            return
    with pytest.raises(CodecError) as caught:
        codec.decode(Node, broken)
    reason = {"remove": "missing required field", "add": "unknown field"}.get(kind, "")
    assert_names_path(caught.value, "Node", path, reason)


# --- the compiled decoder against a field-by-field reference ----------------------------
# The compiled decoder takes common wire values inline (exact scalars, arrays of ints, an
# adapter's wire type, an enum's ints) and fills plain classes through their slots. The
# reference (tests/support/codec_reference.py) walks the fields with the codec's
# converters and calls the class: both must give the same object or the same error for
# any input.


@dataclass(frozen=True, slots=True, kw_only=True)
class Inline:
    """One field of every kind the compiled decoder takes inline."""

    ints: tuple[int, ...]
    ids: tuple[Id, ...] = ()
    maybe_ints: tuple[int, ...] | None = None
    color: Color = Color.RED
    maybe_color: Color | None = None
    token: Token | None = None
    count: int = 0
    name: str = ""
    leaf: Leaf | None = None
    extra: tuple[str, ...] = dataclasses.field(default_factory=tuple)


WIRE_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(INT64_MIN - 2, INT64_MAX + 2),
    st.sampled_from([INT64_MIN, INT64_MAX, 1, -2, 3]), st.floats(allow_nan=False),
    st.text(max_size=3), st.binary(max_size=3), st.sampled_from(list(Color)))
NEAR_VALID = st.recursive(
    WIRE_VALUES,
    lambda inner: st.lists(inner, max_size=3) | st.lists(inner, max_size=3).map(tuple)
    | st.dictionaries(st.sampled_from(["value", "label", "other"]), inner, max_size=2),
    max_leaves=6)
INLINE_KEYS = [f.name for f in dataclasses.fields(Inline)] + ["type", "unknown"]


@given(st.dictionaries(st.sampled_from(INLINE_KEYS), NEAR_VALID, max_size=6),
       st.sampled_from([STRICT, LENIENT]))
def test_compiled_decode_equals_the_reference_when_any_map_is_decoded(
        data: dict[str, Any], codec: Codec) -> None:
    """Random maps, mostly malformed: the same object, or the same error message."""
    assert outcome(lambda: codec.decode(Inline, data)) == \
        outcome(lambda: reference_decode(codec, Inline, data))


@given(st.builds(
    Inline, ints=st.lists(st.integers(INT64_MIN, INT64_MAX), max_size=4).map(tuple),
    ids=st.lists(st.integers(-3, 3).map(Id), max_size=2).map(tuple),
    maybe_ints=st.none() | st.lists(st.integers(-3, 3), max_size=2).map(tuple),
    color=st.sampled_from(Color), maybe_color=st.none() | st.sampled_from(Color),
    token=st.none() | st.text("ab", min_size=1, max_size=3).map(Token),
    count=st.integers(INT64_MIN, INT64_MAX), name=st.text(max_size=3),
    leaf=st.none() | st.builds(Leaf, value=st.integers(-3, 3)),
    extra=st.lists(st.text(max_size=2), max_size=2).map(tuple)), st.data())
def test_compiled_decode_equals_the_reference_when_one_field_is_broken(
        value: Inline, data: Any) -> None:
    """Valid maps round trip through both; one broken field (the shared mutations) gives
    one error, the same from both."""
    for codec in (STRICT, LENIENT):
        wire = msgpack.unpackb(msgpack.packb(codec.encode(value)), raw=False)
        assert codec.decode(Inline, wire) == reference_decode(codec, Inline, wire) == value
        _, _, broken = data.draw(mutations(wire))
        assert outcome(lambda c=codec, b=broken: c.decode(Inline, b)) == \
            outcome(lambda c=codec, b=broken: reference_decode(c, Inline, b))


@pytest.mark.parametrize(("changes", "message"), [
    ({"ints": [1, True]}, "Inline.ints[1]: expected a 64-bit integer, got bool True"),
    ({"ints": [1, INT64_MAX + 1]},
     "Inline.ints[1]: expected a 64-bit integer, got int 9223372036854775808"),
    ({"ints": [1.0]}, "Inline.ints[0]: expected a 64-bit integer, got float 1.0"),
    ({"ints": "12"}, "Inline.ints: expected an array, got str '12'"),
    ({"maybe_ints": [None]}, "Inline.maybe_ints[0]: expected a 64-bit integer, got "
                             "NoneType None"),
    ({"color": 7}, "Inline.color: unknown Color 7"),
    ({"color": True}, "Inline.color: expected a 64-bit integer, got bool True"),
    ({"maybe_color": "RED"}, "Inline.maybe_color: expected a 64-bit integer, got str 'RED'"),
    ({"token": "a1"}, "Inline.token: expected a token, got str 'a1'"),
    ({"token": 5}, "Inline.token: expected a token, got int 5"),
])
def test_inline_fields_refuse_what_their_converters_refuse_when_malformed(
        changes: dict[str, Any], message: str) -> None:
    with pytest.raises(CodecError) as caught:
        STRICT.decode(Inline, {"ints": [], **changes})
    assert str(caught.value) == message


def test_inline_fields_take_the_values_their_converters_take_when_not_the_common_form(
        ) -> None:
    """A tuple for an array and IntEnum members for ints (a map built in Python, not by
    msgpack) still decode, through the converters."""
    decoded = STRICT.decode(Inline, {"ints": (1, Color.BLUE), "color": -2, "maybe_color": None})
    assert decoded == Inline(ints=(1, -2), color=Color.BLUE)
    assert [type(i) for i in decoded.ints] == [int, int]
    assert decoded.extra == ()
    assert decoded.maybe_ints is None


def test_a_plan_another_thread_is_building_is_waited_for_when_used(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Plans are built on first use, and a plan is cached before it is built (for
    recursive types): a second thread that asks for it meanwhile waits for the build
    instead of calling a half-made plan (seen: four admin threads of the snapshot bench
    encoding their first CreateTopics at once)."""
    codec = make_codec()
    building, done = threading.Event(), threading.Event()
    compile_decoder = codec_module._compile_decoder

    def slow_compile(*args: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():
            building.set()
            done.wait(0.5)  # the other thread asks for the plan meanwhile
        return compile_decoder(*args)

    monkeypatch.setattr(codec_module, "_compile_decoder", slow_compile)
    results: list[Any] = []
    builder = threading.Thread(target=lambda: results.append(codec.encode(SAMPLE)))
    builder.start()
    assert building.wait(5)
    try:
        assert codec.decode(Node, STRICT.encode(SAMPLE)) == SAMPLE  # waits, then decodes
    finally:
        done.set()
        builder.join(5)
    assert results == [STRICT.encode(SAMPLE)]
