"""The checker's parts, one concept per module; `chaos.checker.check` composes them.

    model      the history indexed for checking: sends, the final read-back per partition,
               deliveries, acks, faults; message ids and topic names normalised
    findings   `Category`: a count and a few examples of one kind of finding
    log        the topic log read back at the end: lost (prefix/middle/postfix), duplicated,
               nonmonotonic, wrong bytes, incomplete read-back, unknown/failed sends present
    subs       subscriptions: unseen, per-key order, redelivery after a persisted ack
    liveness   time from each fault (and heal) to the next acknowledged send; stuck subscriptions
    kafka      the Kafka workload: lost, duplicated in storage, offsets, order; the group's recovery

Every part is a pure function of the records (no I/O, no clock), so a test feeds it a synthetic
history and sees exactly what it reports.
"""
