"""Authentication providers, one module each, and the one registry of them by name.

    provider = build("token", config)        # TokenProvider.from_config(config)

A provider is a plug-in behind `auth.api.AuthenticationProvider`: `method_name` (what clients send
as CONNECT's auth_method_name), `authenticate(credentials) -> Identity`, `blocking` (True: slow
CPU work the service runs off the event loop) and a `from_config(config)` that reads and checks its
key material once. Adding a provider is a module here plus one line in `PROVIDERS` (and its name in
common.config's AUTH_PROVIDER_NAMES). A provider's module is imported when it is built: each pulls
its own libraries (PyJWT and cryptography for tokens, passlib and bcrypt for basic), which a broker
without authentication never loads.

What must hold: `build` either returns a provider ready to verify or raises
KeyMaterialError/ConfigError; nothing is read again later.
"""

from __future__ import annotations

import importlib
from typing import Protocol

from auth.api import AuthenticationProvider
from common.config import Config
from common.errors import ConfigError


class ProviderFactory(Protocol):
    def from_config(self, config: Config) -> AuthenticationProvider: ...


# method name -> (module, class) of its provider
PROVIDERS: dict[str, tuple[str, str]] = {
    "token": ("auth.providers.token", "TokenProvider"),
    "tls": ("auth.providers.tls", "TlsProvider"),
    "basic": ("auth.providers.basic", "BasicProvider"),
}


def build(name: str, config: Config) -> AuthenticationProvider:
    """The provider `name` made from `config` (ConfigError for a name not in PROVIDERS)."""
    where = PROVIDERS.get(name)
    if where is None:
        raise ConfigError("unknown authentication provider", provider=name, known=",".join(PROVIDERS))
    module, class_name = where
    factory: ProviderFactory = getattr(importlib.import_module(module), class_name)
    return factory.from_config(config)


def is_blocking(provider: AuthenticationProvider) -> bool:
    """Whether `provider.authenticate` must run off the event loop."""
    return bool(getattr(provider, "blocking", False))
