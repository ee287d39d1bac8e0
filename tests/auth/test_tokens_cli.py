"""`strata tokens` round trips: keys made by the command sign tokens the command and the token
provider accept; invalid tokens and bad durations are exit code 1 with one clear line.
"""

from __future__ import annotations

import base64
import io
import json
import stat
from pathlib import Path

import pytest

from auth.api import Credentials
from auth.providers.token import TokenProvider
from auth.tokens import parse_duration_s
from cli.main import main as strata
from common.config import load_config
from common.errors import InvalidDuration


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = strata(["tokens", *argv])
    out, err = capsys.readouterr()
    return code, out.strip(), err.strip()


def test_secret_key_create_validate_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    key = tmp_path / "secret.key"
    assert run(capsys, "create-secret-key", "--output", str(key))[0] == 0
    assert len(key.read_bytes()) == 32 and stat.S_IMODE(key.stat().st_mode) == 0o600
    code, token, _ = run(capsys, "create", "--secret-key", f"file://{key}", "--subject", "alice",
                         "--expiry-time", "2h", "--headers", "kid=k1")
    assert code == 0 and token.count(".") == 2
    code, out, _ = run(capsys, "validate", "-sk", f"file://{key}", token)
    claims = json.loads(out)
    assert code == 0 and claims["sub"] == "alice" and 7100 < claims["exp"] - _now() <= 7200
    code, out, _ = run(capsys, "show", token)
    assert json.loads(out)["header"]["kid"] == "k1" and json.loads(out)["verified"] is False
    for command in (["validate", "-sk", f"file://{key}"], ["show"]):    # Pulsar's -i / --stdin
        monkeypatch.setattr("sys.stdin", io.StringIO(token + "\n"))
        code, out, _ = run(capsys, *command, "-i")
        assert code == 0 and '"alice"' in out
    config = load_config(env={}, authentication_enabled=True, authentication_providers="token",
                         token_secret_key=str(key))
    assert TokenProvider.from_config(config).authenticate(Credentials("token", token.encode())).role == "alice"


def test_base64_secret_key_as_a_data_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, b64, _ = run(capsys, "create-secret-key", "--base64")
    assert code == 0 and len(base64.b64decode(b64)) == 32
    code, token, _ = run(capsys, "create", "-sk", f"data:;base64,{b64}", "-s", "bob")
    assert run(capsys, "validate", "-sk", f"data:;base64,{b64}", token)[0] == 0
    other = run(capsys, "create-secret-key", "--base64")[1]
    code, out, err = run(capsys, "validate", "-sk", f"data:;base64,{other}", token)
    assert code == 1 and out == "" and "signature" in err and other not in err


@pytest.mark.parametrize("alg, pem", [("RS256", False), ("ES256", False), ("ES384", True)])
def test_key_pair_round_trip(alg: str, pem: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    private, public = tmp_path / "private.key", tmp_path / "public.key"
    argv = ["create-key-pair", "-a", alg, "--output-private-key", str(private), "--output-public-key", str(public)]
    assert run(capsys, *argv, *(["--pem"] if pem else []))[0] == 0
    assert public.read_bytes().startswith(b"-----BEGIN PUBLIC KEY") == pem     # DER unless --pem, like Pulsar
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    code, token, _ = run(capsys, "create", "--private-key", f"file://{private}", "--subject", "carol", "-e", "1d")
    assert code == 0
    assert json.loads(run(capsys, "validate", "--public-key", str(public), token)[1])["sub"] == "carol"
    config = load_config(env={}, authentication_enabled=True, authentication_providers="token",
                         token_public_key=f"file://{public}", token_public_alg=alg)
    assert TokenProvider.from_config(config).authenticate(Credentials("token", token.encode())).role == "carol"


def test_expired_and_garbage_tokens_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = tmp_path / "k"
    run(capsys, "create-secret-key", "-o", str(key))
    code, token, _ = run(capsys, "create", "-sk", str(key), "-s", "dave", "-e", "0s")
    assert code == 0
    code, _, err = run(capsys, "validate", "-sk", str(key), token)
    assert code == 1 and "expired" in err
    code, _, err = run(capsys, "validate", "-sk", str(key), "not-a-token")
    assert code == 1 and err.count("\n") == 0
    assert run(capsys, "show", "garbage")[0] == 1
    code, _, err = run(capsys, "create", "-sk", str(key), "-s", "dave", "-e", "3x")
    assert code == 1 and "unit" in err
    code, _, err = run(capsys, "create", "-sk", "file:///nonexistent/key", "-s", "dave")
    assert code == 1 and "/nonexistent/key" in err


def test_durations() -> None:
    assert [parse_duration_s(t) for t in ("90", "45s", "10m", "2h", "30d", "1w", "1y")] == \
        [90, 45, 600, 7200, 30 * 86400, 7 * 86400, 365 * 86400]
    for bad in ("", "1.5h", "-1d", "3x", "h", "1 year", "99999999y"):
        with pytest.raises(InvalidDuration):
            parse_duration_s(bad)


def _now() -> float:
    import time
    return time.time()
