"""Approval policies and the errors of a call that asks: checked where the call is made.

An in-kernel handle checks its tool's policy in the kernel (:mod:`toolpath.kernel.inside.handles`)
and a host toolkit on the host (:mod:`toolpath.kernel.tools.toolkit`); both send the host's gate an
:class:`ApprovalRequest` (:mod:`toolpath.kernel.tools.approvals`), and a cell gets
:class:`ApprovalDenied`, :class:`ApprovalTimeout` or :class:`ApprovalPending` as the same classes on
either side. This module runs in the kernel, so it imports nothing but the standard library and
toolpath's root error.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from toolpath.errors import ToolpathError

#: Characters of one argument's ``repr`` an approver is shown; the digest covers the whole value.
MAX_SHOWN_ARGUMENT_CHARS = 500


class ApprovalDenied(ToolpathError, PermissionError):
    """The call needed approval and did not get it: the approver said no, failed, or nobody can be
    asked here. The tool's code did not run. ``reason`` says why, with the approver's note."""

    def __init__(self, message: str, reason: str = ""):
        super().__init__(message)
        self.reason = reason or message


class ApprovalTimeout(ToolpathError, TimeoutError):
    """The approver did not answer in time; the tool's code did not run."""


class ApprovalPending(ToolpathError, RuntimeError):
    """The call needs approval and the run pauses before it instead of asking (a planned task run
    with ``on_approval="pause"``): the tool's code did not run; the session's ``resume`` continues
    from this call with the answer."""


@dataclass(frozen=True)
class ApprovalRequest:
    """One call waiting for a decision, as the approver sees it.

    Attributes:
        tool: ``"toolkit.tool"``.
        arguments: each argument's ``repr``, cut at :data:`MAX_SHOWN_ARGUMENT_CHARS` characters.
        reason: why this call asks ("it always asks", "it would write over /home/ana/report.md").
        digest: SHA-256 of the tool and its arguments (JSON, with ``repr`` for other values, so a
            large table counts by its shortened ``repr``), hex: what the audit log keeps instead of
            the values, and what a given answer is matched by.
        session_id / user_id: the session the call came from and its owner (``None`` outside a
            session, or for nobody's).
    """

    tool: str
    arguments: dict[str, str]
    reason: str
    digest: str
    session_id: str | None = None
    user_id: str | None = None

    @classmethod
    def of(cls, tool: str, arguments: Mapping[str, Any], reason: str, session_id: str | None = None, user_id: str | None = None) -> ApprovalRequest:
        """The request for a call of ``tool`` with these (bound) arguments."""
        shown = {name: _shown(value) for name, value in arguments.items()}
        # The tool is part of what is digested: an answer given on one tool's call is no other's.
        canonical = json.dumps([tool, dict(arguments)], sort_keys=True, default=repr, ensure_ascii=False)
        return cls(tool, shown, reason, hashlib.sha256(canonical.encode()).hexdigest(), session_id, user_id)

    def describe(self) -> str:
        """One paragraph for a person: the call, its arguments and why it asks."""
        arguments = ", ".join(f"{name}={value}" for name, value in self.arguments.items())
        return f"{self.tool}({arguments}) asks for approval: {self.reason}."

    def to_dict(self) -> dict[str, Any]:
        return {"tool": self.tool, "arguments": dict(self.arguments), "reason": self.reason, "digest": self.digest}


class ApprovalPolicy(Protocol):
    """``policy(arguments)`` → why this call needs approval (a sentence), or ``""``/``None``/``False``
    when it does not; ``True`` means "its policy asks"."""

    def __call__(self, arguments: Mapping[str, Any]) -> str | bool | None: ...


def approval_reason(policy: bool | ApprovalPolicy, arguments: Mapping[str, Any]) -> str:
    """Why a call with ``arguments`` needs approval under ``policy`` ("" when it does not).

    Raises:
        Exception: whatever the policy raised (the call is then not made: a policy that cannot
            decide does not let the call through).
    """
    if policy is True:
        return "it always asks"
    if not policy:
        return ""
    answer = policy(arguments)
    if answer is None or answer is False or (isinstance(answer, str) and not answer):
        return ""
    if answer is True:
        return "its approval policy asks"
    # Anything else asks too: a policy that answers oddly must not let the call through.
    return answer if isinstance(answer, str) else f"its approval policy answered {type(answer).__name__} {answer!r}"


@dataclass(frozen=True)
class OverwritePolicy:
    """Asks when an output parameter, as passed or by its default, names something that exists
    (a file, a directory, or a link, which writing would follow): writing would replace it.

    Attributes:
        outputs: ``{parameter: default}`` of the tool's output parameters (``role: output``).
    """

    outputs: Mapping[str, Any]

    def __call__(self, arguments: Mapping[str, Any]) -> str:
        for name, default in self.outputs.items():
            target = arguments.get(name, default)
            if target is None or (isinstance(target, (str, bytes)) and not target):
                continue
            if not isinstance(target, (str, bytes, os.PathLike)):
                # A file descriptor, or anything else a write may take: nothing here can tell what it replaces.
                return f"its output {name} is {type(target).__name__} {target!r}, not a path, so what it replaces cannot be checked"
            if os.path.lexists(target):
                written = os.fsdecode(os.path.realpath(target))
                shown = os.fsdecode(os.path.abspath(target))
                link = f", through the link {shown}" if written != shown else ""
                return f"it would write over {written} (argument {name}{link})"
        return ""


def policy_of(spec: Mapping[str, Any] | None) -> bool | ApprovalPolicy:
    """The policy a catalog tool's approval spec (:func:`approval_spec`)
    stands for: ``False``, ``True`` or an :class:`OverwritePolicy`.

    Raises:
        ValueError: an unknown ``approval`` in the spec.
    """
    kind = (spec or {}).get("approval", "never")
    if kind == "never":
        return False
    if kind == "always":
        return True
    if kind == "on_overwrite":
        return OverwritePolicy(dict(spec["outputs"]))  # type: ignore[index]
    raise ValueError(f"unknown approval {kind!r}: use never, always or on_overwrite")


def _shown(value: Any) -> str:
    try:
        text = repr(value)
    except Exception as error:  # a value whose repr fails is still shown as something
        text = f"<{type(value).__name__}: repr failed ({type(error).__name__})>"
    return text if len(text) <= MAX_SHOWN_ARGUMENT_CHARS else f"{text[:MAX_SHOWN_ARGUMENT_CHARS]}… ({len(text):,} characters)"
