"""The ``toolpath`` command's entry point: its parser, assembled from each verb's own, and
:func:`main`, which runs a verb and reports what toolpath refused (exit statuses: see
:mod:`toolpath.planner.interfaces.cli`).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import gc
import logging
import os
import signal
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from toolpath.errors import ToolpathError
from toolpath.observability.tracing import span
from toolpath.observability.tracing_setup import configure_tracing
from toolpath.planner.interfaces.cli.catalogs import add_catalog_parser, add_init_parser, add_schema_parser, add_validate_parser
from toolpath.planner.interfaces.cli.graph import add_graph_parser
from toolpath.planner.interfaces.cli.history import add_history_parser
from toolpath.planner.interfaces.cli.learning import add_learn_parser
from toolpath.planner.interfaces.cli.planning import add_cell_parser, add_plan_parser, add_search_parser
from toolpath.planner.interfaces.cli.run import add_run_parser
from toolpath.planner.interfaces.cli.serve import add_serve_parser
from toolpath.planner.interfaces.cli.sessions import add_sessions_parser
from toolpath.planner.interfaces.cli.shared import emit_json, error_payload, in_command_terms


class _VersionAction(argparse.Action):
    """``--version``: the installed version, looked up only when asked (importlib.metadata is slow to load)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="show the version and exit")

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        import importlib.metadata

        try:
            version = importlib.metadata.version("toolpath")
        except importlib.metadata.PackageNotFoundError:  # run from a source tree that was never installed
            version = "(not installed)"
        print(f"toolpath {version}")
        parser.exit()


EXIT_STATUSES = """exit status:
  0  done
  1  the cell failed (exception, timeout, dead kernel), or validate found problems
  2  refused before running anything (bad catalog or input, no matching skill, no plan, a task not in English), with what to do
  3  some parts of the task were not understood: nothing ran (cell and run; --partial goes on with the parts understood)
  74 the output could not be written to standard output (closed, or the device full); what ran still ran"""

#: The exit status when standard output cannot be written: EX_IOERR of BSD's sysexits.h.
OUTPUT_FAILED = 74


class _OutputError(OSError):
    """Standard output could not be written (closed when the command started, or a write failed)."""


class _Output:
    """Standard output as the commands write it: every write and flush of ``stream`` that fails
    raises :class:`_OutputError`, so :func:`main` reports it instead of exiting 0 having said nothing.
    ``stream`` is ``None`` when the process started with its standard output closed (``>&-``):
    Python then sets ``sys.stdout`` to ``None``, and ``print`` drops every line in silence.
    A closed pipe stays a :class:`BrokenPipeError` (the reader went away: :func:`main` stops quietly)."""

    def __init__(self, stream: Any):
        self._stream = stream

    def write(self, text: str) -> int:
        return self._call("write", text)

    def flush(self) -> None:
        if self._stream is not None:
            self._call("flush")

    def _call(self, method: str, *arguments: Any) -> Any:
        if self._stream is None:
            raise _OutputError(
                "standard output is closed, so nothing could be written; run the command with standard output open (a file, a pipe or a terminal)"
            )
        try:
            return getattr(self._stream, method)(*arguments)
        except BrokenPipeError:
            raise
        except OSError as error:
            raise _OutputError(f"writing to standard output failed: {error.strerror or error}") from error

    def __getattr__(self, name: str) -> Any:
        # encoding, isatty, fileno, buffer, ...: the stream's own (a closed one has none).
        if self._stream is None:
            raise AttributeError(name)
        return getattr(self._stream, name)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every verb, listed in this order by ``toolpath --help``."""
    parser = argparse.ArgumentParser(
        prog="toolpath",
        description="Plan tool paths over a state-transition graph and run them as one cell in an IPython kernel.",
        epilog=EXIT_STATUSES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_VersionAction)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add_parser in (
        add_run_parser,
        add_cell_parser,
        add_plan_parser,
        add_search_parser,
        add_validate_parser,
        add_schema_parser,
        add_graph_parser,
        add_init_parser,
        add_catalog_parser,
        add_learn_parser,
        add_serve_parser,
        add_sessions_parser,
        add_history_parser,
    ):
        add_parser(commands)
    return parser


def _exit_on_signal(signum, frame) -> None:
    # Raising here unwinds `async with IPythonKernel()`, so the kernel and its sockets are cleaned up.
    raise SystemExit(128 + signum)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    # A command-line user needs what happened and what to do, not the source line that warned.
    print(f"toolpath: warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    stream = sys.stdout
    sys.stdout = output = _Output(stream)  # from the start: --help and --version write too
    try:
        arguments = build_parser().parse_args(argv)
        _set_up_process()
        if arguments.command == "serve":  # serving over stdio owns standard output; over HTTP it may be closed
            sys.stdout = stream
            return _run(arguments)
        status = _run(arguments)
        output.flush()  # what is still buffered is written now, while a failure can be reported
        return status
    except BrokenPipeError:
        return _reader_gone()
    except _OutputError as error:
        print(f"toolpath: {error}", file=sys.stderr)
        stream = open(os.devnull, "w")  # nothing more is written there (nor flushed at exit)
        return OUTPUT_FAILED
    finally:
        if sys.stdout is output:  # a caller in the same process gets its own stream back
            sys.stdout = stream


def _set_up_process() -> None:
    """Warnings and toolpath's own progress notes (e.g. a one-off model export) on standard error;
    SIGTERM and SIGHUP end the command as an exit does, cleaning up."""
    warnings.showwarning = _show_warning
    notes = logging.getLogger("toolpath")
    if not notes.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("toolpath: %(message)s"))
        notes.addHandler(handler)
        notes.setLevel(logging.INFO)
    signal.signal(signal.SIGTERM, _exit_on_signal)
    signal.signal(signal.SIGHUP, _exit_on_signal)
    configure_tracing()  # from the OTEL_* variables; nothing unless they ask for traces


def _reader_gone() -> int:
    """The reader of standard output (e.g. `| head`) went away: stop quietly, as Unix tools do."""
    sys.stdout = open(os.devnull, "w")
    return 141


def _run(arguments: argparse.Namespace) -> int:
    """Run the command of ``arguments``; its exit status (the refusals toolpath reports, told apart)."""
    try:
        with contextlib.nullcontext() if arguments.command == "serve" else _without_cycle_collection(), _command_span(arguments.command):
            return arguments.handler(arguments)
    except KeyboardInterrupt:
        print("toolpath: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _reader_gone()
    except ToolpathError as error:  # any other exception is a bug: its traceback stays
        message = in_command_terms(error, arguments.command)
        if getattr(arguments, "json", False):
            emit_json(error_payload(error, message))
        else:
            print(f"toolpath: {message}", file=sys.stderr)
        # A task with a part not understood has its own status (3), told apart from other refusals.
        return getattr(error, "exit_status", 2)


def _command_span(command: str) -> contextlib.AbstractContextManager[Any]:
    """The span of a command, the root of its trace: ``toolpath run`` is a task's span
    (:mod:`toolpath.planner.tasks.task_spans`), another command ``toolpath COMMAND``; ``serve`` has
    none (each MCP request is its own trace)."""
    if command == "serve":
        return contextlib.nullcontext()
    if command == "run":
        from toolpath.planner.tasks.task_spans import task_span

        return task_span()
    return span(f"toolpath {command}", {"toolpath.command": command})


@contextlib.contextmanager
def _without_cycle_collection() -> Iterator[None]:
    """Run a command that ends soon without the cycle collector (:mod:`gc`), and freeze its objects
    at exit. Start-up makes some 300,000 objects that live until exit (modules, the catalogs, the
    query model): collecting them for cycles again and again cost a ``toolpath search`` about
    0.05 s, and interpreter shutdown collecting them all once more about 0.1 s (issue 37). The
    collector is on again afterwards (for a caller in the same process), as it is for ``serve``."""
    if not gc.isenabled():
        yield
        return
    from toolpath.registry.catalog_documents import garbage_collection_paused

    atexit.register(gc.freeze)  # at exit, before the interpreter's last collections
    # Paused as catalogs are loaded: what was made meanwhile goes to the oldest generation at the
    # end, so the first collection after it does not walk it all (0.08 s at 100,000 tools).
    with garbage_collection_paused():
        yield
