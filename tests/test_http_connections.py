"""HTTP tools share one client per API and event loop (issue 54): a chain of calls reuses its
connection, the connections close when the loop shuts down, and sharing carries nothing from one
call or API to another (credentials, cookies). Against tests/servers/hostile_api.py, a real server
whose echo names the client's port, one per connection; this process's sockets are read with psutil."""

from __future__ import annotations

import asyncio
import gc
import sys
import textwrap
import weakref
from pathlib import Path

import psutil
import pytest

from toolpath.kernel import CodeMode
from toolpath.kernel.tools import http_tools
from toolpath.kernel.tools.http_tools import call_operation, http_tool
from toolpath.registry import read_catalog
from toolpath.registry.http_apis import HttpApiConfig, HttpAuth, HttpOperation

pytestmark = pytest.mark.integration

SERVERS = Path(__file__).parent / "servers"
HOME_SECRET = "home-" + "k3y" * 8
OTHER_SECRET = "other-" + "k3y" * 8
ENVIRONMENT = {"HOME_KEY": HOME_SECRET, "OTHER_KEY": OTHER_SECRET}


@pytest.fixture(scope="module")
def port(module_listening_server):
    return module_listening_server(lambda port: [sys.executable, str(SERVERS / "hostile_api.py"), str(port)], timeout=60)


def api(name, base_url, auth=None):
    return HttpApiConfig(name=name, base_url=base_url, auth=auth, retries=0)


async def echo(config, rest="probe", **redirect):
    path, query = ("/redirect", ("to",)) if redirect else (f"/echo/{rest}", ())
    return await call_operation("echo", HttpOperation(api=config, method="GET", path=path, query=query), {"to": redirect.get("to")}, ENVIRONMENT)


def open_connections_to(port):
    """This process's established TCP connections to the server's port."""
    return [
        connection
        for connection in psutil.Process().net_connections(kind="tcp")
        if connection.raddr and connection.raddr.port == port and connection.status == psutil.CONN_ESTABLISHED
    ]


def test_consecutive_calls_to_one_api_reuse_one_connection_closed_with_the_loop(port):
    config = api("hostile", f"http://127.0.0.1:{port}")

    async def chain():
        first, second = await echo(config, "first"), await echo(config, "second")
        return first["port"], second["port"], len(open_connections_to(port))

    first_port, second_port, open_during = asyncio.run(chain())
    assert first_port == second_port and open_during == 1
    assert open_connections_to(port) == []  # asyncio.run shut the loop down, and the client with it
    again_port, _, _ = asyncio.run(chain())
    assert again_port != first_port  # a new loop opens its own connection: the closed loop's is gone


def test_a_loop_closed_without_shutting_down_is_let_go_and_a_new_loop_works(port):
    config = api("hostile", f"http://127.0.0.1:{port}")
    abandoned = asyncio.new_event_loop()
    assert abandoned.run_until_complete(echo(config))["path"] == "/echo/probe"
    abandoned.close()  # no shutdown_asyncgens(): its client cannot be closed on it any more
    gone = weakref.ref(abandoned)
    del abandoned
    assert asyncio.run(echo(config, "after"))["path"] == "/echo/after"
    gc.collect()
    assert gone() is None


def test_past_the_bound_of_clients_per_loop_the_least_recently_used_is_closed(port, monkeypatch):
    monkeypatch.setattr(http_tools, "MAX_CLIENTS_PER_LOOP", 2)
    apis = [api(name, f"http://127.0.0.1:{port}") for name in ("first", "second", "third")]

    async def calls():
        ports = [(await echo(config))["port"] for config in apis]
        open_after_three = len(open_connections_to(port))
        again = (await echo(apis[0]))["port"]  # "first" was closed to make room for "third"
        return ports, open_after_three, again

    ports, open_after_three, again = asyncio.run(calls())
    assert len(set(ports)) == 3 and open_after_three == 2 and again not in ports


def test_credentials_stay_with_their_own_api_on_a_shared_loop(port):
    home = api("home", f"http://127.0.0.1:{port}", HttpAuth(scheme="api_key", env="HOME_KEY", name="X-Home-Key"))
    other = api("other", f"http://localhost:{port}", HttpAuth(scheme="api_key", env="OTHER_KEY", name="X-Other-Key"))

    async def calls():
        at_home = await echo(home, "home")
        # 'other' redirects to the host 'home' has a client for: its key must not follow, nor home's join it.
        other_to_home = await echo(other, to=f"http://127.0.0.1:{port}/echo/from-other")
        home_to_other = await echo(home, to=f"http://localhost:{port}/echo/from-home")
        at_other = await echo(other, "other")
        return at_home, other_to_home, home_to_other, at_other

    at_home, other_to_home, home_to_other, at_other = asyncio.run(calls())
    assert at_home["headers"]["x-home-key"] == "[redacted: HOME_KEY]" and "x-other-key" not in at_home["headers"]
    assert at_other["headers"]["x-other-key"] == "[redacted: OTHER_KEY]" and "x-home-key" not in at_other["headers"]
    for redirected in (other_to_home, home_to_other):
        assert redirected["path"].startswith("/echo/from-")
        assert not {"x-home-key", "x-other-key"} & set(redirected["headers"])
        assert HOME_SECRET not in str(redirected) and OTHER_SECRET not in str(redirected)


def test_a_cookie_one_call_got_is_not_sent_by_the_next(port):
    config = api("hostile", f"http://127.0.0.1:{port}")

    async def calls():
        await call_operation("cookie", HttpOperation(api=config, method="GET", path="/cookie"), {}, ENVIRONMENT)
        return await echo(config, "after-cookie")

    assert "cookie" not in asyncio.run(calls())["headers"]


CATALOG = """\
domain: hostile
http_apis:
  hostile: {base_url: "${HOSTILE_URL}", retries: 0}
states:
  - {token: hostile.echoed, description: A request was echoed back., affordances: [echo a request back]}
tools:
  - name: echo
    description: "Echo a request (GET /echo/{rest})"
    http: {api: hostile, method: GET, path: "/echo/{rest}"}
    required_parameters: [{name: rest, type: str}]
    return_spec: {name: echoed, type: dict, state: hostile.echoed}
    state_transition: {requires: [], produces: [hostile.echoed]}
"""


def test_a_cell_chaining_calls_reuses_the_connection_and_shutdown_closes_it(port, tmp_path, monkeypatch):
    monkeypatch.setenv("HOSTILE_URL", f"http://127.0.0.1:{port}")
    path = tmp_path / "hostile.yaml"
    path.write_text(textwrap.dedent(CATALOG))
    (definition,) = read_catalog(path).tools
    with CodeMode(tools=[http_tool(definition)], snapshot=False, pool_size=0) as code_mode:
        run = code_mode.run(
            "first = await tools.echo(rest='one')\nsecond = await tools.echo(rest='two')\n(first['port'] == second['port'], second['path'])", "chain"
        )
        assert run.status == "ok", run.error
        assert run.result == "(True, '/echo/two')"
        assert len(open_connections_to(port)) == 1
    assert open_connections_to(port) == []
