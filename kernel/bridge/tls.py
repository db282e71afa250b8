"""TLS for the bridge's TCP endpoint, which kernels on other hosts connect to (see :mod:`toolpath.kernel.bridge.host`).

The host either generates a certificate (an ECDSA P-256 key and a self-signed certificate naming the
address kernels connect to) or is given one. Either way the kernel trusts exactly that certificate:
CodeMode sends its PEM with the bridge's address and token, and the kernel pins it
(:func:`toolpath.kernel.inside.bridge_client.client_context`), so no certificate authority is involved and a
generated certificate is as safe as a bought one.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import tempfile
from dataclasses import dataclass

from toolpath.errors import MissingExtraError

try:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
except ImportError as error:  # an optional part: local kernels reach the host over a Unix socket
    raise MissingExtraError("kernels on other hosts reach this one over TLS, which needs cryptography: pip install 'toolpath[gateway]'") from error

#: How long a generated certificate is valid; one CodeMode lives far shorter, and each makes its own.
VALID_DAYS = 365


@dataclass(frozen=True)
class BridgeCertificate:
    """The bridge's certificate (PEM, a chain when given one) and the TLS context that serves it."""

    pem: str
    context: ssl.SSLContext


def generate(host: str) -> BridgeCertificate:
    """A new key and self-signed certificate for ``host`` (an IP address or a DNS name).

    The key never touches the disk outside a private temporary directory, removed before returning
    (``ssl`` loads keys from files only).
    """
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "toolpath bridge")])
    try:
        alternative: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        alternative = x509.DNSName(host)
    now = datetime.datetime.now(datetime.UTC)
    public_key = key.public_key()
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))  # clocks of the kernel's host may lag
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.SubjectAlternativeName([alternative]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public_key), critical=False)
        .sign(key, hashes.SHA256())
    )
    certificate_pem = certificate.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    with tempfile.TemporaryDirectory(prefix="toolpath-bridge-tls-") as directory:
        certificate_file, key_file = os.path.join(directory, "bridge.pem"), os.path.join(directory, "bridge.key")
        for path, data in ((certificate_file, certificate_pem), (key_file, key_pem)):
            with open(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600), "wb") as file:
                file.write(data)
        return BridgeCertificate(certificate_pem.decode(), _server_context(certificate_file, key_file))


def load(certificate_file: str, key_file: str) -> BridgeCertificate:
    """The certificate (chain) in ``certificate_file`` with its key in ``key_file``, both PEM.

    Raises:
        ValueError: a file cannot be read, or the key does not match the certificate; the message
            names the files.
    """
    try:
        with open(certificate_file, encoding="ascii") as file:
            pem = file.read()
        return BridgeCertificate(pem, _server_context(certificate_file, key_file))
    except (OSError, ssl.SSLError, UnicodeDecodeError) as error:
        raise ValueError(
            f"bridge_certificate ({certificate_file}, {key_file}) cannot be used: {error}; give a PEM certificate file and its PEM key file"
        ) from None


def _server_context(certificate_file: str, key_file: str) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(certificate_file, key_file)
    return context
