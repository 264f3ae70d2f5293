"""TLS material made on the fly for tests: a CA, a server certificate for 127.0.0.1 and
localhost, and a client certificate (mutual TLS), as PEM files, with ``cryptography``.

    certs = make_certs(tmp_path / "tls")
    certs.ca, certs.server_cert, certs.server_key, certs.client_cert, certs.client_key

:func:`server_tls_block` is the ``tls { ... }`` block of a nats-server config that
requires TLS and verifies clients against the CA.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Certs:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    #: a second CA that signed nothing here: a client trusting it rejects the server
    other_ca: Path


def make_certs(folder: Path) -> Certs:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    def write_key(key, path: Path) -> Path:
        path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
        return path

    def write_cert(cert, path: Path) -> Path:
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return path

    def authority(common: str):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (x509.CertificateBuilder().subject_name(name(common)).issuer_name(name(common))
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                             content_commitment=False, key_encipherment=False,
                                             data_encipherment=False, key_agreement=False,
                                             encipher_only=False, decipher_only=False), critical=True)
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
                .sign(key, hashes.SHA256()))
        return key, cert

    ca_key, ca_cert = authority("agentgym test CA")
    _, other_ca_cert = authority("some other CA")

    def leaf(common: str, usage, names: list) -> tuple:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (x509.CertificateBuilder().subject_name(name(common)).issuer_name(ca_cert.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                                  critical=False))
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return key, builder.sign(ca_key, hashes.SHA256())

    server_key, server_cert = leaf("127.0.0.1", ExtendedKeyUsageOID.SERVER_AUTH,
                                   [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")])
    client_key, client_cert = leaf("agentgym worker", ExtendedKeyUsageOID.CLIENT_AUTH, [])
    return Certs(ca=write_cert(ca_cert, folder / "ca.pem"),
                 server_cert=write_cert(server_cert, folder / "server.pem"),
                 server_key=write_key(server_key, folder / "server.key"),
                 client_cert=write_cert(client_cert, folder / "client.pem"),
                 client_key=write_key(client_key, folder / "client.key"),
                 other_ca=write_cert(other_ca_cert, folder / "other-ca.pem"))


def server_tls_block(certs: Certs) -> str:
    """nats-server's ``tls { ... }``: TLS required, clients verified against the CA (mutual TLS)."""
    return (f'tls {{\n  cert_file: "{certs.server_cert}"\n  key_file: "{certs.server_key}"\n'
            f'  ca_file: "{certs.ca}"\n  verify: true\n  timeout: 2\n}}\n')
