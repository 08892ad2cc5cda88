"""testing layer (see DESIGN.md)."""
