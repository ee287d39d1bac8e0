"""The workload of `strata chaos`: producers, consumers and readers in separate processes, each
through the official pulsar-client, each appending every operation to its own history file.

    plan = WorkloadPlan.build(seed, size=1)                    # plan: topics, producers, subs, readers
    cluster = LocalCluster.start(..., env={**BROKER_ENV, ...})    # setup: small ledgers
    prepare(AdminClient(admin_url), plan)                       # setup: namespace, topics, subscriptions
    for record in plan.topic_records(): runner_history.write("topic", **record)
    procs = [Popen(argv) for _, argv in plan.commands(service_url, out)]
    ... faults ...
    (out / STOP_PRODUCERS).touch()      # producers stop sending, drain (--drain-s), exit
    (out / STOP_CONSUMERS).touch()      # consumers and readers exit (once the producers have)
    name, argv = plan.final_command(service_url, out)     # then: the final read-back, run to its end

    plan        WorkloadPlan: what runs, decided from the seed (the only thing processes share)
    setup       prepare() and BROKER_ENV
    runtime     stop files and SIGTERM, bounded waits, the client, message id formatting
    producer    paced async sends, each recorded once with its outcome
    consumer    one thread per consumer: deliver, ack, nack, reopen
    reader      readers during the run; the final read-back after it
    __main__    `python -m chaos.workload <role> ...`
    kafka       the Kafka workload beside it (confluent-kafka): idempotent producers, a consumer
                group, the final read from offset 0; `python -m chaos.workload.kafka <role> ...`

Layering: imports chaos.history, admin_client and common; nothing of the product's server side.
"""

from chaos.workload.plan import WorkloadPlan
from chaos.workload.runtime import STOP_CONSUMERS, STOP_PRODUCERS
from chaos.workload.setup import BROKER_ENV, prepare

__all__ = ["BROKER_ENV", "STOP_CONSUMERS", "STOP_PRODUCERS", "WorkloadPlan", "prepare"]
