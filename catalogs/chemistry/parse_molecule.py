"""Tool parse_molecule: SMILES → validated molecule record."""

from __future__ import annotations

from rdkit import Chem
from rdkit.Chem import Descriptors, rdMolDescriptors

from toolpath.catalogs.chemistry._common import molecule_from_smiles


def parse_molecule(smiles: str) -> dict:
    """Parse a SMILES string and describe the molecule.

    Args:
        smiles: a SMILES string, e.g. ``"CC(=O)Oc1ccccc1C(=O)O"`` (aspirin).

    Returns:
        ``{"smiles", "canonical_smiles", "formula", "molecular_weight", "heavy_atom_count",
        "bond_count"}``; ``molecular_weight`` is the average molecular weight in Da, rounded to
        0.01 Da; counts exclude implicit hydrogens.

    Raises:
        InvalidSmilesError: (a ``ValueError``) naming the SMILES when RDKit cannot parse it.
    """
    molecule = molecule_from_smiles(smiles)
    return {
        "smiles": smiles,
        "canonical_smiles": Chem.MolToSmiles(molecule),
        "formula": rdMolDescriptors.CalcMolFormula(molecule),
        "molecular_weight": round(Descriptors.MolWt(molecule), 2),
        "heavy_atom_count": molecule.GetNumHeavyAtoms(),
        "bond_count": molecule.GetNumBonds(),
    }
