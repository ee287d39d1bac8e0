"""`strata chaos`: a Jepsen-style soak of a real local cluster, with a checker.

A run starts a cluster (launch.cluster's processes, each node behind a fault-injecting proxy),
drives a workload through the official pulsar-client in separate processes, injects faults aimed
at one role at a time (the nemesis), heals, drains, and checks the whole history.

    history   the record format every part writes (JSON lines) and reads back
    proxy     the fault-injecting TCP proxies (partitions, S3 `503 SlowDown`)
    nemesis   the faults, one role at a time, and their schedule (seeded)
    workload  producer, consumer and reader processes (pulsar-client), and the Kafka workload
              (confluent-kafka: idempotent producers, a consumer group) on the brokers' Kafka ports
    checker   Jepsen's definitions over a history: lost, unseen, duplicated, nonmonotonic, ...
    orphans   S3 objects with no ledger record naming them, and records naming missing objects
    report    the text summary and the PNG timeline
    runner    one run, start to report

Layering: history is the leaf; checker, orphans and report read histories (and stored state) and
know nothing of processes; workload, proxy and nemesis act; runner composes them all.
"""
