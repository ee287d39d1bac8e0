"""`make bench`: Strata side by side with Redis Streams, NATS JetStream and RabbitMQ Streams.

One run on one machine: every system is started here on loopback with durable settings, driven
by its most efficient Python client through the same workloads (bench/workloads.py), measured
with the same clock and the same process accounting (bench/procstat.py, psutil), next to this disk's
fsync'd sequential write limit (bench/disk.py). `python -m bench.run --help` for the options.
"""
