"""Tables: dicts backed by a store per partition and a compacted changelog topic."""
# registers Table's window factories (table.tumbling()...) with table.py, which cannot import its
# windowed subclasses (they import it); every import of a tables module runs this first
from . import window_api as _window_api  # noqa: F401
