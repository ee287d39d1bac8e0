"""`strata admin tenants ...` and the namespace entity commands (`namespaces list|topics|policies|
create -b -c|delete [-f]|split-bundle -san|set-*|get-*|remove-*`) end to end against a real
`strata standalone`: pulsar-admin's flag spellings (`-ttl`, `-t/-s`, `-e/-d`, ...), the JSON they
print (a namespace getter prints null when the namespace has no value of its own), the broker's
reason on a refusal (exit status 1), a bad name refused before anything is sent with words of its
own (exit status 2), and destructive commands that do nothing without confirmation.
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
    for action in ("get", "create", "update", "delete"):
        for name in ("sp ace", "bad/name", ""):
            code, _, err = cli("tenants", action, name)
            assert code == 2 and f"Tenant name is not valid: {name!r}" in err, (action, name, err)
            assert "namespace" not in err, err
    code, _, err = cli("namespaces", "list", "a?b")
    assert code == 2 and "Tenant name is not valid: 'a?b'" in err
    assert "bad" not in cli("tenants", "list")[1]


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
    # unset: a namespace without a value of its own prints null, as pulsar-admin
    (["set-retention", "--time", "3h", "--size", "2G"], "get-retention", "remove-retention", None),
    (["set-message-ttl", "--ttl", "60"], "get-message-ttl", "remove-message-ttl", None),
    (["set-deduplication", "--enable"], "get-deduplication", "remove-deduplication", None),
])
def test_namespace_policy_remove_commands(cli, setter: list[str], getter: str, remover: str, unset: object) -> None:
    ns = f"public/{unique('pol')}"
    assert cli("namespaces", "create", ns)[0] == 0
    code, before, _ = cli("namespaces", getter, ns)
    assert (code, before) == (0, unset)
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


@pytest.mark.parametrize(("setter", "getter", "expected"), [
    (["set-message-ttl", "-ttl", "120"], "get-message-ttl", 120),
    (["set-message-ttl", "-ttl", "2m"], "get-message-ttl", 120),
    (["set-message-ttl", "--messageTTL", "1h"], "get-message-ttl", 3600),
    (["set-message-ttl", "-ttl", "0"], "get-message-ttl", 0),
    (["set-retention", "-t", "3h", "-s", "2G"], "get-retention", {"retentionTimeInMinutes": 180,
                                                                   "retentionSizeInMB": 2048}),
    (["set-retention", "--time", "-1", "--size", "-1"], "get-retention", {"retentionTimeInMinutes": -1,
                                                                           "retentionSizeInMB": -1}),
    (["set-deduplication", "-e"], "get-deduplication", True),
    (["set-deduplication", "-d"], "get-deduplication", False),
    (["set-deduplication", "--disable"], "get-deduplication", False),
])
def test_namespace_setters_take_pulsar_admins_flags(cli, setter: list[str], getter: str, expected: object) -> None:
    """`namespaces set-message-ttl public/x -ttl 120` as pulsar-admin spells it (argparse alone
    reads `-ttl` as `-t tl`: 'bad time'); the getter prints exactly what was set."""
    ns = f"public/{unique('flags')}"
    assert cli("namespaces", "create", ns)[0] == 0
    code, _, err = cli("namespaces", setter[0], ns, *setter[1:])
    assert code == 0, err
    assert cli("namespaces", getter, ns)[:2] == (0, expected)


def test_public_default_getters_print_null(cli) -> None:
    for getter in ("get-message-ttl", "get-retention", "get-deduplication"):
        assert cli("namespaces", getter, "public/default")[:2] == (0, None), getter


def test_namespaces_topics(cli, standalone: StandaloneProcess) -> None:
    tenant = unique("t")
    assert cli("tenants", "create", tenant)[0] == 0
    ns = f"{tenant}/{unique('ns')}"
    assert cli("namespaces", "create", ns)[0] == 0
    assert cli("namespaces", "topics", ns)[:2] == (0, [])
    assert cli("topics", "create-partitioned-topic", f"persistent://{ns}/p", "-p", "2")[0] == 0
    with closing(pulsar.Client(standalone.service_url)) as client:
        client.create_producer(f"persistent://{ns}/x").send(b"m")
    expected = [f"persistent://{ns}/p-partition-0", f"persistent://{ns}/p-partition-1", f"persistent://{ns}/x"]
    assert cli("namespaces", "topics", ns)[:2] == (0, expected)
    assert cli("namespaces", "topics", ns, "-m", "all", "-ist")[:2] == (0, expected)
    assert cli("namespaces", "topics", ns, "--mode", "NON_PERSISTENT")[:2] == (0, [])
    code, _, err = cli("namespaces", "topics", f"{ns}-missing")
    assert code == 1 and "HTTP 404: Namespace does not exist" in err
    assert cli("namespaces", "topics", "no-slash")[0] == 2


def test_namespace_create_and_split_take_pulsar_admins_flags(cli) -> None:
    tenant = unique("t")
    created = cli("tenants", "create", tenant, "--admin-roles", "a", "-r", "b,c", "--allowed-clusters", "standalone")
    assert created[0] == 0
    assert cli("tenants", "get", tenant)[1] == {"adminRoles": ["a", "b", "c"], "allowedClusters": ["standalone"]}
    ns = f"{tenant}/{unique('ns')}"
    # -b 0 is pulsar-admin's "the broker's default" (4 here); --clusters/-c this cluster
    assert cli("namespaces", "create", ns, "--bundles", "0", "--clusters", "standalone")[0] == 0
    assert cli("namespaces", "bundles", ns)[1]["numBundles"] == 4
    with pytest.raises(SystemExit):
        cli("namespaces", "create", f"{tenant}/{unique('ns')}", "-b", "-1")
    bundle = "_".join(cli("namespaces", "bundles", ns)[1]["boundaries"][:2])
    code, _, err = cli("namespaces", "split-bundle", ns, "-b", bundle, "-san", "topic_count_equally_divide")
    assert code == 1 and "HTTP 412: Unsupported namespace bundle split algorithm" in err
    code, _, err = cli("namespaces", "split-bundle", ns, "--bundle", bundle, "--split-algorithm-name",
                       "range_equally_divide", "-u")
    assert code == 1 and "HTTP 412" in err and "not owned by any broker" in err   # nothing looked up yet
    assert cli("namespaces", "bundles", ns)[1]["numBundles"] == 4
