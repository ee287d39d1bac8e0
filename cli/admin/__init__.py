"""`strata admin`: pulsar-admin's command tree over the broker's admin REST API (thin clients).

    strata admin [--admin-url http://127.0.0.1:8080] [-o table|json] [-y] GROUP ACTION ... [-o json] [-y]

The admin URL defaults to `$STRATA_ADMIN_URL`, else http://127.0.0.1:8080; an https:// URL is
verified against `--tls-trust-cert`. A secured broker needs credentials: `--auth-token`
(`TOKEN`, `file:///path`), `--auth-params` (Pulsar's `token:...`/`file:///...`), `--auth-basic
user:pass`, or `--tls-cert/--tls-key`; each has an environment fallback
($STRATA_ADMIN_AUTH_TOKEN, $STRATA_ADMIN_AUTH_PARAMS, $STRATA_ADMIN_AUTH_BASIC,
$STRATA_ADMIN_TLS_TRUST_CERT, $STRATA_ADMIN_TLS_CERT, $STRATA_ADMIN_TLS_KEY; `cli.admin.credentials`).

Groups: `tenants`, `namespaces`, `topics` (subscription operations included, as pulsar-admin's),
`brokers`, `clusters`, `broker-stats`. One module per resource declares its commands
(`add_parsers(groups)`, each leaf with `run(args, client) -> int`): `cli.admin.topics`,
`namespaces`, `offload`, `cluster`, and the others listed in `_MODULES`.

Output: rich tables by default; `-o json` prints the broker's JSON (for scripts). Destructive
commands ask first unless `-y/--yes`. Units: `cli.admin.units` (pulsar-admin 3.x: a bare time is
seconds, a bare size bytes). Topic names may be short (`my-topic` →
`persistent://public/default/my-topic`).

Exit status: 0 done; 1 the broker refused (its `reason` is printed: `HTTP 404: Topic not found`,
`HTTP 401: ...` without valid credentials, `HTTP 403: ...` for a role without the permission) or
could not be reached (a certificate not trusted included); 2 bad arguments or a name that is not
valid (nothing is sent), a credential that cannot be read, or a destructive command not confirmed.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from cli.admin import credentials
from cli.admin.console import OUTPUTS, AdminConsole
from common.errors import AdminAnswerTooLarge, AdminBadAnswer, AdminHttpError, AdminUnreachable, StrataError

ADMIN_URL_ENV = "STRATA_ADMIN_URL"
GROUPS = ("tenants", "namespaces", "topics", "brokers", "clusters", "broker-stats", "schemas")
# the modules that declare commands, each with add_parsers(groups)
_MODULES = ("cli.admin.backlog_quota",
            "cli.admin.topics", "cli.admin.namespaces", "cli.admin.offload", "cli.admin.cluster", "cli.admin.explain",
            "cli.admin.subscriptions", "cli.admin.terminate", "cli.admin.tenants", "cli.admin.compaction",
            "cli.admin.schemas", "cli.admin.permissions", "cli.admin.limits")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="strata admin", description="administer a Strata cluster")
    p.add_argument("--admin-url", "--url", dest="admin_url",
                   default=os.environ.get(ADMIN_URL_ENV) or "http://127.0.0.1:8080",
                   help=f"broker admin HTTP URL, any broker of the cluster (default: ${ADMIN_URL_ENV} or "
                        "http://127.0.0.1:8080)")
    p.add_argument("-o", "--output", choices=OUTPUTS, default="table", help="table (default) or json")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask before destructive commands")
    credentials.add_options(p)
    subparsers = p.add_subparsers(dest="group", required=True)
    groups = {name: subparsers.add_parser(name).add_subparsers(dest="action", required=True) for name in GROUPS}
    for module in _MODULES:
        importlib.import_module(module).add_parsers(groups)
    for group in groups.values():          # -o and -y after the command too, as people type them
        for leaf in set(group.choices.values()):
            leaf.add_argument("-o", "--output", choices=OUTPUTS, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
            leaf.add_argument("-y", "--yes", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    try:
        client = AdminConsole(args.admin_url, output=args.output, yes=args.yes,
                              credentials=credentials.from_args(args))
        return int(args.run(args, client))
    except AdminHttpError as exc:
        print(f"strata admin: HTTP {exc.status}: {exc.reason}{credentials.hint(exc.status)}", file=sys.stderr)
        return 1
    except AdminUnreachable as exc:
        print(f"strata admin: cannot reach {args.admin_url}: {exc.message}{credentials.tls_hint(exc)}",
              file=sys.stderr)
        return 1
    except (AdminBadAnswer, AdminAnswerTooLarge) as exc:
        print(f"strata admin: unexpected answer from {args.admin_url}: {exc.message}", file=sys.stderr)
        return 1
    except StrataError as exc:
        print(f"strata admin: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"strata admin: cannot reach {args.admin_url}: {exc}{credentials.tls_hint(exc)}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"strata admin: unexpected answer from {args.admin_url}: {exc}", file=sys.stderr)
        return 1
