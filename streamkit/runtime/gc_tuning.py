"""The garbage collector's young-generation threshold while workers run.

Python's default (700 allocations) makes the cyclic collector walk every record still in flight
— a fetched batch holds thousands of messages, events and decoded values — many times per
batch: it cost a third of the stateless pipeline's time. Workers raise the threshold and freeze
the objects that exist after startup (modules, the app), so full collections skip them. The
interpreter's setting comes back when the last worker in the process stops.
"""
from __future__ import annotations

import gc

_holders = 0
_saved: tuple[int, int, int] | None = None


def acquire(young_threshold: int) -> None:
    """Raise the threshold to at least ``young_threshold`` (0: leave the collector alone)."""
    global _holders, _saved
    if young_threshold <= 0:
        return
    if _holders == 0:
        _saved = gc.get_threshold()
        gc.freeze()
    _holders += 1
    current = gc.get_threshold()
    if current[0] < young_threshold:
        gc.set_threshold(young_threshold, *current[1:])


def release(young_threshold: int) -> None:
    global _holders, _saved
    if young_threshold <= 0 or _holders == 0:
        return
    _holders -= 1
    if _holders == 0 and _saved is not None:
        gc.set_threshold(*_saved)
        gc.unfreeze()
        _saved = None
