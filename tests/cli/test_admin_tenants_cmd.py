"""`strata admin tenants ...` and the namespace entity commands (`namespaces list|policies|create -c|
delete [-f]|remove-*`) end to end against a real `strata standalone`: the JSON they print, the
broker's reason on a refusal (exit status 1), a bad name refused before anything is sent (exit
status 2), and destructive commands that do nothing without confirmation.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import closing

import pulsar
import pytest

from cli import admin
from tests.support.admin_cli import run_admin
from tests.support.standalone_proc import StandaloneProcess

_N = iter(range(1_000_000))


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_N)}"


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    with StandaloneProcess.start(tmp_path_factory.mktemp("tenants-cli") / "data") as sa:
        yield sa


@pytest.fixture
def cli(standalone: StandaloneProcess, capsys: pytest.CaptureFixture):
    """Run `strata admin -o json -y ...`: (exit status, parsed stdout or None, stderr)."""
    def run(*argv: str) -> tuple[int, object, str]:
        code = run_admin(["--admin-url", standalone.admin_url, *argv])
        captured = capsys.readouterr()
        return code, (json.loads(captured.out) if captured.out.strip() else None), captured.err
    return run


def test_tenants_create_get_update_list_delete(cli) -> None:
    tenant = unique("acme")
    assert cli("tenants", "create", tenant, "-r", "ops,dev")[:2] == (0, None)
    assert cli("tenants", "get", tenant)[:2] == (0, {"adminRoles": ["dev", "ops"], "allowedClusters": ["standalone"]})
    assert tenant in cli("tenants", "list")[1]
    code, _, err = cli("tenants", "create", tenant)
    assert code == 1 and "HTTP 409: Tenant already exists" in err
    assert cli("tenants", "update", tenant, "-r", "ops")[0] == 0           # clusters kept
    assert cli("tenants", "get", tenant)[1] == {"adminRoles": ["ops"], "allowedClusters": ["standalone"]}
    code, _, err = cli("tenants", "update", tenant, "-c", "elsewhere")
    assert code == 1 and "HTTP 412: Clusters do not exist" in err
    assert cli("tenants", "delete", tenant)[:2] == (0, None)
    code, _, err = cli("tenants", "get", tenant)
    assert code == 1 and "HTTP 404: Tenant does not exist" in err


def test_bad_tenant_names_are_refused_before_sending(cli) -> None:
    for action in ("get", "create", "delete"):
        code, _, err = cli("tenants", action, "sp ace")
        assert code == 2 and err, action
    assert cli("namespaces", "list", "a?b")[0] == 2


def test_namespaces_list_create_policies_delete(cli) -> None:
    tenant = unique("t")
    assert cli("tenants", "create", tenant)[0] == 0
    ns = f"{tenant}/{unique('ns')}"
    assert cli("namespaces", "list", tenant)[:2] == (0, [])
    assert cli("namespaces", "create", ns, "-b", "2", "-c", "standalone")[0] == 0
    assert cli("namespaces", "list", tenant)[:2] == (0, [ns])
    code, policies, _ = cli("namespaces", "policies", ns)
    assert code == 0 and policies["bundles"]["numBundles"] == 2 and policies["replication_clusters"] == ["standalone"]
    code, _, err = cli("namespaces", "create", f"{tenant}/{unique('ns')}", "-c", "elsewhere")
    assert code == 1 and "HTTP 412: Clusters do not exist" in err
    code, _, err = cli("namespaces", "create", f"{unique('nobody')}/ns")
    assert code == 1 and "HTTP 404: Tenant does not exist" in err
    code, _, err = cli("tenants", "delete", tenant)
    assert code == 1 and "HTTP 409: The tenant still has active namespaces" in err
    assert cli("namespaces", "delete", ns)[:2] == (0, None)
    code, _, err = cli("namespaces", "policies", ns)
    assert code == 1 and "HTTP 404: Namespace does not exist" in err
    assert cli("tenants", "delete", tenant)[0] == 0


def test_namespace_with_topics_is_deleted_by_force_only(cli, standalone: StandaloneProcess) -> None:
    tenant = unique("t")
    assert cli("tenants", "create", tenant)[0] == 0
    ns = f"{tenant}/{unique('ns')}"
    assert cli("namespaces", "create", ns)[0] == 0
    with closing(pulsar.Client(standalone.service_url)) as client:
        client.create_producer(f"persistent://{ns}/x").send(b"m")
    code, _, err = cli("namespaces", "delete", ns)
    assert code == 1 and "HTTP 409: Cannot delete non empty namespace" in err
    assert cli("namespaces", "delete", ns, "-f")[0] == 0
    assert cli("namespaces", "list", tenant)[1] == []
    # tenant force delete takes its namespaces along
    assert cli("namespaces", "create", ns)[0] == 0
    assert cli("tenants", "delete", tenant, "--force")[0] == 0
    assert tenant not in cli("tenants", "list")[1]


def test_destructive_commands_need_confirmation(standalone: StandaloneProcess, cli,
                                                capsys: pytest.CaptureFixture) -> None:
    """Without `--yes` and with no terminal to ask, nothing is deleted (exit status 2)."""
    tenant = unique("t")
    ns = f"{tenant}/{unique('ns')}"
    assert cli("tenants", "create", tenant)[0] == 0
    assert cli("namespaces", "create", ns)[0] == 0
    url = ["--admin-url", standalone.admin_url, "-o", "json"]
    assert admin.main([*url, "namespaces", "delete", ns]) == 2
    assert admin.main([*url, "tenants", "delete", tenant, "-f"]) == 2
    assert "pass --yes" in capsys.readouterr().err
    assert cli("namespaces", "list", tenant)[1] == [ns]
    assert admin.main([*url, "namespaces", "delete", ns, "-y"]) == 0
    assert cli("namespaces", "list", tenant)[1] == []


@pytest.mark.parametrize(("setter", "getter", "remover", "unset"), [
    (["set-retention", "--time", "3h", "--size", "2G"], "get-retention", "remove-retention",
     {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0}),
    (["set-message-ttl", "--ttl", "60"], "get-message-ttl", "remove-message-ttl", 0),
    (["set-deduplication", "--enable"], "get-deduplication", "remove-deduplication", False),
])
def test_namespace_policy_remove_commands(cli, setter: list[str], getter: str, remover: str, unset: object) -> None:
    ns = f"public/{unique('pol')}"
    assert cli("namespaces", "create", ns)[0] == 0
    before = cli("namespaces", getter, ns)[1]
    assert before == unset
    assert cli("namespaces", setter[0], ns, *setter[1:])[0] == 0
    assert cli("namespaces", getter, ns)[1] != before
    assert cli("namespaces", remover, ns)[:2] == (0, None)
    assert cli("namespaces", getter, ns)[1] == before
    code, _, err = cli("namespaces", remover, f"{ns}-missing")
    assert code == 1 and "HTTP 404: Namespace does not exist" in err


def test_offload_removes(cli) -> None:
    ns = f"public/{unique('off')}"
    assert cli("namespaces", "create", ns)[0] == 0
    assert cli("namespaces", "set-offload-threshold", ns, "--size", "10M", "--time", "1h")[0] == 0
    assert cli("namespaces", "policies", ns)[1]["offload_threshold"] == 10 * 1024 * 1024
    assert cli("namespaces", "remove-offload-threshold", ns)[0] == 0
    policies = cli("namespaces", "policies", ns)[1]
    assert (policies["offload_threshold"], policies["offload_threshold_in_seconds"]) == (-1, -1)
    assert cli("namespaces", "remove-offload-policies", ns)[0] == 0
