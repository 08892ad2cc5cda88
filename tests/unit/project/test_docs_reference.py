"""The docs site's generated reference pages (scripts/docs_reference.py): every setting and every
export appears, so a setting added to settings.py without a docstring, or a new export, shows
up here rather than missing from the site."""
from __future__ import annotations

import dataclasses
import importlib.util
import re
import sys
from pathlib import Path

import pytest

import streamkit
from streamkit.settings import Settings

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "scripts" / "docs_reference.py")
reference = importlib.util.module_from_spec(_spec)
sys.modules["docs_reference"] = reference  # its dataclass looks its module up there
_spec.loader.exec_module(reference)


def test_every_setting_has_its_section_with_type_default_environment_and_text():
    page = reference.settings_page()
    fields = [f.name for f in dataclasses.fields(Settings)]
    assert re.findall(r"^## `(\w+)` \{#\1\}$", page, re.M) == fields
    sections = dict(zip(fields, re.split(r"^## `\w+` \{#\w+\}$", page, flags=re.M)[1:], strict=True))
    for name, section in sections.items():
        assert f"**environment** `STREAMKIT_{name.upper()}`" in section, name
        assert "**type** `" in section and "**default** `" in section, name
        assert len(section.split("\n\n", 2)[-1].strip()) > 10, f"{name}: no description"
    assert f"{len(fields)} settings:" in page


def test_settings_show_their_real_defaults_choices_and_faust_names():
    page = reference.settings_page()
    assert "**type** `DriverName` (`aiokafka`, `confluent`, `memory`) · **default** `\"aiokafka\"`" in page
    assert "**default** `1.0` · **environment** `STREAMKIT_COMMIT_INTERVAL` · **Faust** `broker_commit_interval`" in page
    assert "**Faust** `producer_linger`, `producer_linger_ms`" in page  # both of Faust's names for linger_ms
    assert "**default** `1048576`" in page  # web_max_request_size, evaluated


def test_a_setting_without_a_docstring_is_refused_by_name(monkeypatch):
    written = reference.field_docstrings()
    written["linger_ms"] = (written["linger_ms"][0], None)
    monkeypatch.setattr(reference, "field_docstrings", lambda: written)
    with pytest.raises(ValueError, match="Settings.linger_ms has no docstring"):
        reference.settings_page()


def test_every_export_is_documented_or_named_as_an_alias():
    page = reference.api_page()
    for name in streamkit.__all__:
        assert (f"::: streamkit.{name}\n" in page or f"- `{name}`:" in page or f"## `{name}`" in page), name
    assert "- `AgentT`: Faust's name for [`Agent`](#streamkit.Agent)" in page
