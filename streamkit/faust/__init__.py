"""The Faust compatibility layer: Faust's type names (``names.py``), its setting names
(``settings.py``) and its app-level settings applied at start (``app_settings.py``).

Empty on purpose: its modules sit in different layers (settings.py below ``streamkit.settings``,
names.py above the app), so importing one must not import the others."""
