"""Start `strata standalone` as a real subprocess for tests: free ports, temp data dir, bounded waits.

    with StandaloneProcess.start(tmp_path / "data") as sa:   # waits for the "admin URL" line
        client = pulsar.Client(sa.service_url)
        ...
        sa.kill9()        # the whole process group: broker and its bookies
        sa.restart()      # same data dir and ports

It runs with `--no-s3` unless `embedded_s3=True`; to give it a cold tier, pass the session S3
server's settings: `StandaloneProcess.start(d, env=s3_server.standalone_env(s3_server.new_bucket()))`.

The process logic lives in the product module `launch/standalone.py` (the perf tools and the
benchmark use it too); this module is where the tests import it from.
"""

from common.net import free_port
from launch.process import REPO_ROOT
from launch.standalone import StandaloneProcess

__all__ = ["REPO_ROOT", "StandaloneProcess", "free_port"]
