"""Tabular catalog: pandas tables and matplotlib plots, one module per tool.

The sample data under ``data/`` is described in ``data/README.md``; :data:`SAMPLE_DATA` is its folder.
"""

from pathlib import Path

#: The folder of the sample tables (``compounds.csv``, ``suppliers.csv``, ``sales.csv``, ``regions.csv``).
SAMPLE_DATA = Path(__file__).resolve().parent / "data"
