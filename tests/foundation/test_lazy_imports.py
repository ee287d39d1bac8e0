"""A broker starts small: the heavy libraries load with the component that needs them, not before.

Each check runs in a fresh interpreter (this test process has imported everything already) and
lists which of `HEAVY` are in its `sys.modules`:

- importing the standalone command and the broker loads none of them (pyarrow and numpy come
  with the first offload or cold read, boto3 with a configured cold tier, fastavro with the
  first Avro/JSON schema, cryptography/PyJWT/passlib with TLS or an authentication provider,
  pyspark and pyiceberg with analytics or the first Iceberg table);
- opening a configured cold tier (S3 and its Iceberg tables, no I/O) loads boto3 for its client
  but still no Arrow, Iceberg or Spark.

tests/cli/test_perf_startup.py checks the same on a real idle standalone.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.standalone_proc import REPO_ROOT

RUN_TIMEOUT_S = 60
HEAVY = ("pyarrow", "numpy", "pandas", "boto3", "botocore", "pyspark", "pyiceberg", "duckdb", "fastavro",
         "cryptography", "jwt", "passlib", "bcrypt")
_REPORT = f"import json, sys; print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"


def _heavy_after(code: str) -> list[str]:
    """The HEAVY modules loaded once `code` has run in a fresh interpreter."""
    proc = subprocess.run([sys.executable, "-c", f"{code}\n{_REPORT}"], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return list(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_the_broker_and_the_standalone_command_import_no_heavy_library() -> None:
    assert _heavy_after("import cli.main, cli.standalone, broker.server") == []


def test_a_configured_cold_tier_loads_boto3_only() -> None:
    code = "\n".join([
        "import offload",
        "from common.config import load_config",
        "config = load_config(None, offload_driver='s3', offload_s3_endpoint='http://127.0.0.1:9',",
        "                     offload_s3_bucket='b')",
        "cold = offload.open_cold_storage(config, access_key='a', secret_key='s',",
        "                                 metadata_url='sqlite:////tmp/strata-lazy-imports-never-opened.db')",
        "assert cold is not None and cold.tables is not None",
    ])
    assert _heavy_after(code) == ["boto3", "botocore"]
