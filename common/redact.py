"""Secrets out of what is logged or printed: passwords in URLs, secret-looking settings.

    redact_url("postgresql://strata:pw@db:5432/strata?sslmode=verify-full")
        # -> "postgresql://strata:***@db:5432/strata?sslmode=verify-full"
    redact_url("https://s3.example?X-Amz-Signature=abc")     # -> "https://s3.example?X-Amz-Signature=***"
    redact_text("cannot connect to postgresql://u:pw@h/db")   # every URL inside a message
    redact_mapping({"STRATA_BOOKIE_AUTH_SECRET": "s3cret", "STRATA_METADATA_URL": "postgresql://u:pw@h/db"})
        # -> {"STRATA_BOOKIE_AUTH_SECRET": "***", "STRATA_METADATA_URL": "postgresql://u:***@h/db"}

What is masked: the password of a URL's user info (the user name stays: it says who connects);
query parameters whose name says password, secret, token, signature or credential; in a mapping,
the values of keys whose name says so (or key; not *_FILE, *_PATH, *_URL...: those name where a key
is), unless the value cannot be one (file:..., env:..., an absolute path, true/false, a number).
What must hold: these functions never raise on odd input (a value that is not a URL comes back
unchanged) and never shorten anything but the secret itself, so what was logged stays readable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

MASK = "***"

_SECRET_WORDS = re.compile(r"pass(word|wd)?|secret|token|signature|credential|auth", re.IGNORECASE)
_SECRET_KEY_WORDS = re.compile(r"pass(word|wd)?|secret|token|signature|credential|auth|key", re.IGNORECASE)
_LOCATION_SUFFIX = re.compile(r"(_file|_path|_dir|_url|_endpoint|_providers?|_roles?|_claim|_alg)$",
                              re.IGNORECASE)
# scheme://user:password@ anywhere in a text (the password ends at the last @ before the host)
_USERINFO = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@?#]*:)(?P<pw>[^\s/?#]*)(?=@)")
# name=value after ?, &, ; or a blank (URL queries, libpq "key=value" conninfo) with a secret-looking name
_QUERY_SECRET = re.compile(
    r"(?P<head>(?:(?<=[?&;\s])|^)(?P<name>[^=&;#\s]*(?:pass(?:word|wd)?|secret|token|signature|credential)"
    r"[^=&;#\s]*)=)(?P<value>[^&;#\s]*)", re.IGNORECASE)


def redact_url(url: str) -> str:
    """`url` with its user-info password and secret query parameters masked (see the module docstring);
    the rest of it byte for byte as given."""
    return redact_text(url)


def redact_text(text: str) -> str:
    """Every URL password and secret query parameter inside free text (an error message) masked."""
    if not isinstance(text, str) or ("://" not in text and "=" not in text):
        return text
    text = _USERINFO.sub(lambda m: m.group("head") + MASK, text)
    return _QUERY_SECRET.sub(lambda m: m.group("head") + MASK, text)


def secret_name(name: str) -> bool:
    """Whether a setting or variable named `name` holds a secret (not where one is kept)."""
    return bool(_SECRET_KEY_WORDS.search(name)) and not _LOCATION_SUFFIX.search(name)


def redact_value(name: str, value: object) -> object:
    """`value` as it may be shown under `name`: masked when the name says secret, URLs redacted."""
    if not isinstance(value, str):
        return value
    if secret_name(name) and not _harmless(value):
        return MASK
    return redact_text(value)


def _harmless(value: str) -> bool:
    """Values that cannot be a secret: where one lives (file:, env:, a path), a flag, a number, nothing."""
    return (not value or value.startswith(("file:", "env:", "/")) or value.lower() in ("true", "false")
            or value.lstrip("-").isdigit())


def redact_mapping(mapping: Mapping[str, object]) -> dict[str, object]:
    """An env-like mapping (STRATA_*, AWS_*, settings) safe to log or print."""
    return {key: redact_value(key, value) for key, value in mapping.items()}
