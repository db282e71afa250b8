"""Goal choice counts a plan's own data flow as bound: a parameter that carries a state an earlier
step of the plan produces is not a value the user failed to give, even when the catalog does not
say which part of that step's result carries it (no ``return_spec.state``, as in catalogs drafted
from an API's paths). Counting it as unbound made a request stop at the step that finds its input
("who composed the music for Interstellar?" planned the film search alone, short of its credits).

The catalog is written here: a people directory whose search yields an id that a details call needs.
"""

import textwrap

import pytest

from toolpath.planner import Workspace
from toolpath.planner.tasks.goals import GoalSearch, choose_goal

DIRECTORY = """\
domain: people
package: people_api
states:
  - token: people.person_id
    description: A person's id in the directory is known.
    affordances: ["find a person in the directory by name"]
  - token: people.birth_details
    description: When and where a person was born.
    affordances: ["when and where a person was born"]
  - token: people.awards
    description: The awards a person won in a given year.
    affordances: ["the awards a person won in a year"]
tools:
  - name: find_person
    description: Search the directory for a person by name.
    required_parameters: [{name: name, type: str}]
    state_transition: {requires: [], produces: [people.person_id]}
  - name: person_details
    description: A person's details, including when and where they were born.
    required_parameters: [{name: person_id, type: int, state: people.person_id}]
    state_transition: {requires: [people.person_id], produces: [people.birth_details]}
  - name: person_awards
    description: The awards a person won in one year.
    required_parameters: [{name: person_id, type: int, state: people.person_id}, {name: year, type: int}]
    state_transition: {requires: [people.person_id], produces: [people.awards]}
"""


@pytest.fixture(scope="module")
def directory(tmp_path_factory, embedder):
    path = tmp_path_factory.mktemp("people") / "people.yaml"
    path.write_text(textwrap.dedent(DIRECTORY))
    return Workspace.open([path], embedder=embedder)


def test_an_id_an_earlier_step_finds_is_the_plans_data_flow_not_an_input_left_to_the_user(directory):
    choice = choose_goal(GoalSearch(directory.graph, directory.index), "When and where was 'Ada Lovelace' born?")
    chosen = choice.chosen
    assert [step.tool.name for step in chosen.plan.steps] == ["find_person", "person_details"]
    # The cell cannot pass the id (the catalog does not say where it is in the search's result) ...
    assert [unbound.parameter for unbound in chosen.cell.unbound] == ["person_id"]
    # ... but the plan supplies it: nothing is left to the user, so the candidate binds all inputs.
    assert chosen.inputs_left_to_the_user == ()
    assert chosen.binds_all_inputs


def test_a_parameter_no_step_supplies_is_still_left_to_the_user(directory):
    choice = choose_goal(GoalSearch(directory.graph, directory.index), "Which awards did 'Ada Lovelace' win in some year?")
    chosen = choice.chosen
    assert [step.tool.name for step in chosen.plan.steps] == ["find_person", "person_awards"]
    assert [unbound.parameter for unbound in chosen.inputs_left_to_the_user] == ["year"]
    assert not chosen.binds_all_inputs
