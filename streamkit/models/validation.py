"""``ValidationError``: a decoded value that does not fit its declared type.

Its own module so that the converters (convert.py) and the blessed key (blessed.py), which
both raise it, need not import each other.
"""
from __future__ import annotations

from ..errors import NoRetry


class ValidationError(ValueError, NoRetry):
    """A field's JSON value does not fit its declared type (every attempt would fail: not retried)."""
