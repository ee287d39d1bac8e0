"""A real HTTP server in front of the test run's SeaweedFS, for the cold tier's tests: it answers
the next N requests with a real S3 throttling error (the XML body S3 sends), forwards the rest
byte for byte (the Host header as signed, so SigV4 signatures hold), and counts the requests and
the most it had in flight at once."""

from __future__ import annotations

import http.client
import http.server
import threading
from typing import Any
from urllib.parse import urlsplit

SLOW_DOWN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
             b"<Message>Please reduce your request rate.</Message><RequestId>t</RequestId></Error>")
TOO_MANY = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>TooManyRequests</Code>'
            b"<Message>Too many requests.</Message></Error>")
HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "expect", "proxy-connection", "upgrade"}


class ThrottlingProxy:
    """A real HTTP server in front of S3: refuses the next `throttle_next` requests with
    `status`/`body`, forwards the rest. `seen` counts requests by method."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.throttle_next = 0
        self.status, self.body = 503, SLOW_DOWN
        self.seen: dict[str, int] = {}
        self.throttled = 0
        self.in_flight = 0
        self.in_flight_peak = 0                 # most requests under way at once
        self._lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                refuse = proxy._take(self.command)
                if refuse is not None:
                    self._answer(refuse[0], [("Content-Type", "application/xml")], refuse[1])
                    return
                proxy._enter(+1)
                try:
                    status, headers, answer = proxy._forward(self.command, self.path, list(self.headers.items()),
                                                             body)
                finally:
                    proxy._enter(-1)
                self._answer(status, headers, answer)

            def _answer(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
                self.send_response(status)
                for name, value in headers:
                    if name.lower() not in HOP_HEADERS and name.lower() != "content-length":
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)) if self.command != "HEAD" else
                                 dict((k.lower(), v) for k, v in headers).get("content-length", "0"))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _enter(self, step: int) -> None:
        with self._lock:
            self.in_flight += step
            self.in_flight_peak = max(self.in_flight_peak, self.in_flight)

    def _take(self, method: str) -> tuple[int, bytes] | None:
        with self._lock:
            self.seen[method] = self.seen.get(method, 0) + 1
            if self.throttle_next <= 0:
                return None
            self.throttle_next -= 1
            self.throttled += 1
            return self.status, self.body

    def _forward(self, method: str, path: str, headers: list[tuple[str, str]],
                 body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        conn = http.client.HTTPConnection(*self.upstream, timeout=30)
        try:
            conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            for name, value in headers:
                if name.lower() not in HOP_HEADERS:
                    conn.putheader(name, value)
            conn.endheaders(body if body else None)
            answer = conn.getresponse()
            return answer.status, answer.getheaders(), answer.read()
        finally:
            conn.close()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
