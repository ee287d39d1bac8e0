#!/usr/bin/env bash
# Install the Debian packages Strata's tests and tools need, only when they are missing.
# - postgresql: the tests start a real PostgreSQL server from its binaries (initdb, pg_ctl).
# - default-jre-headless: Spark (PySpark) needs a JVM; Java 17 is usually there already.
# - python3-venv: Debian's python3 ships without ensurepip, so `python3 -m venv .venv` fails.
# - prometheus: tests/acceptance/test_prometheus.py scrapes a standalone with a real Prometheus
#   server. Installed without its recommends (node-exporter and friends); the package's service is
#   not needed (the test runs its own `prometheus` on a free port), and in containers
#   /usr/sbin/policy-rc.d usually keeps it from starting.
# - kcat: tests/kafka drive the Kafka listener with kcat (librdkafka's command-line client) too.
# - chromium, chromium-driver: tests/console drive the web console in a real headless Chromium
#   (Playwright, pointed at /usr/bin/chromium; it never downloads a browser of its own).
# - nodejs, npm: tests/kafka run kafkajs (npm, installed by the Makefile into tests/kafka/js) on Node.
set -euo pipefail
need=()
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null 2>&1; then
  need+=(postgresql)
fi
if ! command -v java >/dev/null 2>&1; then
  need+=(default-jre-headless)
fi
if ! python3 -c 'import ensurepip' >/dev/null 2>&1; then
  need+=(python3-venv)
fi
if ! command -v kcat >/dev/null 2>&1; then
  need+=(kcat)
fi
if ! command -v node >/dev/null 2>&1; then
  need+=(nodejs)
fi
if ! command -v npm >/dev/null 2>&1; then
  need+=(npm)
fi
if ! command -v chromium >/dev/null 2>&1; then
  need+=(chromium)
fi
if ! command -v chromedriver >/dev/null 2>&1; then
  need+=(chromium-driver)
fi
bare=()   # installed without their recommends
if ! command -v prometheus >/dev/null 2>&1; then
  bare+=(prometheus)
fi
if [ ${#need[@]} -eq 0 ] && [ ${#bare[@]} -eq 0 ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  # never wait for a password prompt: fail with the list of what is missing instead
  if ! command -v sudo >/dev/null 2>&1 || ! sudo -n true 2>/dev/null; then
    echo "missing Debian packages: ${need[*]} ${bare[*]}; install them as root (apt-get install ${need[*]} ${bare[*]})" >&2
    exit 1
  fi
  SUDO="sudo -n"
fi
echo "installing Debian packages: ${need[*]} ${bare[*]}"
$SUDO apt-get update -qq
if [ ${#need[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi
if [ ${#bare[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${bare[@]}"
fi
