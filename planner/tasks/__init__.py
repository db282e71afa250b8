"""Tasks, above search: a request in words or steps is split into parts (:mod:`.parts`), each part's
goal is chosen by skill search (:mod:`.goals`), the goals get one joint plan and a planned cell
(:mod:`.cell`), written once in :mod:`.pipeline` and returned as a :class:`.task.TaskPlan`. The
callers are :class:`.workspace.Workspace` (the catalogs, a throwaway kernel per run) and
:class:`.agent_session.AgentSession` (one persistent kernel and what it holds). The modules load on
use (this file imports nothing), so importing this package pulls neither search nor kernels.
"""
