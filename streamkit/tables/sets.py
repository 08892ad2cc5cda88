"""The values of a SetTable whose ``value_type`` is given: sets, stored as JSON lists.

In Faust, ``app.SetTable("people", value_type=str)`` declares the type of the set's elements,
not of the table's values (those are sets). Encoded with a ``str`` codec, a set would be stored
as ``"{'alice'}"`` and read back after the next checkpoint as that string, whose ``.add`` fails.
Here each value is the JSON list of its elements (sorted where they compare, so a set's bytes
do not depend on its insertion order), each element checked against the type on the way back,
and decoded into a set again.
"""
from __future__ import annotations

from typing import Any

from ..codecs import JsonCodec


class SetCodec(JsonCodec):
    """A set of ``element_type`` as the JSON list of its elements (module docstring)."""

    def __init__(self, element_type: Any) -> None:
        super().__init__(list[element_type])
        self.element_type = element_type

    def encode(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        if not isinstance(obj, (set, frozenset)):
            raise TypeError(f"a SetTable's values are sets (value_type= is the type of their elements), not "
                            f"{type(obj).__name__}: write table[key].add(element), or assign a set")
        try:
            elements = sorted(obj)
        except TypeError:  # elements that do not compare keep the set's order
            elements = list(obj)
        return super().encode(elements)

    def decode(self, data: bytes | None) -> Any:
        elements = super().decode(data)
        return None if elements is None else set(elements)


def store_sets(table: Any) -> Any:
    """Make ``table`` (a SetTable) store its values as sets of its ``value_type``, if declared;
    marked as a SetTable, whose changelog Faust's operations must not restore (faust_changelogs.py)."""
    table.set_table = True
    if table.value_type is not None:
        from .values import TableEntries

        table.value_codec = SetCodec(table.value_type)
        table.entries = TableEntries(table.key_codec, table.value_codec, key_declared=table.entries.key_declared)
    return table
