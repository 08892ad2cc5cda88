"""pytest plugin for apps' own tests (registered as the ``streamkit`` pytest11 entry point).

Fixtures:

- ``app``: the app under test, named by the ``streamkit_app`` ini option (``module:attribute``)
  or overridden by a fixture of that name in the project's conftest.
- ``test_driver``: a started :class:`~streamkit.testing.TestDriver` for ``app`` (in-memory
  broker, virtual clock), stopped after the test. Async: needs pytest-asyncio.

    # pyproject.toml
    [tool.pytest.ini_options]
    streamkit_app = "myproject.app:app"

    async def test_counts(test_driver):
        await test_driver.send("clicks", key="u1", value="home")
        await test_driver.settle()
        assert test_driver.table("counts")["u1"] == 1
"""
from __future__ import annotations

from types import ModuleType
from typing import Any, AsyncIterator

import pytest

pytest_asyncio: ModuleType | None
try:
    import pytest_asyncio
except ImportError:  # the plugin loads wherever streamkit is installed; only test_driver needs it
    pytest_asyncio = None


def pytest_addoption(parser: Any) -> None:
    parser.addini("streamkit_app", "The app under test, as module:attribute (the `app` fixture)", default="")


@pytest.fixture
def app(request: Any) -> Any:
    """The app named by the ``streamkit_app`` ini option; override this fixture to give another."""
    from .app import import_app

    spec = request.config.getini("streamkit_app")
    if not spec:
        raise pytest.UsageError("the `app` fixture needs streamkit_app = \"module:attribute\" in the pytest ini "
                                "options, or an `app` fixture of your own in conftest.py")
    return import_app(spec)


if pytest_asyncio is not None:
    @pytest_asyncio.fixture
    async def test_driver(app: Any) -> AsyncIterator[Any]:
        """``app`` running on the in-memory broker and a virtual clock for the test."""
        from .testing.driver import TestDriver

        async with TestDriver(app) as driver:
            yield driver
else:
    @pytest.fixture
    def test_driver() -> Any:
        raise pytest.UsageError("the test_driver fixture is async: pip install pytest-asyncio")
