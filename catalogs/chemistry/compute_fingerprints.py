"""Tool compute_fingerprints: Morgan (ECFP-like) bit fingerprints of a list of molecules."""

from __future__ import annotations

from rdkit import Chem
from rdkit.Chem import rdFingerprintGenerator

from toolpath.catalogs.chemistry._common import molecules_from_smiles_list


def compute_fingerprints(smiles_list: list[str], radius: int = 2, n_bits: int = 2048) -> dict:
    """Compute Morgan fingerprints.

    Args:
        smiles_list: SMILES strings (at least one).
        radius: Morgan radius in bonds; 2 corresponds to ECFP4.
        n_bits: fingerprint length in bits.

    Returns:
        ``{"smiles": [canonical SMILES], "radius", "n_bits", "fingerprints": [ExplicitBitVect]}``,
        in input order. The bit vectors are RDKit objects: they stay live in the kernel.

    Raises:
        ValueError: for an empty list, a non-positive radius or size, or an invalid SMILES.
    """
    if radius < 0 or n_bits <= 0:
        raise ValueError(f"radius must be ≥ 0 and n_bits > 0, got radius={radius}, n_bits={n_bits}")
    molecules = molecules_from_smiles_list(smiles_list)
    if not molecules:
        raise ValueError("smiles_list is empty; give at least one SMILES")
    generator = rdFingerprintGenerator.GetMorganGenerator(radius=radius, fpSize=n_bits)
    return {
        "smiles": [Chem.MolToSmiles(molecule) for molecule in molecules],
        "radius": radius,
        "n_bits": n_bits,
        "fingerprints": [generator.GetFingerprint(molecule) for molecule in molecules],
    }
