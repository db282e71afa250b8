"""Kernel-side setup and inspection (this module is imported *in the kernel process*).

CodeMode runs :func:`configure` once in every kernel it starts, :func:`keep_handles` after binding
tool handles, and :func:`print_variables` / :func:`print_value` for its developer surface; those
send JSON on the kernel's own stdout stream (even when a cell redirected ``sys.stdout``), where the
host reads the answer.

``configure`` also keeps the session usable when a cell breaks it by accident:

- a tool handle that was deleted (``del inventory``) is bound again before the next cell, and a
  ``NameError`` or ``AttributeError`` caused by a deleted or reassigned handle says how to get it
  back;
- a cell that closes ``sys.stdout`` or ``sys.stderr`` (or sets them to ``None`` or to something
  that is not a stream) gets them reopened when it ends (or before the next cell, when a background
  thread did it), with a note on stderr, instead of leaving every later cell silent or wedged.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from toolpath.kernel.inside.protocol import SUMMARY_MIME, VALUE_MIME

#: Rows a table or series keeps in the short text when it has more (half from the head, half from the tail).
SUMMARY_MAX_ROWS = 10
#: Columns a table keeps in the short text when it has more (half from each side).
SUMMARY_MAX_COLUMNS = 8
SHELL_DISABLED = "shell commands are disabled in this session (allow_shell=False); use Python instead"
#: IPython's subprocess-running cell magics (its ScriptMagics defaults, and a few more if present).
SCRIPT_MAGICS = ("bash", "sh", "zsh", "perl", "ruby", "python", "python2", "python3", "pypy")


def _shell() -> Any:
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None:
        raise RuntimeError("toolpath.kernel.inside.setup must run inside an IPython kernel")
    return shell


def _refuse_shell(*args: Any, **kwargs: Any) -> None:
    raise RuntimeError(SHELL_DISABLED)


def configure(allow_shell: bool = True) -> None:
    """Prepare a fresh kernel for CodeMode: handle and stream repair (see the module docstring), and
    the shell switch.

    With ``allow_shell=False`` the script cell magics (``%%bash``, ``%%sh``, ``%%script`` and the
    rest of IPython's ScriptMagics), the ``%sx``/``%system``/``%sc`` line magics and ``!`` escapes
    are replaced by a refusal that says why. This keeps a model on Python; it is not a security
    boundary (``subprocess`` and ``os.system`` still work).
    """
    shell = _shell()
    _send_json_values(shell)
    _send_summaries(shell)
    shell.events.register("pre_run_cell", _before_cell)
    shell.events.register("post_run_cell", _reopen_broken_streams)
    shell.set_custom_exc(_HANDLE_ERRORS, _explain_handle_error)
    if allow_shell:
        return
    magics = shell.magics_manager.magics
    # Script magics run a subprocess (%%bash, %%sh, %%script, %%perl ...): replace each with a refusal
    # so the model reads why instead of "magic not found".
    for name in ("script", *SCRIPT_MAGICS):
        if name in magics["cell"]:
            shell.register_magic_function(_refuse_shell, magic_kind="cell", magic_name=name)
    for name in ("sx", "system", "sc"):
        if name in magics["line"]:
            shell.register_magic_function(_refuse_shell, magic_kind="line", magic_name=name)
    shell.system = _refuse_shell
    shell.getoutput = _refuse_shell


def _send_json_values(shell: Any) -> None:
    """Add a display formatter that sends each value that is plain JSON (dicts, lists, strings,
    numbers, booleans) as JSON text under :data:`VALUE_MIME`, so the host gets the value itself and
    not only its repr. Other values (NaN, sets, objects) get no such form."""
    from IPython.core.formatters import BaseFormatter

    class JSONValueFormatter(BaseFormatter):
        format_type = VALUE_MIME
        _return_type = str

        def __call__(self, obj: Any) -> str | None:
            try:
                return json.dumps(obj, allow_nan=False, ensure_ascii=False)
            except (TypeError, ValueError, RecursionError):
                return None

    _add_formatter(shell, JSONValueFormatter)


def _send_summaries(shell: Any) -> None:
    """Add a display formatter that sends each value's short text under :data:`SUMMARY_MIME`: IPython's
    plain text made under pandas display options of at most :data:`SUMMARY_MAX_ROWS` rows and
    :data:`SUMMARY_MAX_COLUMNS` columns, with the shape of every table (so a dict of tables is cut too)."""
    from IPython.core.formatters import BaseFormatter
    from IPython.lib.pretty import pretty

    class SummaryFormatter(BaseFormatter):
        format_type = SUMMARY_MIME
        _return_type = str

        def __call__(self, obj: Any) -> str | None:
            pandas = sys.modules.get("pandas")
            if pandas is None:  # no table can be in the value: text/plain says it
                return None
            options = ("display.max_rows", SUMMARY_MAX_ROWS, "display.min_rows", SUMMARY_MAX_ROWS, "display.max_columns", SUMMARY_MAX_COLUMNS)
            try:
                with pandas.option_context(*options, "display.show_dimensions", True):
                    return pretty(obj)
            except Exception:  # a repr that fails here fails in text/plain too, which reports it
                return None

    _add_formatter(shell, SummaryFormatter)


def _add_formatter(shell: Any, formatter_class: Any) -> None:
    formatter = shell.display_formatter
    formatter.formatters[formatter_class.format_type] = formatter_class(parent=formatter)
    # A formatter added after start-up is used only once listed as active.
    if formatter.active_types and formatter_class.format_type not in formatter.active_types:
        formatter.active_types = [*formatter.active_types, formatter_class.format_type]


#: The tool handles CodeMode bound, by variable name.
_handles: dict[str, Any] = {}


def keep_handles(names: list[str]) -> None:
    """Remember the objects now bound to ``names`` as tool handles, to bind again if deleted."""
    namespace = _shell().user_ns
    _handles.clear()
    _handles.update({name: namespace[name] for name in names if name in namespace})


_HANDLE_ERRORS = (NameError, AttributeError)


def _before_cell(info: Any = None) -> None:
    """IPython ``pre_run_cell`` hook: bind again every handle a previous cell deleted, reopen streams
    something broke since (a background thread), and put back the error handler if a cell replaced
    it or IPython dropped it.

    A handle the user assigned something else to is left alone: that may be on purpose.
    """
    shell = _shell()
    for name, handle in _handles.items():
        shell.user_ns.setdefault(name, handle)
    _reopen_broken_streams()
    if shell.custom_exceptions != _HANDLE_ERRORS:
        shell.set_custom_exc(_HANDLE_ERRORS, _explain_handle_error)


def _explain_handle_error(shell: Any, kind: type, error: BaseException, traceback: Any, tb_offset: int | None = None) -> None:
    """IPython custom exception handler: say when a ``NameError``/``AttributeError`` comes from a
    deleted or reassigned tool handle, then show the usual traceback (IPython shows nothing else
    for an exception a custom handler takes)."""
    try:
        hint = _handle_hint(shell.user_ns, error)
        if hint and error.args and isinstance(error.args[0], str):
            error.args = (f"{error.args[0]}. Note: {hint}", *error.args[1:])
    except Exception:  # a hint is a courtesy; the traceback must still be shown
        pass
    # A cell that set sys.stdout to None would make showing the traceback fail (and IPython would
    # then drop this handler and report nothing).
    _reopen_broken_streams()
    shell.showtraceback((kind, error, traceback), tb_offset=tb_offset)


def _handle_hint(namespace: dict[str, Any], error: BaseException) -> str:
    """Why ``error`` may come from a deleted or reassigned tool handle, or ``""``."""
    name = getattr(error, "name", None)
    if isinstance(error, NameError) and isinstance(name, str) and name in _handles and name not in namespace:
        return f"{name!r} is a toolpath tool handle that was deleted; it is bound again from the next cell on"
    if isinstance(error, AttributeError) and isinstance(name, str):
        # Only when the missing attribute is a tool of a handle whose name now holds another value:
        # identity with error.obj alone would match any None or small int.
        for handle_name, handle in _handles.items():
            current = namespace.get(handle_name, handle)
            if current is not handle and current is getattr(error, "obj", None) and name in dir(handle):
                return f"{handle_name!r} no longer holds its toolpath tool handle (it was assigned another value); run `del {handle_name}` and it is bound again from the next cell on"
    return ""


def _is_broken(stream: Any) -> bool:
    """A stream print() and ipykernel cannot use: ``None``, closed, or without ``write``/``flush``."""
    try:
        return (
            stream is None
            or bool(getattr(stream, "closed", False))
            or not callable(getattr(stream, "write", None))
            or not callable(getattr(stream, "flush", None))
        )
    except Exception:  # an object whose attributes raise is no stream either
        return True


def _reopen_broken_streams(result: Any = None) -> None:
    """IPython ``post_run_cell`` hook (and before each cell): replace a broken ``sys.stdout`` or
    ``sys.stderr`` (see :func:`_is_broken`) with a new stream to the kernel's output, and say so on
    stderr. An open stream the cell chose (a file, a ``StringIO``) is left alone."""
    from ipykernel.iostream import OutStream

    kernel = getattr(_shell(), "kernel", None)
    if kernel is None:
        return
    reopened = []
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if _is_broken(stream):
            # watchfd=False: output written straight to the file descriptor (C extensions) is no
            # longer captured once the original stream gave its descriptor back on close.
            fresh = OutStream(kernel.session, kernel.iopub_thread, name, watchfd=False)
            fresh.set_parent(kernel.get_parent())
            setattr(sys, name, fresh)
            reopened.append(f"sys.{name}")
    if reopened:
        print(
            f"toolpath: {' and '.join(reopened)} had been closed or replaced by something that is not a stream; reopened (output not yet shown when that happened was lost)",
            file=sys.stderr,
        )


def answer(payload: Any) -> None:
    """Send ``payload`` as one JSON line on the kernel's own stdout stream, even when a cell has
    pointed ``sys.stdout`` elsewhere (a ``StringIO``, a file): the host reads the answer there."""
    from ipykernel.iostream import OutStream

    kernel = getattr(_shell(), "kernel", None)
    if kernel is None:
        print(json.dumps(payload))
        return
    stream = OutStream(kernel.session, kernel.iopub_thread, "stdout", watchfd=False)
    stream.set_parent(kernel.get_parent())
    stream.write(json.dumps(payload) + "\n")
    stream.flush()


def _variable_names() -> list[str]:
    """The names of the user's variables (IPython's ``%who_ls``), sorted."""
    return sorted(_shell().run_line_magic("who_ls", "") or [])


def print_variables() -> None:
    """Print the names of the user's variables as a JSON list."""
    answer(_variable_names())


def variable_names_json() -> str:
    """The names of the user's variables as JSON text. A session's cells ask for it in their
    ``user_expressions``, so the names come back in the cell's own execute reply; as text, because
    IPython's display of a list stops after 1,000 items."""
    return json.dumps(_variable_names())


def print_value(name: str) -> None:
    """Print ``{"value": ...}`` for a JSON-serialisable variable, else ``{"error": ...}``."""
    namespace = _shell().user_ns
    if name not in namespace:
        answer({"error": f"no variable named {name!r} in this session"})
        return
    value = namespace[name]
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        answer({"error": f"{name} is a {type(value).__name__}, which has no JSON form; inspect it with run()", "repr": repr(value)[:1000]})
        return
    answer({"value": value})
