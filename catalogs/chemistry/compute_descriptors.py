"""Tool compute_descriptors: physico-chemical descriptors and Lipinski's rule of five."""

from __future__ import annotations

from toolpath.catalogs.chemistry._common import descriptor_values, lipinski_violations, molecule_from_record, passes_lipinski, veber_violations


def compute_descriptors(molecule: dict) -> dict:
    """Compute descriptors of a parsed molecule and judge it by Lipinski's rule of five.

    Args:
        molecule: the record returned by ``parse_molecule`` (or a SMILES string).

    Returns:
        ``{"smiles", "molecular_weight" (Da), "logp" (Crippen), "hbd", "hba", "tpsa" (Å²),
        "rotatable_bonds", "ring_count", "aromatic_ring_count", "lipinski": {"passes",
        "violations"}, "veber": {"passes", "violations"}}``. Lipinski passes with at most one broken
        criterion (Lipinski et al., 1997); Veber needs both of its criteria (Veber et al., 2002).
    """
    parsed = molecule_from_record(molecule)
    values = descriptor_values(parsed)
    lipinski = lipinski_violations(values)
    veber = veber_violations(values)
    smiles = molecule["canonical_smiles"] if isinstance(molecule, dict) else molecule
    return {
        "smiles": smiles,
        **values,
        "lipinski": {"passes": passes_lipinski(lipinski), "violations": lipinski},
        "veber": {"passes": not veber, "violations": veber},
    }
