#!/usr/bin/env bash
# Install the peers `make bench` compares Strata against, from Debian packages, only when missing:
# - redis-server + redis-tools: Redis 7 streams and the C `redis-benchmark`.
# - nats-server: NATS with JetStream (Debian ships 2.9.x).
# - rabbitmq-server: RabbitMQ 3.10 with the stream plugin, which the harness enables for its own
#   node through RABBITMQ_ENABLED_PLUGINS_FILE (`rabbitmq-plugins enable rabbitmq_stream` would
#   need a running node, and `--offline` leaves an epmd daemon behind).
# Services are never started by this script; the harness starts each peer on loopback itself.
set -euo pipefail
need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v redis-benchmark >/dev/null 2>&1 || need+=(redis-tools)
command -v nats-server >/dev/null 2>&1 || need+=(nats-server)
if ! command -v rabbitmq-server >/dev/null 2>&1 && [ ! -x /usr/lib/rabbitmq/bin/rabbitmq-server ]; then
  need+=(rabbitmq-server)
fi
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "installing Debian packages: ${need[*]}"
  $SUDO apt-get update -qq
  # policy-rc.d (present in containers) keeps the packages' services from starting.
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
  # A package install may start a service where no policy-rc.d forbids it; the harness runs its
  # own instances on free ports, so stop the system ones (best effort, no error if absent).
  for svc in redis-server nats-server rabbitmq-server; do
    $SUDO service "$svc" stop >/dev/null 2>&1 || true
  done
fi
