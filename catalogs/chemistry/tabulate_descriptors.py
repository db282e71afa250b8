"""Tool tabulate_descriptors: descriptors of every molecule of a table file, as columns."""

from __future__ import annotations

import pandas

from toolpath.catalogs.chemistry._common import descriptor_values, lipinski_violations, molecule_from_smiles, passes_lipinski
from toolpath.catalogs.tabular._common import check_columns, read_table


def tabulate_descriptors(path: str, smiles_column: str = "smiles") -> pandas.DataFrame:
    """Read the table at ``path`` (CSV, TSV, Parquet or Excel) and add, for the SMILES in
    ``smiles_column``, the columns ``molecular_weight`` (Da), ``logp`` (Crippen), ``hbd``, ``hba``,
    ``tpsa`` (Å²), ``rotatable_bonds``, ``ring_count``, ``aromatic_ring_count`` and
    ``lipinski_passes``.

    Raises:
        KeyError: no such column. InvalidSmilesError: a SMILES RDKit cannot parse (naming its row).
        FileNotFoundError, ValueError: as for ``tabular.load_table``.
    """
    table = read_table(path, "tabulate_descriptors")
    check_columns(table, smiles_column)
    rows = []
    for index, smiles in enumerate(table[smiles_column]):
        values = descriptor_values(molecule_from_smiles(smiles, index))
        rows.append({**values, "lipinski_passes": passes_lipinski(lipinski_violations(values))})
    return pandas.concat([table.reset_index(drop=True), pandas.DataFrame(rows)], axis=1)
