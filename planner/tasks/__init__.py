"""Tasks, above search: one planning per request, written once in :mod:`.pipeline`.

A request in words or steps is checked and read into clauses once (:mod:`.request`); a
:class:`.matching.PartMatcher` matches each part, whose goal is chosen by skill search
(:mod:`.goals`), into the data of :mod:`.parts`; the matched parts get one joint plan
(:mod:`.joint_planning`) and a planned cell (:mod:`.cell`), written by a :class:`.cell_writers.CellWriter`,
and come back as a :class:`.task.TaskPlan`. The callers are :class:`.workspace.Workspace` (the
catalogs, a fresh kernel per run) and :class:`.agent_session.AgentSession` (one persistent kernel:
what it holds in :mod:`.session_holdings`, its handles and cells in :mod:`.session_cells`, its kernel
in :mod:`.session_kernel`, its runs and paused task in :mod:`.session_runs`, its plain data in
:mod:`.session_state`). The modules load on use (this file imports nothing), so importing this package
pulls neither search nor kernels.
"""
