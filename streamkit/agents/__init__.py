"""agents layer (see docs/architecture.md)."""
