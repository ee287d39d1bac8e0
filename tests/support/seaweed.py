"""One real S3 server (SeaweedFS `weed mini`) for a test run, reusable by every component's tests.

    def test_x(s3_server):                        # the session fixture in tests/conftest.py
        bucket = s3_server.new_bucket()           # a fresh, empty bucket of its own
        client = s3_server.boto3_client()         # SigV4, path-style, the server's credentials
        env = s3_server.standalone_env(bucket)    # STRATA_OFFLOAD_* + AWS_* for a standalone
        s3_server.stop(); s3_server.start()       # fault tests: same ports, data, credentials

It is `launch.seaweed.EmbeddedS3` on free loopback ports in a temp dir, started lazily (only
when a test asks for the fixture) and stopped at the end of the run. What must hold:
- A server that cannot start FAILS the test that needs it, never skips it.
- Tests share the server, so each takes its own bucket (`new_bucket`) and never assumes an
  empty server. A fault test that stops the server should start it again when done;
  `new_bucket` starts it if it is down, so the next test gets a running server anyway.
"""

from __future__ import annotations

import itertools
import os
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Any

from common.errors import StrataError
from launch.seaweed import EmbeddedS3, S3Credentials, s3_client

__all__ = ["TestSeaweed", "started_or_fail"]

REGION = "us-east-1"


class TestSeaweed:
    """A SeaweedFS S3 server for tests; the data dir is a temp dir removed by `cleanup()`."""

    __test__ = False  # not a pytest test class

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="strata-seaweed-"))
        self.credentials = S3Credentials.generate()
        self.region = REGION
        self.server = EmbeddedS3(self.root / "data", self.credentials, bucket="strata-test",
                                 region=REGION, log_path=self.root / "weed.log")
        self._names = itertools.count(1)

    @property
    def endpoint(self) -> str:
        return self.server.endpoint

    @property
    def access_key(self) -> str:
        return self.credentials.access_key

    @property
    def secret_key(self) -> str:
        return self.credentials.secret_key

    @property
    def running(self) -> bool:
        return self.server.running

    def boto3_client(self, access_key: str | None = None, secret_key: str | None = None) -> Any:
        """A boto3 S3 client (the server's credentials unless others are given)."""
        creds = S3Credentials(access_key or self.access_key, secret_key or self.secret_key)
        return s3_client(self.endpoint, creds, self.region)

    def new_bucket(self, name: str | None = None) -> str:
        """Create a bucket (a unique name unless one is given) and return its name."""
        if not self.running:
            self.start()
        if name is None:
            name = f"t-{os.getpid()}-{next(self._names)}-{secrets.token_hex(3)}"
        client = self.boto3_client()
        try:
            client.create_bucket(Bucket=name)
        except client.exceptions.BucketAlreadyOwnedByYou:
            pass
        return name

    def standalone_env(self, bucket: str, prefix: str = "strata") -> dict[str, str]:
        """The environment that points a `strata standalone` (or broker) at this server."""
        return {
            "STRATA_OFFLOAD_DRIVER": "s3",
            "STRATA_OFFLOAD_S3_ENDPOINT": self.endpoint,
            "STRATA_OFFLOAD_S3_BUCKET": bucket,
            "STRATA_OFFLOAD_S3_PREFIX": prefix,
            "STRATA_OFFLOAD_S3_REGION": self.region,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_DEFAULT_REGION": self.region,
        }

    def start(self) -> None:
        self.server.start()

    def stop(self) -> None:
        """SIGTERM; returns once the process has exited (the ports are free again)."""
        self.server.stop()

    def kill(self) -> None:
        """SIGKILL (a crash); returns once the process has exited."""
        self.server.kill()

    def restart(self) -> None:
        self.server.restart()

    def log_tail(self) -> str:
        return self.server.log_tail()

    def cleanup(self) -> None:
        """SIGKILL (the data is thrown away, so a clean stop's 2-3 s buys nothing), remove the dir."""
        self.server.kill()
        shutil.rmtree(self.root, ignore_errors=True)


def started_or_fail() -> TestSeaweed:
    """A started server; a server that cannot start fails the calling test (never a skip)."""
    import pytest

    server = TestSeaweed()
    try:
        server.start()
    except StrataError as exc:
        server.cleanup()
        pytest.fail(f"could not start SeaweedFS: {exc}")
    return server
