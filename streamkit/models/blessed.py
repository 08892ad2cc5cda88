"""Faust's ``__faust`` blessed key: the Record class a JSON object names, read and written.

Faust writes ``{"__faust": {"ns": "shop.Order"}}`` into every Record it encodes (unless the class
says ``include_metadata=False``) and, reading, builds the class registered under that namespace
when the declared type allows it: the declared type is abstract (or none was declared), or the
named class has ``allow_blessed_key`` or ``polymorphic_fields``. streamkit does the same, so a
streamkit app and a Faust app can share a topic of Records (polymorphic ones included).
"""
from __future__ import annotations

import dataclasses
import sys
import typing
from pathlib import Path
from typing import Any, Callable

from .validation import ValidationError

KEY = "__faust"
KEY_BYTES = b'"__faust"'

#: namespace -> Record class (abstract classes are not registered, as in Faust)
registry: dict[str, type] = {}  # Record classes (record.py imports this module)
#: namespaces of registered classes a blessed key may redirect to even under a concrete declared
#: type; while it is empty, decoders skip the blessed-key check entirely
redirect_targets: set[str] = set()


@dataclasses.dataclass
class RecordOptions:
    """A Record class's Faust options (``Model._options`` in Faust)."""

    namespace: str = ""
    include_metadata: bool = True
    allow_blessed_key: bool = False
    polymorphic_fields: bool = False
    abstract: bool = False


def _main_module_name() -> str:
    """The importable name of ``__main__`` (``app.py`` run as a script is ``app``), as Faust's
    namespaces use it, so a class gets the same namespace run as a script or imported."""
    filename = getattr(sys.modules.get("__main__"), "__file__", None)
    if not filename:
        return "__main__"
    path = Path(filename).absolute()
    parts = [path.stem]
    node = path.parent
    while (node / "__init__.py").exists():
        parts.insert(0, node.name)
        node = node.parent
    return ".".join(parts)


def default_namespace(cls: type) -> str:
    module = cls.__module__
    if module == "__main__":
        module = _main_module_name()
    return f"{module}.{cls.__qualname__}"


def register(cls: type, options: RecordOptions) -> None:
    previous = registry.get(options.namespace)
    if previous is not None and previous is not cls and previous.__qualname__ != cls.__qualname__:
        raise TypeError(f"Record namespace {options.namespace!r} is taken by {previous.__module__}."
                        f"{previous.__qualname__}; give {cls.__qualname__} its own namespace=")
    registry[options.namespace] = cls
    if options.allow_blessed_key or options.polymorphic_fields:
        redirect_targets.add(options.namespace)


def blessed_class(data: Any, declared: type | None) -> type | None:
    """The class ``data``'s blessed key selects under ``declared`` (None: keep the declared type)."""
    try:
        namespace = data[KEY]["ns"]
    except (KeyError, TypeError, IndexError):
        return None
    open_type = declared is None or _options(declared).abstract
    model = registry.get(namespace)
    if model is None:
        if open_type:
            raise ValidationError(f"the blessed key names Record namespace {namespace!r}, which no class in this "
                                  "process declares: import the module that defines it, or declare a concrete "
                                  "value_type")
        return None
    if open_type or namespace in redirect_targets:
        return model
    return None


def _options(cls: type) -> RecordOptions:
    return getattr(cls, "_options", None) or RecordOptions(abstract=False)


def representation(obj: Any) -> Any:
    """``obj`` as JSON-ready data with every Record a dict carrying its blessed key."""
    options = getattr(type(obj), "_options", None)
    if isinstance(options, RecordOptions) and dataclasses.is_dataclass(obj):
        payload = {f.name: representation(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        if options.include_metadata:
            payload[KEY] = {"ns": options.namespace}
        return payload
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [representation(item) for item in obj]
    if isinstance(obj, dict):
        return {key: representation(value) for key, value in obj.items()}
    return obj


def holds_records(cls: type) -> bool:
    """Whether any field of ``cls`` can hold a Record (then its JSON needs the slower nested path)."""
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # unresolvable forward references: take the safe, general path
        return True
    return any(_mentions_record(hints.get(f.name, Any)) for f in dataclasses.fields(cls))


def _mentions_record(hint: Any, abstract_only: bool = False, seen: frozenset = frozenset()) -> bool:
    options = getattr(hint, "_options", None)
    if isinstance(hint, type) and isinstance(options, RecordOptions):
        if not abstract_only or options.abstract:
            return True
        if hint in seen:
            return False
        hints = _hints(hint)
        return any(_mentions_record(h, True, seen | {hint}) for h in hints.values())
    return any(_mentions_record(arg, abstract_only, seen) for arg in typing.get_args(hint))


def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:
        return {}


def is_open(cls: Any) -> bool:
    """Whether a value of ``cls`` may be (or hold) an abstract Record, so decoding must read the
    blessed keys (the direct msgspec decode would build the declared classes as they are)."""
    return _mentions_record(cls, abstract_only=True)


def record_encoder(cls: type, native: Callable[[Any], bytes], general: Callable[[Any], bytes],
                   fast: Callable[[Any], bytes] | None = None,
                   fast_errors: tuple[type[BaseException], ...] = ()) -> Callable[[Any], bytes]:
    """An encoder for instances of ``cls`` (and its subclasses) that adds blessed keys.

    The common case, a flat Record of the declared class, is the native encoder's bytes with
    the key spliced in before the closing brace; nested Records take ``general`` over
    :func:`representation`. ``fast`` (raising ``fast_errors`` where ``native`` would fall back)
    serves the declared class without the fallback's extra call.
    """
    plans: dict[type, bytes | None] = {}

    def plan(kind: type) -> bytes | None:
        """The bytes that replace the closing brace (b"" when there is nothing to add), None for
        the nested path."""
        if kind not in plans:
            options = getattr(kind, "_options", None)
            if not isinstance(options, RecordOptions):
                plans[kind] = b""  # not a Record: the native encoder decides
            elif holds_records(kind):
                plans[kind] = None
            elif not options.include_metadata:
                plans[kind] = b""
            else:
                plans[kind] = b',"__faust":{"ns":' + native(options.namespace) + b"}}"
        return plans[kind]

    def encode(obj: Any) -> bytes:
        kind = type(obj)
        tail = plans[kind] if kind in plans else plan(kind)
        if tail is None:
            return general(representation(obj))
        out = native(obj)
        if not tail:
            return out
        return out[:-1] + tail if len(out) > 2 else b"{" + tail[1:]

    if dataclasses.is_dataclass(cls) and dataclasses.fields(cls) and not _options(cls).abstract:
        declared_tail = plan(cls)
        direct = fast or native
        if declared_tail is not None:  # the declared class, flat with fields: no lookups

            def encode_declared(obj: Any) -> bytes:
                if type(obj) is cls:
                    try:
                        return direct(obj)[:-1] + declared_tail if declared_tail else direct(obj)
                    except fast_errors:
                        pass
                return encode(obj)

            return encode_declared
    return encode
