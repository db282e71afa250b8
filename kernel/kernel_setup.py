"""Kernel-side setup and inspection (this module is imported *in the kernel process*).

CodeMode runs :func:`configure` once in every kernel it starts, and :func:`print_variables` /
:func:`print_value` for its developer surface; they print JSON so the host can read the answer from
the cell's stdout.
"""

from __future__ import annotations

import json
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
    """Prepare a fresh kernel for CodeMode.

    With ``allow_shell=False`` the script cell magics (``%%bash``, ``%%sh``, ``%%script`` and the
    rest of IPython's ScriptMagics), the ``%sx``/``%system``/``%sc`` line magics and ``!`` escapes
    are replaced by a refusal that says why. This keeps a model on Python; it is not a security
    boundary (``subprocess`` and ``os.system`` still work).
    """
    if allow_shell:
        return
    shell = _shell()
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
