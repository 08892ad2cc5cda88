"""streams layer (see DESIGN.md)."""
