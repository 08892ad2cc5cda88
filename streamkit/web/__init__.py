"""web layer: aiohttp views inside the worker (see server.py)."""
