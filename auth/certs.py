"""A certificate authority and the certificates it signs, made with `cryptography`.

    ca = make_ca("Strata standalone CA")
    server = issue(ca, "localhost", hosts=("localhost", "127.0.0.1"))      # a broker's or bookie's
    client = issue(ca, "admin", client=True)                               # mTLS: the CN is the role
    write_pem(server, "broker.cert.pem", "broker.key.pem")

Keys are EC P-256 (fast to make, accepted by OpenSSL and the official client). A server certificate
names its hosts as subjectAltNames (DNS names and IP addresses), so clients that check hostnames
(the official client does by default with `tls_validate_hostname=True`) accept it.

What must hold: private keys are written with mode 0600; a CA certificate is marked CA and may
only sign; a leaf is not a CA.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Issued:
    cert_pem: bytes
    key_pem: bytes

    def certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem)

    def private_key(self) -> ec.EllipticCurvePrivateKey:
        key = serialization.load_pem_private_key(self.key_pem, password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        return key


def make_ca(common_name: str = "Strata CA", *, days: int = 3650) -> Issued:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = _now()
    cert = (x509.CertificateBuilder()
            .subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return Issued(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def issue(ca: Issued, common_name: str, *, hosts: Sequence[str] = (), client: bool = False,
          server: bool | None = None, days: int = 825) -> Issued:
    """A leaf certificate signed by `ca`: CN `common_name`; `hosts` (DNS names or IPs) as SANs. A
    certificate with hosts is a server certificate; `client=True` adds client authentication."""
    server = bool(hosts) if server is None else server
    key = ec.generate_private_key(ec.SECP256R1())
    ca_cert, ca_key = ca.certificate(), ca.private_key()
    now = _now()
    usages = [ExtendedKeyUsageOID.SERVER_AUTH] if server else []
    usages += [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
               .issuer_name(ca_cert.subject).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=days))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False))
    if usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if hosts:
        builder = builder.add_extension(x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return Issued(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def write_pem(issued: Issued, cert_path: str | os.PathLike[str],
              key_path: str | os.PathLike[str] | None = None) -> None:
    """The certificate (mode 0644) and, when `key_path` is given, the key (mode 0600)."""
    Path(cert_path).write_bytes(issued.cert_pem)
    if key_path is not None:
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(issued.key_pem)
        os.chmod(key_path, 0o600)


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
