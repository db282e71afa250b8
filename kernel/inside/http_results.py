"""What a cell sees of HTTP tools (``http:`` in a catalog): the error a failed call raises, and the
values a planned cell picks out of a result by a tool's output paths.

Runs in the kernel: a planned cell imports :func:`output_value` and passes
``output_value(search_person_result, "results[0].id", "search_person")`` to the next call, not the
whole page. An HTTP call's failure crosses the bridge by type name and message
(:mod:`toolpath.kernel.inside.bridge_client`), so :class:`HttpToolError` rebuilds its status from
the message the host wrote (:mod:`toolpath.kernel.tools.http_tools`).
"""

from __future__ import annotations

import re
from typing import Any

from toolpath.errors import ToolpathError
from toolpath.registry.output_paths import parse_output_path

#: How the host's message gives the API's status: ``search_person: GET /search/person answered 404 Not Found: ...``.
_STATUS = re.compile(r" answered (\d{3})\b")


class HttpToolError(ToolpathError, RuntimeError):
    """An HTTP tool's call failed: the API answered an error status, or could not be reached, or its
    answer could not be read (too large, not the JSON it said). The message names the tool, the
    method and path (never the query string or a header: they may carry a key), the status and the
    API's own message.

    Attributes:
        status: the HTTP status the API answered (``404``), or ``None`` when it gave none.
    """

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        found = _STATUS.search(message) if status is None else None
        self.status = status if status is not None else (int(found.group(1)) if found else None)


class OutputPathError(ToolpathError, LookupError):
    """An output path found nothing in a tool's result; the message names the tool, the path and
    where it stopped."""


def output_value(result: Any, path: str, tool: str) -> Any:
    """The value at ``path`` (``results[0].id``) in ``result``, a tool's decoded JSON result.

    Raises:
        OutputPathError: a key the result does not have, an index past the end of a list, or a step
            into something that is neither a mapping nor a list; the message names ``tool`` and ``path``.
        ValueError: ``path`` is not an output path (:func:`toolpath.registry.output_paths.parse_output_path`).
    """
    value = result
    walked = ""
    for step in parse_output_path(path):
        here = f"{walked}[{step}]" if isinstance(step, int) else (f"{walked}.{step}" if walked else step)
        if isinstance(step, int):
            if not isinstance(value, list):
                raise OutputPathError(f"{tool}'s result has no list at {walked or 'its top'} (found {_kind(value)}), so output path {path!r} finds nothing")
            if step >= len(value):
                raise OutputPathError(f"{tool}'s result has {len(value)} item(s) at {walked or 'its top'}, so output path {path!r} finds nothing at {here}")
        elif not isinstance(value, dict):
            raise OutputPathError(f"{tool}'s result has no fields at {walked or 'its top'} (found {_kind(value)}), so output path {path!r} finds nothing")
        elif step not in value:
            fields = ", ".join(list(map(str, value))[:12]) or "none"
            raise OutputPathError(
                f"{tool}'s result has no field {step!r} at {walked or 'its top'} (its fields: {fields}), so output path {path!r} finds nothing"
            )
        value = value[step]
        walked = here
    return value


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__
