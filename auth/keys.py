"""Key material from the places Pulsar's settings name it: a file, inline data, or the environment.

    read_source("file:///etc/strata/secret.key")    # the file's bytes
    read_source("data:;base64,c2VjcmV0")             # b"secret"
    read_source("env:STRATA_TOKEN")                  # the variable's value
    read_source("/etc/strata/secret.key")            # a plain path that exists: the file
    read_source("eyJhbGciOi...")                     # anything else: the text itself

What must hold: a source that cannot be read is a KeyMaterialError naming the source's kind and
path or variable, never the key's bytes.
"""

from __future__ import annotations

import base64
import binascii
import os
import urllib.parse
from collections.abc import Mapping
from pathlib import Path

from common.errors import KeyMaterialError


def read_source(spec: str, *, what: str = "key", env: Mapping[str, str] | None = None) -> bytes:
    """The bytes `spec` names (see the module docstring); KeyMaterialError when it cannot be read."""
    spec = spec.strip()
    if not spec:
        raise KeyMaterialError(f"{what}: empty source")
    if spec.startswith("file:"):
        return _read_file(_file_path(spec), what)
    if spec.startswith("data:"):
        header, sep, payload = spec[5:].partition(",")
        if not sep:
            raise KeyMaterialError(f"{what}: a data: source is data:[;base64],<data>")
        if header.endswith(";base64"):
            try:
                return base64.b64decode(payload, validate=True)
            except (binascii.Error, ValueError):
                raise KeyMaterialError(f"{what}: data:;base64 source is not base64") from None
        return urllib.parse.unquote_to_bytes(payload)
    if spec.startswith("env:"):
        name = spec[4:]
        value = (os.environ if env is None else env).get(name)
        if value is None:
            raise KeyMaterialError(f"{what}: environment variable is not set", variable=name)
        return value.encode()
    if spec.startswith("/") and Path(spec).exists():
        return _read_file(spec, what)
    return spec.encode()


def _file_path(spec: str) -> str:
    parsed = urllib.parse.urlparse(spec)
    path = urllib.parse.unquote(parsed.path) if spec.startswith("file://") else spec[5:]
    if not path:
        raise KeyMaterialError("file: source names no path")
    return path


def _read_file(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise KeyMaterialError(f"{what}: cannot read file ({exc.strerror})", path=path) from None
