"""The HTTP client and the output of every `strata admin` command.

`AdminClient.call` sends one admin call and decodes the JSON answer. A call answered 307/308 (the
broker that owns a topic or bundle is another one) is sent again, same method and body, to the
`Location`, at most `REDIRECTS_MAX` times, for every method (urllib follows only GET by itself), so
every command works against any broker of a cluster. `call_raw` does the same for answers that are
not JSON (peek, examine: the payload bytes and the `X-Pulsar-*` headers).

Output: `show` prints a rich table by default and the broker's JSON with `-o json` (for scripts);
`progress` draws a bar on stderr for long operations; `confirm` asks before a destructive command
unless `--yes` was given, and refuses (ConfirmationRefused) when nobody can answer (stdin is not a
terminal).

Credentials (`cli.admin.credentials.HttpAuth`: the Authorization header, the https context) go
with every call, the redirected ones too (the 307s name brokers of the same cluster), but never
from https:// to a plain http:// Location: that redirect is refused (an HTTPError saying so).

Errors: urllib.error.HTTPError on an error status (the caller prints the broker's `reason`),
URLError/OSError when the broker cannot be reached, ValueError on an answer that is not JSON.
Every call is bounded by `timeout_s`.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import IO, Any

from cli.admin.credentials import NO_AUTH, HttpAuth
from common.errors import ConfirmationRefused

TIMEOUT_S = 30.0
REDIRECTS_MAX = 5
OUTPUTS = ("table", "json")


class _RedirectEveryMethod(urllib.request.HTTPRedirectHandler):
    """307/308 followed for every method with the same body; 301-303 as urllib does."""

    max_redirections = REDIRECTS_MAX
    max_repeats = REDIRECTS_MAX

    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
                         headers, newurl: str) -> urllib.request.Request | None:
        if req.full_url.startswith("https:") and not newurl.startswith("https:") and req.has_header("Authorization"):
            raise urllib.error.HTTPError(newurl, code, "refusing to follow a redirect from https to plain http "
                                         f"with credentials ({newurl})", headers, fp)
        if code not in (307, 308):
            return super().redirect_request(req, fp, code, msg, headers, newurl)
        return urllib.request.Request(newurl, data=req.data, method=req.get_method(),
                                      headers=dict(req.headers), origin_req_host=req.origin_req_host,
                                      unverifiable=True)


_OPENER = urllib.request.build_opener(_RedirectEveryMethod)


def opener(auth: HttpAuth = NO_AUTH) -> urllib.request.OpenerDirector:
    """An opener that follows every method's 307s, verifying https:// with `auth`'s context."""
    if auth.ssl_context is None:
        return _OPENER
    return urllib.request.build_opener(_RedirectEveryMethod, urllib.request.HTTPSHandler(context=auth.ssl_context))


def request_raw(url: str, method: str = "GET", body: object = None,
                timeout_s: float = TIMEOUT_S, auth: HttpAuth = NO_AUTH) -> tuple[bytes, dict[str, str]]:
    """One admin call with `auth`'s credentials, redirects followed: (raw body, headers)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json", **auth.headers})
    with opener(auth).open(request, timeout=timeout_s) as resp:
        return resp.read(), dict(resp.headers.items())


def request_json(url: str, method: str = "GET", body: object = None, timeout_s: float = TIMEOUT_S,
                 auth: HttpAuth = NO_AUTH) -> object:
    """One admin call, redirects followed; the decoded JSON answer, None for an empty one."""
    raw, _headers = request_raw(url, method, body, timeout_s, auth)
    return json.loads(raw) if raw else None


class AdminClient:
    """One broker's admin API, and how the answers are printed."""

    def __init__(self, admin_url: str, *, output: str = "table", yes: bool = False,
                 timeout_s: float = TIMEOUT_S, auth: HttpAuth = NO_AUTH) -> None:
        self.base_url = admin_url.rstrip("/")
        self.output = output
        self.yes = yes
        self.timeout_s = timeout_s
        self.auth = auth

    def url(self, path: str, query: dict[str, str] | None = None) -> str:
        if not query:
            return self.base_url + path
        return self.base_url + path + ("&" if "?" in path else "?") + urllib.parse.urlencode(query)

    def call(self, method: str, path: str, body: object = None, query: dict[str, str] | None = None) -> Any:
        return request_json(self.url(path, query), method, body, self.timeout_s, self.auth)

    def call_raw(self, method: str, path: str, body: object = None,
                 query: dict[str, str] | None = None) -> tuple[bytes, dict[str, str]]:
        return request_raw(self.url(path, query), method, body, self.timeout_s, self.auth)

    # --- output --------------------------------------------------------------------------------

    def show(self, value: object, *, columns: Sequence[str] | None = None, title: str | None = None) -> None:
        """Print `value`: JSON with `-o json`, else a table (`columns` picks and orders the
        columns of a list of objects)."""
        if self.output == "json":
            print(json.dumps(value, indent=2, sort_keys=True))
            return
        from cli.admin import tables
        tables.print_value(value, columns=columns, title=title)

    def say(self, text: str) -> None:
        """A line for people (not printed with `-o json`, where only the JSON goes to stdout)."""
        if self.output != "json":
            print(text)

    def confirm(self, question: str) -> None:
        """Go on only if confirmed: `--yes`, or "y" typed at a terminal; else ConfirmationRefused."""
        if self.yes:
            return
        if not sys.stdin.isatty():
            raise ConfirmationRefused(f"{question} Refusing without confirmation: pass --yes")
        answer = input(f"{question} [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            raise ConfirmationRefused("not confirmed")

    @contextmanager
    def progress(self, description: str, total: int | None) -> Iterator[Any]:
        """A progress bar on stderr (transient); yields `update(completed, total=None)`."""
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        columns = (TextColumn(description), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task(description, total=total)

            def update(completed: int, total: int | None = None) -> None:
                if total is None:
                    bar.update(task, completed=completed)
                else:
                    bar.update(task, completed=completed, total=total)

            yield update
