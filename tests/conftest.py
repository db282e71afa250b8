"""Shared fixtures: the shipped catalogs, and one embedding model per test session."""

from __future__ import annotations

import pytest

from catalogs import default_catalog_paths
from planner import StateGraph
from registry import load_catalogs


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
