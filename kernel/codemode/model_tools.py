"""What a model is told about CodeMode: its tools' JSON declarations and the instructions text."""

from __future__ import annotations

from typing import Any, Literal

from toolpath.kernel.codemode.options import CellPolicy

EXECUTE_DESCRIPTION = "Run a Python cell in your persistent IPython kernel and get back what it printed, its value, its error and its images. Variables stay for later cells; top-level await works; tool handles are bound."
RESTART_DESCRIPTION = "Discard the kernel and all its variables; the next cell starts fresh."


def tool_schemas(allow_restart: bool, api: Literal["openai", "anthropic"]) -> list[dict[str, Any]]:
    """Declarations of ``execute`` (and ``restart`` with ``allow_restart``) in ``api``'s format.

    Args:
        api: ``"openai"``: Chat Completions function tools (``{"type": "function", "function":
            {"name", "description", "parameters"}}``); ``"anthropic"``: Messages API tools
            (``{"name", "description", "input_schema"}``).

    Raises:
        ValueError: another ``api``.
    """
    # Built anew on each call: callers may change what they get.
    code = {"type": "string", "description": "The Python cell to run."}
    declared = [("execute", EXECUTE_DESCRIPTION, {"type": "object", "properties": {"code": code}, "required": ["code"], "additionalProperties": False})]
    if allow_restart:
        declared.append(("restart", RESTART_DESCRIPTION, {"type": "object", "properties": {}, "additionalProperties": False}))
    if api == "openai":
        return [{"type": "function", "function": {"name": name, "description": description, "parameters": schema}} for name, description, schema in declared]
    if api == "anthropic":
        return [{"name": name, "description": description, "input_schema": schema} for name, description, schema in declared]
    raise ValueError(f"api must be 'openai' or 'anthropic', got {api!r}")


def instructions(handle_lines: list[str], cells: CellPolicy, allow_shell: bool, offloaded_over: int | None, allow_restart: bool) -> str:
    """Text for a model: how the kernel behaves, the tool handles and the limits in force.

    Args:
        handle_lines: the lines describing the bound handles (``HandleBinder.describe``).
        offloaded_over: results over this many bytes are offloaded (``None``: offloading is off).
    """
    lines = [
        "You have a persistent IPython kernel: variables, imports and functions you define stay available to later cells.",
        "Top-level `await` works in cells.",
        "Input from the user (input()) is not available.",
        *handle_lines,
    ]
    if offloaded_over is not None:
        lines.append(f"Tool results over {offloaded_over:,} bytes arrive as an offloaded-result id: read them with `await results.get(id)`.")
    if allow_shell:
        lines.append("Shell commands: start a cell with %%bash, or prefix a line with !.")
    else:
        lines.append("Shell commands (%%bash, !) are disabled: use Python.")
    timeout = "no time limit" if cells.timeout is None else f"{cells.timeout:g} seconds"
    limits = cells.limits
    lines.append(
        f"Each cell may run for {timeout}; output streams are cut to {limits.max_output_chars:,} characters (head and tail kept); at most {limits.max_images_per_cell} images of {limits.max_image_bytes:,} bytes each are returned."
    )
    if allow_restart:
        lines.append("Call restart to discard the kernel and start again with no variables.")
    return "\n".join(lines) + "\n"
