"""``STREAMKIT_*`` variables that no setting reads: a typo (``STREAMKIT_COMIT_INTERVAL``) is
otherwise ignored without a word, and the worker runs with the default it was meant to change."""
from __future__ import annotations

import difflib
import logging
from typing import Iterable, Mapping

log = logging.getLogger("streamkit.settings")

PREFIX = "STREAMKIT_"
# Read by streamkit itself outside the settings: the test plugin and harness (STREAMKIT_TEST_*),
# the Spark session's shuffle partitions, the pure-Python switch (compiled.py) and setup.py's.
OTHER_NAMES = frozenset({"STREAMKIT_SPARK_SHUFFLE_PARTITIONS", "STREAMKIT_PURE_PYTHON", "STREAMKIT_COMPILE"})
OTHER_PREFIXES = ("STREAMKIT_TEST_",)

_warned: set[str] = set()


def warn_unknown(environ: Mapping[str, str], settings: Iterable[str]) -> list[str]:
    """Warn once per process about each ``STREAMKIT_*`` variable no setting reads, with the
    closest setting's variable when one is close; the names warned about now."""
    settings = sorted(settings)
    known = {PREFIX + name.upper() for name in settings}
    warned = []
    for env in sorted(environ):
        if (not env.startswith(PREFIX) or env in known or env in OTHER_NAMES or env.startswith(OTHER_PREFIXES)
                or env in _warned):
            continue
        _warned.add(env)
        warned.append(env)
        close = difflib.get_close_matches(env[len(PREFIX):].lower(), settings, n=1, cutoff=0.6)
        hint = f"did you mean {PREFIX}{close[0].upper()}?" if close else "no setting has this name"
        log.warning("environment variable %s is ignored: %s (settings are STREAMKIT_<SETTING>)", env, hint)
    return warned
