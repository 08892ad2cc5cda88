"""cli layer (see DESIGN.md)."""
