"""Tool identify_functional_groups: SMARTS matching of common functional groups."""

from __future__ import annotations

from rdkit import Chem

from toolpath.catalogs.chemistry._common import molecule_from_record

# Patterns after Daylight's SMARTS examples (daylight.com/dayhtml_tutorials/languages/smarts/smarts_examples.html).
FUNCTIONAL_GROUP_SMARTS: dict[str, str] = {
    "carboxylic_acid": "[CX3](=O)[OX2H1]",
    "ester": "[#6][CX3](=O)[OX2H0][#6]",
    "amide": "[NX3][CX3](=[OX1])[#6]",
    "aldehyde": "[CX3H1](=O)[#6]",
    "ketone": "[#6][CX3](=O)[#6]",
    "primary_amine": "[NX3;H2;!$(NC=O)]",
    "secondary_amine": "[NX3;H1;!$(NC=O)]([#6])[#6]",
    "tertiary_amine": "[NX3;H0;!$(NC=O);!$(N=*);!$(N#*);!$([N+])]([#6])([#6])[#6]",
    "alcohol": "[OX2H][CX4]",
    "phenol": "[OX2H][c]",
    "ether": "[OD2]([#6])[#6]",
    "nitrile": "[NX1]#[CX2]",
    "nitro": "[$([NX3](=O)=O),$([NX3+](=O)[O-])][!#8]",
    "halide": "[#6][F,Cl,Br,I]",
    "sulfonamide": "[SX4](=[OX1])(=[OX1])[NX3]",
    "aromatic_ring": "a1aaaaa1",
}

_PATTERNS = {name: Chem.MolFromSmarts(smarts) for name, smarts in FUNCTIONAL_GROUP_SMARTS.items()}


def identify_functional_groups(molecule: dict) -> dict:
    """Count the functional groups of a parsed molecule by SMARTS matching.

    Args:
        molecule: the record returned by ``parse_molecule`` (or a SMILES string).

    Returns:
        ``{group_name: count}`` for every group found (unique matches), in the order of
        ``FUNCTIONAL_GROUP_SMARTS``. Patterns overlap where the chemistry does: an ester's
        single-bonded oxygen also counts as an ``ether``.
    """
    parsed = molecule_from_record(molecule)
    counts = {}
    for name, pattern in _PATTERNS.items():
        matches = parsed.GetSubstructMatches(pattern)
        if matches:
            counts[name] = len(matches)
    return counts
