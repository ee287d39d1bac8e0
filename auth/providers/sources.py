"""Key material the way Pulsar's providers read it (tokenSecretKey, tokenPublicKey, basicAuthConf).

    read_pulsar_source("file:///etc/pulsar/secret.key", what="token secret key")   # the file's bytes
    read_pulsar_source("data:;base64,c2VjcmV0...", what=...)                       # decoded
    read_pulsar_source("env:STRATA_TOKEN_KEY", what=...)                           # the variable (ours)
    read_pulsar_source("/etc/pulsar/htpasswd", what=...)                           # an existing path
    read_pulsar_source("c2VjcmV0...", what=...)                                    # anything else: base64

Pulsar (AuthTokenUtils.readKeyFromUrl, AuthenticationProviderBasic.readData) takes data:/file: URLs,
then an existing path, then a bare base64 value; nothing else. `auth.keys.read_source` would take
any other text as the key itself, so a mistyped path would silently become the key: here it is a
KeyMaterialError instead, naming the path (never a value that might be the key).

What must hold: the bytes returned are the key the operator meant, or KeyMaterialError.
"""

from __future__ import annotations

import base64
import binascii
from pathlib import Path

from auth.keys import read_source
from common.errors import KeyMaterialError


def read_pulsar_source(spec: str, *, what: str) -> bytes:
    """The bytes `spec` names (see the module docstring); KeyMaterialError otherwise."""
    spec = spec.strip()
    if spec.startswith(("file:", "data:", "env:")):
        return read_source(spec, what=what)
    if spec.startswith("/") or spec.startswith("./") or spec.startswith("~"):
        if not Path(spec).expanduser().exists():
            raise KeyMaterialError(f"{what}: file does not exist", path=spec)
        return read_source(str(Path(spec).expanduser()), what=what)
    if spec and Path(spec).exists():
        return read_source(str(Path(spec).absolute()), what=what)
    try:
        return base64.b64decode(spec, validate=True) if spec else b""
    except (binascii.Error, ValueError):
        raise KeyMaterialError(f"{what}: neither file:///path, data:, env:VAR, an existing path, "
                               "nor base64") from None
