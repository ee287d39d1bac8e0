"""`strata tokens`: make keys and JWTs for the token provider, and check them (Pulsar's `pulsar tokens`).

    strata tokens create-secret-key [--output F] [--base64] [-a HS256|HS384|HS512]
    strata tokens create-key-pair --output-private-key F --output-public-key F [-a RS256|ES256|...] [--pem]
    strata tokens create (--secret-key K | --private-key K) --subject S [--expiry-time 30d] [--headers k=v]...
    strata tokens validate (--secret-key K | --public-key K) [-a ALG] TOKEN     # exit 1 when invalid
    strata tokens show TOKEN                                                   # header and claims, unverified

A key K is `file:///path`, `data:;base64,...`, `env:VAR`, a path, or bare base64, as Pulsar reads
keys (auth.providers.sources); key
pairs are written as DER, as Pulsar writes them (`--pem` for PEM), and read in either form. A
secret key without --output goes to stdout (raw bytes unless --base64). TOKEN may be `-` (stdin)
or given with --token-file, or read from stdin with -i/--stdin (Pulsar's options).

What must hold: every failure is one line on stderr and exit code 1 (2 for usage); no key bytes are
ever printed except the secret key asked for with create-secret-key.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from pathlib import Path
from typing import Any

from common.errors import StrataError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="strata tokens", description="Make and check tokens and their keys.")
    sub = p.add_subparsers(dest="command", required=True)
    sk = sub.add_parser("create-secret-key", help="a random HMAC key (tokenSecretKey)")
    sk.add_argument("-a", "--signature-algorithm", default="HS256", help="HS256 (default), HS384, HS512")
    sk.add_argument("-o", "--output", help="file to write (mode 600); default: stdout")
    sk.add_argument("-b", "--base64", action="store_true", help="write the key base64-encoded")
    kp = sub.add_parser("create-key-pair", help="an RSA or EC key pair (tokenPublicKey is the public half)")
    kp.add_argument("-a", "--signature-algorithm", default="RS256", help="RS256 (default), RS512, PS256, ES256, ...")
    kp.add_argument("--output-private-key", required=True, help="file for the private key (mode 600)")
    kp.add_argument("--output-public-key", required=True, help="file for the public key")
    kp.add_argument("--pem", action="store_true", help="write PEM instead of DER")
    cr = sub.add_parser("create", help="a signed token; printed on stdout")
    _key_options(cr, "--private-key", "-pk")
    cr.add_argument("-s", "--subject", required=True, help="the role (sub claim)")
    cr.add_argument("-e", "--expiry-time", help="lifetime: 30d, 2h, 1y, ... (default: never expires)")
    cr.add_argument("-a", "--signature-algorithm", help="default: HS256 for a secret key, by key type otherwise")
    cr.add_argument("-hs", "--headers", action="append", default=[], metavar="K=V", help="extra JWT header")
    va = sub.add_parser("validate", help="check a token's signature and expiry; print its claims")
    _key_options(va, "--public-key", "-pk")
    va.add_argument("-a", "--signature-algorithm", help="accept only this algorithm")
    _token_options(va)
    sh = sub.add_parser("show", help="print a token's header and claims WITHOUT checking its signature")
    _token_options(sh)
    return p


def _key_options(p: argparse.ArgumentParser, asymmetric: str, short: str) -> None:
    keys = p.add_mutually_exclusive_group(required=True)
    keys.add_argument("-sk", "--secret-key", help="HMAC key: file:///path, data:;base64,..., env:VAR, a path or base64")
    keys.add_argument(short, asymmetric, dest="asymmetric_key", help="RSA/EC key (DER or PEM), same forms")


def _token_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("token", nargs="?", help="the JWT, or - to read it from stdin")
    p.add_argument("-f", "--token-file", help="read the token from this file")
    p.add_argument("-i", "--stdin", action="store_true", help="read the token from stdin (as Pulsar's -i)")


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    handlers = {"create-secret-key": _create_secret_key, "create-key-pair": _create_key_pair,
                "create": _create, "validate": _validate, "show": _show}
    try:
        return handlers[args.command](args)
    except StrataError as exc:
        print(f"strata tokens {args.command}: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:   # an output or token file
        print(f"strata tokens {args.command}: {exc.strerror}: {exc.filename}", file=sys.stderr)
        return 1


def _create_secret_key(args: argparse.Namespace) -> int:
    from auth.tokens import create_secret_key
    key = create_secret_key(args.signature_algorithm)
    data = base64.b64encode(key) if args.base64 else key
    if args.output:
        _write_private(Path(args.output), data)
    else:
        sys.stdout.buffer.write(data + (b"\n" if args.base64 else b""))
        sys.stdout.flush()
    return 0


def _create_key_pair(args: argparse.Namespace) -> int:
    from auth.tokens import create_key_pair
    pair = create_key_pair(args.signature_algorithm)
    _write_private(Path(args.output_private_key), pair.private_pem if args.pem else pair.private_der)
    Path(args.output_public_key).write_bytes(pair.public_pem if args.pem else pair.public_der)
    return 0


def _create(args: argparse.Namespace) -> int:
    from auth.tokens import create_token, parse_duration_s
    expires_in_s = parse_duration_s(args.expiry_time) if args.expiry_time else None
    key = _load_key(args, private=True)
    token = create_token(key, args.subject, algorithm=args.signature_algorithm, expires_in_s=expires_in_s,
                         headers=_headers(args.headers))
    print(token)
    return 0


def _validate(args: argparse.Namespace) -> int:
    from auth.tokens import validate_token
    key = _load_key(args, private=False)
    algorithms = (args.signature_algorithm,) if args.signature_algorithm else None
    claims = validate_token(_token(args), key, algorithms=algorithms)
    print(json.dumps(claims, indent=2, sort_keys=True))
    return 0


def _show(args: argparse.Namespace) -> int:
    from auth.tokens import show_token
    header, claims = show_token(_token(args))
    print(json.dumps({"header": header, "claims": claims, "verified": False}, indent=2, sort_keys=True))
    return 0


def _load_key(args: argparse.Namespace, *, private: bool) -> Any:
    from auth.providers.sources import read_pulsar_source
    from auth.providers.token import parse_private_key, parse_public_key
    if args.secret_key:
        return read_pulsar_source(args.secret_key, what="secret key")
    raw = read_pulsar_source(args.asymmetric_key, what="private key" if private else "public key")
    return parse_private_key(raw) if private else parse_public_key(raw)


def _headers(items: list[str]) -> dict[str, str]:
    from common.errors import ConfigError
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ConfigError("a header is K=V", header=item)
        out[name] = value
    return out


def _token(args: argparse.Namespace) -> str:
    from common.errors import ConfigError
    if args.token_file:
        return Path(args.token_file).read_text().strip()
    if args.token == "-" or (args.stdin and not args.token):
        return sys.stdin.read().strip()
    if not args.token:
        raise ConfigError("give a token, - or -i for stdin, or --token-file")
    return str(args.token).strip()


def _write_private(path: Path, data: bytes) -> None:
    """Write a secret: created with mode 600 (never readable by others, not even briefly)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
