"""HTTP tools (issue 54) against real servers started by these tests: httpbin (a REST application
from the package registry, served by Flask's own server), a TMDB stand-in serving TMDB-shaped fixture
data, and an API that fails on purpose. Planned cells run in real kernels; ids flow from one call
to the next by the catalog's output paths; secrets stay on the host."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from toolpath.kernel.inside.http_results import HttpToolError
from toolpath.kernel.tools.approvals import ApprovalDecision
from toolpath.kernel.tools.http_tools import http_tool
from toolpath.planner import Workspace
from toolpath.registry import lint_catalogs, read_catalog

pytestmark = pytest.mark.integration

SERVERS = Path(__file__).parent / "servers"
TOKEN = "tok-" + "s3cr3t" * 6

HTTPBIN_CATALOG = """\
domain: httpbin
http_apis:
  httpbin:
    base_url: "${HTTPBIN_URL}"
    auth: {scheme: bearer, env: HTTPBIN_TOKEN}
    retries: 0
states:
  - token: httpbin.request_id
    description: A fresh request id (a UUID) has been issued.
    affordances: [issue a new request id]
  - token: httpbin.request_echoed
    description: A request has been echoed back with its URL, query arguments and headers.
    affordances: [echo a request back to see what was sent]
  - token: httpbin.bearer_checked
    description: The bearer token sent with a request has been checked.
    affordances: [check that the bearer token is accepted]
  - token: httpbin.headers_shown
    description: The headers a request arrived with have been shown.
    affordances: [show the headers a request was sent with]
  - token: httpbin.status_answered
    description: An HTTP status has been answered on request.
    affordances: [answer with a chosen HTTP status code]
tools:
  - name: new_request_id
    description: "Issue a new request id (GET /uuid)"
    http: {api: httpbin, method: GET, path: /uuid}
    outputs: {httpbin.request_id: uuid}
    state_transition: {requires: [], produces: [httpbin.request_id]}
  - name: echo_request
    description: "Echo a request back (GET /anything/{request_id})"
    http: {api: httpbin, method: GET, path: "/anything/{request_id}", query: [note]}
    required_parameters: [{name: request_id, type: str, state: httpbin.request_id}]
    optional_parameters: [{name: note, type: str, default: null}]
    return_spec: {name: echo, type: dict, state: httpbin.request_echoed}
    state_transition: {requires: [httpbin.request_id], produces: [httpbin.request_echoed]}
  - name: check_bearer
    description: "Check the bearer token (GET /bearer)"
    http: {api: httpbin, method: GET, path: /bearer}
    return_spec: {name: bearer, type: dict, state: httpbin.bearer_checked}
    state_transition: {requires: [], produces: [httpbin.bearer_checked]}
  - name: show_headers
    description: "Show the request's headers (GET /headers)"
    http: {api: httpbin, method: GET, path: /headers}
    return_spec: {name: headers, type: dict, state: httpbin.headers_shown}
    state_transition: {requires: [], produces: [httpbin.headers_shown]}
  - name: answer_status
    description: "Answer with a status code (GET /status/{code})"
    http: {api: httpbin, method: GET, path: "/status/{code}"}
    required_parameters: [{name: code, type: int}]
    return_spec: {name: answer, type: str, state: httpbin.status_answered}
    state_transition: {requires: [], produces: [httpbin.status_answered]}
"""

TMDB_CATALOG = """\
domain: tmdb
package: tmdb_api
http_apis:
  tmdb:
    base_url: "${TMDB_URL}/3"
    auth: {scheme: bearer, env: TMDB_API_TOKEN}
    timeout_seconds: 30
    retries: 3
    max_response_bytes: 10000000
states:
  - token: tmdb.person_id
    description: The TMDB id of a person (an actor, a director).
    affordances: [find a person's id by name]
  - token: tmdb.person_search_results
    description: People whose names match a search, with their ids and departments.
    affordances: [search for people by name]
  - token: tmdb.movie_id
    description: The TMDB id of a movie.
    affordances: [pick a movie]
  - token: tmdb.person_movie_credits
    description: The movies a person worked on, as cast (characters) and crew (jobs such as director).
    affordances: [list the movies a person acted in or directed]
  - token: tmdb.movie_details
    description: "A movie's details: title, runtime, release date and overview."
    affordances: [get the details of a movie, its runtime and release date]
tools:
  - name: search_person
    description: "Search for people (GET /search/person)"
    http:
      api: tmdb
      method: GET
      path: /search/person
      query: [query, page]
      headers: []
      body: []
    required_parameters: [{name: query, type: str}]
    optional_parameters: [{name: page, type: int, default: 1}]
    outputs:
      tmdb.person_id: "results[0].id"
    state_transition: {requires: [], produces: [tmdb.person_id, tmdb.person_search_results]}
    approval: never
  - name: person_movie_credits
    description: "The movie credits of a person (GET /person/{person_id}/movie_credits)"
    http: {api: tmdb, method: GET, path: "/person/{person_id}/movie_credits"}
    required_parameters: [{name: person_id, type: int, state: tmdb.person_id}]
    state_transition: {requires: [tmdb.person_id], produces: [tmdb.movie_id, tmdb.person_movie_credits]}
    outputs: {tmdb.movie_id: "cast[0].id"}
  - name: movie_details
    description: "The details of a movie (GET /movie/{movie_id})"
    http: {api: tmdb, method: GET, path: "/movie/{movie_id}"}
    required_parameters: [{name: movie_id, type: int, state: tmdb.movie_id}]
    return_spec: {name: movie, type: dict, state: tmdb.movie_details}
    state_transition: {requires: [tmdb.movie_id], produces: [tmdb.movie_details]}
"""

FLAKY_CATALOG = """\
domain: flaky
http_apis:
  flaky:
    base_url: "${FLAKY_URL}"
    retries: 2
    max_retry_wait_seconds: 2
    max_response_bytes: 100000
states:
  - {token: flaky.answered, description: The API answered., affordances: [ask the flaky API]}
  - {token: flaky.note_posted, description: A note was posted., affordances: [post a note to the flaky API]}
tools:
  - name: ask
    description: "Ask, failing the first times (GET /flaky/{key})"
    http: {api: flaky, method: GET, path: "/flaky/{key}", query: [fails, status, retry_after]}
    required_parameters: [{name: key, type: str}]
    optional_parameters: [{name: fails, type: int, default: 0}, {name: status, type: int, default: 503}, {name: retry_after, type: "int | None", default: null}]
    return_spec: {name: answer, type: dict, state: flaky.answered}
    state_transition: {requires: [], produces: [flaky.answered]}
  - name: post_note
    description: "Post a note (POST /flaky/{key})"
    http: {api: flaky, method: POST, path: "/flaky/{key}", query: [fails, status], body: [text]}
    required_parameters: [{name: key, type: str}, {name: text, type: str}]
    optional_parameters: [{name: fails, type: int, default: 0}, {name: status, type: int, default: 503}]
    return_spec: {name: posted, type: dict, state: flaky.note_posted}
    state_transition: {requires: [], produces: [flaky.note_posted]}
    approval: always
  - name: stream
    description: "A long answer (GET /stream)"
    http: {api: flaky, method: GET, path: /stream, query: [bytes]}
    required_parameters: [{name: bytes, type: int}]
    return_spec: {name: text, type: str, state: flaky.answered}
    state_transition: {requires: [], produces: [flaky.answered]}
"""


def catalog_file(directory, text, name):
    path = directory / name
    path.write_text(textwrap.dedent(text))
    return path


def fetch_json(url):
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


@pytest.fixture(scope="module")
def httpbin_url(module_listening_server):
    port = module_listening_server(lambda port: [sys.executable, "-m", "flask", "--app", "httpbin:app", "run", "--port", str(port)], timeout=60)
    return f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def tmdb_url(module_listening_server):
    port = module_listening_server(lambda port: [sys.executable, str(SERVERS / "tmdb_fixture.py"), str(port), TOKEN], timeout=60)
    return f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def flaky_url(module_listening_server):
    port = module_listening_server(lambda port: [sys.executable, str(SERVERS / "flaky_api.py"), str(port)], timeout=60)
    return f"http://127.0.0.1:{port}"


@pytest.fixture()
def httpbin(httpbin_url, tmp_path, monkeypatch):
    monkeypatch.setenv("HTTPBIN_URL", httpbin_url)
    monkeypatch.setenv("HTTPBIN_TOKEN", TOKEN)
    return Workspace.open([catalog_file(tmp_path, HTTPBIN_CATALOG, "bin.yaml")])


@pytest.fixture()
def flaky(flaky_url, tmp_path, monkeypatch):
    monkeypatch.setenv("FLAKY_URL", flaky_url)
    catalog = read_catalog(catalog_file(tmp_path, FLAKY_CATALOG, "flaky.yaml"))
    return {tool.name: http_tool(tool).function for tool in catalog.tools}


def test_the_catalogs_validate_clean(tmp_path):
    paths = [catalog_file(tmp_path, text, name) for text, name in ((HTTPBIN_CATALOG, "bin.yaml"), (TMDB_CATALOG, "tmdb.yaml"), (FLAKY_CATALOG, "flaky.yaml"))]
    assert [(finding.code, finding.message) for finding in lint_catalogs(paths) if finding.severity == "error"] == []


def test_httpbin_a_planned_two_call_chain_passes_the_id_the_first_call_issued(httpbin, tmp_path):
    task = httpbin.plan_task("echo a request back to see what was sent", {})
    assert [step.tool.name for step in task.plan.steps] == ["new_request_id", "echo_request"]
    assert "request_id=output_value(new_request_id_result, 'uuid', 'new_request_id')" in task.cell.code
    assert [source.path for source in task.cell.arguments[1].values() if source.kind == "step"] == ["uuid"]
    with httpbin.code_mode(tools=[step.tool for step in task.plan.steps], snapshot_store=tmp_path / "toolpath.db") as code_mode:
        run = code_mode.run(task.cell.code, "chain")
        assert run.status == "ok", run.error
        issued = code_mode.run("new_request_id_result['uuid']", "chain").result.strip("'")
        assert len(issued) == 36
        echoed = code_mode.run("echo['url']", "chain").result.strip("'")
        assert echoed == f"{httpbin_url_of(httpbin)}/anything/{issued}"


def httpbin_url_of(workspace):
    (catalog,) = workspace.loaded.catalogs
    return catalog.http_apis["httpbin"].expanded_base_url()


def test_auth_is_sent_but_never_written_into_the_cell_the_result_or_the_snapshot(httpbin, tmp_path, monkeypatch):
    store = tmp_path / "toolpath.db"
    tools = list(httpbin.loaded.registry)
    with httpbin.code_mode(tools=tools, snapshot_store=store) as code_mode:
        checked = code_mode.run("from toolpath.kernel.inside.http_results import HttpToolError\nbearer = await httpbin.check_bearer()\nbearer", "auth")
        assert checked.status == "ok", checked.error
        assert "'authenticated': True" in checked.result and "[redacted: HTTPBIN_TOKEN]" in checked.result
        shown = code_mode.run("headers = await httpbin.show_headers()\nheaders['headers']['Authorization']", "auth")
        assert shown.result == "'Bearer [redacted: HTTPBIN_TOKEN]'"
        monkeypatch.delenv("HTTPBIN_TOKEN")
        unset = code_mode.run("await httpbin.check_bearer()", "auth")
        assert unset.error["ename"] == "HttpToolError" and "HTTPBIN_TOKEN" in unset.error["evalue"] and "not set" in unset.error["evalue"]
        texts = [json.dumps(result.to_dict() if hasattr(result, "to_dict") else str(result)) for result in (checked, shown, unset)]
    written = b"".join(path.read_bytes() for path in tmp_path.glob("toolpath.db*"))
    assert written, "the session's snapshot was written"
    assert TOKEN.encode() not in written and all(TOKEN not in text for text in texts)


def test_an_error_status_comes_back_as_the_apis_status_and_message(httpbin):
    with httpbin.code_mode(tools=list(httpbin.loaded.registry)) as code_mode:
        code = "from toolpath.kernel.inside.http_results import HttpToolError\ntry:\n    await httpbin.answer_status(code=404)\nexcept HttpToolError as error:\n    caught = (error.status, str(error))\ncaught"
        result = code_mode.run(code, "errors")
        assert result.status == "ok", result.error
        assert result.result.startswith("(404, 'answer_status: GET /status/404 answered 404 NOT FOUND")
        uncaught = code_mode.run("await httpbin.answer_status(code=418)", "errors")
        assert (
            uncaught.error["ename"] == "HttpToolError" and "answered 418" in uncaught.error["evalue"] and "httpx2" not in "".join(uncaught.error["traceback"])
        )


def test_retries_honour_retry_after_and_give_up_with_the_apis_answer(flaky, flaky_url):
    started = time.monotonic()
    answer = asyncio.run(flaky["ask"](key="twice", fails=2, status=503, retry_after=1))
    assert answer == {"key": "twice", "tries": 3} and time.monotonic() - started >= 2  # two waits of Retry-After: 1

    with pytest.raises(HttpToolError) as exhausted:
        asyncio.run(flaky["ask"](key="always", fails=10, status=503))
    assert exhausted.value.status == 503 and "try 3 refused on purpose" in str(exhausted.value)
    assert fetch_json(f"{flaky_url}/__tries/always") == 3  # one try and two retries

    started = time.monotonic()
    with pytest.raises(HttpToolError) as too_long:
        asyncio.run(flaky["ask"](key="later", fails=1, status=429, retry_after=120))
    assert too_long.value.status == 429 and time.monotonic() - started < 5  # 120 s is over max_retry_wait_seconds: no wait
    assert fetch_json(f"{flaky_url}/__tries/later") == 1

    with pytest.raises(HttpToolError) as posted:
        asyncio.run(flaky["post_note"](key="post-once", text="hello", fails=1, status=503))
    assert posted.value.status == 503 and fetch_json(f"{flaky_url}/__tries/post-once") == 1  # a POST that may have acted is not repeated
    assert asyncio.run(flaky["ask"](key="a429", fails=1, status=429)) == {"key": "a429", "tries": 2}


def test_an_answer_past_the_size_cap_fails_while_it_is_read(flaky):
    assert asyncio.run(flaky["stream"](bytes=1000)) == "x" * 1000
    started = time.monotonic()
    with pytest.raises(HttpToolError, match="max_response_bytes") as too_large:
        asyncio.run(flaky["stream"](bytes=200_000_000))
    assert "Content-Length" not in str(too_large.value)  # the answer gave none: the read stopped at the cap
    assert time.monotonic() - started < 5  # stopped at 100 kB, not after the 15 s the server takes to send 200 MB


def test_a_post_tool_asks_first_and_a_no_sends_nothing(flaky_url, tmp_path, monkeypatch):
    monkeypatch.setenv("FLAKY_URL", flaky_url)
    workspace = Workspace.open([catalog_file(tmp_path, FLAKY_CATALOG, "flaky.yaml")])
    post = next(tool for tool in workspace.loaded.registry if tool.name == "post_note")
    assert post.side_effect == "sends"
    asked = []

    def desk(request):
        asked.append(request)
        return ApprovalDecision(len(asked) > 1, note="not yet")

    with workspace.code_mode(tools=[post], approver=desk, approval_timeout=10) as code_mode:
        denied = code_mode.run("await flaky.post_note(key='asked', text='hello')", "notes")
        assert denied.error["ename"] == "ApprovalDenied" and "not yet" in denied.error["evalue"]
        assert fetch_json(f"{flaky_url}/__tries/asked") == 0
        approved = code_mode.run("(await flaky.post_note(key='asked', text='hello'))['tries']", "notes")
        assert approved.status == "ok" and approved.result == "1", approved.error
    assert [request.tool for request in asked] == ["flaky.post_note"] * 2


@pytest.fixture()
def tmdb(tmdb_url, tmp_path, monkeypatch):
    monkeypatch.setenv("TMDB_URL", tmdb_url)
    monkeypatch.setenv("TMDB_API_TOKEN", TOKEN)
    return Workspace.open([catalog_file(tmp_path, TMDB_CATALOG, "tmdb.yaml")])


def test_tmdb_search_credits_details_each_call_gets_the_id_from_the_one_before(tmdb, tmdb_url):
    task = tmdb.plan_task("get the details of a movie, its runtime and release date", {"query": "Ada Lindqvist"})
    assert [step.tool.name for step in task.plan.steps] == ["search_person", "person_movie_credits", "movie_details"]
    assert TOKEN not in task.cell.code
    before = len(fetch_json(f"{tmdb_url}/__requests"))
    run = tmdb.run_task(task, timeout=120)
    assert run.result.status == "ok", run.result.error
    assert "'title': 'The Lantern Keeper'" in run.result.result and "'runtime': 97" in run.result.result
    requests = fetch_json(f"{tmdb_url}/__requests")[before:]
    assert [request["path"] for request in requests] == ["/3/search/person", "/3/person/70412/movie_credits", "/3/movie/5521"]
    # `page` was left at its default, so it is not sent: the API applies its own.
    assert requests[0]["query"] == {"query": "Ada Lindqvist"} and all(request["authorised"] for request in requests)


def test_tmdb_an_output_path_that_finds_nothing_names_the_path_and_the_tool(tmdb):
    task = tmdb.plan_task("get the details of a movie, its runtime and release date", {"query": "Nobody Of That Name"})
    run = tmdb.run_task(task, timeout=120)
    assert run.result.error["ename"] == "OutputPathError"
    assert "search_person's result has 0 item(s) at results" in run.result.error["evalue"] and "'results[0].id'" in run.result.error["evalue"]


def test_tmdb_a_404_carries_tmdbs_own_message(tmdb):
    tools = list(tmdb.loaded.registry)
    with tmdb.code_mode(tools=tools) as code_mode:
        missing = code_mode.run("await tmdb.movie_details(movie_id=1)", "s")
        assert missing.error["ename"] == "HttpToolError"
        assert missing.error["evalue"] == "movie_details: GET /movie/1 answered 404 Not Found: The resource you requested could not be found."


def test_tmdb_a_session_passes_on_the_id_an_earlier_tasks_search_found(tmdb, tmdb_url):
    from toolpath.kernel import CodeMode

    with CodeMode(pool_size=0) as shared:
        session = tmdb.session("films", code_mode=shared)
        found = session.run_task("search for people by name", {"query": "Ada Lindqvist"})
        assert found.result.status == "ok", found.result.error
        assert "tmdb.person_id" in session.held and "search_person_result at results[0].id" in session.instructions()

        follow = session.plan_task("list the movies a person acted in or directed")
        assert [step.tool.name for step in follow.plan.steps] == ["person_movie_credits"]
        assert "person_id=output_value(search_person_result, 'results[0].id', 'search_person')" in follow.cell.code
        assert follow.cell.arguments[0]["person_id"].to_dict() == {
            "source": "held",
            "label": "held search_person_result",
            "variable": "search_person_result",
            "state": "tmdb.person_id",
            "path": "results[0].id",
            "tool": "search_person",
        }
        before = len(fetch_json(f"{tmdb_url}/__requests"))
        credits = session.run_task(follow)
        assert credits.result.status == "ok", credits.result.error
        assert [request["path"] for request in fetch_json(f"{tmdb_url}/__requests")[before:]] == ["/3/person/70412/movie_credits"]

        # Saved and restored with the kernel, the places of the ids come back with it.
        saved = json.loads(json.dumps(session.state().to_dict()))
        assert saved["outputs"]["search_person_result"] == {"tmdb.person_id": {"path": "results[0].id", "tool": "search_person"}}
        restored = tmdb.session("films", code_mode=shared, state=saved)
        details = restored.run_task("get the details of a movie, its runtime and release date")
        assert "movie_id=output_value(person_movie_credits_result, 'cast[0].id', 'person_movie_credits')" in details.task_plan.cell.code
        assert details.result.status == "ok" and "'title': 'The Lantern Keeper'" in details.result.result, details.result.error

        # The variable deleted, the id it held is no longer held: finding it searches again.
        gone = restored.execute("del search_person_result")
        assert "search_person_result (tmdb.person_id)" in gone.notice and "tmdb.person_id" not in restored.held
        again = restored.plan_task("find a person's id by name", {"query": "Ada Lindqvist"})
        assert [step.tool.name for step in again.plan.steps] == ["search_person"]
