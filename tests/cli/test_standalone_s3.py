"""The embedded S3 server (SeaweedFS `weed mini`): the session fixture and `strata standalone`'s wiring.

What must hold: the embedded server serves S3 with the credentials it was started with and
refuses others (403, a typed error through offload's translation); a restart keeps data and
credentials; `strata standalone` starts one by default with its credentials kept in
`D/s3/credentials.json` (mode 0600), and `--no-s3` starts none.
"""

from __future__ import annotations

import pytest

from common.errors import ColdTierAccessDenied
from offload.embedded_s3 import _client_error


def test_session_server_serves_and_keeps_data_across_restart(s3_server):
    bucket = s3_server.new_bucket()
    client = s3_server.boto3_client()
    client.put_object(Bucket=bucket, Key="a/b", Body=b"payload")
    s3_server.restart()
    client = s3_server.boto3_client()
    assert client.get_object(Bucket=bucket, Key="a/b")["Body"].read() == b"payload"
    env = s3_server.standalone_env(bucket, prefix="p")
    assert env["STRATA_OFFLOAD_S3_ENDPOINT"] == s3_server.endpoint
    assert env["STRATA_OFFLOAD_S3_BUCKET"] == bucket and env["STRATA_OFFLOAD_DRIVER"] == "s3"


def test_bad_credentials_are_refused(s3_server):
    from botocore.exceptions import ClientError

    bucket = s3_server.new_bucket()
    for access_key, secret_key in ((s3_server.access_key, "wrong-secret"), ("UNKNOWNKEY", "x" * 20)):
        client = s3_server.boto3_client(access_key, secret_key)
        with pytest.raises(ClientError) as info:
            client.list_objects_v2(Bucket=bucket)
        assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
        assert isinstance(_client_error(info.value, bucket), ColdTierAccessDenied)

