"""Skill search and goal choice with the real embedded model, plus a custom embedder."""

import numpy as np
import pytest

from planner import NoMatchingSkillError, SkillIndex, choose_goal

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def index(chemistry_graph, embedder):
    return SkillIndex(chemistry_graph, embedder)


def test_drug_likeness_finds_descriptors_and_filter_states(index):
    names = [hit.name for hit in index.search("check drug-likeness", k=4)]
    assert {"chemistry.descriptors_computed", "chemistry.candidates_filtered"} & set(names)


def test_grouping_similar_molecules_finds_clustering(index):
    best = index.search("group similar molecules", k=3)[0]
    assert "chemistry.molecules_clustered" in best.states


def test_hits_carry_the_text_that_matched(index):
    (hit,) = index.search("cluster molecules by structural similarity", k=1)
    assert hit.kind == "state" and hit.matched == "cluster molecules by structural similarity"
    assert hit.score > 0.9


def test_goal_choice_prefers_the_goal_the_inputs_can_feed(index, chemistry_graph):
    task = "is aspirin drug-like? check Lipinski's rule of five"
    with_one_molecule = choose_goal(task, index, chemistry_graph, inputs={"smiles": "CC(=O)Oc1ccccc1C(=O)O"})
    assert with_one_molecule.chosen.goal == {"chemistry.descriptors_computed"}
    with_a_list = choose_goal(task, index, chemistry_graph, inputs={"smiles_list": ["CCO"]})
    assert with_a_list.chosen.goal == {"chemistry.candidates_filtered"}


def test_unrelated_task_is_refused(index, chemistry_graph):
    with pytest.raises(NoMatchingSkillError, match="no catalog can serve"):
        choose_goal("book a flight to Paris next Tuesday", index, chemistry_graph)


def test_empty_query_is_refused(index):
    with pytest.raises(ValueError, match="empty"):
        index.search("   ")


def test_a_custom_embedder_replaces_the_model(chemistry_graph):
    vocabulary = ["cluster", "lipinski", "fingerprint", "smiles"]

    def bag_of_words(texts):
        return np.array([[text.lower().count(word) for word in vocabulary] for text in texts], dtype=float)

    hits = SkillIndex(chemistry_graph, bag_of_words).search("cluster", k=2)
    assert {hit.name for hit in hits} == {"chemistry.molecules_clustered", "cluster_molecules"}
