"""Tool cluster_molecules: Butina clustering on Tanimoto distance."""

from __future__ import annotations

from rdkit import DataStructs
from rdkit.ML.Cluster import Butina


def cluster_molecules(fingerprints: dict, distance_threshold: float = 0.6) -> list[dict]:
    """Cluster fingerprinted molecules with the Butina algorithm (Butina, J. Chem. Inf. Comput. Sci.
    39:747, 1999).

    Args:
        fingerprints: the record returned by ``compute_fingerprints``.
        distance_threshold: Tanimoto distance (1 − similarity, 0–1) within which molecules are
            neighbours; 0.6 groups molecules at least 0.4 similar.

    Returns:
        ``[{"centroid": smiles, "members": [smiles, ...]}, ...]``, largest cluster first; the
        centroid is also the first member.

    Raises:
        ValueError: when ``distance_threshold`` is outside [0, 1].
    """
    if not 0.0 <= distance_threshold <= 1.0:
        raise ValueError(f"distance_threshold is a Tanimoto distance in [0, 1], got {distance_threshold}")
    smiles, vectors = fingerprints["smiles"], list(fingerprints["fingerprints"])
    # Butina wants the lower triangle of the distance matrix, row by row.
    distances: list[float] = []
    for index in range(1, len(vectors)):
        similarities = DataStructs.BulkTanimotoSimilarity(vectors[index], vectors[:index])
        distances.extend(1.0 - similarity for similarity in similarities)
    clusters = Butina.ClusterData(distances, len(vectors), distance_threshold, isDistData=True)
    return [{"centroid": smiles[cluster[0]], "members": [smiles[member] for member in cluster]} for cluster in clusters]
