"""runtime layer (see DESIGN.md)."""
