"""HTTP tools (issue 54) against an API that misbehaves on purpose (tests/servers/hostile_api.py, a
real server started here): credentials must not follow a redirect to another host, a path or header
parameter cannot reach outside its place, and a slow or inflating answer is bounded."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

from toolpath.kernel.inside.http_results import HttpToolError
from toolpath.kernel.tools.http_tools import call_operation
from toolpath.registry.http_apis import HttpApiConfig, HttpAuth, HttpOperation

pytestmark = pytest.mark.integration

SERVERS = Path(__file__).parent / "servers"
SECRET = "key-" + "hunter2" * 4
ENVIRONMENT = {"HOSTILE_KEY": SECRET}


@pytest.fixture(scope="module")
def port(module_listening_server):
    return module_listening_server(lambda port: [sys.executable, str(SERVERS / "hostile_api.py"), str(port)], timeout=60)


def api(port, auth=None, **limits):
    return HttpApiConfig(name="hostile", base_url=f"http://127.0.0.1:{port}", auth=auth, retries=0, **limits)


def call(config, path, arguments, **placed):
    return asyncio.run(call_operation("probe", HttpOperation(api=config, method="GET", path=path, **placed), arguments, ENVIRONMENT))


@pytest.mark.parametrize(
    "auth",
    [
        HttpAuth(scheme="api_key", env="HOSTILE_KEY", name="X-Api-Key"),
        HttpAuth(scheme="bearer", env="HOSTILE_KEY"),
        HttpAuth(scheme="api_key", env="HOSTILE_KEY", name="api_key", **{"in": "query"}),
    ],
    ids=["api-key-header", "bearer", "api-key-query"],
)
def test_a_redirect_to_another_host_carries_no_credentials_one_to_the_same_host_does(port, auth):
    # 'localhost' and '127.0.0.1' are the same server but different hosts to a client, as another company's would be.
    elsewhere = call(api(port, auth), "/redirect", {"to": f"http://localhost:{port}/echo/elsewhere"}, query=("to",))
    assert elsewhere["path"] == "/echo/elsewhere"
    assert "[redacted: HOSTILE_KEY]" not in str(elsewhere) and SECRET not in str(elsewhere)
    home = call(api(port, auth), "/redirect", {"to": f"http://127.0.0.1:{port}/echo/home"}, query=("to",))
    if auth.placement == "header" or auth.scheme == "bearer":
        assert "[redacted: HOSTILE_KEY]" in str(home["headers"])  # the API's own host still gets its key


@pytest.mark.parametrize("value", ["..", ".", ""])
def test_a_path_parameter_cannot_step_out_of_its_segment(port, value):
    with pytest.raises(HttpToolError, match="no path segment"):
        call(api(port), "/echo/users/{user}/profile", {"user": value})
    sent = call(api(port), "/echo/users/{user}/profile", {"user": "../admin?x=1#y"})
    assert sent["path"] == "/echo/users/..%2Fadmin%3Fx%3D1%23y/profile" and sent["query"] == ""


def test_a_header_parameter_with_a_line_break_is_refused_before_sending(port):
    with pytest.raises(HttpToolError, match="'X-Note' holds a line break"):
        call(api(port), "/echo/note", {"X-Note": "hello\r\nX-Injected: 1"}, headers=("X-Note",))


def test_timeout_seconds_bounds_the_whole_answer_not_each_read(port):
    started = time.monotonic()
    with pytest.raises(HttpToolError, match=r"longer than timeout_seconds \(1 s\)"):
        call(api(port, timeout_seconds=1), "/drip", {"seconds": 6}, query=("seconds",))
    assert time.monotonic() - started < 3  # each byte came within 0.2 s; the whole answer takes 6 s


def test_a_retry_after_wait_is_not_counted_in_the_tries_timeout(port):
    assert call(api(port, timeout_seconds=1).model_copy(update={"retries": 1}), "/later/{key}", {"key": "wait-outside"}) == "ok"


def test_the_size_cap_counts_decompressed_bytes(port):
    with pytest.raises(HttpToolError, match="max_response_bytes"):
        call(api(port, max_response_bytes=1_000_000), "/bomb", {"megabytes": 50}, query=("megabytes",))


@pytest.mark.parametrize(
    ("path", "arguments", "message"),
    [
        ("/circle", {}, r"probe: GET /circle redirected more than 20 times"),
        ("/garbled", {}, r"probe: GET /garbled answered a body its Content-Encoding does not decode"),
        ("/nested", {"depth": 100_000}, r"probe: GET /nested answered JSON nested too deeply to read"),
        ("/nested", {"depth": 600}, r"probe: GET /nested answered JSON nested too deeply to read"),  # decodes, but too deep to mask the key in
    ],
)
def test_an_answer_that_cannot_be_read_fails_as_the_tools_error(port, path, arguments, message):
    # A client or interpreter exception would reach the cell without the tool, method and path.
    with pytest.raises(HttpToolError, match=message):
        call(api(port, HttpAuth(scheme="bearer", env="HOSTILE_KEY")), path, arguments, query=tuple(arguments))
