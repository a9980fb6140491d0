"""Every module of the daemon and its plugins imports: a name moved without its importers fails here, in a second."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import tabletopic
import tabletopic_plugins

MODULES = sorted(m.name for pkg in (tabletopic, tabletopic_plugins)
                 for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")
                 if not m.name.endswith("__main__"))


@pytest.mark.parametrize("name", MODULES)
def test_module_imports(name: str) -> None:
    importlib.import_module(name)
