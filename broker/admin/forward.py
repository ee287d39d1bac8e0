"""Follow a 307 to a topic's owner on the caller's behalf, for callers that cannot follow it.

A topic's admin call is answered by its owner; any other broker answers 307 with the owner's
URL (`broker.admin.lookup`). The CLI, curl and Pulsar's clients follow it. A browser cannot: the
owner's admin port is another origin, so the browser drops the `Authorization` header on the
way and the page may not read the answer. The web console (`/console/`) therefore marks its
calls with the header `X-Strata-Forward: owner`, and for those this middleware makes the call on
the owner itself and streams the owner's answer back as its own.

What must hold:
- Only a call this broker already authenticated and authorized is forwarded: the middleware
  runs inside `broker.admin.access.access`, and only ever sees a 307 that this broker's own
  routes answered. The forwarded call carries this broker's peer credentials
  (`broker.security.peer_auth`), as every broker-to-broker call does.
- Every wait is bounded: connecting by `FORWARD_CONNECT_TIMEOUT_S`, and each read of the owner's
  answer by `FORWARD_READ_TIMEOUT_S` (a live tail sends a keep-alive well within it). At most
  `PEER_REDIRECTS_MAX` redirects are followed (the topic moving while the call is in flight).
- The answer is streamed chunk by chunk, never gathered, so a live tail (Server-Sent Events)
  works through it and costs this broker one chunk of memory at a time.
- An owner that cannot be reached is a 503 `{"reason"}` naming it, so the console can say
  which broker went away.
"""

from __future__ import annotations

import logging

import aiohttp
import yarl
from aiohttp import web
from aiohttp.typedefs import Handler

from broker.cluster.peers import PEER_REDIRECTS_MAX
from broker.security.peer_auth import peer_headers, peer_ssl
from common.config import Config
from common.errors import ServiceNotReady

log = logging.getLogger(__name__)

FORWARD_HEADER = "X-Strata-Forward"
FORWARD_OWNER = "owner"
# set on the forwarded call, so the owner's audit log does not record it a second time under the
# broker's own role (`broker.admin.audit`: the receiving broker recorded it under the caller's)
FORWARDED_HEADER = "X-Strata-Forwarded"
FORWARD_CONNECT_TIMEOUT_S = 5.0
FORWARD_READ_TIMEOUT_S = 60.0
CONFIG = web.AppKey("forward_config", Config)

# answer headers passed on to the caller (the rest describe the hop, not the answer)
_KEPT_HEADERS = ("Content-Type", "Cache-Control", "Content-Disposition")


def install(app: web.Application, config: Config) -> None:
    app[CONFIG] = config


@web.middleware
async def follow_owner(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A marked call's 307 becomes the owner's answer, streamed; any other call is untouched."""
    answer = await handler(request)
    if answer.status not in (307, 308) or request.headers.get(FORWARD_HEADER, "").lower() != FORWARD_OWNER:
        return answer
    location = answer.headers.get("Location", "")
    if not location:
        return answer
    return await _forward(request, location)


async def _forward(request: web.Request, location: str) -> web.StreamResponse:
    config = request.app[CONFIG]
    body = await request.read() if request.body_exists else None
    headers = {**peer_headers(config), FORWARDED_HEADER: "1"}
    if request.content_type and body:
        headers["Content-Type"] = request.content_type
    timeout = aiohttp.ClientTimeout(total=None, connect=FORWARD_CONNECT_TIMEOUT_S,
                                    sock_read=FORWARD_READ_TIMEOUT_S)
    ssl_ctx = peer_ssl(config) or True
    url = location
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session:
            for _ in range(PEER_REDIRECTS_MAX + 1):
                async with session.request(request.method, url, data=body, headers=headers, ssl=ssl_ctx,
                                           allow_redirects=False) as resp:
                    if resp.status in (307, 308) and resp.headers.get("Location"):
                        url = str(resp.url.join(yarl.URL(resp.headers["Location"])))
                        continue
                    return await _stream(request, resp)
    except (aiohttp.ClientError, TimeoutError) as exc:
        owner = yarl.URL(url).origin()
        log.info("forwarding %s %s to %s failed: %s", request.method, request.path, owner, exc)
        raise ServiceNotReady(f"the topic's owner {owner} did not answer: {exc or type(exc).__name__}") from None
    raise ServiceNotReady(f"the topic moved more than {PEER_REDIRECTS_MAX} times while the call was forwarded")


async def _stream(request: web.Request, resp: aiohttp.ClientResponse) -> web.StreamResponse:
    out = web.StreamResponse(status=resp.status)
    for name in _KEPT_HEADERS:
        if name in resp.headers:
            out.headers[name] = resp.headers[name]
    for name, value in resp.headers.items():
        if name.lower().startswith("x-pulsar-"):
            out.headers[name] = value
    await out.prepare(request)
    async for chunk in resp.content.iter_any():
        await out.write(chunk)
    await out.write_eof()
    return out
