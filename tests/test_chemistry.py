import pytest

from toolpath.catalogs.chemistry._common import InvalidSmilesError
from toolpath.catalogs.chemistry.cluster_molecules import cluster_molecules
from toolpath.catalogs.chemistry.compute_descriptors import compute_descriptors
from toolpath.catalogs.chemistry.compute_fingerprints import compute_fingerprints
from toolpath.catalogs.chemistry.compute_similarity import compute_similarity
from toolpath.catalogs.chemistry.filter_drug_like import filter_drug_like
from toolpath.catalogs.chemistry.identify_functional_groups import identify_functional_groups
from toolpath.catalogs.chemistry.parse_molecule import parse_molecule

ASPIRIN = "CC(=O)Oc1ccccc1C(=O)O"
# Cyclosporin A: a classic rule-of-five violator (MW ~1203 Da).
CYCLOSPORIN = "CCC1C(=O)N(CC(=O)N(C(C(=O)NC(C(=O)N(C(C(=O)NC(C(=O)NC(C(=O)N(C(C(=O)N(C(C(=O)N(C(C(=O)N(C(C(=O)N1)C(C(C)CC=CC)O)C)C(C)C)C)CC(C)C)C)CC(C)C)C)C)C)CC(C)C)C)C(C)C)CC(C)C)C)C"


def test_parse_aspirin():
    molecule = parse_molecule(ASPIRIN)
    assert molecule["formula"] == "C9H8O4"
    assert molecule["molecular_weight"] == pytest.approx(180.16)
    assert molecule["heavy_atom_count"] == 13 and molecule["bond_count"] == 13


def test_invalid_smiles_is_named():
    with pytest.raises(InvalidSmilesError, match="'C1CC'"):
        parse_molecule("C1CC")
    with pytest.raises(InvalidSmilesError, match=r"'xyz' \(item 2 of the list, index 1\)"):
        compute_fingerprints(["CCO", "xyz"])


def test_aspirin_passes_lipinski():
    descriptors = compute_descriptors(parse_molecule(ASPIRIN))
    assert descriptors["molecular_weight"] == pytest.approx(180.16)
    assert (descriptors["hbd"], descriptors["hba"]) == (1, 3)
    assert descriptors["lipinski"] == {"passes": True, "violations": []}


def test_cyclosporin_fails_lipinski_and_is_filtered_out():
    descriptors = compute_descriptors(CYCLOSPORIN)
    assert not descriptors["lipinski"]["passes"]
    assert "molecular_weight > 500" in descriptors["lipinski"]["violations"]
    result = filter_drug_like([ASPIRIN, CYCLOSPORIN], rule="both")
    assert result["passed"] == [ASPIRIN]
    assert result["failed"][0]["smiles"] == CYCLOSPORIN


def test_filter_rejects_unknown_rule():
    with pytest.raises(ValueError, match="lipinski, veber, both"):
        filter_drug_like([ASPIRIN], rule="ghose")


def test_functional_groups_of_aspirin():
    groups = identify_functional_groups(parse_molecule(ASPIRIN))
    assert groups["carboxylic_acid"] == 1 and groups["ester"] == 1 and groups["aromatic_ring"] == 1
    assert "amide" not in groups


def test_similarity_ranks_the_closest_analogue_first():
    fingerprints = compute_fingerprints(["c1ccccc1", "CCO", "CCCO"])
    ranked = compute_similarity("CCCCO", fingerprints)
    assert ranked[0]["smiles"] == "CCCO"
    assert ranked[-1]["similarity"] == 0.0


def test_butina_groups_alcohols_apart_from_aromatics():
    clusters = cluster_molecules(compute_fingerprints(["CCO", "CCCO", "c1ccccc1", "c1ccccc1C"]))
    memberships = [set(cluster["members"]) for cluster in clusters]
    assert {"CCO", "CCCO"} in memberships
    assert all(not ({"CCO", "c1ccccc1"} <= members) for members in memberships)
    loose = cluster_molecules(compute_fingerprints(["CCO", "CCCO", "c1ccccc1", "c1ccccc1C"]), distance_threshold=0.8)
    assert {"c1ccccc1", "Cc1ccccc1"} in [set(cluster["members"]) for cluster in loose]
