"""Authentication providers, one module each, and the one registry of them by name.

    provider = build("token", config)        # TokenProvider.from_config(config)

A provider is a plug-in behind `auth.api.AuthenticationProvider`: `method_name` (what clients send
as CONNECT's auth_method_name), `authenticate(credentials) -> Identity`, `blocking` (True: slow
CPU work the service runs off the event loop) and a `from_config(config)` that reads and checks its
key material once. Adding a provider is a module here plus one line in `PROVIDERS` (and its name in
common.config's AUTH_PROVIDER_NAMES).

What must hold: `build` either returns a provider ready to verify or raises
KeyMaterialError/ConfigError; nothing is read again later.
"""

from __future__ import annotations

from typing import Protocol

from auth.api import AuthenticationProvider
from auth.providers.basic import BasicProvider
from auth.providers.tls import TlsProvider
from auth.providers.token import TokenProvider
from common.config import Config
from common.errors import ConfigError


class ProviderFactory(Protocol):
    def from_config(self, config: Config) -> AuthenticationProvider: ...


# method name -> provider class
PROVIDERS: dict[str, ProviderFactory] = {
    "token": TokenProvider,
    "tls": TlsProvider,
    "basic": BasicProvider,
}


def build(name: str, config: Config) -> AuthenticationProvider:
    """The provider `name` made from `config` (ConfigError for a name not in PROVIDERS)."""
    factory = PROVIDERS.get(name)
    if factory is None:
        raise ConfigError("unknown authentication provider", provider=name, known=",".join(PROVIDERS))
    return factory.from_config(config)


def is_blocking(provider: AuthenticationProvider) -> bool:
    """Whether `provider.authenticate` must run off the event loop."""
    return bool(getattr(provider, "blocking", False))
