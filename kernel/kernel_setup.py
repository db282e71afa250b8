"""Kernel-side setup and inspection (this module is imported *in the kernel process*).

CodeMode runs :func:`configure` once in every kernel it starts, :func:`keep_handles` after binding
tool handles, and :func:`print_variables` / :func:`print_value` for its developer surface; those
print JSON so the host can read the answer from the cell's stdout.

``configure`` also keeps the session usable when a cell breaks it by accident:

- a tool handle that was deleted (``del inventory``) is bound again before the next cell, and a
  ``NameError`` or ``AttributeError`` caused by a deleted or reassigned handle says how to get it
  back;
- a cell that closes ``sys.stdout`` or ``sys.stderr`` (or sets them to ``None``) gets them reopened
  when it ends, with a note on stderr, instead of leaving every later cell silent.
"""

from __future__ import annotations

import json
import sys
from typing import Any

SHELL_DISABLED = "shell commands are disabled in this session (allow_shell=False); use Python instead"
#: IPython's subprocess-running cell magics (its ScriptMagics defaults, and a few more if present).
SCRIPT_MAGICS = ("bash", "sh", "zsh", "perl", "ruby", "python", "python2", "python3", "pypy")


def _shell() -> Any:
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None:
        raise RuntimeError("kernel_setup must run inside an IPython kernel")
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
    shell.events.register("pre_run_cell", _restore_handles)
    shell.events.register("post_run_cell", _reopen_closed_streams)
    shell.set_custom_exc((NameError, AttributeError), _explain_handle_error)
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


#: The tool handles CodeMode bound, by variable name.
_handles: dict[str, Any] = {}


def keep_handles(names: list[str]) -> None:
    """Remember the objects now bound to ``names`` as tool handles, to bind again if deleted."""
    namespace = _shell().user_ns
    _handles.clear()
    _handles.update({name: namespace[name] for name in names if name in namespace})


def _restore_handles(info: Any = None) -> None:
    """IPython ``pre_run_cell`` hook: bind again every handle a previous cell deleted.

    A handle the user assigned something else to is left alone: that may be on purpose.
    """
    namespace = _shell().user_ns
    for name, handle in _handles.items():
        namespace.setdefault(name, handle)


def _explain_handle_error(shell: Any, kind: type, error: BaseException, traceback: Any, tb_offset: int | None = None) -> None:
    """IPython custom exception handler: say when a ``NameError``/``AttributeError`` comes from a
    deleted or reassigned tool handle, then show the usual traceback (IPython shows nothing else
    for an exception a custom handler takes)."""
    namespace = shell.user_ns
    hint = ""
    if isinstance(error, NameError) and error.name in _handles and error.name not in namespace:
        hint = f"{error.name!r} is a toolpath tool handle that was deleted; it is bound again from the next cell on"
    elif isinstance(error, AttributeError):
        shadowed = [name for name, handle in _handles.items() if name in namespace and namespace[name] is not handle and namespace[name] is getattr(error, "obj", None)]
        if shadowed:
            hint = f"{shadowed[0]!r} no longer holds its toolpath tool handle (it was assigned another value); run `del {shadowed[0]}` and it is bound again from the next cell on"
    if hint and error.args and isinstance(error.args[0], str):
        error.args = (f"{error.args[0]}. Note: {hint}", *error.args[1:])
    shell.showtraceback((kind, error, traceback), tb_offset=tb_offset)


def _reopen_closed_streams(result: Any = None) -> None:
    """IPython ``post_run_cell`` hook: replace a closed (or ``None``) ``sys.stdout``/``sys.stderr``
    with a new stream to the kernel's output, and say so on stderr."""
    from ipykernel.iostream import OutStream

    kernel = getattr(_shell(), "kernel", None)
    if kernel is None:
        return
    reopened = []
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None or getattr(stream, "closed", False):
            # watchfd=False: output written straight to the file descriptor (C extensions) is no
            # longer captured once the original stream gave its descriptor back on close.
            fresh = OutStream(kernel.session, kernel.iopub_thread, name, watchfd=False)
            fresh.set_parent(kernel.get_parent())
            setattr(sys, name, fresh)
            reopened.append(f"sys.{name}")
    if reopened:
        print(f"toolpath: {' and '.join(reopened)} had been closed; reopened (output written while closed was lost)", file=sys.stderr)


def print_variables() -> None:
    """Print the names of the user's variables (IPython's ``%who_ls``) as a JSON list."""
    print(json.dumps(sorted(_shell().run_line_magic("who_ls", "") or [])))


def print_value(name: str) -> None:
    """Print ``{"value": ...}`` for a JSON-serialisable variable, else ``{"error": ...}``."""
    namespace = _shell().user_ns
    if name not in namespace:
        print(json.dumps({"error": f"no variable named {name!r} in this session"}))
        return
    value = namespace[name]
    try:
        print(json.dumps({"value": value}))
    except (TypeError, ValueError):
        print(json.dumps({"error": f"{name} is a {type(value).__name__}, which has no JSON form; inspect it with run()", "repr": repr(value)[:1000]}))
