"""The generated reference pages of the docs site, rendered from the code so they cannot drift.

``settings_page()``: every field of ``streamkit.settings.Settings`` with its type, default,
environment variable, Faust name and the docstring written under it (a field without one is an
error, so a new setting cannot be published undocumented). ``api_page()``: one mkdocstrings
block per name in ``streamkit.__all__``. scripts/docs_pages.py writes both when mkdocs builds.
"""
from __future__ import annotations

import ast
import dataclasses
import inspect
import re
from enum import Enum
from pathlib import Path
from typing import Any, get_type_hints

import streamkit
from streamkit.faust.settings import FAUST_SETTINGS, RENAMED
from streamkit.settings import Settings

SETTINGS_SOURCE = Path(__file__).resolve().parents[1] / "streamkit" / "settings.py"
_CODE = re.compile(r"(``.+?``|`[^`]+`)")


@dataclasses.dataclass(frozen=True)
class SettingDoc:
    name: str
    type: str
    choices: tuple[str, ...]
    default: str
    env: str
    faust: tuple[str, ...]
    text: str


def field_docstrings(source: str = SETTINGS_SOURCE.read_text()) -> dict[str, tuple[str, str | None]]:
    """Each ``Settings`` field's annotation as written and the docstring under it (None when none)."""
    tree = ast.parse(source)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Settings")
    found: dict[str, tuple[str, str | None]] = {}
    for node, following in zip(cls.body, cls.body[1:] + [None], strict=True):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            doc = None
            if (isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
                    and isinstance(following.value.value, str)):
                doc = inspect.cleandoc(following.value.value)
            found[node.target.id] = (ast.unparse(node.annotation), doc)
    return found


def settings_docs() -> list[SettingDoc]:
    """One entry per Settings field, in declaration order; a field without a docstring is refused."""
    written = field_docstrings()
    hints = get_type_hints(Settings)
    docs = []
    for f in dataclasses.fields(Settings):
        annotation, text = written[f.name]
        if not text:
            raise ValueError(f"Settings.{f.name} has no docstring: write what it does under it in streamkit/settings.py")
        hint = hints[f.name]
        choices = tuple(str(m.value) for m in hint) if isinstance(hint, type) and issubclass(hint, Enum) else ()
        faust = ((f.name,) if f.name in FAUST_SETTINGS else ()) + tuple(
            sorted(name for name, (target, _) in RENAMED.items() if target == f.name))
        docs.append(SettingDoc(f.name, annotation, choices, _default(f), f"STREAMKIT_{f.name.upper()}", faust, text))
    return docs


def _default(f: dataclasses.Field) -> str:
    value: Any = f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc]
    if isinstance(value, Enum):
        value = value.value
    return f'"{value}"' if isinstance(value, str) else repr(value)


def _markdown(text: str) -> str:
    """A docstring as Markdown: ``code`` stays code, a bare ``<word>`` is shown rather than taken for HTML."""
    return "".join(part if _CODE.fullmatch(part) else part.replace("<", "&lt;") for part in _CODE.split(text))


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def settings_page() -> str:
    docs = settings_docs()
    lines = [
        "# Settings reference",
        "",
        "<!-- Generated from streamkit/settings.py by scripts/docs_reference.py: edit the docstrings there. -->",
        "",
        "Every setting of `streamkit.Settings`, in the order `settings.py` declares them. A setting is",
        "given to `App(...)` as a keyword (`App(\"orders\", commit_interval=2.0)`), set on `app.conf` before",
        "the worker starts, or overridden by its environment variable (`STREAMKIT_<NAME>`, which wins over",
        "the code; a misspelt `STREAMKIT_*` variable is reported). A Faust app's setting names are accepted",
        "where the **Faust** column names them, with Faust's units converted.",
        "",
        f"{len(docs)} settings:",
        "",
        "| setting | type | default | Faust name |",
        "|---|---|---|---|",
    ]
    for doc in docs:
        faust = ", ".join(f"`{name}`" for name in doc.faust)
        lines.append(f"| [`{doc.name}`](#{doc.name}) | `{_cell(doc.type)}` | `{_cell(doc.default)}` | {faust} |")
    for doc in docs:
        lines += ["", f"## `{doc.name}` {{#{doc.name}}}", ""]
        choices = " (" + ", ".join(f"`{c}`" for c in doc.choices) + ")" if doc.choices else ""
        facts = [f"**type** `{doc.type}`{choices}", f"**default** `{doc.default}`", f"**environment** `{doc.env}`"]
        if doc.faust:
            facts.append("**Faust** " + ", ".join(f"`{name}`" for name in doc.faust))
        lines += [" · ".join(facts), "", _markdown(doc.text)]
    return "\n".join(lines) + "\n"


def api_names() -> list[str]:
    """The public API: ``streamkit.__all__``."""
    return list(streamkit.__all__)


def api_page() -> str:
    """One mkdocstrings block per export; a Faust alias of another export, or a name streamkit
    re-exports from another package, is a line pointing at what it is."""
    lines = [
        "# API reference",
        "",
        "<!-- Generated from streamkit.__all__ by scripts/docs_reference.py: edit the docstrings in the code. -->",
        "",
        "Everything `import streamkit` exports (`streamkit/__init__.py`), from the docstrings in the code.",
        "Other modules are internal and may change.",
        "",
    ]
    documented: dict[int, str] = {}
    aliases: list[str] = []
    for name in api_names():
        obj = getattr(streamkit, name)
        module = getattr(obj, "__module__", "") or ""
        if name == "__version__":
            lines += ["## `__version__`", "",
                      f"The installed version, `{streamkit.__version__}` when this page was built.", ""]
        elif not module.startswith("streamkit"):
            aliases.append(f"- `{name}`: `{module}.{getattr(obj, '__qualname__', name)}`, re-exported for Faust apps")
        elif id(obj) in documented:
            aliases.append(f"- `{name}`: Faust's name for [`{documented[id(obj)]}`](#streamkit.{documented[id(obj)]})")
        elif obj is Settings:  # its fields have their own page
            documented[id(obj)] = name
            lines += ["::: streamkit.Settings", "    options:", "      members: false", "",
                      "Every field: the [settings reference](settings.md).", ""]
        else:
            documented[id(obj)] = name
            lines += [f"::: streamkit.{name}", ""]
    if aliases:
        lines += ["## Faust's names", "", "Exported so that `import streamkit as faust` finds what Faust code imports:", ""]
        lines += aliases
    return "\n".join(lines) + "\n"
