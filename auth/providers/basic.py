"""The basic provider: a user name and password checked against an htpasswd file (Pulsar's
AuthenticationProviderBasic, basicAuthConf).

    provider = BasicProvider.from_config(config)                 # the file read and checked once, here
    provider.authenticate(Credentials("basic", b"alice:secret"))  # Identity("alice", "basic")

The file (`basic_auth_conf`: a path, file:///path, data:;base64,..., env:VAR or bare base64, as
Pulsar reads it; auth.providers.sources) holds `user:hash` lines as
`htpasswd` writes them; accepted hashes: bcrypt ($2y$/$2b$, `htpasswd -B`), apr1 ($apr1$, `htpasswd
-m`, Pulsar's default), sha256/sha512-crypt, and traditional crypt (DES, `htpasswd -d`). Plaintext and
{SHA} lines are refused when the file is loaded (KeyMaterialError naming the user, never the hash).
The role is the user name. Pulsar itself checks only apr1 and DES crypt, and refuses a password
containing ':'; here the credentials split at the first ':' (htpasswd user names cannot hold one).

Wire facts (pulsar-client 3.13, measured with tests/auth's listener decoding the first frame):
`AuthenticationBasic(user, password)` sends CONNECT auth_method_name="basic" and
auth_data=b"user:password" (the password split at the first ':'); an HTTP lookup sends
`Authorization: Basic base64(user:password)`.

Credentials that verified are remembered (a keyed hash, never the password; at most
VERIFIED_ENTRIES_MAX), so a user's further connections skip bcrypt; wrong ones are never remembered
and pay the full check each time.

What must hold: a password is never logged, stored or put in an error; a user not in the file costs
the same hash check as a wrong password (no user enumeration by timing); `authenticate` is slow by
design (bcrypt), so it is `blocking` and the service runs it off the event loop.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
from collections import OrderedDict

from passlib.apache import HtpasswdFile  # type: ignore[import-untyped]
from passlib.context import CryptContext  # type: ignore[import-untyped]

from auth.api import Credentials, Identity
from auth.providers.sources import read_pulsar_source
from common.config import Config
from common.errors import AuthenticationFailed, KeyMaterialError

METHOD = "basic"
ACCEPTED_SCHEMES = ("bcrypt", "apr_md5_crypt", "sha256_crypt", "sha512_crypt", "des_crypt")
VERIFIED_ENTRIES_MAX = 1024      # credentials remembered as verified (the least recently used go first)
CREDENTIALS_BYTES_MAX = 4096     # "user:password" longer than this is refused unhashed
HTPASSWD_BYTES_MAX = 16 * 1024 * 1024


class BasicProvider:
    """Checks "user:password" against the htpasswd entries loaded at construction."""

    method_name = METHOD
    blocking = True   # bcrypt: ~0.1-0.3 s of CPU per check

    def __init__(self, htpasswd: bytes) -> None:
        if len(htpasswd) > HTPASSWD_BYTES_MAX:
            raise KeyMaterialError("basic_auth_conf too large", bytes=len(htpasswd), max_bytes=HTPASSWD_BYTES_MAX)
        self._context = CryptContext(schemes=list(ACCEPTED_SCHEMES))
        try:
            table = HtpasswdFile.from_string(htpasswd, context=self._context)
        except (ValueError, UnicodeDecodeError) as exc:
            line = re.search(r"reading line (\d+)", str(exc))   # passlib's message; only the number is shown
            raise KeyMaterialError("basic_auth_conf is not an htpasswd file (each line user:hash)",
                                   line=int(line.group(1)) if line else None, reason=type(exc).__name__) from None
        self._hashes: dict[str, str] = {}
        for user in table.users():
            digest = table.get_hash(user)
            hash_text = digest.decode() if isinstance(digest, bytes) else str(digest)
            if self._context.identify(hash_text, required=False) is None:
                raise KeyMaterialError("basic_auth_conf: unsupported hash scheme (use bcrypt or apr1)", user=user)
            self._hashes[user] = hash_text
        if not self._hashes:
            raise KeyMaterialError("basic_auth_conf names no user")
        # a user not in the file is checked against this real hash too, then refused: same cost either way
        self._decoy_hash = next(iter(self._hashes.values()))
        # keyed hash of "user:password" that verified -> user (LRU); the file never changes, so neither do these
        self._verified: OrderedDict[bytes, str] = OrderedDict()
        self._memo_secret = secrets.token_bytes(32)    # never leaves the process; the memo holds no password
        self._memo_lock = threading.Lock()             # authenticate runs on the service's threads

    @classmethod
    def from_config(cls, config: Config) -> BasicProvider:
        return cls(read_pulsar_source(config.basic_auth_conf, what="basic_auth_conf"))

    @property
    def users(self) -> tuple[str, ...]:
        return tuple(self._hashes)

    def authenticate(self, credentials: Credentials) -> Identity:
        user, password = _split(credentials.data)
        remembered = self._remembered(credentials.data)
        if remembered is not None:
            return Identity(remembered, METHOD)
        known = self._hashes.get(user)
        ok = self._context.verify(password, known if known is not None else self._decoy_hash)
        if known is None or not ok:
            raise AuthenticationFailed("wrong user name or password")
        self._remember(credentials.data, user)
        return Identity(user, METHOD)

    def _remembered(self, data: bytes) -> str | None:
        key = hmac.new(self._memo_secret, data, hashlib.sha256).digest()
        with self._memo_lock:
            user = self._verified.get(key)
            if user is not None:
                self._verified.move_to_end(key)
            return user

    def _remember(self, data: bytes, user: str) -> None:
        key = hmac.new(self._memo_secret, data, hashlib.sha256).digest()
        with self._memo_lock:
            self._verified[key] = user
            while len(self._verified) > VERIFIED_ENTRIES_MAX:
                self._verified.popitem(last=False)


def _split(data: bytes) -> tuple[str, str]:
    if len(data) > CREDENTIALS_BYTES_MAX:
        raise AuthenticationFailed("basic credentials too long", bytes=len(data), max_bytes=CREDENTIALS_BYTES_MAX)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise AuthenticationFailed("basic credentials are not UTF-8 user:password") from None
    user, sep, password = text.partition(":")
    if not sep or not user:
        raise AuthenticationFailed("basic credentials are not user:password")
    return user, password
