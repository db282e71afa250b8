"""What is particular to kernels on a gateway: its API, its errors, and the TLS bridge they call host tools through.

Every case runs against a real Jupyter Kernel Gateway and a real Jupyter Enterprise Gateway 3.x
(from its own virtual environment), with toolpath unchanged between them. The shared cases (cells,
caps, images, timeouts, deaths, restarts, host tools, snapshots) run against the Kernel Gateway in
test_codemode.py, test_toolkit_bridge.py and test_snapshots.py.
"""

import asyncio
import datetime
import http
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from websockets.asyncio.server import serve

from toolpath.kernel import CodeMode, KernelError, Toolkit
from toolpath.kernel.bridge.tls import generate
from toolpath.kernel.kernels.gateway import Gateway, GatewayTransport

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", params=["Kernel Gateway", "Enterprise Gateway"])
def kernel_gateway(request, kernel_gateway):
    """CodeMode's options for each of the two gateways in turn (this module's cases run on both)."""
    return kernel_gateway if request.param == "Kernel Gateway" else request.getfixturevalue("enterprise_gateway")


def gateway_request(gateway, method, path):
    """The JSON answer of one request to the gateway's REST API (``None`` when empty)."""
    request = urllib.request.Request(f"{gateway['gateway_url']}/{path}", method=method, headers={"Authorization": f"token {gateway['gateway_token']}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        body = response.read()
    return json.loads(body) if body else None


def on_gateway(gateway, kernel_id) -> bool:
    """Whether the gateway has kernel ``kernel_id``."""
    try:
        return gateway_request(gateway, "GET", f"api/kernels/{kernel_id}")["id"] == kernel_id
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return False
        raise


def stock_level(sku: str) -> int:
    """Units of ``sku`` in stock."""
    return len(sku)


def test_kernels_live_on_the_gateway_and_are_shut_down_there(kernel_gateway):
    with CodeMode(pool_size=1, **kernel_gateway) as code_mode:
        code_mode.run("x = 1", "s")
        first = code_mode.kernel_id("s")
        assert on_gateway(kernel_gateway, first)
        code_mode.restart("s")
        assert not on_gateway(kernel_gateway, first)
        assert code_mode.run("'x' in globals()", "s").result == "False"
        second = code_mode.kernel_id("s")
        assert second != first and on_gateway(kernel_gateway, second)
    assert not on_gateway(kernel_gateway, second)


def test_a_wrong_token_or_an_unreachable_gateway_is_a_clear_error(kernel_gateway):
    with CodeMode(pool_size=0, gateway_url=kernel_gateway["gateway_url"], gateway_token="wrong") as code_mode:
        with pytest.raises(KernelError, match=r"refused the request \(HTTP 40[13]\);.* check the gateway token"):
            code_mode.run("1", "s")
    with CodeMode(pool_size=0, gateway_url="http://127.0.0.1:9", gateway_token="x") as code_mode:
        with pytest.raises(KernelError, match="cannot reach the kernel gateway at http://127.0.0.1:9/"):
            code_mode.run("1", "s")
    with CodeMode(pool_size=0, kernel_name="no-such-kernelspec", **kernel_gateway) as code_mode:
        with pytest.raises(KernelError, match="has no kernelspec 'no-such-kernelspec'; it has python3"):
            code_mode.run("1", "s")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"gateway_url": "gateway:8888"}, "http:// or https:// URL"),
        ({"gateway_url": "http://gateway:8888", "python": "/usr/bin/python3"}, "python cannot be combined"),
        ({"kernel_name": "python3", "python": "/usr/bin/python3"}, "python cannot be combined"),
        ({"gateway_url": "http://gateway:8888", "cwd": "/tmp"}, "cwd cannot be set for gateway kernels"),
        ({"gateway_url": "http://gateway:8888", "offload_results": True}, "offload_results needs kernels on this machine"),
        ({"gateway_token": "secret"}, "gateway_token is only used with gateway_url"),
        ({"bridge_address": "10.0.0.5"}, "bridge_address must be 'host:port'"),
        ({"bridge_listen": "0.0.0.0:99999"}, "bridge_listen must be 'host:port'"),
        ({"bridge_certificate": ("/nonexistent.pem", "/nonexistent.key")}, r"bridge_certificate \(/nonexistent.pem, /nonexistent.key\) cannot be used"),
        ({"bridge_certificate": "bridge.pem"}, r"bridge_certificate must be \(certificate file, key file\)"),
        ({"gateway_url": "http://127.0.0.1:notaport"}, "a port that is not a number"),
        ({"gateway_url": "http://127.0.0.1:99999"}, "a port that is not a number"),
        ({"gateway_url": "http://gateway:8888 "}, "no spaces"),
        ({"gateway_url": "http://user:secret@gateway:8888"}, "must not hold credentials"),
        ({"gateway_url": "http://gateway:8888", "gateway_token": "token\n"}, "trailing newline"),
    ],
)
def test_options_that_cannot_work_are_refused_at_construction(options, message):
    with pytest.raises(ValueError, match=message):
        CodeMode(**options)


def test_gateway_kernels_send_json_only_unless_the_host_allows_pickles(kernel_gateway):
    inventory = Toolkit("inventory", [stock_level])
    with CodeMode([inventory], pool_size=0, **kernel_gateway) as strict:
        refused = strict.run("await inventory.stock_level({'a', 'b'})", "s")
        assert refused.error["ename"] == "BridgeError" and "accepts JSON only" in refused.error["evalue"]
        assert strict.run("await inventory.stock_level('abc')", "s").result == "3"
    with CodeMode([inventory], pool_size=0, accept_pickles=True, **kernel_gateway) as trusting:
        assert trusting.run("await inventory.stock_level({'a', 'b'})", "s").result == "2"


def bridge_endpoint(code_mode, session_id):
    spec = code_mode._binder.bridge_of(code_mode._engine.pool.sessions[session_id].kernel).spec()
    return spec["address"], spec["certificate"], spec["token"], spec["generation"]


def test_the_bridge_speaks_tls_only_and_the_kernel_trusts_only_the_hosts_certificate(kernel_gateway):
    inventory = Toolkit("inventory", [stock_level])
    with CodeMode([inventory], pool_size=0, **kernel_gateway) as code_mode:
        code_mode.run("1", "s")
        (host, port), certificate, token, generation = bridge_endpoint(code_mode, "s")
        # Plain TCP gets no answer: the host waits for a TLS handshake and drops the connection.
        plain = code_mode.run(
            "import asyncio, struct, json\n"
            f"reader, writer = await asyncio.open_connection({host!r}, {port})\n"
            f"hello = b'J' + json.dumps({{'op': 'hello', 'token': {token!r}, 'generation': {generation}}}).encode()\n"
            "writer.write(struct.pack('>I', len(hello)) + hello)\n"
            "answer = await asyncio.wait_for(reader.read(), 30)\n"
            "answer",
            "s",
        )
        assert plain.result == "b''", plain
        # A kernel told to pin another certificate refuses the host's.
        impostor = generate(host).pem
        pinned = code_mode.run(
            "from toolpath.kernel.inside.bridge_client import BridgeClient, BridgeError\n"
            "try:\n"
            f"    await BridgeClient(({host!r}, {port}, {impostor!r}), {token!r}, {generation}).call('inventory.stock_level', ('a',), {{}})\n"
            "except BridgeError as error:\n"
            "    print(error)",
            "s",
        )
        assert "CERTIFICATE_VERIFY_FAILED" in pinned.stdout and "cannot reach the host bridge" in pinned.stdout


def issued_certificate(directory, host):
    """A key and a certificate for ``host`` issued by a new certificate authority (not self-signed),
    written as PEM files; the kernel pins the certificate without knowing the authority."""
    now = datetime.datetime.now(datetime.UTC)

    def certificate(subject, issuer, public_key, signing_key, extensions):
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
        )
        for extension, critical in extensions:
            builder = builder.add_extension(extension, critical=critical)
        return builder.sign(signing_key, hashes.SHA256())

    authority_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    # The authority's own certificate is never needed: the kernel pins the leaf.
    authority_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test authority")])
    leaf = certificate(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]),
        authority_name,
        key.public_key(),
        authority_key,
        [
            (x509.SubjectAlternativeName([x509.DNSName(host)]), False),
            (x509.BasicConstraints(ca=False, path_length=None), True),
            (x509.AuthorityKeyIdentifier.from_issuer_public_key(authority_key.public_key()), False),
            (x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False),
        ],
    )
    certificate_file, key_file = directory / "bridge.pem", directory / "bridge.key"
    certificate_file.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return certificate_file, key_file


def test_a_given_certificate_serves_the_bridge(kernel_gateway, tmp_path):
    certificate, key = issued_certificate(tmp_path, "localhost")
    inventory = Toolkit("inventory", [stock_level])
    with CodeMode([inventory], pool_size=0, bridge_address="localhost:0", bridge_certificate=(str(certificate), str(key)), **kernel_gateway) as code_mode:
        assert code_mode.run("await inventory.stock_level('four')", "s").result == "4"
        assert bridge_endpoint(code_mode, "s")[1] == certificate.read_text()
    with pytest.raises(ValueError, match="cannot be used"):
        CodeMode(bridge_certificate=(str(certificate), str(certificate)))  # a certificate is no key


def test_the_run_command_runs_its_cell_on_a_gateway(kernel_gateway, tmp_path):
    command = [
        sys.executable,
        "-m",
        "toolpath.planner.interfaces.cli",
        "run",
        "is aspirin drug-like? check Lipinski's rule of five",
        "--input",
        "smiles=CC(=O)Oc1ccccc1C(=O)O",
        "--json",
        "--gateway-url",
        kernel_gateway["gateway_url"],
    ]
    environment = {**os.environ, "TOOLPATH_GATEWAY_TOKEN": kernel_gateway["gateway_token"]}
    finished = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr
    assert json.loads(finished.stdout)["result"]["result"]["lipinski"]["passes"] is True
    refused = subprocess.run(command, env={**environment, "TOOLPATH_GATEWAY_TOKEN": "wrong"}, capture_output=True, text=True, timeout=300)
    error = json.loads(refused.stdout)["error"]  # with --json, the refusal is JSON too
    assert refused.returncode == 2 and "refused the request (HTTP 40" in error and "TOOLPATH_GATEWAY_TOKEN" in error


def test_a_bridge_address_this_host_cannot_listen_on_is_a_clear_error(kernel_gateway):
    inventory = Toolkit("inventory", [stock_level])
    # 203.0.113.0/24 is reserved for documentation (RFC 5737): no interface of this machine has it.
    with CodeMode([inventory], pool_size=0, bridge_address="203.0.113.7:7443", **kernel_gateway) as code_mode:
        with pytest.raises(KernelError, match="the bridge cannot listen on 203.0.113.7:7443.*set bridge_listen"):
            code_mode.run("1", "s")


def test_a_kernel_the_gateway_shut_down_is_reported_dead_and_replaced(kernel_gateway):
    # A culled kernel's WebSocket stays open: CodeMode asks the gateway when a cell goes quiet.
    with CodeMode(pool_size=0, timeout=60, **kernel_gateway) as code_mode:
        code_mode.run("x = 1", "s")
        gateway_request(kernel_gateway, "DELETE", f"api/kernels/{code_mode.kernel_id('s')}")
        started = time.monotonic()
        gone = code_mode.run("x", "s")
        assert gone.status == "dead" and time.monotonic() - started < 20, gone
        fresh = code_mode.run("'x' in globals()", "s")
        assert fresh.result == "False" and "fresh kernel" in fresh.notice


def test_a_cell_over_the_gateways_message_limit_loses_the_connection_not_the_kernel(kernel_gateway):
    with CodeMode(pool_size=0, timeout=60, snapshot=False, **kernel_gateway) as code_mode:
        code_mode.run("kept = 42", "s")
        kernel_id = code_mode.kernel_id("s")
        huge = code_mode.run("y = '" + "a" * 11_000_000 + "'", "s")  # Tornado's default limit is 10 MiB
        assert huge.status == "error" and huge.error["ename"] == "ConnectionLost" and "still running and keeps its variables" in huge.error["evalue"]
        assert code_mode.run("kept", "s").result == "42" and code_mode.kernel_id("s") == kernel_id


def test_no_kernel_is_left_on_the_gateway_when_shutdown_interrupts_the_pool(kernel_gateway):
    for attempt in range(6):
        code_mode = CodeMode(pool_size=1, **kernel_gateway)
        time.sleep(0.1 + 0.15 * attempt)  # before, during and after the pool kernel's start
        code_mode.shutdown()
    assert gateway_request(kernel_gateway, "GET", "api/kernels") == []


def test_a_gateway_token_without_a_gateway_is_refused_by_the_command_line(tmp_path):
    command = [sys.executable, "-m", "toolpath.planner.interfaces.cli", "run", "is aspirin drug-like?", "--input", "smiles=CCO"]
    refused = subprocess.run(command, env={**os.environ, "TOOLPATH_GATEWAY_TOKEN": "secret"}, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and "TOOLPATH_GATEWAY_TOKEN is set but no gateway is" in refused.stderr


def test_a_kernel_is_reached_when_the_gateway_holds_the_handshake_past_the_start_timeout():
    """jupyter_server holds a kernel's WebSocket handshake until the kernel answers its one
    kernel_info_request, and when that reply is lost, until its own kernel_info_timeout, 60 s, which
    equals CodeMode's default start timeout. A server that answers a little after the start timeout
    must still get its kernel used."""
    start_timeout, held = 1.0, 2.5

    async def process_request(connection, request):
        if request.path == "/api/kernels/k1":
            return connection.respond(http.HTTPStatus.OK, json.dumps({"id": "k1", "execution_state": "idle"}))
        await asyncio.sleep(held)  # the channels: held as jupyter_server holds them
        return None

    async def kernel(websocket):
        async for raw in websocket:
            request = json.loads(raw)
            await websocket.send(
                json.dumps({"channel": "shell", "msg_type": "kernel_info_reply", "parent_header": request["header"], "content": {"status": "ok"}})
            )

    async def main():
        async with serve(kernel, "127.0.0.1", 0, process_request=process_request) as server:
            port = server.sockets[0].getsockname()[1]
            transport = GatewayTransport(Gateway(f"http://127.0.0.1:{port}", "token"), {})
            started = time.monotonic()
            attached = await transport.attach("k1", start_timeout)
            elapsed = time.monotonic() - started
            await transport.detach()
            return attached, elapsed

    attached, elapsed = asyncio.run(main())
    assert attached and elapsed >= held


def test_a_starting_kernel_whose_channels_the_gateway_drops_is_reached_on_new_ones():
    """jupyter_server may close a starting kernel's WebSocket when its own first request goes
    unanswered; the kernel still runs, and the start goes on over channels opened again."""
    connections = []

    async def kernel(websocket):
        connections.append(websocket)
        if len(connections) == 1:
            await websocket.close()
            return
        async for raw in websocket:
            request = json.loads(raw)
            await websocket.send(
                json.dumps({"channel": "shell", "msg_type": "kernel_info_reply", "parent_header": request["header"], "content": {"status": "ok"}})
            )

    async def process_request(connection, request):
        if request.path == "/api/kernels/k1":
            return connection.respond(http.HTTPStatus.OK, json.dumps({"id": "k1", "execution_state": "idle"}))
        return None

    async def main():
        async with serve(kernel, "127.0.0.1", 0, process_request=process_request) as server:
            transport = GatewayTransport(Gateway(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", "token"), {})
            attached = await transport.attach("k1", 10.0)
            await transport.detach()
            return attached

    assert asyncio.run(main()) and len(connections) == 2
