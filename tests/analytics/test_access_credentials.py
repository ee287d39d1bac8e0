"""The Spark options' credentials (analytics.access.credentials): pulsar.client.authParams read by
auth.params (Pulsar's Java client's rule, as StreamNative's connector passes them on), the short
`token` option as before, and a message that never holds the params. No Spark, no broker."""

from __future__ import annotations

import pytest

from analytics.access import ClusterAccess, credentials
from common.errors import BadSourceOption

PLUGIN = "pulsar.client.authpluginclassname"
PARAMS = "pulsar.client.authparams"


def test_each_plugin_gives_its_fields(tmp_path) -> None:
    token_file = tmp_path / "t.jwt"
    token_file.write_text("jwt-from-file\n")
    assert credentials({PLUGIN: "org.apache.pulsar.client.impl.auth.AuthenticationToken",
                        PARAMS: f"file://{token_file}"}, {}) == {"auth_method": "token", "auth_secret": "jwt-from-file"}
    assert credentials({PLUGIN: "token", PARAMS: '{"token": "j"}'}, {})["auth_secret"] == "j"
    assert credentials({PLUGIN: "basic", PARAMS: '{"userId": "u", "password": "p:w"}'}, {}) == {
        "auth_method": "basic", "auth_secret": "u:p:w"}
    assert credentials({PLUGIN: "org.apache.pulsar.client.impl.auth.AuthenticationTls",
                        PARAMS: "tlsCertFile:/c.pem,tlsKeyFile:/k.pem"}, {}) == {
        "auth_method": "tls", "tls_cert_file": "/c.pem", "tls_key_file": "/k.pem"}


@pytest.mark.parametrize(("plugin", "params", "message"), [
    ("basic", "userId:u,password:secret-pw", "basic authParams"),        # Java's basic reads JSON only
    ("tls", "tlscertfile:/c,tlskeyfile:/k", "tlsCertFile and tlsKeyFile"),   # keys are case-sensitive
    ("token", "token:", "empty"),
    ("oauth2", "{}", "unsupported pulsar.client.authPluginClassName"),
])
def test_what_java_would_not_take_is_a_bad_option_without_the_secret(plugin: str, params: str, message: str) -> None:
    with pytest.raises(BadSourceOption, match=message) as raised:
        credentials({PLUGIN: plugin, PARAMS: params}, {})
    assert "secret-pw" not in str(raised.value)


def test_the_short_token_option_and_its_environment_fallback() -> None:
    assert credentials({"token": "token:abc"}, {}) == {"auth_method": "token", "auth_secret": "abc"}
    assert credentials({}, {"STRATA_AUTH_TOKEN": "env-jwt"})["auth_secret"] == "env-jwt"
    access = ClusterAccess.from_options({"pulsar.client.authPluginClassName": "basic",
                                         "pulsar.client.authParams": '{"userId": "u", "password": "pw"}'}, {})
    assert access.has_credentials and "pw" not in repr(access)
