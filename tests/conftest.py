"""Shared fixtures: the shipped catalogs, and one embedding model per test session."""

from __future__ import annotations

import os

import pytest

from catalogs import default_catalog_paths
from planner import StateGraph
from registry import load_catalogs


@pytest.fixture(scope="session", autouse=True)
def toolpath_home(tmp_path_factory):
    """Keep the embedding cache and result store of the tests (and the CLIs they start) out of the user's data directory."""
    home = tmp_path_factory.mktemp("toolpath-home")
    previous = os.environ.get("TOOLPATH_HOME")
    os.environ["TOOLPATH_HOME"] = str(home)
    yield home
    if previous is None:
        del os.environ["TOOLPATH_HOME"]
    else:
        os.environ["TOOLPATH_HOME"] = previous


@pytest.fixture(scope="session")
def chemistry():
    return load_catalogs(default_catalog_paths())


@pytest.fixture(scope="session")
def chemistry_graph(chemistry):
    return StateGraph(chemistry.registry, chemistry.states)


@pytest.fixture(scope="session")
def embedder():
    from planner.embedding import default_embedder

    return default_embedder()
