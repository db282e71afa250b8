"""Output paths: where, in a tool's result, the value carrying a state is (``outputs`` of a tool).

A path is dotted keys and ``[N]`` list indexes: ``results[0].id``, ``crew[2].name``, ``id``,
``[0].id`` (the first item of a result that is a list). Keys are written as JSON APIs name fields
(letters, digits, ``_`` and ``-``, not starting with a digit). This module reads a path; it imports
nothing heavy, since a planned cell's kernel follows paths with it
(:func:`toolpath.kernel.inside.http_results.output_value`).
"""

from __future__ import annotations

import re

#: One step of an output path: a key (``results``, ``known-for``) or a list index (``[0]``).
_PATH_STEP = re.compile(r"([A-Za-z_][A-Za-z0-9_\-]*)|\[(\d+)\]")
#: A whole output path: a first key or index, then ``.key`` and ``[N]`` steps.
_OUTPUT_PATH = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_\-]*|\[\d+\])(?:\.[A-Za-z_][A-Za-z0-9_\-]*|\[\d+\])*")


def parse_output_path(path: str) -> tuple[str | int, ...]:
    """The steps of an output path: ``"results[0].id"`` → ``("results", 0, "id")``.

    Raises:
        ValueError: the path is empty or not dotted keys and ``[N]`` indexes; the message quotes it.

    Examples:
        >>> parse_output_path("cast[2].name"), parse_output_path("[0].id")
        (('cast', 2, 'name'), (0, 'id'))
    """
    if not isinstance(path, str) or not _OUTPUT_PATH.fullmatch(path):
        raise ValueError(f"output path {path!r} is not dotted keys and [N] indexes, like results[0].id or id")
    return tuple(key if key else int(index) for key, index in _PATH_STEP.findall(path))
