"""MCP servers' tools in cells and in catalogs, against real servers started by the tests:
``mcp-server-time`` and ``mcp-server-git`` from PyPI, and ``tests/servers/paged_server.py`` (tools
listed two per page, odd names, every result shape), over stdio and Streamable HTTP."""

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from toolpath.kernel import CodeMode, FailureInjection, MCPToolkit, UnknownInjectionTargetError
from toolpath.kernel.tools.approvals import ApprovalDecision
from toolpath.kernel.tools.mcp_connection import PROBE_AFTER_IDLE
from toolpath.planner.interfaces.draft import draft_catalog, server_config
from toolpath.planner.tasks.workspace import Workspace
from toolpath.registry import CatalogError, lint_catalogs, read_catalog

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
PAGED_SERVER = str(ROOT / "tests" / "servers" / "paged_server.py")
ODD_SERVER = str(ROOT / "tests" / "servers" / "odd_server.py")
ANNOTATED_SERVER = str(ROOT / "tests" / "servers" / "annotated_server.py")
#: The tools of odd_server.py that cannot be bound, with why.
ODD_SKIPPED = {
    "": "its name is empty",
    "bad\x00name": "contains the control character U+0000",
    "tab\tname": "contains the control character U+0009",
    "x" * 200: "its name is 200 characters long; MCP allows 128",
    "listed_properties": "its input schema's `properties` is not a JSON object",
    "counted_required": "its input schema's `required` is not a list of property names",
}


def time_server(name="time"):
    return MCPToolkit(name, command=sys.executable, args=["-m", "mcp_server_time", "--local-timezone", "UTC"])


def paged_server(**options):
    return MCPToolkit("paged", command=sys.executable, args=[PAGED_SERVER], **options)


def server_processes(script):
    """This process's descendants whose command line mentions ``script``."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if any(script in part for part in child.cmdline()):
                found.append(child)
        except psutil.Error:  # it exited while we looked
            continue
    return found


@pytest.fixture()
def git_repository(tmp_path):
    repository = tmp_path / "repo"
    repository.mkdir()
    environment = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Ada",
        "GIT_AUTHOR_EMAIL": "ada@example.com",
        "GIT_COMMITTER_NAME": "Ada",
        "GIT_COMMITTER_EMAIL": "ada@example.com",
    }
    subprocess.run(["git", "init", "-q", str(repository)], check=True, env=environment)
    (repository / "notes.txt").write_text("first line\n")
    subprocess.run(["git", "-C", str(repository), "add", "notes.txt"], check=True, env=environment)
    subprocess.run(["git", "-C", str(repository), "commit", "-q", "-m", "Add the notes"], check=True, env=environment)
    (repository / "notes.txt").write_text("first line\nsecond line\n")
    return repository


def test_a_cell_calls_the_time_and_git_servers_and_the_run_stops_them(git_repository):
    git = MCPToolkit("git", command=sys.executable, args=["-m", "mcp_server_git", "--repository", str(git_repository)])
    with CodeMode(tools=[time_server(), git], snapshot=False, pool_size=0) as code_mode:
        result = code_mode.run(
            f"now = await time.get_current_time(timezone='Europe/Paris')\n"
            f"log = await git.git_log(repo_path={str(git_repository)!r})\n"
            f"diff = await git.git_diff_unstaged(repo_path={str(git_repository)!r})\n"
            "print(now['timezone'], now['datetime'][:4])\n"
            "print('Add the notes' in log, '+second line' in diff)",
            "s",
        )
        assert result.status == "ok", result.error
        assert result.stdout.split() == ["Europe/Paris", time.strftime("%Y"), "True", "True"]
        instructions = code_mode.instructions()
        assert "time.get_current_time(*, timezone: str)" in instructions and "git.git_log(" in instructions
        assert server_processes("mcp_server_time") and server_processes("mcp_server_git")
        code_mode.close()  # the run ends: both servers are stopped
        assert not server_processes("mcp_server_time") and not server_processes("mcp_server_git")
        again = code_mode.run("(await time.get_current_time(timezone='UTC'))['timezone']", "s")  # a new run connects again
        assert again.result == "'UTC'", again.error


def test_every_page_is_bound_names_are_mapped_and_results_become_values():
    with CodeMode(tools=[paged_server()], snapshot=False, pool_size=0) as code_mode:
        result = code_mode.run(
            "forecast = await paged.get_forecast(city='Oslo')\n"
            "mail = await paged.gmail_search(query='invoices', from_='bob')\n"
            "words = await paged.count_words(text='one two three')\n"
            "kept = await paged.object_with_result()\n"
            "picture = await paged.pixel()\n"
            "print(sorted(name for name in dir(paged) if not name.startswith('_')))\n"
            "print(forecast, mail, words, kept, picture[0]['type'], picture[0]['mimeType'], sep='|')",
            "s",
        )
        assert result.status == "ok", result.error
        listed, values = result.stdout.strip().splitlines()
        # eight tools over four pages of tools/list
        assert listed == str(sorted(["count_words", "crash", "fail", "get_forecast", "gmail_search", "object_with_result", "pixel", "slow"]))
        # get-forecast and gmail.search were called by their real names, `from_` sent as `from`; the
        # server's default for `days` applied; {"result": 3} unwrapped; a real {"result": ...} kept
        assert values == "{'city': 'Oslo', 'days': 3, 'sky': 'clear'}|3 mails about invoices from bob|3|{'result': 'kept'}|image|image/png"
        assert "paged.get_forecast(*, city: str, days: int = 3)  (tool 'get-forecast')" in code_mode.instructions()


def test_an_error_result_raises_in_the_cell_with_the_servers_message_and_the_session_goes_on():
    with CodeMode(tools=[paged_server()], snapshot=False, pool_size=0) as code_mode:
        failed = code_mode.run("x = 1\nawait paged.fail(why='the disk is full')", "s")
        assert failed.status == "error"
        assert failed.error["ename"] == "RuntimeError" and "it failed because the disk is full" in failed.error["evalue"]
        caught = code_mode.run("try:\n    await paged.fail(why='no reason')\nexcept RuntimeError as error:\n    print('caught:', error)\nx + 1", "s")
        assert caught.status == "ok" and "caught: MCPToolError" in caught.stdout and caught.result == "2"
        wrong = code_mode.run("await paged.get_forecast(town='Oslo')", "s")  # bound by the tool's signature before anything is sent
        assert wrong.status == "error" and wrong.error["ename"] == "TypeError" and "city" in wrong.error["evalue"]


def test_a_server_that_cannot_start_is_a_failed_handle_saying_why_and_the_others_work():
    broken = MCPToolkit("broken", command=sys.executable, args=["-c", "import sys; print('missing API key', file=sys.stderr); sys.exit(3)"])
    with CodeMode(tools=[broken, time_server()], snapshot=False, pool_size=0) as code_mode:
        result = code_mode.run("await broken.anything()", "s")
        assert result.status == "error"
        assert "MCP server 'broken' could not be started or reached" in result.error["evalue"] and "missing API key" in result.error["evalue"]
        works = code_mode.run("(await time.get_current_time(timezone='UTC'))['timezone']", "s")
        assert works.result == "'UTC'"


def test_a_toolkit_opened_by_hand_is_left_open_by_runs():
    async def scenario():
        async with time_server() as toolkit:
            async with CodeMode(tools=[toolkit], snapshot=False, pool_size=0) as code_mode:
                result = await code_mode.arun("(await time.get_current_time(timezone='UTC'))['timezone']", "s")
                assert result.result == "'UTC'", result.error
                await code_mode.aclose()
                assert toolkit.is_connected
            assert (await toolkit.acall("get_current_time", kwargs={"timezone": "Asia/Tokyo"}))["timezone"] == "Asia/Tokyo"
        assert not toolkit.is_connected and not server_processes("mcp_server_time")

    asyncio.run(scenario())


def test_a_server_that_dies_idle_is_restarted_and_one_that_dies_mid_call_fails_only_that_call():
    with CodeMode(tools=[paged_server()], snapshot=False, pool_size=0) as code_mode:
        assert code_mode.run("await paged.count_words(text='a b')", "s").result == "2"
        (process,) = server_processes(PAGED_SERVER)
        process.kill()
        process.wait(10)
        time.sleep(PROBE_AFTER_IDLE + 0.2)
        assert code_mode.run("await paged.count_words(text='a b c')", "s").result == "3"  # found gone, started again
        (restarted,) = server_processes(PAGED_SERVER)
        assert restarted.pid != process.pid
        lost = code_mode.run("await paged.crash()", "s")
        assert (
            lost.status == "error"
            and "closed the connection during tool 'crash'" in lost.error["evalue"]
            and "the next call connects again" in lost.error["evalue"]
        )
        assert code_mode.run("await paged.count_words(text='a')", "s").result == "1"
        assert len(server_processes(PAGED_SERVER)) == 1


def test_a_tool_the_server_calls_read_only_is_retried_after_a_lost_connection_and_any_other_is_tried_once(tmp_path):
    """Each tool's first call kills the server mid-call. Only read_rates says it is read-only; add_note
    only adds (not read-only), say_nothing says nothing, read_and_destroy says both."""
    log = tmp_path / "calls.log"
    annotated = MCPToolkit("annotated", command=sys.executable, args=[ANNOTATED_SERVER], env={"ANNOTATED_CALLS": str(log)})
    with CodeMode(tools=[annotated], snapshot=False, pool_size=0, timeout=60) as code_mode:
        read = code_mode.run("await annotated.read_rates(text='EUR')", "s")
        assert read.status == "ok", read.error
        assert read.result == """'read_rates: {"text": "EUR"}'"""
        assert read.stderr.startswith("retrying annotated.read_rates (try 2 of 3) after RuntimeError: MCPConnectionError: ")
        assert read.retries == {"annotated.read_rates": 1}
        for name in ("add_note", "say_nothing", "read_and_destroy"):
            once = code_mode.run(f"await annotated.{name}(text='x')", "s")
            assert once.status == "error" and f"closed the connection during tool {name!r}" in once.error["evalue"], once.error
            assert once.retries == {} and "retrying" not in once.stderr
    assert log.read_text().split() == ["read_rates", "read_rates", "add_note", "say_nothing", "read_and_destroy"]


def test_a_failure_injected_into_a_tool_the_server_does_not_list_is_refused_when_it_connects():
    """The server's tools are known once it connects: the run's first cell raises, naming the
    nearest tool, and nothing runs; every later run says the same."""
    misspelt = FailureInjection("paged.count_wrds", probability=1.0)
    with CodeMode(tools=[paged_server()], snapshot=False, pool_size=0, inject_failures=[misspelt]) as code_mode:
        for _ in range(2):
            with pytest.raises(UnknownInjectionTargetError, match=r"this CodeMode has no tool 'paged.count_wrds'; did you mean 'paged.count_words'\?"):
                code_mode.run("ran = True", "s")
        assert code_mode.sessions() == []  # no kernel started
    with CodeMode(tools=[paged_server()], snapshot=False, pool_size=0, inject_failures=[FailureInjection("paged.count_words", on_calls=(1,))]) as code_mode:
        struck = code_mode.run("await paged.count_words(text='a b')", "s")
        assert struck.status == "error" and struck.error["ename"] == "InjectedFailure"
        assert code_mode.run("await paged.count_words(text='a b')", "s").result == "2"


def test_connect_and_call_timeouts_bound_the_waits_and_leave_no_server_behind():
    stuck = MCPToolkit("stuck", command="sleep", args=["987.25"], connect_timeout=2)  # starts, never answers
    broken = MCPToolkit("broken", command=sys.executable, args=[PAGED_SERVER, "--broken-listing"])
    with CodeMode(tools=[stuck, broken, paged_server(call_timeout=1)], snapshot=False, pool_size=0, timeout=60) as code_mode:
        assert "stuck: its tools are listed when it connects" in code_mode.instructions()
        started = time.monotonic()
        result = code_mode.run("await stuck.anything()", "s")
        assert time.monotonic() - started < 20
        assert result.status == "error" and "within 2 s (connect_timeout)" in result.error["evalue"]
        assert not server_processes("987.25")
        listing = code_mode.run("await broken.anything()", "s")
        assert listing.status == "error" and "failed to list its tools" in listing.error["evalue"] and "the tool index is corrupt" in listing.error["evalue"]
        assert [process for process in server_processes(PAGED_SERVER) if "--broken-listing" in process.cmdline()] == []
        slow = code_mode.run("await paged.slow(seconds=5)", "s")
        assert slow.status == "error" and slow.error["ename"] == "TimeoutError" and "no answer within 1 s (call_timeout)" in slow.error["evalue"]
        assert code_mode.run("await paged.slow(seconds=0)", "s").result == "'done'"


def test_tools_with_odd_names_or_schemas_are_skipped_by_name_and_the_others_bind_and_answer():
    odd = MCPToolkit("odd", command=sys.executable, args=[ODD_SERVER])
    with CodeMode(tools=[odd], snapshot=False, pool_size=0) as code_mode:
        with pytest.warns(RuntimeWarning, match=r"MCP server 'odd': skipped 6 tools that cannot be bound: '' \(its name is empty\); 'bad\\x00name' \(its name"):
            result = code_mode.run(
                "print(sorted(name for name in dir(odd) if not name.startswith('_')))\n"
                "print(await odd.echo(text='hi'))\n"
                "print(await odd.tool(), await odd.class_(), await odd.get_time(), await odd.get_time_2(), sep='|')\n"
                "print(await odd.deep(rows=[[['a']]]))",
                "s",
            )
        assert result.status == "ok", result.error
        assert result.stdout.splitlines() == [
            str(sorted(["class_", "deep", "echo", "get_time", "get_time_2", "tool"])),
            'echo: {"text": "hi"}',
            "!!!: {}|class: {}|get_time: {}|get-time: {}",
            'deep: {"rows": [[["a"]]]}',
        ]
        assert list(odd.skipped) == list(ODD_SKIPPED)
        assert all(why in odd.skipped[name] for name, why in ODD_SKIPPED.items())
        # the 30-level schema's type stops at the depth cap
        assert f"odd.deep(*, rows: {'list[' * 12}Any{']' * 12} = None)" in code_mode.instructions()


def test_catalog_draft_leaves_out_the_tools_that_cannot_be_bound_and_names_them(tmp_path):
    with pytest.warns(RuntimeWarning, match=r"left out 6 tools of the MCP server that toolpath cannot bind: '' \(its name is empty\)"):
        text = asyncio.run(draft_catalog(server_config(f"{sys.executable} {ODD_SERVER}", "odd")))
    assert "# Left out, as toolpath cannot bind them:\n#   '': its name is empty\n#   'bad\\x00name': its name" in text
    assert f"#   {'x' * 60!r}… (200 characters): its name is 200 characters long" in text  # a long name is shortened
    path = tmp_path / "odd.yaml"
    path.write_text(text)
    catalog = read_catalog(path)
    assert [tool.name for tool in catalog.tools] == ["echo", "!!!", "class", "get-time", "get_time", "deep"]
    assert catalog.tools[-1].optional_parameters[0].type == "list[" * 12 + "Any" + "]" * 12


@pytest.fixture()
def paged_over_http(listening_server):
    token = "token-" + "t" * 30
    port = listening_server(lambda port: [sys.executable, PAGED_SERVER, "--http", str(port), "--token", token], timeout=60)
    return f"http://127.0.0.1:{port}/mcp", token


def test_over_streamable_http_headers_carry_a_token_read_from_the_environment(paged_over_http, monkeypatch):
    url, token = paged_over_http
    monkeypatch.setenv("PAGED_TOKEN", token)
    monkeypatch.setenv("PAGED_URL", url)
    authorised = MCPToolkit("paged", url="${PAGED_URL}", headers={"Authorization": "Bearer ${PAGED_TOKEN}"})
    refused = MCPToolkit("refused", url=url, headers={"Authorization": "Bearer not-the-token"}, connect_timeout=20)
    unset = MCPToolkit("unset", url=url, headers={"Authorization": "Bearer ${NO_SUCH_VARIABLE_SET}"})
    with CodeMode(tools=[authorised, refused, unset], snapshot=False, pool_size=0) as code_mode:
        assert code_mode.run("(await paged.get_forecast(city='Rome', days=1))['days']", "s").result == "1"
        denied = code_mode.run("await refused.get_forecast(city='Rome')", "s")
        assert denied.status == "error" and "MCP server 'refused' could not be started or reached" in denied.error["evalue"]
        missing = code_mode.run("await unset.get_forecast(city='Rome')", "s")
        assert missing.status == "error" and "NO_SUCH_VARIABLE_SET" in missing.error["evalue"]


# -- catalogs whose tools MCP servers serve -----------------------------------------------------------

TIME_STATES = [
    {
        "token": "clock.current_time_known",
        "description": "The current time in a timezone is known.",
        "affordances": ["find out what time it is in a city or timezone"],
    },
    {
        "token": "clock.time_converted",
        "description": "A time of day has been converted from one timezone to another.",
        "affordances": ["convert a time between timezones"],
    },
]


def drafted_time_catalog(directory):
    """The catalog `toolpath catalog draft` writes for mcp-server-time, with states filled in as an
    author would: converting a time first looks up the current time in the source timezone. (The
    domain is not `time`, which is also a parameter's name: the handle would be `time_2`.)"""
    text = asyncio.run(draft_catalog(server_config(f"{sys.executable} -m mcp_server_time --local-timezone UTC", "time"), domain="clock"))
    path = directory / "time.yaml"
    path.write_text(text)
    document = yaml.safe_load(text)
    document["states"] = TIME_STATES
    tools = {tool["name"]: tool for tool in document["tools"]}
    tools["get_current_time"]["state_transition"] = {"requires": [], "produces": ["clock.current_time_known"]}
    tools["get_current_time"]["return_spec"]["state"] = "clock.current_time_known"
    tools["convert_time"]["state_transition"] = {"requires": ["clock.current_time_known"], "produces": ["clock.time_converted"]}
    filled = directory / "time-filled.yaml"
    filled.write_text(yaml.safe_dump(document, sort_keys=False))
    return path, filled


def test_a_drafted_catalog_lists_the_servers_tools_and_validate_reports_the_missing_states(tmp_path):
    drafted, _ = drafted_time_catalog(tmp_path)
    catalog = read_catalog(drafted)
    assert [tool.name for tool in catalog.tools] == ["get_current_time", "convert_time"]
    convert = catalog.tools[1]
    assert [parameter.name for parameter in convert.required_parameters] == ["source_timezone", "time", "target_timezone"]
    assert "24-hour format" in convert.required_parameters[1].description and convert.return_spec.type == "dict"
    assert convert.mcp_server.args == ("-m", "mcp_server_time", "--local-timezone", "UTC") and convert.binding == "host"
    findings = lint_catalogs([drafted])
    assert [(finding.code, finding.severity) for finding in findings] == [("TP004", "warning")] * 2
    assert "# Left for you: declare the states" in drafted.read_text()


def test_a_drafted_catalog_with_its_states_filled_in_plans_and_runs_a_two_step_task(tmp_path):
    _, filled = drafted_time_catalog(tmp_path)
    assert lint_catalogs([filled]) == []
    workspace = Workspace.open([filled])
    inputs = {"timezone": "UTC", "source_timezone": "UTC", "time": "09:30", "target_timezone": "Asia/Tokyo"}  # neither has summer time
    task_plan = workspace.plan_task("convert a time between timezones", inputs)
    assert [step.tool.name for step in task_plan.plan.steps] == ["get_current_time", "convert_time"]
    assert "await clock.get_current_time(timezone=timezone)" in task_plan.cell.code
    run = workspace.run_task(task_plan, timeout=120)
    assert run.result.status == "ok", run.result.error
    assert "T18:30:00+09:00" in run.result.result and "'time_difference': '+9.0h'" in run.result.result
    assert not server_processes("mcp_server_time")  # the throwaway kernel's run stopped the server

    with workspace.session("agent", snapshot=False) as session:  # a session binds the domain's handle too
        first = session.run_task("what time is it in Tokyo", {"timezone": "Asia/Tokyo"})
        assert first.result.status == "ok", first.result.error
        follow_up = session.execute("get_current_time_result['timezone']")
        assert follow_up.result == "'Asia/Tokyo'"


def test_a_catalog_tool_with_a_keyword_parameter_takes_it_as_from_and_the_server_gets_from(tmp_path):
    path = tmp_path / "mail.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "domain": "mail",
                "mcp_servers": {"paged": {"command": sys.executable, "args": [PAGED_SERVER]}},
                "states": [{"token": "mail.found", "description": "Mails were found.", "affordances": ["search mail from someone"]}],
                "tools": [
                    {
                        "name": "gmail.search",
                        "description": "Search mail by words and sender.",
                        "mcp_server": "paged",
                        "required_parameters": [{"name": "query", "type": "str"}, {"name": "from", "type": "str"}],
                        "return_spec": {"name": "mails", "type": "str", "state": "mail.found"},
                        "state_transition": {"requires": [], "produces": ["mail.found"]},
                    }
                ],
            }
        )
    )
    assert lint_catalogs([path]) == []
    workspace = Workspace.open([path])
    task_plan = workspace.plan_task("search mail from someone", {"query": "invoices", "from_": "bob"})
    assert "gmail_search(query=query, from_=from_)" in task_plan.cell.code
    run = workspace.run_task(task_plan, timeout=120)
    assert run.result.status == "ok", run.result.error
    assert run.result.result == "'3 mails about invoices from bob'"


def test_catalog_errors_name_an_undeclared_server_and_a_tool_that_cannot_be_both(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(
        "domain: clock\n"
        "mcp_servers:\n"
        "  time: {command: uvx, args: [mcp-server-time]}\n"
        "  both: {command: uvx, url: 'http://localhost/mcp'}\n"
        "tools:\n"
        "  - {name: now, mcp_server: clock}\n"
        "  - {name: later, mcp_server: both}\n"
        "  - {name: kernel_side, mcp_server: time, binding: kernel}\n"
    )
    with pytest.raises(CatalogError) as caught:
        read_catalog(path)
    messages = [(problem.code, problem.line, problem.message) for problem in caught.value.problems]
    assert any(code == "TP101" and line == 4 and "exactly one of `command`" in message for code, line, message in messages)
    assert any(code == "TP106" and line == 6 and "does not declare under `mcp_servers` (declared: time)" in message for code, line, message in messages)
    assert any(code == "TP101" and line == 8 and "runs on the host" in message for code, line, message in messages)
    # the tool of the invalid server gets no second, misleading problem
    assert not any("'both'" in message and code == "TP106" for code, _, message in messages)


def test_the_servers_catalog_resource_hides_mcp_server_environments_and_headers(tmp_path):
    from mcp import Client

    from toolpath.planner.interfaces.server import ToolpathServer

    path = tmp_path / "clock.yaml"
    path.write_text(
        "domain: clock\n"
        "mcp_servers:\n"
        "  time: {command: uvx, args: [mcp-server-time], env: {API_KEY: sk-live-123456}}\n"
        "  remote: {url: 'https://example.com/mcp', headers: {Authorization: 'Bearer abcdef'}}\n"
        "states: [{token: clock.now_known, description: The time is known.}]\n"
        "tools:\n"
        "  - {name: get_current_time, mcp_server: time, state_transition: {produces: [clock.now_known]}}\n"
    )

    async def scenario():
        server = ToolpathServer(Workspace.open([path]), user_id="me", snapshot=False)
        try:
            async with Client(server.mcp) as client:
                text = (await client.read_resource("toolpath://catalogs/0")).contents[0].text
        finally:
            await server.aclose()
        served = yaml.safe_load(text)
        assert served["mcp_servers"]["time"] == {"command": "uvx", "args": ["mcp-server-time"], "env": {"API_KEY": "<hidden>"}}
        assert served["mcp_servers"]["remote"]["headers"] == {"Authorization": "<hidden>"}
        assert "sk-live" not in text and "abcdef" not in text and served["tools"][0]["name"] == "get_current_time"

    asyncio.run(scenario())


def toolpath(*arguments):
    return subprocess.run([sys.executable, "-m", "toolpath.planner.interfaces.cli", *arguments], capture_output=True, text=True, timeout=300, cwd=str(ROOT))


def test_catalog_draft_writes_a_file_whole_and_refuses_to_overwrite_or_to_draft_from_a_broken_server(tmp_path, git_repository):
    output = tmp_path / "git.yaml"
    command = f"{sys.executable} -m mcp_server_git --repository {git_repository}"
    drafted = toolpath("catalog", "draft", "--mcp", command, "--name", "git", "--output", str(output))
    assert drafted.returncode == 0, drafted.stderr
    assert f"wrote {output}" in drafted.stderr and "toolpath validate" in drafted.stderr
    document = yaml.safe_load(output.read_text())
    tools = {tool["name"]: tool for tool in document["tools"]}
    assert document["domain"] == "git" and document["mcp_servers"]["git"]["args"][-1] == str(git_repository)
    assert tools["git_diff_unstaged"]["required_parameters"] == [{"name": "repo_path", "type": "str", "description": "Repo Path"}]
    assert tools["git_diff_unstaged"]["optional_parameters"] == [{"name": "context_lines", "type": "int", "description": "Context Lines", "default": 3}]
    assert all(tool["mcp_server"] == "git" and tool["state_transition"] == {"requires": [], "produces": []} for tool in tools.values())
    assert read_catalog(output).tools  # it loads as it is

    before = output.read_text()
    again = toolpath("catalog", "draft", "--mcp", command, "--output", str(output))
    assert again.returncode == 2 and "exists; pass --force" in again.stderr and output.read_text() == before

    broken = toolpath("catalog", "draft", "--mcp", f"{sys.executable} -c \"import sys; sys.exit('no config file')\"", "--output", str(tmp_path / "broken.yaml"))
    assert broken.returncode == 2 and "could not be started or reached" in broken.stderr and "no config file" in broken.stderr
    assert not (tmp_path / "broken.yaml").exists() and list(tmp_path.glob("*.tmp")) == []
    empty = toolpath("catalog", "draft", "--mcp", "  ")
    assert empty.returncode == 2 and "the MCP server command is empty" in empty.stderr


def test_catalog_draft_warns_when_a_value_is_written_as_given_and_keeps_keyword_parameters(tmp_path):
    drafted = toolpath("catalog", "draft", "--mcp", f"{sys.executable} {PAGED_SERVER}", "--env", "API_KEY=sk-123")
    assert drafted.returncode == 0, drafted.stderr
    assert "--env API_KEY is written into the catalog as given; write ${NAME}" in drafted.stderr
    assert "name: gmail.search" in drafted.stdout and "API_KEY: sk-123" in drafted.stdout
    # gmail.search(from=...) loads: the parameter keeps its name and is passed in Python as from_
    assert "does not load" not in drafted.stderr
    path = tmp_path / "paged.yaml"
    path.write_text(drafted.stdout)
    search = next(tool for tool in read_catalog(path).tools if tool.name == "gmail.search")
    assert [(parameter.name, parameter.python_name) for parameter in search.parameters] == [("query", "query"), ("from", "from_")]


def test_catalog_draft_json_lists_the_tools_those_left_out_and_what_validate_says():
    drafted = toolpath("catalog", "draft", "--mcp", f"{sys.executable} {ODD_SERVER}", "--name", "odd", "--json")
    assert drafted.returncode == 0, drafted.stderr
    report = json.loads(drafted.stdout)
    assert (report["kind"], report["server"], report["api"], report["domain"], report["output"]) == ("mcp", "odd", None, "odd", None)
    assert report["tools"] == ["echo", "!!!", "class", "get-time", "get_time", "deep"]
    assert report["states"] == [] and report["approval_always"] == [] and report["todos"] == []
    assert [entry["tool"] for entry in report["left_out"]] == list(ODD_SKIPPED)
    assert all(ODD_SKIPPED[entry["tool"]] in entry["reason"] for entry in report["left_out"])
    assert yaml.safe_load(report["catalog"])["mcp_servers"]["odd"]["args"] == [ODD_SERVER]
    # No state is declared yet: validate warns (TP004) about every tool.
    assert report["errors"] == 0 and len([finding for finding in report["findings"] if finding["code"] == "TP004"]) == len(report["tools"])
    refused = toolpath("catalog", "draft", "--mcp", "  ", "--json")
    assert refused.returncode == 2 and json.loads(refused.stdout) == {
        "error": "--mcp '  ': the MCP server command is empty; give it like --mcp 'uvx mcp-server-time'"
    }


def test_a_draft_that_would_not_load_says_where_and_why():
    from toolpath.planner.interfaces.draft import load_problems

    (problem,) = load_problems("domain: d\ntools:\n  - name: t\n    required_parameters: [{name: page size, type: int}]\n")
    assert problem.startswith("line 4: TP101 tools[0].required_parameters[0].name:") and "'page size' is not a parameter name" in problem


# -- large servers: many tools, huge answers, hosts that are killed -------------------------------------

LARGE_SERVER = str(ROOT / "tests" / "servers" / "large_server.py")
MEGABYTE = 1024 * 1024


def test_an_answer_over_max_message_bytes_is_refused_once_that_much_is_read_and_the_server_goes_on(tmp_path):
    gate = tmp_path / "gate"
    large = MCPToolkit("large", command=sys.executable, args=[LARGE_SERVER, "--gate", str(gate)], max_message_bytes=1_000_000, call_timeout=30)
    with CodeMode(tools=[large], snapshot=False, pool_size=0, timeout=120) as code_mode:
        refused = code_mode.run("await large.huge(megabytes=50)", "s")
        # refused while the server still holds back all but the first 2 MiB of its 50 MiB answer
        assert not (tmp_path / "gate.sent").exists()
        assert refused.status == "error", refused.result
        assert "its answer is over max_message_bytes=1,000,000 bytes; toolpath stopped reading it there" in refused.error["evalue"]
        (process,) = server_processes(LARGE_SERVER)
        gate.touch()  # the server sends the rest, which is discarded
        assert code_mode.run("len(await large.huge(megabytes=0.5))", "s").result == str(MEGABYTE // 2)
        assert (tmp_path / "gate.sent").exists() and server_processes(LARGE_SERVER) == [process]  # the same server, connected all along


#: A host that binds a stdio server in CodeMode, runs a cell that calls it (so CodeMode's loop thread
#: starts it), says so, then waits to be killed.
KILLED_HOST = """
import sys, time
from toolpath.kernel import CodeMode, MCPToolkit
large = MCPToolkit("large", command=sys.executable, args=[sys.argv[1], "--linger"])
with CodeMode(tools=[large], snapshot=False, pool_size=0) as code_mode:
    print(code_mode.run("await large.record_1()", "s").result, flush=True)
    time.sleep(3600)
"""


def test_a_stdio_server_that_outlives_its_stdin_still_dies_with_a_host_killed_by_sigkill():
    host = subprocess.Popen([sys.executable, "-c", KILLED_HOST, LARGE_SERVER], stdout=subprocess.PIPE, text=True, cwd=str(ROOT))
    descendants = []
    try:
        assert host.stdout.readline() == "'record_1: {}'\n"
        descendants = psutil.Process(host.pid).children(recursive=True)
        (server,) = [process for process in descendants if LARGE_SERVER in " ".join(process.cmdline())]
        assert server.is_running()  # the thread that started it (CodeMode's loop) is alive: so is the server
        host.kill()
        host.wait(30)
        _, alive = psutil.wait_procs([server], timeout=15)  # polls
        assert alive == [], "the MCP server outlived its host"
    finally:
        host.kill()
        host.wait(30)
        lingering = [process for process in psutil.process_iter() if _runs(process, LARGE_SERVER, "--linger")]
        for process in {*descendants, *lingering}:  # the host's kernel, and the server if the test failed
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass


def _runs(process, *parts):
    """Whether ``process``'s command line has each of ``parts``."""
    try:
        return all(part in process.cmdline() for part in parts)
    except psutil.Error:
        return False


def test_a_server_with_ten_thousand_tools_lists_fifty_in_the_instructions_and_a_cell_finds_the_others_by_words():
    large = MCPToolkit("large", command=sys.executable, args=[LARGE_SERVER, "--tools", "10000"], connect_timeout=120)
    with CodeMode(tools=[large, paged_server(max_listed_tools=2)], snapshot=False, pool_size=0, timeout=120) as code_mode:
        found = code_mode.run("large.search_tools('email an invoice to a customer', k=3)", "s")
        assert found.status == "ok", found.error
        assert found.result.startswith("['large.send_invoice(*, customer: str): Email an invoice to a customer.'")
        assert code_mode.run("await large.send_invoice(customer='Ada')", "s").result == "\"send_invoice: {'customer': 'Ada'}\""
        missing = code_mode.run("large.no_such_tool", "s")
        assert "it has 10,002 tools, the first: huge, record_0, record_1" in missing.error["evalue"] and len(missing.error["evalue"]) < 2000
        instructions = code_mode.instructions()
        assert len(instructions) < 20_000  # not 390,000
        assert "large.record_49(" in instructions and "large.record_50(" not in instructions  # the server's first 50
        assert "  large has 10,002 tools, the first 50 listed above: find the others with `large.search_tools('words for what you need')`" in instructions
        assert "paged.gmail_search(" in instructions and "paged.count_words(" not in instructions  # max_listed_tools=2
        assert "  paged has 8 tools, the first 2 listed above" in instructions


def test_a_message_over_max_message_bytes_that_answers_no_call_resets_the_connection_and_says_so():
    large = MCPToolkit("large", command=sys.executable, args=[LARGE_SERVER], max_message_bytes=1_000_000)
    with CodeMode(tools=[large], snapshot=False, pool_size=0) as code_mode:
        reset = code_mode.run("await large.shout(megabytes=3)", "s")
        assert reset.status == "error"
        assert (
            "MCP server 'large' sent a message over 1,000,000 bytes (max_message_bytes) that answers no request; toolpath stopped reading it and reset the connection during tool 'shout'; the next call connects again"
            in reset.error["evalue"]
        )
        assert code_mode.run("await large.shout(megabytes=0.5)", "s").result == "'shouted'"  # a new connection


def test_a_catalog_tool_served_over_mcp_with_approval_always_asks_first_and_a_no_calls_nothing(tmp_path):
    _, filled = drafted_time_catalog(tmp_path)
    document = yaml.safe_load(filled.read_text())
    document["tools"][0]["approval"] = "always"
    filled.write_text(yaml.safe_dump(document, sort_keys=False))
    workspace = Workspace.open([filled])
    clock = next(tool for tool in workspace.loaded.registry if tool.name == "get_current_time")
    asked = []

    def desk(request):
        asked.append(request)
        return ApprovalDecision(len(asked) > 1, note="not now")

    with workspace.code_mode(tools=[clock], approver=desk, approval_timeout=30) as code_mode:
        denied = code_mode.run("await clock.get_current_time(timezone='UTC')", "asking")
        assert denied.error["ename"] == "ApprovalDenied" and "not now" in denied.error["evalue"]
        approved = code_mode.run("(await clock.get_current_time(timezone='UTC'))['timezone']", "asking")
        assert approved.status == "ok" and approved.result == "'UTC'", approved.error
    assert [request.tool for request in asked] == ["clock.get_current_time"] * 2
