"""Joins: stream-table and stream-GlobalTable lookups (lookup.py, as-of with versioned.py),
table-table joins (tables.py) and windowed stream-stream joins (windowed.py); docs/joins.md."""
from .lookup import JoinNotCopartitioned, stream_table_join
from .tables import JoinedTable, table_join
from .versioned import VersionedTable
from .windowed import JoinWindows, WindowJoin, windowed_join

__all__ = ["JoinNotCopartitioned", "JoinWindows", "JoinedTable", "VersionedTable", "WindowJoin", "stream_table_join",
           "table_join", "windowed_join"]
