"""The ``toolpath`` command line: validate, graph, search, plan, cell, run, serve, sessions, history, catalog draft, learn.

One module per group of verbs, each adding its verbs' sub-parsers and running them: :mod:`.planning`
(plan, search, cell), :mod:`.run`, :mod:`.graph`, :mod:`.catalogs` (validate, schema, init, catalog
draft), :mod:`.learning` (learn), :mod:`.serve`, :mod:`.sessions` (sessions list, show, close) and :mod:`.history`; what they share is in :mod:`.shared`, and :mod:`.main` assembles the parser
and runs a verb (the console script ``toolpath``, and ``python -m toolpath.planner.interfaces.cli``).
This file imports nothing.

Exit status: 0 on success; 1 when an executed cell fails (exception, timeout, dead kernel) or
``validate`` finds problems; 2 when toolpath refuses before running anything (bad catalog, bad input,
no matching skill, no plan, a task not in English; for ``serve``, also an ``--http`` address that
cannot be bound, such as a port in use); 3 when ``cell`` or ``run`` understood only some parts of a
task (the others matched nothing): nothing runs unless ``--partial`` is given; 74 when the output
could not be written to standard output (closed, or the device full), said on standard error.

Errors' advice names the options of the command that reports them (``--add-catalog``, ``--input``,
``--have``; see :func:`.shared.in_command_terms`).
"""
