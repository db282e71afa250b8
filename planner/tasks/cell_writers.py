"""Who writes a task's cells: the :class:`CellWriter` protocol, and the writer for a fresh kernel.

Planning a task writes two kinds of cell: one per candidate goal, which goal choice reads to pass over
a goal whose plan leaves parameters unbound or puts an input where it is not meant, and the cell of
the plan chosen for the whole task. A fresh kernel (:meth:`toolpath.planner.Workspace.plan_task`)
gets :class:`FreshKernelCells`; an agent session's kernel already holds artifacts, variables and
bound handles, and gets :class:`toolpath.planner.tasks.session_cells.SessionCells`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from toolpath.planner.tasks.cell import KernelView, PlannedCell, render_cell

if TYPE_CHECKING:
    from toolpath.planner.planning.graph import StateGraph
    from toolpath.planner.planning.plans import Plan, TaskBudget
    from toolpath.planner.tasks.parts import PartMatch
    from toolpath.planner.tasks.request import TaskRequest


class CellWriter(Protocol):
    """Writes the cells of one planning (see the module docstring)."""

    def candidate(self, plan: Plan, inputs: Mapping[str, Any], text: str) -> PlannedCell:
        """The cell of a candidate goal's ``plan``, with the inputs the part has (the request's,
        its facts' values and the part's own) and the part's words ``text``.

        Raises:
            InputError: an input would go where it is not meant (the candidate is passed over).
        """
        ...

    def chosen(self, request: TaskRequest, parts: tuple[PartMatch, ...], joint: Plan, budget: TaskBudget) -> PlannedCell:
        """The cell of ``joint``, the plan chosen for all ``parts`` of ``request`` (whose inputs
        include the values its words give); ``budget`` is checked before anything that lasts
        beyond the planning (a session binds handles)."""
        ...


@dataclass(frozen=True)
class FreshKernelCells:
    """Cells for a kernel that holds nothing yet: every cell binds its own handles.

    Attributes:
        graph: the graph planned over (its registry names the handles' attributes, its
            refinements say which held artifact a parameter may read).
        output_directory: where the chosen cell's tools write the files no input places
            (:func:`toolpath.planner.tasks.cell.render_cell`); ``None``: their default paths.
    """

    graph: StateGraph
    output_directory: str | os.PathLike[str] | None = None

    def candidate(self, plan: Plan, inputs: Mapping[str, Any], text: str) -> PlannedCell:
        return render_cell(plan, inputs, text, KernelView.of(self.graph))

    def chosen(self, request: TaskRequest, parts: tuple[PartMatch, ...], joint: Plan, budget: TaskBudget) -> PlannedCell:
        return render_cell(joint, request.inputs, request.text, KernelView.of(self.graph), output_directory=self.output_directory)
