"""The registry's indexes stay consistent under any sequence of operations (vs. a plain model)."""

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from toolpath.registry import AmbiguousToolNameError, ToolDefinition, ToolNotFoundError, ToolRegistry
from toolpath.registry.names import module_basename

SERVERS = st.sampled_from([None, "web", "files"])
NAMES = st.sampled_from(["search", "read", "write", "get-forecast"])


class RegistryMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.registry = ToolRegistry(package="pkg")
        self.model: dict[int, tuple[str | None, str]] = {}  # id -> (server, name), the plain model
        self.next_id = 0

    def ids_named(self, name):
        return [tool_id for tool_id, (_, tool_name) in self.model.items() if tool_name == name]

    @rule(server=SERVERS, name=NAMES)
    def register(self, server, name):
        definition = ToolDefinition(name=name, server_name=server)
        if (server, name) in self.model.values():
            try:
                self.registry.register_tool(definition)
            except ValueError as error:
                assert "already has a tool" in str(error)
            else:
                raise AssertionError("a duplicate (server, name) was registered")
            return
        assert self.registry.register_tool(definition) == self.next_id
        assert definition.id is None, "the caller's definition was mutated"
        self.model[self.next_id] = (server, name)
        self.next_id += 1

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def remove_by_id(self, data):
        tool_id = data.draw(st.sampled_from(sorted(self.model)))
        removed = self.registry.remove_tool_by_id(tool_id)
        assert (removed.server_name, removed.name) == self.model.pop(tool_id)

    @rule(name=NAMES)
    def remove_by_name(self, name):
        ids = self.ids_named(name)
        if len(ids) == 1:
            assert self.registry.remove_tool_by_name(name).id == ids[0]
            del self.model[ids[0]]
        elif ids:
            try:
                self.registry.remove_tool_by_name(name)
            except AmbiguousToolNameError as error:
                assert sorted(error.servers) == sorted(str(self.model[tool_id][0]) for tool_id in ids)
            else:
                raise AssertionError("an ambiguous name was removed")
        else:
            try:
                self.registry.remove_tool_by_name(name)
            except ToolNotFoundError:
                pass
            else:
                raise AssertionError("a missing name was removed")

    @rule(tool_id=st.integers(min_value=-1, max_value=40))
    def lookup_by_id(self, tool_id):
        if tool_id in self.model:
            tool = self.registry.get_tool_by_id(tool_id)
            assert (tool.server_name, tool.name) == self.model[tool_id]
            assert self.registry.get_name_by_id(tool_id) == self.model[tool_id][1]
        else:
            try:
                self.registry.get_tool_by_id(tool_id)
            except ToolNotFoundError:
                pass
            else:
                raise AssertionError("a removed or unknown id was found")

    @invariant()
    def indexes_agree_with_the_model(self):
        assert len(self.registry) == len(self.model)
        assert [tool.id for tool in self.registry] == sorted(self.model)
        for tool_id, (server, name) in self.model.items():
            assert self.registry.get_tool_by_server_and_name(server, name).id == tool_id
            assert self.registry.get_tool_by_id(tool_id).module == f"pkg.{module_basename(name)}"
        for name in ["search", "read", "write", "get-forecast"]:
            ids = self.ids_named(name)
            if len(ids) == 1:
                assert self.registry.get_id_by_name(name) == ids[0]


TestRegistryMachine = RegistryMachine.TestCase
# 300 runs of 30 steps each cover the 12 (server, name) pairs many times over (a removal that
# forgets a shared name's index is found in every seed tried); 1000 took 10-50 s of a worker.
TestRegistryMachine.settings = settings(max_examples=300, stateful_step_count=30, deadline=None)
