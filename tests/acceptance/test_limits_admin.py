"""The multi-tenant policies' admin surface on a real standalone (`broker.admin.limits`,
`cli.admin.limits`): every policy's namespace and topic routes answer, a value set is read back
(also in the namespace's Policies JSON, per cluster where Pulsar keeps it so), `applied` resolves
topic > namespace > broker, bad values get Pulsar's status and text and change nothing, a create
body may carry the policies, and `strata admin` sets and reads them with pulsar-admin's flags.
"""

from __future__ import annotations

import itertools
import json

import pytest

from broker.limits import registry
from tests.support.admin_cli import run_admin
from tests.support.admin_http import admin_call

_ids = itertools.count()
NS = "/admin/v2/namespaces/public/default"


def _topic(sa) -> tuple[str, str]:
    name = f"limits-{next(_ids)}"
    assert admin_call(sa.admin_url, "PUT", f"/admin/v2/persistent/public/default/{name}")[0] == 204
    return name, f"/admin/v2/persistent/public/default/{name}"


def _namespace(sa, body: object = None) -> tuple[int, object, str]:
    ns = f"public/limits-{next(_ids)}"
    status, answer = admin_call(sa.admin_url, "PUT", f"/admin/v2/namespaces/{ns}", body)
    return status, answer, f"/admin/v2/namespaces/{ns}"


def test_every_policy_route_answers_its_default_as_unset(standalone) -> None:
    _, topic = _topic(standalone)
    for spec in registry.ALL:
        if spec.route:
            status, body = admin_call(standalone.admin_url, "GET", f"{NS}/{spec.route}")
            assert (status, body) == (200, None), spec.route
        if spec.topic_route:
            assert admin_call(standalone.admin_url, "GET", f"{topic}/{spec.topic_route}") == (200, None)
            status, applied = admin_call(standalone.admin_url, "GET", f"{topic}/{spec.topic_route}?applied=true")
            assert status == 200 and applied is not None, spec.topic_route


def test_set_read_applied_and_remove_across_levels(standalone) -> None:
    url = standalone.admin_url
    _, path = _namespace(standalone)[::2]
    name = f"persistent://{path.split('/namespaces/')[1]}/t"
    topic = f"/admin/v2/persistent/{name.split('://')[1]}"
    assert admin_call(url, "PUT", topic)[0] == 204
    assert admin_call(url, "GET", f"{topic}/maxProducers?applied=true") == (200, 0)          # the broker's
    assert admin_call(url, "POST", f"{path}/maxProducersPerTopic", 5)[0] == 204
    assert admin_call(url, "GET", f"{path}/maxProducersPerTopic") == (200, 5)
    assert admin_call(url, "GET", f"{topic}/maxProducers?applied=true") == (200, 5)         # the namespace's
    assert admin_call(url, "POST", f"{topic}/maxProducers", 2)[0] == 204
    assert admin_call(url, "GET", f"{topic}/maxProducers") == (200, 2)
    assert admin_call(url, "GET", f"{topic}/maxProducers?applied=true") == (200, 2)         # the topic's
    assert admin_call(url, "DELETE", f"{topic}/maxProducers")[0] == 204
    assert admin_call(url, "GET", f"{topic}/maxProducers?applied=true") == (200, 5)
    assert admin_call(url, "GET", path)[1]["max_producers_per_topic"] == 5
    assert admin_call(url, "DELETE", f"{path}/maxProducersPerTopic")[0] == 204
    assert admin_call(url, "GET", f"{path}/maxProducersPerTopic") == (200, None)
    rate = {"publishThrottlingRateInMsg": 100, "publishThrottlingRateInByte": -1}
    assert admin_call(url, "POST", f"{path}/publishRate", rate)[0] == 204
    cluster = admin_call(url, "GET", "/admin/v2/clusters")[1][0]
    assert admin_call(url, "GET", path)[1]["publishMaxMessageRate"] == {cluster: rate}
    assert admin_call(url, "GET", f"{topic}/publishRate?applied=true") == (200, rate)


@pytest.mark.parametrize(("route", "body", "status", "text"), [
    ("maxProducersPerTopic", -1, 412, "maxProducersPerTopic must be 0 or more"),
    ("maxConsumersPerTopic", "x", 400, "must be an integer"),
    ("persistence", {"bookkeeperEnsemble": 1, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 1}, 400,
     "Bookkeeper Ensemble (1) >= WriteQuorum (2) >= AckQuorum (1)"),
    ("persistence", {"bookkeeperEnsemble": 6, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 1}, 400,
     "Bookkeeper-Ensemble must be <= 5 and > 0."),
    ("persistence", {"bookkeeperEnsemble": 2, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 0}, 400,
     "Bookkeeper-AckQuorum must be <= 5 and > 0."),
    ("publishRate", {"publishThrottlingRateInMsg": -5}, 412, "publishRate.publishThrottlingRateInMsg must be -1"),
    ("dispatchRate", {"dispatchThrottlingRateInMsg": 10, "ratePeriodInSecond": 0}, 412, "must be 1 second or more"),
    ("inactiveTopicPolicies", {"inactiveTopicDeleteMode": "sometimes", "maxInactiveDurationSeconds": 5,
                               "deleteWhileInactive": True}, 400, "must be one of"),
    ("autoTopicCreation", {"allowAutoTopicCreation": True, "topicType": "partitioned"}, 412,
     "[defaultNumPartitions] cannot be less than 1"),
])
def test_a_bad_value_is_refused_and_nothing_changes(standalone, route, body, status, text) -> None:
    url = standalone.admin_url
    _, path = _namespace(standalone)[::2]
    before = admin_call(url, "GET", path)[1]
    got, answer = admin_call(url, "POST", f"{path}/{route}", body)
    assert got == status and text in json.dumps(answer).replace("\\", ""), answer
    assert admin_call(url, "GET", path)[1] == before


def test_a_create_body_may_carry_the_policies(standalone) -> None:
    url = standalone.admin_url
    cluster = admin_call(url, "GET", "/admin/v2/clusters")[1][0]
    rate = {"dispatchThrottlingRateInMsg": 50, "dispatchThrottlingRateInByte": -1, "relativeToPublishRate": False,
            "ratePeriodInSecond": 1}
    status, _, path = _namespace(standalone, {"max_consumers_per_topic": 7, "topicDispatchRate": {cluster: rate},
                                              "subscription_expiration_time_minutes": 0})
    assert status == 204
    policies = admin_call(url, "GET", path)[1]
    assert policies["max_consumers_per_topic"] == 7 and policies["topicDispatchRate"] == {cluster: rate}
    assert policies["subscription_expiration_time_minutes"] == 0
    assert admin_call(url, "POST", path.replace("/namespaces/", "/namespaces/") + "/maxConsumersPerTopic", 8)[0] == 204
    again = admin_call(url, "GET", path)[1]
    again.pop("max_consumers_per_topic")
    status, _, _ = _namespace(standalone, again)       # a GET answer is a valid create body
    assert status == 204
    status, answer, _ = _namespace(standalone, {"replicatorDispatchRate": {cluster: rate}})
    assert status == 412 and "replicatorDispatchRate is not supported by Strata" in answer["reason"]


def test_the_cli_sets_reads_and_removes_with_pulsar_admins_flags(standalone, capsys) -> None:
    url = ["--admin-url", standalone.admin_url]
    _, path = _namespace(standalone)[::2]
    ns = path.split("/namespaces/")[1]
    name, _ = _topic(standalone)
    assert run_admin([*url, "namespaces", "set-max-unacked-messages-per-consumer", ns, "-c", "9"]) == 0
    capsys.readouterr()
    assert run_admin([*url, "namespaces", "get-max-unacked-messages-per-consumer", ns]) == 0
    assert json.loads(capsys.readouterr().out) == 9
    assert run_admin([*url, "namespaces", "set-dispatch-rate", ns, "-md", "500", "-dt", "2"]) == 0
    assert run_admin([*url, "namespaces", "set-inactive-topic-policies", ns, "-e", "-t", "1h",
                      "-m", "delete_when_subscriptions_caught_up"]) == 0
    assert run_admin([*url, "namespaces", "set-persistence", ns, "-e", "1", "-w", "1", "-a", "1"]) == 0
    capsys.readouterr()
    assert run_admin([*url, "namespaces", "policies", ns]) == 0
    policies = json.loads(capsys.readouterr().out)
    assert list(policies["topicDispatchRate"].values()) == [{"dispatchThrottlingRateInMsg": 500,
                                                             "dispatchThrottlingRateInByte": -1,
                                                             "relativeToPublishRate": False, "ratePeriodInSecond": 2}]
    assert policies["inactive_topic_policies"] == {"inactiveTopicDeleteMode": "delete_when_subscriptions_caught_up",
                                                   "maxInactiveDurationSeconds": 3600, "deleteWhileInactive": True}
    assert policies["persistence"]["bookkeeperAckQuorum"] == 1
    assert run_admin([*url, "topics", "set-max-producers", name, "-p", "3"]) == 0
    capsys.readouterr()
    assert run_admin([*url, "topics", "get-max-producers", name, "--applied"]) == 0
    assert json.loads(capsys.readouterr().out) == 3
    assert run_admin([*url, "topics", "remove-max-producers", name]) == 0
    assert run_admin([*url, "namespaces", "set-max-producers-per-topic", ns, "-p", "-1"]) == 1
