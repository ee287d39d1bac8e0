"""Key material shared by the auth unit tests: made once per module, small and fast.

bcrypt hashes here use 4 rounds (the minimum) so a check costs ~1 ms instead of ~250 ms; the
provider's code path is the same whatever the cost.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

import pytest
from passlib.hash import apr_md5_crypt, bcrypt

from auth.tokens import KeyPair, create_key_pair, create_secret_key
from common.config import Config, load_config


def data_source(raw: bytes) -> str:
    return "data:;base64," + base64.b64encode(raw).decode()


@dataclass
class Keys:
    dir: Path
    secret: bytes
    rsa: KeyPair
    ec: KeyPair
    htpasswd: bytes          # bcrypt-user:bcrypt-pass, apr-user:apr-pass

    def config(self, **overrides: object) -> Config:
        """Authentication on with the token provider (HS256 secret) unless overridden."""
        values: dict[str, object] = {"authentication_enabled": True, "authentication_providers": "token",
                                     "token_secret_key": data_source(self.secret)}
        values.update(overrides)
        return load_config(env={}, **values)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    directory = tmp_path_factory.mktemp("auth-keys")
    htpasswd = (f"bcrypt-user:{bcrypt.using(rounds=4, ident='2y').hash('bcrypt-pass')}\n"
                f"apr-user:{apr_md5_crypt.hash('apr-pass')}\n").encode()
    return Keys(directory, create_secret_key("HS256"), create_key_pair("RS256"), create_key_pair("ES256"), htpasswd)
