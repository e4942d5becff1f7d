"""One codec between frozen dataclasses and msgpack-ready maps, driven by type annotations.

A dataclass travels as a map of field name -> value, in field declaration order: int, str,
bool, bytes and float as they are, IntEnum as its int, tuple[X, ...] as an array, a nested
dataclass as a map, `X | None` as X or nil, and any other type through an adapter
registered on the codec (`codec.register(Uuid, wire=bytes, encode=..., decode=...)`).

`Codec.decode(cls, data)` checks every value against its field's annotation and raises
`CodecError`, and nothing else, on malformed input: a wrong type (a bool is not an int),
an int outside 64 bits, an unknown IntEnum value, a missing required field, a key naming
no field (outside the codec's envelope keys), or a value the dataclass itself refuses. The message
names the class and the field path: "FetchResponse.records[0].base_offset: expected a
64-bit integer, got str 'x'". Omitted fields that have defaults take them.

Each class's annotations are resolved once (`typing.get_type_hints`) into a plan cached on
the codec: an encoder and a decoder compiled to straight-line code, because raft encodes
and decodes every Fetch with them. `encode` trusts its input (our own dataclasses); only
`decode` sees bytes from peers and disks.
"""

from __future__ import annotations

import dataclasses
import enum
import threading
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from raft.common.slots import slot_setters

T = TypeVar("T")
Convert = Callable[[Any], Any]

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
_MISSING = object()  # a key absent from the map
_SCALARS: dict[type, str] = {int: "a 64-bit integer", str: "a string", bool: "a boolean",
                             bytes: "bytes", float: "a float"}


class CodecError(ValueError):
    """Input that does not decode into the dataclass; `path` names the field."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self._segments: list[str] = []  # innermost first: added as the error unwinds

    def within(self, segment: str) -> CodecError:
        """The same error, one level further out ("Class", ".field" or "[index]")."""
        self._segments.append(segment)
        return self

    @property
    def path(self) -> str:
        return "".join(reversed(self._segments))

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}" if self._segments else self.reason


def expected(what: str, value: object) -> CodecError:
    """The error for a value of the wrong type or range."""
    return CodecError(f"expected {what}, got {type(value).__name__} {value!r:.40}")


@dataclasses.dataclass(frozen=True, slots=True)
class Adapter:
    """How a leaf type (one the codec does not walk) travels: as a `wire` value."""

    wire: type
    encode: Convert
    decode: Convert  # may raise ValueError or TypeError on a bad wire value
    name: str  # for error messages: "expected <name>"


class _Plan:
    """One class's compiled encoder and decoder."""

    __slots__ = ("built", "encode", "decode")

    def __init__(self) -> None:
        self.built = False
        self.encode: Callable[[Any], dict[str, Any]] = _not_built
        self.decode: Convert = _not_built


def _not_built(value: Any) -> Any:
    raise AssertionError("a codec plan was used while it was being built")


class Codec:
    """Encodes and decodes dataclasses; one instance per wire format.

    `omit_none`: a None field is left out of the map (a reader takes the default) rather
    than sent as nil. `envelope`: keys a map may carry besides the fields (a record's
    type and version, read by the layer that chose the class); any other key naming no
    field is a CodecError.
    """

    def __init__(self, *, omit_none: bool = False, envelope: Iterable[str] = ()) -> None:
        self.omit_none = omit_none
        self.envelope = frozenset(envelope)
        self._adapters: dict[type, Adapter] = {}
        self._plans: dict[type, _Plan] = {}
        self._lock = threading.RLock()  # held while plans are built or dropped

    def register(self, cls: type, *, wire: type, encode: Convert, decode: Convert,
                 name: str | None = None) -> None:
        """Carry `cls` as a `wire` value (bytes, int or str): `encode(obj)` gives it,
        `decode(wire_value)` rebuilds the object."""
        with self._lock:
            self._adapters[cls] = Adapter(wire, encode, decode, name or cls.__name__)
            self._plans = {}  # a plan built earlier may have walked `cls` as a dataclass

    def encode(self, obj: Any) -> dict[str, Any]:
        """The dataclass `obj` as a msgpack-ready map."""
        return self._plan(type(obj)).encode(obj)

    def decode(self, cls: type[T], data: object) -> T:
        """A `cls` from its map; CodecError (path "Class.field...") on anything malformed."""
        try:
            decoded: T = self._plan(cls).decode(data)
        except CodecError as exc:
            raise exc.within(cls.__name__) from None
        return decoded

    def decoder(self, cls: type[T]) -> Callable[[object], T]:
        """`decode(cls, data)` as a function of `data`, for a caller that decodes many
        maps of one class: its CodecError paths start at the field (".field...") rather
        than at the class, which the caller adds (`exc.within(cls.__name__)`) if it names
        the class. Take it once every adapter is registered (`register` replans)."""
        plan = self._plan(cls)
        return typing.cast(Callable[[object], T], plan.decode)

    def _plan(self, cls: type) -> _Plan:
        plan = self._plans.get(cls)
        if plan is not None and plan.built:
            return plan
        # Built under a lock: a plan is cached before it is built (a field may name its
        # class again), so another thread must not take it half made. Re-entrant: the
        # building thread looks its own plans up while it builds them.
        with self._lock:
            plan = self._plans.get(cls)
            return plan if plan is not None else self._build_plan(cls)

    def _build_plan(self, cls: type) -> _Plan:
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"the codec handles dataclasses, not {cls!r}")
        plan = self._plans[cls] = _Plan()  # cached first: a field may name `cls` again
        try:
            hints = typing.get_type_hints(cls)
            fields = dataclasses.fields(cls)
            encoders = [(f.name, self._encoder(hints[f.name])) for f in fields]
            decoders = [_FieldDecoder(
                f.name, self._decoder(hints[f.name]), self._fast(hints[f.name]), _required(f),
                f.default, None if f.default_factory is dataclasses.MISSING
                else f.default_factory) for f in fields]
        except TypeError:
            del self._plans[cls]
            raise
        plan.encode = _compile_encoder(encoders, self.omit_none)
        plan.decode = _compile_decoder(cls, decoders, self.envelope)
        plan.built = True
        return plan

    def _encoder(self, hint: Any) -> Convert | None:
        """How a field of type `hint` is encoded; None when the value is msgpack-ready."""
        hint = _unwrap_newtype(hint)
        inner = _optional_inner(hint)
        if inner is not None:
            encode = self._encoder(inner)
            return None if encode is None else (lambda v: None if v is None else encode(v))
        if typing.get_origin(hint) is tuple:
            item = self._encoder(_tuple_item(hint))
            return list if item is None else (lambda v: [item(x) for x in v])
        adapter = self._adapters.get(hint)
        if adapter is not None:
            return adapter.encode
        if isinstance(hint, type) and issubclass(hint, enum.IntEnum):
            return int
        if hint in _SCALARS:
            return None
        if dataclasses.is_dataclass(hint):
            plan = self._plan(typing.cast(type, hint))
            # not built yet only while `hint` itself is being built (a recursive type)
            return plan.encode if plan.built else (lambda v: plan.encode(v))
        raise TypeError(f"the codec cannot encode {hint!r}")

    def _fast(self, hint: Any) -> _Fast:
        """The wire values of a field of type `hint` the compiled decoder takes inline."""
        hint = _unwrap_newtype(hint)
        inner = _optional_inner(hint)
        if inner is not None:
            return self._fast(inner)  # None goes through the converter
        if hint in _SCALARS:
            return _Fast(exact=typing.cast(type, hint))
        if typing.get_origin(hint) is tuple:
            return _Fast(int_array=_unwrap_newtype(_tuple_item(hint)) is int)
        adapter = self._adapters.get(hint)
        if adapter is not None:
            return _Fast(adapter=adapter)
        if isinstance(hint, type) and issubclass(hint, enum.IntEnum):
            return _Fast(members={int(m): m for m in hint if INT64_MIN <= m <= INT64_MAX})
        return _Fast()

    def _decoder(self, hint: Any) -> Convert:
        """The function that checks and converts a wire value into a field of `hint`."""
        hint = _unwrap_newtype(hint)
        inner = _optional_inner(hint)
        if inner is not None:
            decode = self._decoder(inner)
            return lambda v: None if v is None else decode(v)
        if typing.get_origin(hint) is tuple:
            item = _tuple_item(hint)
            return _tuple_decoder(self._decoder(item), _exact_type(item))
        adapter = self._adapters.get(hint)
        if adapter is not None:
            return _adapter_decoder(adapter)
        if isinstance(hint, type) and issubclass(hint, enum.IntEnum):
            return _enum_decoder(hint)
        if hint is int:
            return decode_int
        if hint in _SCALARS:
            return _scalar_decoder(hint, _SCALARS[hint])
        if dataclasses.is_dataclass(hint):
            plan = self._plan(typing.cast(type, hint))
            return plan.decode if plan.built else (lambda v: plan.decode(v))
        raise TypeError(f"the codec cannot decode {hint!r}")


class _Fast(typing.NamedTuple):
    """The wire values a field takes inline (`_field_lines`), at most one kind set."""

    exact: type | None = None  # a scalar of exactly this type (an int: in range)
    int_array: bool = False  # a list of in-range ints, for tuple[int, ...]
    members: dict[int, enum.IntEnum] | None = None  # an IntEnum's ints
    adapter: Adapter | None = None  # the adapter's wire type, through its decode


class _FieldDecoder(typing.NamedTuple):
    name: str
    convert: Convert  # checks and converts any wire value, or raises CodecError
    fast: _Fast
    required: bool
    default: Any  # dataclasses.MISSING when required or made by default_factory
    default_factory: Callable[[], Any] | None


# --- compiled plans -------------------------------------------------------------------
# Straight-line code per class, `{"a": obj.a, "b": _e1(obj.b)}` and its mirror image: a
# loop over the fields took twice as long. Field names are identifiers (dataclasses check
# that), so they can be pasted into the source.


def _compile_encoder(fields: list[tuple[str, Convert | None]], omit_none: bool
                     ) -> Callable[[Any], dict[str, Any]]:
    env: dict[str, Any] = {}
    lines = []
    for index, (name, encode) in enumerate(fields):
        env[f"_e{index}"] = encode
        value = "v" if encode is None else f"_e{index}(v)"
        if omit_none:
            lines.append(f"  if (v := obj.{name}) is not None: out[{name!r}] = {value}")
        elif encode is None:
            lines.append(f"  {name!r}: obj.{name},")
        else:
            lines.append(f"  {name!r}: {value} if (v := obj.{name}) is not None else None,")
    if omit_none:
        source = ["def encode(obj):", "  out = {}", *lines, "  return out"]
    else:
        source = ["def encode(obj):", "  return {", *lines, "  }"]
    exec("\n".join(source), env)
    return typing.cast(Callable[[Any], dict[str, Any]], env["encode"])


def _compile_decoder(cls: type, fields: list[_FieldDecoder],
                     envelope: frozenset[str]) -> Convert:
    """The strict decoder of `cls` as straight-line code. Per field, the common wire value
    (an exact scalar, an array of 64-bit ints, an adapter's wire type, a known enum int)
    is checked and taken inline; anything else goes through the field's converter, which
    either converts it or raises the CodecError, so the inline checks only ever accept
    what the converter would have accepted, with the same result. A plain class
    (`raft.common.slots`) is filled through its slots, not through `cls(**kwargs)`."""
    names = frozenset(f.name for f in fields) | envelope
    env: dict[str, Any] = {"cls": cls, "names": names, "Mapping": Mapping, "MIN": INT64_MIN,
                           "MAX": INT64_MAX, "MISSING": _MISSING, "CodecError": CodecError,
                           "expected": expected, "unknown_field": _unknown_field,
                           "new": object.__new__}
    setters = slot_setters(cls)
    lines = ["def decode(data):",
             "  if type(data) is not dict and not isinstance(data, Mapping):",
             "    raise expected('a map', data)"]
    lines += ["  if not data.keys() <= names:", "    raise unknown_field(data, names)"]
    if setters is None:
        lines.append("  kwargs = {}")
    for index, field in enumerate(fields):
        target = f"a{index}" if setters is not None else f"kwargs[{field.name!r}]"
        lines += _field_lines(index, field, target, env)
    if setters is not None:
        env.update({f"_s{index}": setter for index, setter in enumerate(setters)})
        lines.append("  obj = new(cls)")
        lines += [f"  _s{index}(obj, a{index})" for index in range(len(fields))]
        lines.append("  return obj")
    else:
        lines += ["  try:", "    return cls(**kwargs)",
                  "  except (TypeError, ValueError) as exc:",  # the class's own checks
                  "    raise CodecError(str(exc)) from None"]
    exec("\n".join(lines), env)
    return typing.cast(Convert, env["decode"])


def _field_lines(index: int, field: _FieldDecoder, target: str,
                 env: dict[str, Any]) -> list[str]:
    """The code that sets `target` from `data` for one field (see `_compile_decoder`)."""
    name, within = field.name, repr("." + field.name)
    env[f"_d{index}"] = field.convert
    slow = ["    try:", f"      {target} = _d{index}(v)", "    except CodecError as exc:",
            f"      raise exc.within({within}) from None"]
    lines = [f"  v = data.get({name!r}, MISSING)"]
    fast = field.fast
    if fast.exact is not None:  # taken as it is, without a call
        env[f"_t{index}"] = fast.exact
        in_range = " and MIN <= v <= MAX" if fast.exact is int else ""
        lines += [f"  if type(v) is _t{index}{in_range}:", f"    {target} = v"]
    elif fast.int_array:  # a loop beats any builtin on a few items; a bad one: converter
        lines += ["  if type(v) is list:", "    for x in v:",
                  "      if type(x) is not int or not MIN <= x <= MAX:",
                  *("    " + line for line in slow), "        break", "    else:",
                  f"      {target} = tuple(v)"]
    elif fast.members is not None:  # an IntEnum: int -> member, in range by construction
        env[f"_m{index}"] = fast.members
        lines += [f"  if type(v) is int and (m := _m{index}.get(v)) is not None:",
                  f"    {target} = m"]
    elif fast.adapter is not None:  # its wire type: convert, or the converter's error
        env[f"_w{index}"], env[f"_a{index}"] = fast.adapter.wire, fast.adapter.decode
        env[f"_n{index}"] = fast.adapter.name
        lines += [f"  if type(v) is _w{index}:", "    try:", f"      {target} = _a{index}(v)",
                  "    except (TypeError, ValueError):",
                  f"      raise expected(_n{index}, v).within({within}) from None"]
    branch = "elif" if len(lines) > 1 else "if"
    lines += [f"  {branch} v is not MISSING:", *slow]
    if field.required:
        lines += ["  else:", f"    raise CodecError('missing required field').within({within})"]
    elif not target.startswith("kwargs"):  # the default the constructor would have given
        if field.default_factory is not None:
            env[f"_f{index}"] = field.default_factory
            lines += ["  else:", f"    {target} = _f{index}()"]
        else:
            env[f"_v{index}"] = field.default
            lines += ["  else:", f"    {target} = _v{index}"]
    return lines


def _unknown_field(data: Mapping[Any, Any], names: frozenset[str]) -> CodecError:
    unknown = min((k for k in data if k not in names), key=repr)  # the same one each time
    return CodecError("unknown field").within(f".{unknown}")


# --- leaf decoders ------------------------------------------------------------------


def decode_int(value: Any) -> int:
    """A 64-bit signed integer, as Kafka's int64; a bool is not one."""
    if type(value) is int and INT64_MIN <= value <= INT64_MAX:
        return value
    if isinstance(value, int) and not isinstance(value, bool) \
            and INT64_MIN <= value <= INT64_MAX:
        return int(value)  # an IntEnum handed in without a msgpack round trip
    raise expected("a 64-bit integer", value)


def _scalar_decoder(cls: type, what: str) -> Convert:
    def decode(value: Any) -> Any:
        if type(value) is cls:
            return value
        raise expected(what, value)
    return decode


def _enum_decoder(cls: type[enum.IntEnum]) -> Convert:
    members = {int(m): m for m in cls}

    def decode(value: Any) -> Any:
        member = members.get(decode_int(value))
        if member is None:
            raise CodecError(f"unknown {cls.__name__} {value!r}")
        return member
    return decode


def _adapter_decoder(adapter: Adapter) -> Convert:
    def decode(value: Any) -> Any:
        if type(value) is adapter.wire:
            try:
                return adapter.decode(value)
            except (TypeError, ValueError):
                pass
        raise expected(adapter.name, value)
    return decode


def _tuple_decoder(item: Convert, exact: type | None) -> Convert:
    def decode(value: Any) -> tuple[Any, ...]:
        if type(value) is not list and type(value) is not tuple:
            raise expected("an array", value)
        if exact is not None and exact is not int:
            for v in value:
                if type(v) is not exact:
                    break
            else:
                return tuple(value)  # the common case for records: bytes as they are
        try:
            return tuple([item(v) for v in value])
        except CodecError as exc:
            raise exc.within(f"[{_culprit(item, value)}]") from None
    return decode


def _culprit(item: Convert, values: Any) -> int:
    """The index of the first value `item` refuses: errors are rare, so the hot path does
    not count and the index is found again on the way out."""
    for index, value in enumerate(values):
        try:
            item(value)
        except CodecError:
            return index
    return 0


# --- annotations --------------------------------------------------------------------


def _required(field: dataclasses.Field[Any]) -> bool:
    return (field.default is dataclasses.MISSING
            and field.default_factory is dataclasses.MISSING)


def _exact_type(hint: Any) -> type | None:
    """The type a wire value for `hint` has exactly when it needs no converting (an int
    still needs its range checked); None when every value goes through the converter."""
    hint = _unwrap_newtype(hint)
    inner = _optional_inner(hint)
    if inner is not None:
        return _exact_type(inner)
    return typing.cast(type, hint) if hint in _SCALARS else None


def _optional_inner(hint: Any) -> Any:
    """X for `X | None` (or Optional[X]), else None."""
    if typing.get_origin(hint) not in (typing.Union, types.UnionType):
        return None
    options = [a for a in typing.get_args(hint) if a is not type(None)]
    if len(options) != 1 or len(options) == len(typing.get_args(hint)):
        raise TypeError(f"the codec handles `X | None` unions only, not {hint!r}")
    return options[0]


def _tuple_item(hint: Any) -> Any:
    args = typing.get_args(hint)
    if len(args) != 2 or args[1] is not Ellipsis:
        raise TypeError(f"the codec handles tuple[X, ...] only, not {hint!r}")
    return args[0]


def _unwrap_newtype(hint: Any) -> Any:
    while isinstance(hint, typing.NewType):
        hint = hint.__supertype__
    return hint
