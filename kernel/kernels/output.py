"""Collecting one cell's output within limits: capped streams, capped tracebacks, PNG images.

Every text stream — stdout, stderr, the ``Out[n]`` text and the traceback — keeps its head and its
tail within ``max_output_chars`` and drops the middle, so both how a long run started and how it ended
stay visible; memory stays bounded however much a cell prints. At most ``max_images_per_cell`` PNG
images of at most ``max_image_bytes`` each are kept; every dropped image is named.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from toolpath.kernel.inside.protocol import SUMMARY_MIME, VALUE_MIME
from toolpath.kernel.option_checks import check_count

#: An exception's type name is a name, not a stream: a few hundred characters say it.
_MAX_ENAME_CHARS = 200
#: Dropped images named one by one; the rest are counted in one line.
_MAX_DROPPED_LINES = 10
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

Status = Literal["ok", "error", "timeout", "aborted", "busy", "dead"]


@dataclass(frozen=True)
class OutputLimits:
    """Caps applied to one cell's output (defaults from the CodeMode design).

    Raises:
        ValueError: a negative cap.
        TypeError: a cap that is not a whole number.
    """

    max_output_chars: int = 65_536
    max_images_per_cell: int = 8
    max_image_bytes: int = 5_000_000

    def __post_init__(self) -> None:
        for name in ("max_output_chars", "max_images_per_cell", "max_image_bytes"):
            check_count(name, getattr(self, name))


@dataclass(frozen=True)
class CellResult:
    """What running one cell showed.

    Attributes:
        status: ``"ok"``; ``"error"`` (an exception); ``"timeout"`` (interrupted after the time
            limit); ``"aborted"`` (the cell ignored the interrupt and may still be running);
            ``"busy"`` (an earlier aborted cell still holds the kernel; nothing ran); ``"dead"`` (the
            kernel died, or was shut down, during the cell).
        stdout / stderr: the streams, in order of arrival, capped.
        result: the ``text/plain`` form of the cell's last expression (``Out[n]``), capped.
        result_json: the same value as JSON text when it is plain JSON (dicts, lists, strings,
            numbers, booleans; no NaN) and fits the output cap, else ``None``; :attr:`value` parses it.
        result_summary: the same value's short text for a person at a terminal, capped: every
            pandas table and series in it cut to its first and last rows and a few columns, with its
            shape (:data:`toolpath.kernel.inside.protocol.SUMMARY_MIME`); ``None`` when the kernel sent
            none (pandas not imported). :attr:`short_result` falls back to ``result``.
        error: ``{"ename", "evalue", "traceback"}`` (traceback without ANSI colours, capped).
        execution_count: the kernel's ``In[n]`` number.
        images: PNG images the cell displayed, as bytes.
        truncated: names of the streams whose middle was dropped (``stdout``, ``stderr``,
            ``result``, ``traceback``, ``evalue``).
        dropped_images: one line per image that was not kept, saying why (the first ten; then one
            line counting the rest).
        notice: a message for the model about the session itself (a restarted kernel, lost state).
        tool_calls: the tool calls of this cell that returned (did not raise), as ``{"handle.attribute":
            count}`` in the order they first returned; reported by the kernel in the execute reply,
            so a cell that failed still says which of its calls completed. Empty for ``"aborted"``,
            ``"busy"`` and ``"dead"`` cells (no reply says what they did).
        retries: the retries of this cell's tool calls, as ``{"handle.attribute": count}``
            (:mod:`toolpath.kernel.inside.retries`); each also wrote a line on stderr.
        injected_failures: the failures injected into this cell's tool calls (CodeMode's
            ``inject_failures``), as ``{"handle.attribute": count}``.
        failure_kinds: ``{"handle.attribute": "timeout" or "connection"}`` for the tool calls of
            this cell that failed for good from a timeout or a lost connection, as the failure's
            class hierarchy says (:func:`toolpath.registry.retry_conditions.failure_kind`: requests'
            ``ProxyError`` is a connection failure, though ``error["ename"]`` names only its class).
        pending_approval: the call a cell run with ``on_approval="pause"`` stopped at, waiting for
            approval (``tool``, ``arguments`` as shown, ``reason``, ``digest``); ``None`` otherwise.
        variables: the names of the kernel's user variables after the cell, sorted, when the cell
            was run with ``report_variables=True`` and succeeded; ``None`` otherwise (a session then
            asks in a cell of its own). Not part of :meth:`to_dict`: it is bookkeeping for sessions.
    """

    status: Status
    stdout: str = ""
    stderr: str = ""
    result: str | None = None
    error: dict | None = None
    execution_count: int | None = None
    images: tuple[bytes, ...] = ()
    truncated: tuple[str, ...] = ()
    dropped_images: tuple[str, ...] = ()
    notice: str = ""
    tool_calls: dict[str, int] = field(default_factory=dict)
    result_json: str | None = None
    result_summary: str | None = None
    pending_approval: dict | None = None
    variables: tuple[str, ...] | None = None
    retries: dict[str, int] = field(default_factory=dict)
    injected_failures: dict[str, int] = field(default_factory=dict)
    failure_kinds: dict[str, str] = field(default_factory=dict)

    @property
    def short_result(self) -> str | None:
        """:attr:`result_summary` when there is one, else :attr:`result`."""
        return self.result_summary if self.result_summary is not None else self.result

    @property
    def value(self) -> Any:
        """The cell's value parsed from :attr:`result_json`; ``None`` when there is none."""
        return json.loads(self.result_json) if self.result_json is not None else None

    def to_dict(self) -> dict:
        """JSON-ready form; images become base64 strings. ``result`` is the cell's value itself when
        it is plain JSON (``result_is_json``), else its text; ``result_text`` is always the text."""
        return {
            "status": self.status,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "result": self.value if self.result_json is not None else self.result,
            "result_is_json": self.result_json is not None,
            "result_text": self.result,
            "error": self.error,
            "execution_count": self.execution_count,
            "images": [base64.b64encode(image).decode("ascii") for image in self.images],
            "truncated": list(self.truncated),
            "dropped_images": list(self.dropped_images),
            "notice": self.notice,
            "tool_calls": dict(self.tool_calls),
            "pending_approval": self.pending_approval,
            "retries": dict(self.retries),
            "injected_failures": dict(self.injected_failures),
            "failure_kinds": dict(self.failure_kinds),
        }


class CappedText:
    """Text kept as head + tail within ``limit`` characters, however much is appended."""

    def __init__(self, limit: int):
        self.limit = limit
        self._head_limit = limit - limit // 2
        self._tail_limit = limit // 2
        self._head = ""
        self._tail = ""
        self.total = 0

    def append(self, text: str) -> None:
        self.total += len(text)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += text[:room]
            text = text[room:]
        if text and self._tail_limit:
            self._tail = (self._tail + text)[-self._tail_limit :]

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    def text(self) -> str:
        """The text itself, or head, a marker naming how much was dropped, and tail: never more than
        ``limit`` characters, the marker included."""
        if not self.truncated:
            return self._head + self._tail
        # The marker names how much was dropped, which depends on how much the marker leaves room
        # for: size it for the largest count it could name (everything), so it always fits.
        kept = self.limit - len(_marker(self.total))
        if kept < 2:  # a limit too small for the marker: the head alone (``truncated`` still says so)
            return self._head[: self.limit]
        head, tail = kept - kept // 2, kept // 2
        return self._head[:head] + _marker(self.total - head - tail) + self._tail[len(self._tail) - tail :]


def _marker(dropped: int) -> str:
    return f"\n... [{dropped:,} characters truncated] ...\n"


def cap(text: str, limit: int) -> tuple[str, bool]:
    """``text`` capped to ``limit`` characters (head and tail kept), and whether it was cut."""
    capped = CappedText(limit)
    capped.append(text)
    return capped.text(), capped.truncated


@dataclass
class CellOutput:
    """Accumulates the iopub messages of one cell (``add``), then builds the :class:`CellResult`."""

    limits: OutputLimits
    stdout: CappedText = field(init=False)
    stderr: CappedText = field(init=False)
    result: str | None = None
    result_json: str | None = None
    result_summary: str | None = None
    pending_approval: dict | None = None
    error: dict | None = None
    images: list[bytes] = field(default_factory=list)
    dropped_images: list[str] = field(default_factory=list)
    _images_seen: int = 0
    _more_dropped: int = 0

    def __post_init__(self) -> None:
        self.stdout = CappedText(self.limits.max_output_chars)
        self.stderr = CappedText(self.limits.max_output_chars)

    def add(self, kind: str, content: dict) -> None:
        """Take one iopub message of the cell (``stream``, ``execute_result``, ``display_data``, ``error``)."""
        if kind == "stream":
            (self.stdout if content.get("name") == "stdout" else self.stderr).append(content.get("text", ""))
        elif kind in ("execute_result", "display_data"):
            data = content.get("data", {})
            if "image/png" in data:
                self._add_image(data["image/png"])
            if kind == "execute_result":
                self.result = data.get("text/plain")
                self.result_json = data.get(VALUE_MIME)
                self.result_summary = data.get(SUMMARY_MIME)
        elif kind == "error":
            self.error = {
                "ename": content.get("ename", ""),
                "evalue": content.get("evalue", ""),
                "traceback": _ANSI_ESCAPE.sub("", "\n".join(content.get("traceback", []))),
            }

    def _drop(self, line: str) -> None:
        # Name the first few dropped images; count the rest (a loop may display thousands).
        if len(self.dropped_images) < _MAX_DROPPED_LINES:
            self.dropped_images.append(line)
        else:
            self._more_dropped += 1

    def _add_image(self, encoded: str) -> None:
        self._images_seen += 1
        number = self._images_seen
        try:
            image = base64.b64decode(encoded, validate=False)
        except (binascii.Error, ValueError, TypeError):
            self._drop(f"image {number}: not valid base64 PNG data")
            return
        if len(image) > self.limits.max_image_bytes:
            self._drop(f"image {number}: {len(image):,} bytes is over the limit of {self.limits.max_image_bytes:,}")
        elif len(self.images) >= self.limits.max_images_per_cell:
            self._drop(f"image {number}: over the limit of {self.limits.max_images_per_cell} images per cell")
        else:
            self.images.append(image)

    def build(
        self, status: Status, execution_count: int | None = None, error: dict | None = None, notice: str = "", tool_calls: dict[str, int] | None = None
    ) -> CellResult:
        """The capped result; ``error`` (if given) replaces the cell's own."""
        limit = self.limits.max_output_chars
        truncated = [name for name, stream in (("stdout", self.stdout), ("stderr", self.stderr)) if stream.truncated]
        result = None
        if self.result is not None:
            result, cut = cap(self.result, limit)
            if cut:
                truncated.append("result")
        summary = cap(self.result_summary, limit)[0] if self.result_summary is not None else None
        # A value too large for the cap stays as capped text only: half a JSON document is no value.
        result_json = self.result_json if self.result_json is not None and len(self.result_json) <= limit else None
        final_error = error if error is not None else self.error
        if final_error is not None:
            final_error = dict(final_error)
            final_error["ename"] = cap(str(final_error.get("ename", "")), min(limit, _MAX_ENAME_CHARS))[0]
            for key in ("evalue", "traceback"):
                final_error[key], cut = cap(str(final_error.get(key, "")), limit)
                if cut:
                    truncated.append(key)
        return CellResult(
            status,
            self.stdout.text(),
            self.stderr.text(),
            result,
            final_error,
            execution_count,
            tuple(self.images),
            tuple(truncated),
            (*self.dropped_images, *([f"{self._more_dropped:,} more images dropped"] if self._more_dropped else [])),
            notice,
            dict(tool_calls or {}),
            result_json,
            summary,
        )


def format_for_model(result: CellResult) -> str:
    """One text block for a model: notice, stdout, stderr, ``Out``, error, truncation and images."""
    parts = []
    if result.notice:
        parts.append(f"[{result.notice}]")
    if result.stdout:
        parts.append(result.stdout.rstrip("\n"))
    if result.stderr:
        parts.append("[stderr]\n" + result.stderr.rstrip("\n"))
    if result.result is not None:
        parts.append(f"Out[{result.execution_count}]: {result.result}" if result.execution_count else result.result)
    if result.error:
        parts.append(result.error.get("traceback") or f"{result.error.get('ename')}: {result.error.get('evalue')}")
        if result.error.get("traceback") and result.status in ("timeout", "aborted"):
            parts.append(f"{result.error.get('ename')}: {result.error.get('evalue')}")
    if result.truncated:
        parts.append(f"[output truncated: {', '.join(result.truncated)}]")
    if result.images:
        parts.append(f"[{len(result.images)} image(s) attached]")
    parts.extend(f"[{line}]" for line in result.dropped_images)
    return "\n".join(parts) if parts else "[no output]"
