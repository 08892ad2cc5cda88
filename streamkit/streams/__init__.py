"""streams layer (see docs/architecture.md)."""
