"""Tool compute_similarity: Tanimoto similarity of a query molecule against fingerprinted molecules."""

from __future__ import annotations

from rdkit import DataStructs
from rdkit.Chem import rdFingerprintGenerator

from toolpath.catalogs.chemistry._common import molecule_from_smiles


def compute_similarity(query_smiles: str, fingerprints: dict) -> list[dict]:
    """Rank fingerprinted molecules by Tanimoto similarity to a query.

    Args:
        query_smiles: the query molecule as SMILES.
        fingerprints: the record returned by ``compute_fingerprints``; the query is fingerprinted
            with the same radius and size.

    Returns:
        ``[{"smiles", "similarity"}, ...]`` sorted by decreasing similarity (0–1, rounded to 3
        decimals); ties keep the input order.
    """
    query = molecule_from_smiles(query_smiles)
    generator = rdFingerprintGenerator.GetMorganGenerator(radius=fingerprints["radius"], fpSize=fingerprints["n_bits"])
    scores = DataStructs.BulkTanimotoSimilarity(generator.GetFingerprint(query), list(fingerprints["fingerprints"]))
    ranked = sorted(zip(fingerprints["smiles"], scores), key=lambda pair: -pair[1])
    return [{"smiles": smiles, "similarity": round(score, 3)} for smiles, score in ranked]
