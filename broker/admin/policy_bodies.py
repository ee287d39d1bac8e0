"""Policy bodies shared by the topic and namespace routes, checked before anything is stored.

What must hold: a body of the wrong type is BadRequestBody (400); a value of the right type but
out of range is NotAllowed or InvalidRetention (412); a value returned here is what is stored.
"""

from __future__ import annotations

from aiohttp import web

from broker.admin.http import body_json
from common.errors import BadRequestBody, NotAllowed
from cursor.retention import RetentionPolicy


async def body_retention(request: web.Request) -> dict:
    """A retention body, checked (400 wrong types, 412 an invalid pair), as stored."""
    return retention_value(await body_json(request))


def retention_value(body: object) -> dict:
    """A RetentionPolicies value, checked (400 wrong types, 412 an invalid pair), as stored."""
    fields = ("retentionTimeInMinutes", "retentionSizeInMB")
    if not isinstance(body, dict) or not all(k in body for k in fields):
        raise BadRequestBody('retention body must be {"retentionTimeInMinutes": m, "retentionSizeInMB": s}')
    values = [body[k] for k in fields]
    if any(isinstance(v, bool) or not isinstance(v, int) for v in values):
        raise BadRequestBody("retentionTimeInMinutes and retentionSizeInMB must be integers")
    policy = RetentionPolicy(*values)     # InvalidRetention (412) if the pair is invalid
    return {fields[0]: policy.time_minutes, fields[1]: policy.size_mb}


def ttl_seconds(seconds: object) -> int:
    if isinstance(seconds, bool) or not isinstance(seconds, int):
        raise BadRequestBody("messageTTL must be an integer number of seconds")
    if seconds < 0:
        raise NotAllowed("invalid messageTTL: must be >= 0 seconds (0 = off)", seconds=seconds)
    return seconds
