"""auth.params: Pulsar's authParams read by the Java client's rule (AuthenticationToken,
AuthenticationBasic, AuthenticationTls `configure(String)`, AuthenticationUtil's Pulsar 1 format),
and the shape rule when no plugin is named. Pure: no broker; a token file is a real file."""

from __future__ import annotations

import pytest

from auth import params
from auth.params import BASIC, TLS, TOKEN, AuthParams, parse, pulsar1_params
from common.errors import InvalidArgument, KeyMaterialError

JAVA_TOKEN = "org.apache.pulsar.client.impl.auth.AuthenticationToken"
JAVA_BASIC = "org.apache.pulsar.client.impl.auth.AuthenticationBasic"
JAVA_TLS = "org.apache.pulsar.client.impl.auth.AuthenticationTls"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2ln"


@pytest.mark.parametrize(("text", "token"), [
    (f"token:{JWT}", JWT),                        # the prefix stripped
    (JWT, JWT),                                   # not JSON: the whole string
    (f'{{"token": "{JWT}"}}', JWT),               # a JSON object's "token"
    ("token:file:///not/read", "file:///not/read"),   # after token: it is the token as written (Java)
    ("{not json", "{not json"),                   # JSON that does not parse: the whole string (Java)
    (f"  token:{JWT}\n", JWT),                    # surrounding whitespace (a file's newline) goes
])
def test_token_forms_follow_java(text: str, token: str) -> None:
    parsed = parse(JAVA_TOKEN, text)
    assert (parsed.method, parsed.token, parsed.token_file) == (TOKEN, token, "")
    assert parsed.read_token() == token


def test_a_token_file_is_a_file_uri_read_whole_and_trimmed(tmp_path) -> None:
    path = tmp_path / "my token.jwt"                  # a space: percent-encoded in the URI
    path.write_text(f"\n{JWT}\n")
    parsed = parse("token", "file://" + str(path).replace(" ", "%20"))
    assert (parsed.token, parsed.token_file) == ("", str(path))
    assert parsed.read_token() == JWT
    assert parse("token", f"file:{path}").token_file == str(path)        # file:/abs, as Java's URI takes it
    path.write_text("  \n")
    with pytest.raises(KeyMaterialError, match="holds no token"):
        parsed.read_token()
    with pytest.raises(KeyMaterialError, match="cannot read"):
        parse("token", f"file://{tmp_path}/absent").read_token()


@pytest.mark.parametrize("text", ["file://host/etc/t", "file:relative/t", "file:///t?x=1", "file:///t#f"])
def test_a_token_file_uri_java_refuses_is_refused(text: str) -> None:
    with pytest.raises(InvalidArgument, match="file:///absolute/path"):
        parse(JAVA_TOKEN, text)


@pytest.mark.parametrize("text", ["token:", '{"token": ""}', '{"file": "/t"}', '{"token": 7}', ""])
def test_an_empty_or_missing_token_is_refused_without_echoing_it(text: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        parse("token", text)
    assert "/t" not in str(raised.value)


def test_basic_is_java_s_json_only() -> None:
    parsed = parse(JAVA_BASIC, '{"userId": "app", "password": "p:a,s s"}')
    assert (parsed.method, parsed.user, parsed.password) == (BASIC, "app", "p:a,s s")
    assert "p:a,s s" not in repr(parsed)                     # never in a repr
    for text in ('{"username": "app", "password": "pw"}',   # the C++/Python clients' keys: not Java's
                 "userId:app,password:pw",                   # Pulsar 1 key:value: Java's basic does not read it
                 '{"userId": "app"}', '{"userId": "", "password": "pw"}', '{"userId": "a:b", "password": "pw"}'):
        with pytest.raises(InvalidArgument) as raised:
            parse(JAVA_BASIC, text)
        assert "pw" not in str(raised.value)


def test_tls_reads_pulsar1_key_values_or_json() -> None:
    expected = AuthParams(TLS, cert_file="/c.pem", key_file="/k.pem")
    assert parse(JAVA_TLS, "tlsCertFile:/c.pem,tlsKeyFile:/k.pem") == expected
    assert parse(JAVA_TLS, '{"tlsCertFile": "/c.pem", "tlsKeyFile": "/k.pem"}') == expected
    # a value keeps its colons (split at the first only: a Windows path), keys are case-sensitive
    assert parse("tls", "tlsCertFile:C:\\c.pem,tlsKeyFile:C:\\k.pem").cert_file == "C:\\c.pem"
    with pytest.raises(InvalidArgument, match="tlsCertFile"):
        parse("tls", "tlscertfile:/c.pem,tlskeyfile:/k.pem")
    with pytest.raises(InvalidArgument, match="missing='tlsKeyFile'"):
        parse("tls", "tlsCertFile:/c.pem")


def test_pulsar1_format_drops_parts_without_a_value_and_trims_nothing() -> None:
    assert pulsar1_params("a:1,b:,c,d:x:y, e:2") == {"a": "1", "d": "x:y", " e": "2"}
    assert pulsar1_params("") == {}


def test_plugin_names_java_or_short_any_case() -> None:
    for name in (JAVA_TOKEN, JAVA_TOKEN.lower(), "token", "TOKEN"):
        assert params.method_of(name) == TOKEN
    assert params.method_of("Basic") == BASIC and params.method_of(JAVA_TLS) == TLS
    with pytest.raises(InvalidArgument, match="unsupported authentication plugin"):
        params.method_of("org.apache.pulsar.client.impl.auth.oauth2.AuthenticationOAuth2")


@pytest.mark.parametrize(("text", "method"), [
    ('{"userId": "u", "password": "p"}', BASIC),
    ('{"tlsCertFile": "/c", "tlsKeyFile": "/k"}', TLS),
    ('{"token": "t"}', TOKEN),
    ("tlsCertFile:/c,tlsKeyFile:/k", TLS),
    ("tlsKeyFile:/k,tlsCertFile:/c", TLS),
    ("token:t", TOKEN),
    ("file:///t", TOKEN),
    (JWT, TOKEN),
])
def test_without_a_plugin_the_shape_decides(text: str, method: str) -> None:
    assert parse(None, text).method == method
    assert parse("", text).method == method


def test_without_a_plugin_a_brace_that_is_no_json_object_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="JSON object"):
        parse(None, '{"userId": "u", "password": ')
    assert parse("token", "{not json").token == "{not json"        # a named token plugin: Java's rule
