"""Topics, streams, agents, tables, joins and web routing reach the running worker only through the
processing context they were handed (runtime/context.py), never through ``app.runtime`` or an
attribute named ``runtime`` (issue 48: the output path used to climb from a topic to
``app.runtime.producer``; a join read ``runtime.router`` and ``runtime.consumer``)."""
import ast
from pathlib import Path

import streamkit

PACKAGE = Path(streamkit.__file__).parent
# the layers between the app and the runtime; web's metrics and /ready pages and the test
# driver report the worker's internals on purpose, so they are not listed here
HANDED_A_CONTEXT = ["topics.py", "channels.py", "timers.py", "background.py", "signals.py", "topic_patterns.py",
                    "streams", "agents", "tables", "joins", "web/routing.py"]


def _modules() -> list[Path]:
    out: list[Path] = []
    for name in HANDED_A_CONTEXT:
        path = PACKAGE / name
        out.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return out


def reach_throughs(path: Path) -> list[str]:
    """``<expr>.runtime`` and ``<expr>._runtime`` reads in ``path``: file:line and the code."""
    tree = ast.parse(path.read_text(), str(path))
    lines = path.read_text().splitlines()
    return [f"{path.relative_to(PACKAGE)}:{node.lineno}: {lines[node.lineno - 1].strip()}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr in ("runtime", "_runtime")]


def test_the_modules_listed_exist():
    assert all(path.exists() for path in _modules()) and len(_modules()) > 20


def test_no_layer_above_the_runtime_reaches_the_worker_through_the_app():
    found = [hit for path in _modules() for hit in reach_throughs(path)]
    assert not found, "use the processing context (runtime/context.py) instead:\n" + "\n".join(found)
