"""What the verbs of the ``toolpath`` command share: reading ``--input`` values, the option groups
several verbs take (catalogs, a task's inputs, where kernels run) and the argparse types they use,
the workspace the catalog options name, JSON output, and errors told in the command's own terms
(its advice names the options of the command that reports it).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolpath.catalogs import CATALOGS_VARIABLE
from toolpath.errors import Refusal, ToolpathError, Vocabulary

if TYPE_CHECKING:
    from toolpath.planner.tasks.task import InputOption
    from toolpath.planner.tasks.workspace import Workspace


class CommandLineError(Refusal, ValueError):
    """A malformed option value."""


#: The command line's advice for a domain no loaded catalog covers (see :class:`toolpath.errors.Vocabulary`).
LOAD_CATALOG = "load a catalog for this domain with --add-catalog PATH"


def parse_inputs(pairs: Sequence[str]) -> dict[str, Any]:
    """``NAME=VALUE`` pairs → dict.

    VALUE is JSON when it parses as JSON, else the raw string. ``@PATH`` reads the value from a
    file, ``@-`` from standard input, for values too big for a command line:
    a ``.json`` file must hold JSON; any other file (and standard input) is read as VALUE is, JSON
    when it parses, else its text without one trailing line break. ``@@...`` is the literal value
    ``@...`` (one ``@`` dropped). Files are read as UTF-8.

    Raises:
        CommandLineError: a pair that is not ``NAME=VALUE``, a name given twice, ``@-`` twice, or
            a file that cannot be read, is not UTF-8 or (``.json``) is not JSON; each names the input
            and the file.
    """
    inputs: dict[str, Any] = {}
    read_stdin = False
    for pair in pairs:
        name, separator, raw = pair.partition("=")
        name = name.strip()
        if not separator or not name:
            raise CommandLineError(f"--input {pair!r} is not NAME=VALUE; e.g. --input smiles=CCO or --input smiles_list=@molecules.json")
        if name in inputs:
            raise CommandLineError(f"--input {name} is given twice")
        if raw.startswith("@@"):
            inputs[name] = _json_or_text(name, raw[1:])
        elif raw == "@-":
            if read_stdin:
                raise CommandLineError(f"--input {name}=@-: standard input is read by another --input already; give this value in a file (@PATH)")
            read_stdin = True
            inputs[name] = _json_or_text(name, _without_line_break(sys.stdin.read()))
        elif raw.startswith("@"):
            inputs[name] = _input_file(name, raw[1:])
        else:
            inputs[name] = _json_or_text(name, raw)
    return inputs


def _json_or_text(name: str, raw: str) -> Any:
    try:
        return json.loads(raw)
    except RecursionError:
        raise CommandLineError(f"--input {name}: the JSON value is nested too deeply") from None
    except ValueError:  # not JSON (or a number Python refuses to convert): the raw string
        return raw


def _without_line_break(text: str) -> str:
    """``text`` without one trailing line break: a file's last line ends with one, its value does not."""
    return text.removesuffix("\n").removesuffix("\r")


def _input_file(name: str, path: str) -> Any:
    """The value of ``--input NAME=@PATH`` (see :func:`parse_inputs`); ``~`` in PATH is the home
    directory, as a shell would expand it without the ``@`` before it."""
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise CommandLineError(f"--input {name}=@{path}: the file is not UTF-8 text (byte {error.start}); give a JSON or text file") from None
    except OSError as error:
        raise CommandLineError(
            f"--input {name}=@{path}: cannot read the file: {error.strerror or error} (write @@... for a value that starts with @)"
        ) from None
    if not path.lower().endswith(".json"):
        return _json_or_text(name, _without_line_break(text))
    try:
        return json.loads(text)
    except RecursionError:
        raise CommandLineError(f"--input {name}=@{path}: the JSON value is nested too deeply") from None
    except json.JSONDecodeError as error:
        raise CommandLineError(f"--input {name}=@{path}: not JSON at line {error.lineno}, column {error.colno}: {error.msg}") from None
    except ValueError as error:  # e.g. a number with more digits than Python converts
        raise CommandLineError(f"--input {name}=@{path}: not JSON Python can read: {error}") from None


def host_and_port(text: str) -> str:
    """argparse type: ``HOST:PORT`` (port 0: a free one), checked as CodeMode checks it."""
    from toolpath.kernel.codemode.options import parse_host_port

    try:
        parse_host_port(text, "the address")
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def positive_count(text: str) -> int:
    """argparse type: a whole number of at least 1."""
    return _whole_number(text, 1)


def non_negative_count(text: str) -> int:
    """argparse type: a whole number of at least 0."""
    return _whole_number(text, 0)


def _whole_number(text: str, minimum: int) -> int:
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if count < minimum:
        raise argparse.ArgumentTypeError(f"{count} is not at least {minimum}")
    return count


def positive_number(text: str) -> float:
    """argparse type: a positive, finite number (of seconds or milliseconds, as the option says)."""
    try:
        number = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (number > 0 and math.isfinite(number)):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive, finite number")
    return number


#: Environment variables of the kernel options (a token stays out of the command line, which
#: other users of the machine can read).
GATEWAY_URL_VARIABLE = "TOOLPATH_GATEWAY_URL"
GATEWAY_TOKEN_VARIABLE = "TOOLPATH_GATEWAY_TOKEN"


def code_mode_options(arguments: argparse.Namespace) -> dict[str, Any]:
    """The :class:`toolpath.kernel.CodeMode` options of ``--gateway-url``, ``--kernel-name`` and ``--bridge-*``
    (and ``$TOOLPATH_GATEWAY_URL``, ``$TOOLPATH_GATEWAY_TOKEN``); empty for kernels on this machine.

    Raises:
        CommandLineError: a gateway token without a gateway URL.
    """
    options: dict[str, Any] = {}
    gateway_url = arguments.gateway_url or os.environ.get(GATEWAY_URL_VARIABLE)
    token = os.environ.get(GATEWAY_TOKEN_VARIABLE)
    if gateway_url:
        options["gateway_url"], options["gateway_token"] = gateway_url, token or None
    elif token:
        raise CommandLineError(
            f"${GATEWAY_TOKEN_VARIABLE} is set but no gateway is: give --gateway-url (or ${GATEWAY_URL_VARIABLE}), or unset the token to run kernels on this machine"
        )
    if arguments.kernel_name:
        options["kernel_name"] = arguments.kernel_name
    if arguments.bridge_address:
        options["bridge_address"] = arguments.bridge_address
    if arguments.bridge_listen:
        options["bridge_listen"] = arguments.bridge_listen
    if arguments.bridge_certificate:
        options["bridge_certificate"] = tuple(arguments.bridge_certificate)
    return options


def add_command(
    commands: argparse._SubParsersAction, name: str, help_text: str, handler: Callable[[argparse.Namespace], int], examples: str, *, catalogs: bool = True
) -> argparse.ArgumentParser:
    """The sub-parser of the verb ``name``: ``help_text`` is its help and description, ``examples``
    follow its options; it takes ``--json`` and, unless ``catalogs`` is false, the catalog options
    (:func:`add_catalog_options`). ``handler`` runs it."""
    sub = commands.add_parser(name, help=help_text, description=help_text, epilog=examples, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub.set_defaults(handler=handler)
    sub.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    if catalogs:
        add_catalog_options(sub)
    return sub


def add_catalog_options(sub: argparse.ArgumentParser) -> None:
    """``--catalog`` and ``--add-catalog``: the catalogs a verb loads (see :func:`catalog_paths`)."""
    sub.add_argument(
        "--catalog",
        action="append",
        default=[],
        metavar="PATH",
        help=f"a catalog file (YAML or JSON) to load instead of the shipped ones and those ${CATALOGS_VARIABLE} lists; repeatable",
    )
    sub.add_argument(
        "--add-catalog",
        action="append",
        default=[],
        metavar="PATH",
        help=f"a catalog file to load as well; repeatable (${CATALOGS_VARIABLE}, separated by '{os.pathsep}', adds files the same way)",
    )


def add_task_options(sub: argparse.ArgumentParser) -> None:
    """``--step``, ``--input`` and ``--have``: a task's parts, its inputs (:func:`parse_inputs`) and the states held."""
    sub.add_argument(
        "--step",
        action="append",
        default=[],
        metavar="TEXT",
        help="one part of the task, in words, instead of TASK; repeatable, in order (all are planned together)",
    )
    sub.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a tool parameter value; VALUE is parsed as JSON when it parses, else taken as a string; @FILE reads it from a file (a .json file must hold JSON), @- from standard input, @@... is a value starting with @; repeatable",
    )
    sub.add_argument("--have", action="append", default=[], metavar="TOKEN", help="a state already held; repeatable")
    sub.add_argument(
        "--partial",
        action="store_true",
        help=f"go on with the parts of the task that were understood when others were not (warning about those); without it such a task exits {PARTS_NOT_UNDERSTOOD_STATUS} before anything runs",
    )


#: The exit status of a task with a part not understood (see :class:`toolpath.planner.tasks.task.PartsNotUnderstoodError`).
PARTS_NOT_UNDERSTOOD_STATUS = 3
#: How a command-line user runs the parts understood of such a task.
RUN_ANYWAY = "give --partial to go on with the parts understood"


def add_kernel_options(sub: argparse.ArgumentParser) -> None:
    """Where kernels run: a gateway, a kernelspec and the bridge back to this process (see :func:`code_mode_options`)."""
    where = sub.add_argument_group("where kernels run (default: this machine)")
    where.add_argument(
        "--gateway-url",
        metavar="URL",
        help=f"run kernels on this Jupyter Kernel Gateway or Enterprise Gateway (default ${GATEWAY_URL_VARIABLE}); its token is read from ${GATEWAY_TOKEN_VARIABLE}",
    )
    where.add_argument(
        "--kernel-name",
        metavar="NAME",
        help="start kernels from this kernelspec: the gateway's, or an installed one (its kernel provisioner decides where it runs)",
    )
    where.add_argument(
        "--bridge-address",
        type=host_and_port,
        metavar="HOST:PORT",
        help="where kernels on other hosts reach this process's host tools, over TLS (default 127.0.0.1 and a free port)",
    )
    where.add_argument(
        "--bridge-listen",
        type=host_and_port,
        metavar="HOST:PORT",
        help="where the bridge listens, when it differs from --bridge-address (e.g. 0.0.0.0:7443 behind a Kubernetes Service)",
    )
    where.add_argument(
        "--bridge-certificate",
        nargs=2,
        metavar=("CERT", "KEY"),
        help="PEM certificate and key for the bridge's TLS (default: a self-signed certificate made at start)",
    )


def emit_json(payload: dict) -> None:
    print(json.dumps(payload, indent=2, ensure_ascii=False, default=str))


def indent(text: str, prefix: str = "    ") -> str:
    return textwrap.indent(text.rstrip("\n"), prefix)


def catalog_paths(arguments: argparse.Namespace) -> list[Path]:
    """The catalogs the command line names: ``--catalog``, else the shipped ones and
    ``TOOLPATH_CATALOGS``; then ``--add-catalog``."""
    from toolpath.planner.tasks.workspace import resolve_catalog_paths

    return resolve_catalog_paths(arguments.catalog, arguments.add_catalog)


def open_workspace(arguments: argparse.Namespace) -> Workspace:
    """A workspace on the catalogs the command line names (the planner loads here, not at start:
    a command that embeds has started loading its model first, see :func:`prepare_embedding_model`).
    It records nothing itself: each command records its task once
    (:class:`toolpath.planner.interfaces.cli.recording.CommandRecord`)."""
    from toolpath.planner.tasks.workspace import Workspace

    workspace = Workspace.open(catalog_paths(arguments))
    workspace.recorder = None
    return workspace


def prepare_embedding_model() -> None:
    """Start loading the embedding model in a thread: it overlaps loading the catalogs and the
    search code, on another core."""
    from toolpath.planner.search.embedding import default_embedder

    default_embedder().prepare()


def prepare_task_reading() -> None:
    """:func:`prepare_embedding_model`, and start loading the detector of a task's language
    (:func:`toolpath.planner.tasks.language.prepare`): for the commands that plan a task in words."""
    from toolpath.planner.tasks.language import prepare

    prepare_embedding_model()
    prepare()


def error_payload(error: ToolpathError, message: str) -> dict[str, Any]:
    """``--json``'s object for a refusal: ``error`` (the message), and what the error knows besides."""
    from toolpath.planner.planning.plans import NoPlanError
    from toolpath.planner.tasks.task import PartsNotUnderstoodError, UnboundParametersError

    if isinstance(error, NoPlanError):
        return {**error.to_dict(), "error": message}
    if isinstance(error, PartsNotUnderstoodError):
        task_plan = error.task_plan.to_dict()
        return {"error": message, "exit_status": PARTS_NOT_UNDERSTOOD_STATUS, **{key: task_plan[key] for key in ("task", "steps", "parts")}}
    if isinstance(error, UnboundParametersError):
        return {"error": message, "input_options": [option.to_dict() for option in error.options]}
    return {"error": message}


def in_command_terms(error: ToolpathError, command: str) -> str:
    """The error's message, its advice naming only options ``command`` accepts."""
    from toolpath.planner.tasks.task import PartsNotUnderstoodError, UnboundParametersError

    if isinstance(error, PartsNotUnderstoodError):
        return error.explanation(RUN_ANYWAY)
    if isinstance(error, UnboundParametersError):  # raised by run, which takes --input
        # What the words did not give, and why: a person rephrases rather than passes an input they cannot know.
        reasons = "; ".join(f"{parameter.parameter}: {parameter.why}" for parameter in error.unbound if parameter.why)
        said = f" (the words did not give them: {reasons})" if reasons else ""
        if not error.options:
            return (
                "the plan needs inputs that were not given: "
                + "; ".join(f"pass --input {parameter.parameter}=VALUE ({parameter.type}, for {parameter.tool})" for parameter in error.unbound)
                + said
            )
        return "the plan needs inputs that were not given: " + input_options_text(error.options) + said
    return error.message(Vocabulary(load_catalog=LOAD_CATALOG, give_state=lambda state, names: _how_to_give(command, state, names)))


def input_options_text(options: Sequence[InputOption]) -> str:
    """``pass --input smiles=VALUE (str, for parse_molecule) for the plan ...; or, for the plan ..., pass ...``."""
    from toolpath.planner.tasks.task import describe_options

    return describe_options(
        options,
        lambda option: "pass " + " ".join(f"--input {name}=VALUE ({option.parameters[name][0]}, for {option.parameters[name][1]})" for name in option.names),
    )


def _how_to_give(command: str, state: str, names: Sequence[str]) -> str:
    """How the user of ``command`` gives an input state that the inputs ``names`` carry."""
    hold = f"hold it with --have {state}"
    inputs = " or ".join(f"--input {name}=VALUE" for name in names)
    if not inputs:
        return hold
    if command in ("cell", "run"):
        return f"pass {inputs} (or {hold})"
    # plan and graph plan over states: they take held states, not values.
    return f"{hold} (to give its value instead: toolpath cell or run with {inputs})"
