"""models layer (see docs/architecture.md)."""
