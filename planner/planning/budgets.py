"""The planner's default time budgets, apart from the planner so that reading them (a command's
help text) does not load it."""

#: Milliseconds a plan's search may spend proving optimality after its bounds (see
#: :func:`toolpath.planner.planning.plans.plan`).
DEFAULT_TIME_BUDGET_MS = 250.0

#: Seconds planning one task may take by default: splitting it, choosing every part's goal and the
#: joint plan (:class:`toolpath.planner.planning.plans.TaskBudget`). A task of
#: :data:`toolpath.planner.tasks.request.MAX_TASK_PARTS` parts plans in well under this
#: (``benchmarks/bench_long_tasks.py``); an agent kept waiting longer is better told to split its task.
DEFAULT_TASK_BUDGET_S = 30.0

#: Replans one task run may make before it stops at the next failure (issue #55: a small bound, so a
#: task whose every route fails ends quickly; :mod:`toolpath.planner.tasks.replanning`).
DEFAULT_MAX_REPLANS = 2
