"""Tables: dicts backed by a store per partition and a compacted changelog topic."""
