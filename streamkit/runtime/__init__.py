"""runtime layer (see docs/architecture.md)."""
