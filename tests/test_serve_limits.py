"""``toolpath serve --http`` against hostile clients on loopback: floods of idle connections under a
low open-file limit, requests that never finish, forged Host and Origin headers, a client that
gives up on a long cell, SIGTERM during a long request. Each test runs a real server process."""

import asyncio
import os
import resource
import socket
import sys
import time
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
#: Not 127.0.0.1: the MCP SDK's own Host check covers only 127.0.0.1, localhost and ::1.
HOST = "127.0.0.2"
#: The server's open-file limit in the flood test: 400 leaves 144 connections after the reserve.
LOW_FILE_LIMIT = 400


def _low_file_limit():
    resource.setrlimit(resource.RLIMIT_NOFILE, (LOW_FILE_LIMIT, LOW_FILE_LIMIT))


def _serve_command(*options):
    return lambda port: [sys.executable, "-m", "toolpath.planner.interfaces.cli", "serve", "--http", f"{HOST}:{port}", "--no-auth", *options]


@pytest.fixture(scope="module")
def limited_server(tmp_path_factory, module_listening_server):
    """``toolpath serve --http 127.0.0.2:PORT --no-auth --request-timeout 2`` under an open-file
    limit of 400: its MCP URL and port."""
    home = tmp_path_factory.mktemp("home")
    port = module_listening_server(
        _serve_command("--request-timeout", "2"), host=HOST, cwd=str(ROOT), env={**os.environ, "TOOLPATH_HOME": str(home)}, preexec_fn=_low_file_limit
    )
    return f"http://{HOST}:{port}/mcp", port


def _client(url):
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(timeout=60)))


def _search(url):
    async def scenario():
        async with _client(url) as client:
            result = await client.call_tool("search_skills", {"query": "parse a SMILES string", "k": 1})
            assert not result.is_error, result.content[0].text
            return result.structured_content["hits"][0]["name"]

    return asyncio.run(scenario())


def _closed_by_server(connection, within):
    """Whether the server closes ``connection`` within ``within`` seconds (reading until EOF)."""
    connection.settimeout(within)
    try:
        while connection.recv(4096):
            pass
        return True
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_a_flood_of_idle_connections_past_the_file_limit_leaves_the_server_serving(limited_server):
    url, port = limited_server
    flood = []
    try:
        for _ in range(LOW_FILE_LIMIT + 200):  # more than the server has descriptors
            flood.append(socket.create_connection((HOST, port), timeout=5))
        # A real client still gets through: it takes the place of the longest-idle connection.
        assert _search(url) in {"parse_molecule", "chemistry.molecule_parsed"}
        still_open = sum(not _closed_by_server(connection, 0.01) for connection in flood)
        assert still_open <= LOW_FILE_LIMIT - 256, "the server held more connections than its descriptors allow"
    finally:
        for connection in flood:
            connection.close()
    assert _search(url) in {"parse_molecule", "chemistry.molecule_parsed"}


def test_requests_that_never_finish_are_closed_and_others_are_served(limited_server):
    url, port = limited_server
    silent = socket.create_connection((HOST, port))
    slow_head = socket.create_connection((HOST, port))
    slow_head.sendall(f"POST /mcp HTTP/1.1\r\nHost: {HOST}:{port}\r\nX-Slow: ".encode())
    slow_body = socket.create_connection((HOST, port))
    slow_body.sendall(f"POST /mcp HTTP/1.1\r\nHost: {HOST}:{port}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{".encode())
    started = time.monotonic()
    for connection in (silent, slow_head, slow_body):
        assert _closed_by_server(connection, within=15)
        connection.close()
    assert time.monotonic() - started < 15
    assert _search(url) in {"parse_molecule", "chemistry.molecule_parsed"}


def test_forged_host_or_origin_is_refused_on_any_loopback_address(limited_server):
    url, port = limited_server
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
    }
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    with httpx2.Client(timeout=30) as http:
        rebound = http.post(url, json=initialize, headers={**headers, "Host": "attacker.example"})
        assert rebound.status_code == 421
        cross_origin = http.post(url, json=initialize, headers={**headers, "Origin": "http://attacker.example"})
        assert cross_origin.status_code == 403
        own = http.post(url, json=initialize, headers={**headers, "Origin": f"http://{HOST}:{port}"})
        assert own.status_code == 200
        # A client on this machine that names it localhost is this machine's, on any loopback address.
        local = http.post(url, json=initialize, headers={**headers, "Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"})
        assert local.status_code == 200
        other_port = http.post(url, json=initialize, headers={**headers, "Host": f"localhost:{port + 1}"})
        assert other_port.status_code == 421
    assert _search(url) in {"parse_molecule", "chemistry.molecule_parsed"}


def test_a_cell_whose_client_gave_up_is_stopped(limited_server):
    url, _ = limited_server
    cell = "import time\nstarted = time.monotonic()\ntry:\n    time.sleep(60)\nfinally:\n    ran_for = time.monotonic() - started"

    async def scenario():
        async with _client(url) as client:
            await client.call_tool("execute", {"code": "1", "session_id": "gone"})  # the kernel is up

        async def gives_up():
            async with _client(url) as client:
                await client.call_tool("execute", {"code": cell, "session_id": "gone"})

        call = asyncio.create_task(gives_up())
        await asyncio.sleep(4)
        call.cancel()
        await asyncio.gather(call, return_exceptions=True)
        async with _client(url) as client:
            return (await client.call_tool("execute", {"code": "ran_for", "session_id": "gone"})).structured_content["result"]

    assert float(asyncio.run(scenario())) < 30


def test_sigterm_stops_the_server_promptly_while_a_cell_runs(tmp_path, listening_server):
    port = listening_server(_serve_command(), host=HOST, cwd=str(ROOT), env={**os.environ, "TOOLPATH_HOME": str(tmp_path / "home")})
    url, server = f"http://{HOST}:{port}/mcp", listening_server.processes[-1]

    async def long_cell():
        async with _client(url) as client:
            await client.call_tool("execute", {"code": "import time\ntime.sleep(120)"})

    loop = asyncio.new_event_loop()
    cell = loop.create_task(long_cell())
    loop.run_until_complete(asyncio.sleep(8))  # the kernel starts and the cell is running
    started = time.monotonic()
    server.terminate()
    server.wait(timeout=60)
    assert time.monotonic() - started < 30
    cell.cancel()
    loop.run_until_complete(asyncio.gather(cell, return_exceptions=True))
    loop.close()


def test_sigterm_stops_the_server_promptly_when_a_cell_left_a_fifo_at_its_snapshot_dump(listening_server, toolpath_models):
    # The cell replaces toolpath's kernel-side dump with one that leaves a FIFO where the host reads
    # the dump: an open() of it would never return, and the shutdown snapshots every session.
    trap = (
        "import json, os\nimport toolpath.kernel.inside.snapshot as _snapshot_code\n"
        "def _trap(path, *args, **kwargs):\n"
        "    os.mkfifo(path)\n"
        "    with open(path + '.report', 'w') as file:\n"
        "        json.dump({'saved': {}, 'skipped': {}}, file)\n"
        "_snapshot_code.dump = _trap\ntrapped = 1"
    )
    from toolpath.planner.search.onnx_embedding import OnnxEmbedder

    OnnxEmbedder(toolpath_models).load()  # the run's one export, done: SIGTERM meets no start-up work
    port = listening_server(_serve_command(), host=HOST, cwd=str(ROOT), env=dict(os.environ))
    url, server = f"http://{HOST}:{port}/mcp", listening_server.processes[-1]

    async def scenario():
        async with _client(url) as client:
            result = await client.call_tool("execute", {"code": trap, "session_id": "trapped"})
            assert not result.is_error, result.content[0].text

    asyncio.run(scenario())
    time.sleep(3)  # the snapshot 1.5 s after the cell meets the FIFO
    started = time.monotonic()
    server.terminate()
    server.wait(timeout=60)
    assert time.monotonic() - started < 10


def test_connections_to_the_bound_address_send_without_waiting_for_acknowledgements():
    """Nagle's algorithm is off on the connections a bound address accepts: asyncio turns it off
    only for sockets that say they are TCP, and with it on each response of ``serve --http`` waited
    some 40 ms for the client's delayed acknowledgement."""
    from toolpath.planner.interfaces.http_serving import bind_address

    async def accepted_nodelay() -> int:
        listener = bind_address("127.0.0.1", 0)[0]
        seen: asyncio.Future = asyncio.get_running_loop().create_future()

        async def on_connection(reader, writer):
            seen.set_result(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(on_connection, sock=listener)
        async with server:
            _, writer = await asyncio.open_connection(*listener.getsockname()[:2])
            try:
                return await asyncio.wait_for(seen, 10)
            finally:
                writer.close()

    assert asyncio.run(accepted_nodelay()) != 0
