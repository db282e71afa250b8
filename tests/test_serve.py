"""``toolpath serve`` driven by the MCP SDK's own client over stdio: a real server subprocess."""

import asyncio
import base64
import hashlib
import importlib.metadata
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx2
import pytest
import yaml
from conftest import wait_until_stored
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from toolpath.kernel.sandbox.provisioner import SandboxPolicy, sandbox_problem
from toolpath.planner.interfaces.server import MCP_CLIENT, ServeError, ToolpathServer, kernel_placement, read_tokens
from toolpath.planner.planning.plans import NoPlanError
from toolpath.planner.tasks.workspace import Workspace

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
# A 1x1 PNG, shown by a cell through IPython.display.
PIXEL = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC")


def _nested(depth):
    """A list ``depth`` lists deep: ``[[[...]]]``."""
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def served(home):
    return Client(
        StdioServerParameters(
            command=sys.executable, args=["-m", "toolpath.planner.interfaces.cli", "serve"], env={**os.environ, "TOOLPATH_HOME": str(home)}, cwd=str(ROOT)
        )
    )


def test_an_agent_searches_plans_runs_follows_up_and_restarts_through_the_server(tmp_path):
    async def scenario():
        async with served(tmp_path / "home") as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {"search_skills", "plan_task", "run_task", "execute", "restart", "close_session", "list_variables", "session_overview"} <= names

            search = await client.call_tool("search_skills", {"query": "parse a SMILES string into a molecule", "k": 3})
            assert not search.is_error and search.structured_content["hits"][0]["name"] in {"parse_molecule", "chemistry.molecule_parsed"}

            planned = await client.call_tool(
                "plan_task", {"task": ["identify the functional groups of this molecule", "check Lipinski's rule of five"], "inputs": {"smiles": "CCO"}}
            )
            assert not planned.is_error
            assert [step["tool"] for step in planned.structured_content["plan"]["steps"]] == [
                "parse_molecule",
                "identify_functional_groups",
                "compute_descriptors",
            ]
            # A long input is cut short in the cell the model reads, and whole in the cell that runs.
            chain = "C" * 1000
            long_input = await client.call_tool("plan_task", {"task": "parse this molecule", "inputs": {"smiles": chain}})
            assert "characters, cut short here" in long_input.content[0].text and chain not in long_input.content[0].text
            assert f"smiles = {chain!r}" in long_input.structured_content["cell"]

            run = await client.call_tool("run_task", {"task": "parse this molecule", "inputs": {"smiles": "CCO"}, "session_id": "agent-1"})
            assert not run.is_error and run.structured_content["result"]["status"] == "ok"
            # The model is told which variables the run made, so its follow-up names one that exists.
            assert run.content[0].text.endswith("Variables made: molecule (chemistry.molecule_parsed)")
            assert run.structured_content["variables"] == {"molecule": "chemistry.molecule_parsed"}

            follow_up = await client.call_tool("execute", {"code": "molecule['formula']", "session_id": "agent-1"})
            assert follow_up.content[0].text == "Out[2]: 'C2H6O'"
            assert not follow_up.is_error
            # A cell that fails is an error result for the client, with the cell's own structured content.
            failing = await client.call_tool("execute", {"code": "1/0", "session_id": "agent-1"})
            assert failing.is_error and failing.structured_content["status"] == "error"
            assert failing.structured_content["error"]["ename"] == "ZeroDivisionError" and "ZeroDivisionError" in failing.content[0].text
            overview = await client.call_tool("session_overview", {"session_id": "agent-1"})
            assert overview.structured_content["artifacts"] == {"molecule": "chemistry.molecule_parsed"}
            other = await client.call_tool("list_variables", {})  # the default session is another kernel
            assert "molecule" not in other.structured_content["variables"]

            image = await client.call_tool(
                "execute", {"code": f"from IPython.display import Image, display\ndisplay(Image(data={PIXEL!r}))", "session_id": "agent-1"}
            )
            assert [block.type for block in image.content] == ["text", "image"] and base64.b64decode(image.content[1].data) == PIXEL

            unmatched = await client.call_tool("plan_task", {"task": "book a flight to Rome"})
            assert unmatched.is_error and "no catalog can serve the task 'book a flight to Rome'" in unmatched.content[0].text
            # Advice an MCP client can follow: who can load a catalog, and the tool argument for an input.
            assert "ask this server's operator to load a catalog for this domain" in unmatched.content[0].text
            missing = await client.call_tool("run_task", {"task": "cluster these molecules by structural similarity"})
            assert missing.is_error and "the plan needs inputs that were not given: give the inputs {'smiles_list': ...}" in missing.content[0].text
            assert "--input" not in missing.content[0].text
            unknown_input = await client.call_tool("run_task", {"task": "parse this molecule", "inputs": {"not an identifier": 1}})
            assert unknown_input.is_error
            escaped = await client.call_tool("plan_task", {"task": "parse this \x1b[2J molecule"})
            assert escaped.is_error and "the task holds the control character U+001B at character 11" in escaped.content[0].text
            nested = await client.call_tool("plan_task", {"task": "parse this molecule", "inputs": {"smiles": _nested(120)}})
            assert nested.is_error and "input 'smiles' is nested more than 100 levels deep" in nested.content[0].text

            await client.call_tool("restart", {"session_id": "agent-1"})
            gone = await client.call_tool("execute", {"code": "'molecule' in globals()", "session_id": "agent-1"})
            assert gone.content[0].text.endswith("False")

    asyncio.run(scenario())


def test_the_server_names_its_version_and_every_tool_declares_the_output_its_results_follow(tmp_path):
    import jsonschema  # here, not at the top: its import takes 1.5 s in every worker that collects this file

    async def scenario():
        async with served(tmp_path / "home") as client:
            assert client.server_info.name == "toolpath" and client.server_info.version == importlib.metadata.version("toolpath")
            schemas = {tool.name: tool.output_schema for tool in (await client.list_tools()).tools}
            assert all(schema is not None for schema in schemas.values()), schemas

            # The SDK's client checks each result that is not an error against its tool's outputSchema
            # (raising when one does not follow it); checked here as well, so the test says it.
            report = tmp_path / "report.md"
            report.write_text("a file write_report would replace: its run pauses for approval")
            paused_task = {
                "task": "load the table and write a report",
                "inputs": {"path": str(ROOT / "catalogs" / "tabular" / "data" / "compounds.csv"), "tabular.write_report.path": str(report)},
                "on_approval": "pause",
                "session_id": "approvals",
            }
            calls = [
                ("search_skills", {"query": "parse a SMILES string", "k": 2}),
                ("plan_task", {"task": "parse this molecule", "inputs": {"smiles": "CCO"}}),
                ("run_task", {"task": "parse this molecule", "inputs": {"smiles": "CCO"}}),
                ("run_task", paused_task),
                ("resume_task", {"approved": True, "session_id": "approvals"}),
                ("execute", {"code": "print('hi'); molecule['formula']"}),
                ("list_variables", {}),
                ("session_overview", {}),
                ("restart", {}),
                ("close_session", {}),
            ]
            for name, arguments in calls:
                result = await client.call_tool(name, arguments)
                assert not result.is_error and result.structured_content, (name, result.content)
                jsonschema.validate(result.structured_content, schemas[name])
            assert set(schemas) == {name for name, _ in calls}
            # A failed cell is an error result the client does not check; its content follows the schema all the same.
            failed = await client.call_tool("execute", {"code": "1/0"})
            assert failed.is_error
            jsonschema.validate(failed.structured_content, schemas["execute"])

    asyncio.run(scenario())


def test_an_mcp_client_is_told_how_to_give_a_missing_input_in_the_tools_arguments():
    refused = NoPlanError(["trip.flights_found"], {"trip.flights_found": ["trip.request_given"]}, given_by={"trip.request_given": ["request"]})
    told = refused.message(MCP_CLIENT)
    assert 'trip.request_given is given by the user: pass it in the tool\'s inputs argument, e.g. {"request": "..."}' in told
    assert "--" not in told and "held" not in told


def test_a_session_comes_back_in_the_next_server(tmp_path):
    async def scenario():
        async with served(tmp_path / "home") as client:
            await client.call_tool("run_task", {"task": "parse this molecule", "inputs": {"smiles": "CCO"}, "session_id": "agent-2"})
        async with served(tmp_path / "home") as client:
            overview = await client.call_tool("session_overview", {"session_id": "agent-2"})
            assert overview.structured_content["held"] == ["chemistry.molecule_parsed"]
            follow_up = await client.call_tool("run_task", {"task": "check Lipinski's rule of five for it", "session_id": "agent-2"})
            assert follow_up.structured_content["result"]["status"] == "ok"
            assert [step["tool"] for step in follow_up.structured_content["plan"]["steps"]] == ["compute_descriptors"]

    asyncio.run(scenario())


def test_a_second_server_on_one_home_gets_an_error_result_naming_the_server_that_holds_the_session(tmp_path):
    async def scenario():
        async with served(tmp_path / "home") as first, served(tmp_path / "home") as second:
            held = await first.call_tool("execute", {"code": "mine = 1", "session_id": "shared"})
            assert not held.is_error
            refused = await second.call_tool("execute", {"code": "mine = 2", "session_id": "shared"})
            text = refused.content[0].text
            assert refused.is_error and "session 'shared' is in use by process" in text and "use another session id" in text
            assert (await first.call_tool("execute", {"code": "print(mine)", "session_id": "shared"})).content[0].text.startswith("1")

    asyncio.run(scenario())


def test_the_catalogs_and_the_state_graph_are_resources(tmp_path):
    async def scenario():
        async with served(tmp_path / "home") as client:
            resources = (await client.list_resources()).resources
            assert {"toolpath://graph", "toolpath://catalogs/0"} <= {str(resource.uri) for resource in resources}
            # Catalogs are named by domain: no path of the server's files reaches a client.
            assert {resource.name for resource in resources} >= {"catalog chemistry", "catalog tabular"}
            assert not any(str(ROOT) in f"{resource.name} {resource.description}" for resource in resources)
            graph = (await client.read_resource("toolpath://graph")).contents[0].text
            catalog = (await client.read_resource("toolpath://catalogs/0")).contents[0].text
            return graph, catalog

    graph, catalog = asyncio.run(scenario())
    assert graph.startswith("flowchart LR") and '"chemistry.parse_molecule"]' in graph and '("chemistry.molecule_parsed")' in graph
    assert "parse_molecule" in catalog


def _sha256(token):
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


@pytest.fixture()
def serve_over_http(tmp_path, listening_server):
    """``serve_over_http(*options)``: ``toolpath serve --http`` on a free loopback port with two
    users' tokens (Alice's plain in the tokens file, Bob's hashed) and extra options; returns its
    MCP URL and ``{user: token}``."""

    def start(*options):
        tokens = {"alice-" + "a" * 32: "alice", "bob-" + "b" * 32: "bob"}
        tokens_file = tmp_path / "tokens.json"
        tokens_file.write_text(json.dumps({token if user == "alice" else _sha256(token): user for token, user in tokens.items()}))
        port = listening_server(
            lambda port: [
                sys.executable,
                "-m",
                "toolpath.planner.interfaces.cli",
                "serve",
                "--http",
                f"127.0.0.1:{port}",
                "--tokens",
                str(tokens_file),
                *options,
            ],
            cwd=str(ROOT),
            env={**os.environ, "TOOLPATH_HOME": str(tmp_path / "home")},
        )
        return f"http://127.0.0.1:{port}/mcp", {user: token for token, user in tokens.items()}

    return start


@pytest.fixture()
def http_server(serve_over_http):
    """``toolpath serve --http`` on a free loopback port, with two users' tokens."""
    return serve_over_http()


def over_http(url, token=None, **callbacks):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=120)), **callbacks)


def _serve_command(port, *options):
    return [sys.executable, "-m", "toolpath.planner.interfaces.cli", "serve", "--http", f"127.0.0.1:{port}", *options]


def test_over_http_the_server_says_where_it_listens_once_ready_and_nothing_a_user_need_not_read(tmp_path):
    tokens_file = tmp_path / "tokens.json"
    tokens_file.write_text(json.dumps({"alice-" + "a" * 32: "alice"}))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = tmp_path / "stderr.txt"
    with open(log, "wb") as stderr:
        process = subprocess.Popen(
            _serve_command(port, "--tokens", str(tokens_file), "--kernels", "plain"),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            cwd=str(ROOT),
            env={**os.environ, "TOOLPATH_HOME": str(tmp_path / "home")},
        )
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        deadline = time.monotonic() + 120  # a guard against waiting forever, not a time the test measures
        while f"toolpath serve: listening on {url}\n" not in log.read_text():
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)

        async def search():
            # Said once it accepts: a client connects at once.
            async with over_http(url, "alice-" + "a" * 32) as client:
                return await client.call_tool("search_skills", {"query": "parse a SMILES string", "k": 1})

        assert not asyncio.run(search()).is_error
    finally:
        process.terminate()
        process.wait(timeout=60)
    # No SDK notice about token audiences (the tokens file's tokens are this server's) and no
    # library debug notes (bm25s building its index).
    # toolpath's own notes of a first start (a model export, catalog texts embedded) show once.
    notes = ("toolpath: exporting the embedding model", "toolpath: embedding ")
    lines = [line for line in log.read_text().splitlines() if not line.startswith(notes)]
    assert lines == [f"toolpath serve: listening on {url}"], lines


def test_over_http_a_port_in_use_is_refused_before_loading_naming_the_process_that_holds_it(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        # A catalog that does not exist: the address is checked before any catalog is read.
        refused = subprocess.run(
            _serve_command(port, "--no-auth", "--catalog", str(tmp_path / "missing.yaml")),
            capture_output=True,
            text=True,
            cwd=str(ROOT),
            env={**os.environ, "TOOLPATH_HOME": str(tmp_path / "home")},
            timeout=300,
        )
    assert refused.returncode == 2
    assert refused.stderr.startswith(f"toolpath: cannot serve at 127.0.0.1:{port}: the port is already in use by process {os.getpid()} ("), refused.stderr
    assert "stop that process, or give --http another port" in refused.stderr
    assert "Errno" not in refused.stderr and "Traceback" not in refused.stderr and "missing.yaml" not in refused.stderr


@pytest.mark.skipif(bool(sandbox_problem()), reason=sandbox_problem() or "sandboxed kernels run here")
def test_over_http_users_code_is_sandboxed_unless_the_operator_says_plain(serve_over_http, tmp_path, monkeypatch):
    monkeypatch.setenv("SERVER_SECRET", "server-private-value")
    attack = "import os\n(os.path.exists({tokens!r}), os.environ.get('SERVER_SECRET'))"

    # Each server gets its own session: the first still holds its session while it runs.
    async def alice_attacks(url, tokens, session_id):
        async with over_http(url, tokens["alice"]) as client:
            result = await client.call_tool("execute", {"code": attack.format(tokens=str(tmp_path / "tokens.json")), "session_id": session_id})
            return result.structured_content["result"]

    url, tokens = serve_over_http()
    assert asyncio.run(alice_attacks(url, tokens, "sandboxed")) == [False, None]
    url, tokens = serve_over_http("--kernels", "plain")
    assert asyncio.run(alice_attacks(url, tokens, "plain")) == [True, "server-private-value"]


def test_multi_user_serve_refuses_plain_kernels_it_cannot_sandbox_unless_told(monkeypatch):
    monkeypatch.setattr("toolpath.planner.interfaces.server.sandbox_problem", lambda: "bubblewrap cannot set up a sandbox here: no user namespaces")
    with pytest.raises(
        ServeError, match="users' kernels run sandboxed .* no user namespaces. Run kernels on a gateway \\(--gateway-url\\), or give --kernels plain"
    ):
        kernel_placement("auto", True, {})
    assert kernel_placement("plain", True, {}) == {} and kernel_placement("auto", False, {}) == {}
    assert kernel_placement("auto", True, {"gateway_url": "http://gateway:8888"}) == {}
    with pytest.raises(ServeError, match="--sandbox-read, --sandbox-network and --sandbox-limit apply to sandboxed kernels"):
        kernel_placement("plain", True, {}, SandboxPolicy(network=True))


def test_sandbox_limits_are_read_from_the_command_line_with_what_to_write_when_wrong():
    from toolpath.planner.interfaces.cli.serve import _sandbox_limits
    from toolpath.planner.interfaces.cli.shared import CommandLineError

    assert _sandbox_limits(["memory_bytes=1GiB", "processes=64", "cpu_seconds=none", "disk_bytes=512"]) == {
        "memory_bytes": 2**30,
        "processes": 64,
        "cpu_seconds": None,
        "disk_bytes": 512,
    }
    with pytest.raises(CommandLineError, match="the field is one of memory_bytes, cpu_seconds, processes, open_files, disk_bytes"):
        _sandbox_limits(["memory=1GiB"])
    with pytest.raises(CommandLineError, match="give a whole number, or none"):
        _sandbox_limits(["processes=1GiB"])
    with pytest.raises(CommandLineError, match=r"give a whole number \(or with KiB, MiB or GiB\)"):
        _sandbox_limits(["memory_bytes=-5"])


def test_over_http_each_user_has_their_own_sessions_and_cannot_reach_anothers(http_server):
    url, tokens = http_server

    async def scenario():
        async with over_http(url, tokens["alice"]) as alice, over_http(url, tokens["bob"]) as bob:
            run = await alice.call_tool("run_task", {"task": "parse this molecule", "inputs": {"smiles": "CCO"}, "session_id": "lab"})
            assert not run.is_error and run.structured_content["result"]["status"] == "ok"
            # Bob's "lab" is his own session, not a refusal and not Alice's kernel.
            theirs = await bob.call_tool("execute", {"code": "'molecule' in globals()", "session_id": "lab"})
            assert not theirs.is_error and theirs.content[0].text.endswith("False")
            await bob.call_tool("execute", {"code": "owner = 'bob'", "session_id": "lab"})
            follow_up = await alice.call_tool("execute", {"code": "molecule['formula'], 'owner' in globals()", "session_id": "lab"})
            assert follow_up.content[0].text == "Out[2]: ('C2H6O', False)"

            # The id that was Bob's default session is now just one of Alice's.
            claimed = await alice.call_tool("execute", {"code": "planted = 'alice'", "session_id": "main:bob"})
            assert not claimed.is_error
            default = await bob.call_tool("execute", {"code": "'planted' in globals()"})
            assert not default.is_error and default.content[0].text.endswith("False")

            # Whether Bob has a session of an id tells Alice nothing: her answers are the same.
            await bob.call_tool("execute", {"code": "secret = 1", "session_id": "bobs-notes"})
            answers = []
            for session_id in ("bobs-notes", "nobodys-notes"):
                for tool, arguments in (("list_variables", {}), ("restart", {}), ("execute", {"code": "secret"})):
                    result = await alice.call_tool(tool, {**arguments, "session_id": session_id})
                    answers.append((result.is_error, [block.text for block in result.content]))
            assert answers[:3] == answers[3:]
            kept = await bob.call_tool("execute", {"code": "secret", "session_id": "bobs-notes"})
            assert kept.content[0].text == "Out[2]: 1"
        async with httpx2.AsyncClient() as anonymous:  # no token: refused before any MCP message is read
            response = await anonymous.post(
                url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers={"Accept": "application/json, text/event-stream"}
            )
            assert response.status_code == 401
        async with httpx2.AsyncClient() as forger:
            response = await forger.post(
                url,
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                headers={"Accept": "application/json, text/event-stream", "Authorization": "Bearer " + "x" * 40},
            )
            assert response.status_code == 401

    asyncio.run(scenario())


def test_over_http_a_call_waiting_for_approval_is_answered_only_by_the_user_who_made_it(serve_over_http, tmp_path):
    """On the 2026-07-28 protocol a call that asks returns an InputRequiredResult whose
    request_state lets the client come back with the answer. Bob, holding Alice's request_state,
    cannot answer for her: her file stays, and her own "no" is what the audit log keeps."""
    from mcp_types import ElicitResult, InputRequiredResult

    url, tokens = serve_over_http("--kernels", "plain")
    report = tmp_path / "report.md"
    report.write_text("alice's notes")
    compounds = ROOT / "catalogs" / "tabular" / "data" / "compounds.csv"
    task = {"task": "load the table and write a report", "inputs": {"path": str(compounds), "tabular.write_report.path": str(report)}, "session_id": "lab"}

    def answer(approve, note):
        return {"approval": ElicitResult(action="accept", content={"approve": approve, "note": note})}

    async def unused(context, params):  # declares elicitation; the answers below are given by hand
        raise AssertionError("the test answers each InputRequiredResult itself")

    async def scenario():
        async with over_http(url, tokens["alice"], elicitation_callback=unused) as alice, over_http(url, tokens["bob"], elicitation_callback=unused) as bob:
            waiting = await alice.session.call_tool("run_task", task, allow_input_required=True)
            assert isinstance(waiting, InputRequiredResult), waiting
            assert f"it would write over {report}" in waiting.input_requests["approval"].params.message
            for session_id in ("lab", "elsewhere"):
                with pytest.raises(MCPError, match="Invalid or expired requestState"):
                    await bob.session.call_tool(
                        "run_task", {**task, "session_id": session_id}, request_state=waiting.request_state, input_responses=answer(True, "bob says yes")
                    )
            assert report.read_text() == "alice's notes"
            denied = await alice.session.call_tool("run_task", task, request_state=waiting.request_state, input_responses=answer(False, "keep my notes"))
            assert denied.is_error and "keep my notes" in denied.content[0].text
            assert report.read_text() == "alice's notes"
            overview = await alice.call_tool("session_overview", {"session_id": "lab"})
            assert [(row["decision"], row["note"], row["decided_by"]) for row in overview.structured_content["approvals"]] == [
                ("denied", "keep my notes", "alice")
            ]
            spent = await alice.session.call_tool("run_task", task, request_state=waiting.request_state, input_responses=answer(True, ""))
            assert spent.is_error and report.read_text() == "alice's notes"
            bobs = await bob.call_tool("session_overview", {"session_id": "lab"})
            assert bobs.structured_content["approvals"] == []

    asyncio.run(scenario())


def test_two_replicas_on_one_postgres_store_refuse_a_busy_session_and_take_it_over_when_one_dies(postgres_url, serve_over_http, listening_server):
    """Two ``toolpath serve --http`` processes with ``--store postgresql://...``: the session Alice
    drives on the first is busy on the second; once the first is killed and its lease has run
    out, the second takes the session over with its variables."""
    # postgres_url comes first so its database is dropped after the servers stop, as in a real
    # deployment: dropped under a running server, it held that server's shutdown for 20 s.
    lease = "2"
    first, tokens = serve_over_http("--kernels", "plain", "--store", postgres_url, "--session-lease", lease)
    second, _ = serve_over_http("--kernels", "plain", "--store", postgres_url, "--session-lease", lease)
    first_process = listening_server.processes[0]

    async def scenario():
        async with over_http(first, tokens["alice"]) as alice:
            made = await alice.call_tool("execute", {"code": "notes = ['from the first replica']", "session_id": "lab"})
            assert not made.is_error, made.content[0].text
        async with over_http(second, tokens["alice"]) as alice:
            busy = await alice.call_tool("execute", {"code": "notes", "session_id": "lab"})
            # On one host the first replica's process is seen running (across hosts its lease decides).
            assert busy.is_error and "is in use by process" in busy.content[0].text and "which is still running" in busy.content[0].text
            first_process.kill()
            first_process.wait(timeout=60)
            moved = await alice.call_tool("execute", {"code": "notes", "session_id": "lab"})
            assert not moved.is_error, moved.content[0].text
            assert moved.content[0].text.endswith("['from the first replica']")
            assert "took it over" in moved.structured_content["notice"] and "Restored 1 variable(s)" in moved.structured_content["notice"]

    asyncio.run(scenario())


@pytest.mark.parametrize("snapshot", ["after-each-cell", "debounce"])
def test_a_replica_killed_just_after_a_cell_finished_loses_it_only_without_snapshots_after_each_cell(postgres_url, serve_over_http, listening_server, snapshot):
    """Issue 50: the client is told a cell succeeded, then its replica is SIGKILLed 0.3 s later
    (inside the 1.5 s debounce). With ``--snapshot after-each-cell`` (the default on PostgreSQL) the
    other replica has the variable; with ``debounce`` it is lost (so the test can tell them apart)."""
    first, tokens = serve_over_http("--kernels", "plain", "--store", postgres_url, "--session-lease", "2", "--snapshot", snapshot)
    second, _ = serve_over_http("--kernels", "plain", "--store", postgres_url, "--session-lease", "2")
    first_process = listening_server.processes[0]

    async def scenario():
        async with over_http(first, tokens["alice"]) as alice:
            assert not (await alice.call_tool("execute", {"code": "kept = 'earlier'", "session_id": "lab"})).is_error
            await asyncio.sleep(2.5)  # the first cell's snapshot is written either way
            finished = await alice.call_tool("execute", {"code": "finished = 'told the client'", "session_id": "lab"})
            assert not finished.is_error, finished.content[0].text
        await asyncio.sleep(0.3)
        first_process.kill()
        first_process.wait(timeout=60)
        async with over_http(second, tokens["alice"]) as alice:
            for _ in range(40):  # until the dead replica's lease runs out
                moved = await alice.call_tool("execute", {"code": "[kept, globals().get('finished')]", "session_id": "lab"})
                if not moved.is_error:
                    return moved.content[0].text
                await asyncio.sleep(0.25)
            raise AssertionError(moved.content[0].text)

    expected = "['earlier', 'told the client']" if snapshot == "after-each-cell" else "['earlier', None]"
    assert asyncio.run(scenario()).endswith(expected)


def test_serve_refuses_a_store_it_cannot_use_as_it_starts_in_one_line(tmp_path):
    for store, said in (
        ("mysql://root:hunter2@db/toolpath", "mysql:// is not a store toolpath can use"),
        ("postgresql://u:hunter2@127.0.0.1:9/db", "cannot connect to it"),
    ):
        started = subprocess.run(
            [sys.executable, "-m", "toolpath.planner.interfaces.cli", "serve", "--store", store],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "TOOLPATH_HOME": str(tmp_path / "home")},
            cwd=str(tmp_path),
        )
        assert started.returncode == 2 and started.stderr.startswith("toolpath: store ") and said in started.stderr, started.stderr
        assert "hunter2" not in started.stderr and "Traceback" not in started.stderr and list(tmp_path.iterdir()) == []


def test_serve_refuses_a_lease_too_short_as_it_reads_its_command_line():
    for lease, said in (
        ("0", "is not a positive, finite number"),
        ("0.5", "is shorter than the shortest lease, 1 s"),
        ("inf", "is not a positive, finite number"),
    ):
        started = time.monotonic()
        refused = subprocess.run(
            [sys.executable, "-m", "toolpath.planner.interfaces.cli", "serve", "--session-lease", lease], capture_output=True, text=True, timeout=120
        )
        assert refused.returncode == 2 and said in refused.stderr and "Traceback" not in refused.stderr, refused.stderr
        assert time.monotonic() - started < 10, "the refusal waited for something the server loads"


def test_eight_concurrent_clients_lose_or_cross_nothing(serve_over_http):
    # Eight live sessions of one user, all busy (and a budget that admits them whatever the machine).
    url, tokens = serve_over_http("--max-kernels-per-user", "8", "--max-tasks-per-user", "8", "--memory-budget", "64GiB")

    async def client_calls(number):
        async with over_http(url, tokens["alice"]) as client:
            outputs = []
            for call in range(50):
                result = await client.call_tool("execute", {"code": f"print('c{number}-{call}')", "session_id": f"worker-{number}"})
                outputs.append(result.content[0].text)
            return outputs

    async def scenario():
        return await asyncio.gather(*(client_calls(number) for number in range(8)))

    for number, outputs in enumerate(asyncio.run(scenario())):
        assert outputs == [f"c{number}-{call}" for call in range(50)]


def test_a_user_over_the_kernel_cap_gives_up_their_own_idle_kernel_which_comes_back(serve_over_http):
    url, tokens = serve_over_http("--max-kernels-per-user", "1")

    async def scenario():
        async with over_http(url, tokens["alice"]) as alice, over_http(url, tokens["bob"]) as bob:
            await bob.call_tool("execute", {"code": "kept = True"})  # the least recently used kernel
            await alice.call_tool("execute", {"code": "x = 41", "session_id": "one"})
            await alice.call_tool("execute", {"code": "y = 1", "session_id": "two"})  # stops "one", Alice's own
            back = await alice.call_tool("execute", {"code": "x + 1", "session_id": "one"})
            assert "max_kernels_per_user=1" in back.content[0].text and back.content[0].text.endswith("Out[1]: 42")
            untouched = await bob.call_tool("execute", {"code": "kept"})
            assert untouched.content[0].text == "Out[2]: True"

    asyncio.run(scenario())


def test_a_user_over_a_quota_gets_an_error_naming_it_and_another_user_is_served(serve_over_http):
    url, tokens = serve_over_http("--max-sessions-per-user", "2", "--max-tasks-per-user", "1", "--max-request-bytes", "100000")

    async def scenario():
        async with over_http(url, tokens["alice"]) as alice, over_http(url, tokens["bob"]) as bob:
            for session_id in ("one", "two"):
                assert not (await alice.call_tool("execute", {"code": "1", "session_id": session_id})).is_error
            third = await alice.call_tool("execute", {"code": "1", "session_id": "three"})
            assert third.is_error and "user 'alice' already has 2 sessions" in third.content[0].text and "--max-sessions-per-user 2" in third.content[0].text
            again = await alice.call_tool("execute", {"code": "'still here'", "session_id": "one"})
            assert again.content[0].text == "Out[2]: 'still here'"
            await alice.call_tool("execute", {"code": "closing = 'gone'", "session_id": "two"})
            assert not (await alice.call_tool("close_session", {"session_id": "two"})).is_error  # her place is free
            assert not (await alice.call_tool("execute", {"code": "1", "session_id": "three"})).is_error
            reopened = await alice.call_tool("execute", {"code": "'closing' in globals()", "session_id": "two"})
            assert reopened.is_error and "already has 2 sessions" in reopened.content[0].text
            await alice.call_tool("close_session", {"session_id": "three"})
            reopened = await alice.call_tool("execute", {"code": "'closing' in globals()", "session_id": "two"})
            assert reopened.content[0].text == "Out[1]: False"  # a new, empty session: nothing was restored
            for session_id in ("one", "two"):  # Bob's sessions are his own count
                assert not (await bob.call_tool("execute", {"code": "1", "session_id": session_id})).is_error

            long_cell = asyncio.create_task(alice.call_tool("execute", {"code": "import time\ntime.sleep(6)", "session_id": "one"}))
            await asyncio.sleep(2)  # the cell is running
            started = time.monotonic()
            busy = await alice.call_tool("plan_task", {"task": "parse this molecule", "session_id": "two"})
            assert busy.is_error and "--max-tasks-per-user 1" in busy.content[0].text and "wait for one to finish" in busy.content[0].text
            assert time.monotonic() - started < 2 and not long_cell.done()  # refused at once, not queued
            served = await bob.call_tool("execute", {"code": "'bob is served'", "session_id": "one"})
            assert served.content[0].text == "Out[2]: 'bob is served'"
            assert not (await long_cell).is_error
            assert not (await alice.call_tool("execute", {"code": "1", "session_id": "two"})).is_error  # her place is free again

        async with httpx2.AsyncClient(timeout=30) as http:
            headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {tokens['alice']}"}
            call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "execute", "arguments": {"code": "x = '" + "y" * 200_000 + "'"}}}
            response = await http.post(url, json=call, headers=headers)
            assert response.status_code == 413 and "over 100000 bytes" in response.text and "--max-request-bytes 100000" in response.text

    asyncio.run(scenario())


def test_hashed_tokens_are_read_and_malformed_ones_refused_with_what_to_write(tmp_path):
    token = "a-long-random-token-of-alice"
    hashed = subprocess.run(
        [sys.executable, "-m", "toolpath.planner.interfaces.cli", "serve", "--hash-token"],
        input=token + "\n",
        capture_output=True,
        text=True,
        cwd=str(ROOT),
        timeout=120,
    )
    assert hashed.returncode == 0 and hashed.stdout.strip() == _sha256(token)
    short = subprocess.run(
        [sys.executable, "-m", "toolpath.planner.interfaces.cli", "serve", "--hash-token"],
        input="short\n",
        capture_output=True,
        text=True,
        cwd=str(ROOT),
        timeout=120,
    )
    assert short.returncode != 0 and "fewer than 16" in short.stderr

    tokens_file = tmp_path / "tokens.json"
    tokens_file.write_text(json.dumps({_sha256(token): "alice", "b" * 20: "bob"}))
    assert read_tokens(str(tokens_file)) == {_sha256(token): "alice", "b" * 20: "bob"}
    for tokens, message in (
        (
            {"sha256:abc123": "alice"},
            "the token of user 'alice' starts with 'sha256:' but 6 characters follow, not 64 hex digits; write 'sha256:' and the token's SHA-256 hex digest, as `toolpath serve --hash-token` prints it",
        ),
        ({"sha256:" + "g" * 64: "alice"}, "not 64 hex digits"),
        ({token: "alice", _sha256(token): "mallory"}, "the same token is given twice"),
        ({"short": "bob"}, "shorter than 16 characters"),
    ):
        tokens_file.write_text(json.dumps(tokens))
        with pytest.raises(ServeError, match="tokens file") as refused:
            read_tokens(str(tokens_file))
        assert message in str(refused.value)


def test_a_catalog_resource_hides_secrets_in_its_servers_urls_and_arguments(tmp_path):
    path = tmp_path / "remote.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "domain": "remote",
                "mcp_servers": {
                    "search": {"url": "https://user:hunter2@search.example/mcp?api_key=sk-live-1&region=${REGION}"},
                    "git": {
                        "command": "npx",
                        "args": [
                            "-y",
                            "git-server",
                            "--token",
                            "ghp_secret1",
                            "--api-key=sk-secret2",
                            "--password",
                            "${GIT_PASSWORD}",
                            "-e",
                            "GITHUB_TOKEN=ghp_secret3",
                            "--repository",
                            "/srv/repo",
                            "--verbose",
                        ],
                    },
                    "proxy": {
                        "command": "npx",
                        "args": ["mcp-remote", "https://${PROXY_USER}:${PROXY_PASSWORD}@proxy.example/mcp", "--header", "Authorization: Bearer secret4"],
                    },
                },
                "states": [{"token": "remote.found", "description": "Something was found."}],
                "tools": [{"name": "search", "mcp_server": "search", "state_transition": {"produces": ["remote.found"]}}],
            },
            sort_keys=False,
        )
    )

    async def scenario():
        server = ToolpathServer(Workspace.open([path]), user_id="me", snapshot=False)
        try:
            async with Client(server.mcp) as client:
                return (await client.read_resource("toolpath://catalogs/0")).contents[0].text
        finally:
            await server.aclose()

    text = asyncio.run(scenario())
    served = yaml.safe_load(text)
    assert served["mcp_servers"]["search"]["url"] == "https://<hidden>@search.example/mcp?api_key=<hidden>&region=${REGION}"
    assert served["mcp_servers"]["git"]["args"] == [
        "-y",
        "git-server",
        "--token",
        "<hidden>",
        "--api-key=<hidden>",
        "--password",
        "${GIT_PASSWORD}",
        "-e",
        "GITHUB_TOKEN=<hidden>",
        "--repository",
        "/srv/repo",
        "--verbose",
    ]
    assert served["mcp_servers"]["proxy"]["args"] == [
        "mcp-remote",
        "https://${PROXY_USER}:${PROXY_PASSWORD}@proxy.example/mcp",
        "--header",
        "Authorization: <hidden>",
    ]
    assert not any(secret in text for secret in ("hunter2", "sk-live-1", "ghp_secret1", "sk-secret2", "ghp_secret3", "secret4"))
    assert served["tools"][0]["name"] == "search" and served["states"][0]["token"] == "remote.found"


# Attacks from a user's cells against a multi-user `toolpath serve --http` (issue 31): each must
# succeed where the operator chose plain kernels (so the test bites) and fail in the default,
# sandboxed kernels. Alice attacks; Bob, the server and the machine are the targets.

VICTIM_SECRET = "BOB-PRIVATE-7"
SERVER_SECRET = "server-private-value"


@pytest.fixture(scope="module", params=["plain", "sandboxed"])
def attacked_server(request, tmp_path_factory, module_listening_server):
    """``(placement, run, paths)``: a multi-user server with plain or sandboxed kernels (small
    limits), a catalog whose MCP server is reached through the bridge, and a secret in its
    environment; ``run(user, code)`` is a cell's structured result, ``paths`` the server's files."""
    if request.param == "sandboxed" and sandbox_problem():
        pytest.skip(sandbox_problem())
    directory = tmp_path_factory.mktemp(f"attacked-{request.param}")
    tokens = {"alice-" + "a" * 32: "alice", "bob-" + "b" * 32: "bob"}
    paths = {"tokens": directory / "tokens.json", "home": directory / "home", "catalog": directory / "mail.yaml", "marker": directory / "ran-in-the-server"}
    paths["tokens"].write_text(json.dumps(tokens))
    paged = str(ROOT / "tests" / "servers" / "paged_server.py")
    paths["catalog"].write_text(
        yaml.safe_dump(
            {
                "domain": "mail",
                "mcp_servers": {"paged": {"command": sys.executable, "args": [paged]}},
                "states": [{"token": "mail.counted", "description": "Words were counted.", "affordances": ["count the words of a text"]}],
                "tools": [
                    {
                        "name": "count_words",
                        "description": "Count the words of a text.",
                        "mcp_server": "paged",
                        "required_parameters": [{"name": "text", "type": "str"}],
                        "state_transition": {"produces": ["mail.counted"]},
                    }
                ],
            }
        )
    )
    limits = ["--sandbox-limit", "memory_bytes=256MiB", "--sandbox-limit", "disk_bytes=16MiB", "--sandbox-limit", "processes=64"]
    options = ["--kernels", "plain"] if request.param == "plain" else limits
    port = module_listening_server(
        lambda port: [
            sys.executable,
            "-m",
            "toolpath.planner.interfaces.cli",
            "serve",
            "--http",
            f"127.0.0.1:{port}",
            "--tokens",
            str(paths["tokens"]),
            "--catalog",
            str(paths["catalog"]),
            *options,
        ],
        cwd=str(ROOT),
        env={**os.environ, "TOOLPATH_HOME": str(paths["home"]), "SERVER_SECRET": SERVER_SECRET},
    )
    token_of = {user: token for token, user in tokens.items()}

    def run(user, code, tool="execute", **arguments):
        async def call():
            async with over_http(f"http://127.0.0.1:{port}/mcp", token_of[user]) as client:
                return (await client.call_tool(tool, {"code": code, **arguments} if tool == "execute" else arguments)).structured_content

        return asyncio.run(call())

    return request.param, run, paths


def _value(result):
    """A cell's value as text (its ``Out``), or its error's name when it raised, or its status."""
    if result["status"] == "ok":
        return str(result["result_text"])
    return (result.get("error") or {}).get("ename") or result["status"]


def test_over_http_a_cell_cannot_read_the_tokens_file_or_the_servers_environment(attacked_server):
    placement, run, paths = attacked_server
    tokens = _value(run("alice", f"open({str(paths['tokens'])!r}).read()"))
    environment = _value(run("alice", "import os\nos.environ.get('SERVER_SECRET')"))
    assert ("bob-" + "b" * 32 in tokens, SERVER_SECRET in environment) == ((True, True) if placement == "plain" else (False, False))


def test_over_http_a_cell_cannot_read_the_store_or_another_users_kernel_directory(attacked_server):
    placement, run, paths = attacked_server
    run("bob", f"note = {VICTIM_SECRET!r}")
    store = paths["home"] / "toolpath.db"
    wait_until_stored(store, VICTIM_SECRET.encode())
    read = _value(run("alice", f"open({str(store)!r}, 'rb').read().count({VICTIM_SECRET.encode()!r})"))
    # Every kernel directory on the machine but her own whose connection file (the key to drive
    # that kernel) she can read: Bob's among them on plain kernels.
    others = (
        "import glob, os\nfrom ipykernel.connect import get_connection_file\n"
        "own = os.path.dirname(get_connection_file())\nfound = 0\n"
        "for path in glob.glob('/tmp/toolpath-kernel-*/connection.json') + glob.glob('/dev/shm/toolpath-kernel-*/connection.json'):\n"
        "    if os.path.dirname(path) != own:\n        try:\n            found += bool(open(path).read())\n        except OSError:\n            pass\nfound"
    )
    directories = _value(run("alice", others))
    assert (read not in ("0", "FileNotFoundError"), directories != "0") == ((True, True) if placement == "plain" else (False, False))


def test_over_http_a_cell_cannot_run_code_in_the_server_through_the_bridge(attacked_server):
    placement, run, paths = attacked_server
    planned = run("alice", None, "run_task", task="count the words of a text", inputs={"text": "one two three"})
    assert planned["result"]["status"] == "ok", planned  # the planned cell left its handle, mail.count_words, bound
    cell = (
        f"import os\nclass Payload:\n    def __reduce__(self):\n        return (os.mkdir, ({str(paths['marker'])!r},))\nawait mail.count_words(text=Payload())"
    )
    outcome = _value(run("alice", cell))
    assert paths["marker"].exists() == (placement == "plain"), outcome
    if placement == "sandboxed":
        assert outcome == "BridgeError"


def test_over_http_a_cell_cannot_reach_the_network(attacked_server):
    placement, run, _ = attacked_server
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    threading.Thread(target=lambda: listener.accept()[0].close(), daemon=True).start()
    try:
        reached = _value(run("alice", f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=5).close()\n'connected'"))
    finally:
        listener.close()
    assert (reached == "'connected'") == (placement == "plain")


def test_over_http_a_cell_cannot_exhaust_the_machines_memory_processes_or_disk(attacked_server):
    placement, run, _ = attacked_server
    children = "import time; hoard = b'x' * (200 * 2**20); time.sleep(2)"
    memory = _value(
        run(
            "alice",
            f"import subprocess, sys\nchildren = [subprocess.Popen([sys.executable, '-c', {children!r}]) for _ in range(4)]\n[child.wait() for child in children]",
        )
    )
    processes = _value(
        run(
            "alice",
            "import subprocess\nchildren = []\ntry:\n    for _ in range(100):\n        children.append(subprocess.Popen(['sleep', '30']))\nfinally:\n    for child in children:\n        child.kill()\nlen(children)",
        )
    )
    disk = _value(
        run(
            "alice",
            "import os\nwritten = 0\ntry:\n    for index in range(40):\n        with open(f'/tmp/fill-{index}', 'wb') as file:\n            file.write(b'x' * (15 * 2**20))\n        written += 1\nfinally:\n    for index in range(40):\n        if os.path.exists(f'/tmp/fill-{index}'):\n            os.remove(f'/tmp/fill-{index}')\nwritten",
        )
    )
    if placement == "plain":
        assert (memory, processes, disk) == ("[0, 0, 0, 0]", "100", "40")
    else:  # children killed past the group's memory, a refused fork, a full /tmp
        assert "-9" in memory and processes == "BlockingIOError" and disk == "OSError", (memory, processes, disk)
