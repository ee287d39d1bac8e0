"""Every `STRATA_*` environment variable that is not a setting, in one declarative table.

A setting `name` is also the variable `STRATA_<NAME>` (common.config reads those). The variables below are
read elsewhere: by clients and tools (`strata admin`, the Spark source and sink), by debugging
switches of a server, by the benchmark and by the test suite. The settings reference page
(docs/configuration.md, written by `python -m common.settings_doc`) lists them from this table.

What must hold: a `STRATA_*` name anywhere in the repository is a setting or a row here
(tests/foundation/test_env_vars.py checks it); a name is in one table, never both.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EnvVar:
    name: str           # STRATA_...
    read_by: str        # who reads it: a command, a component, the tests
    doc: str            # what it means, one line, with what unset means


ENV_VARS: tuple[EnvVar, ...] = (
    # --- admin clients: fallbacks of their flags, for scripts that should not show a secret in `ps` ---
    EnvVar("STRATA_ADMIN_URL", "`strata admin`, `strata analytics`, the Spark source and sink",
           "a broker's admin HTTP(S) URL, any broker of the cluster (unset: http://127.0.0.1:8080 for the "
           "commands; optional for the Spark source)"),
    EnvVar("STRATA_ADMIN_AUTH_TOKEN", "`strata admin`, `strata top`",
           "default of --auth-token: a JWT, file:///path or env:VAR, sent as a Bearer token"),
    EnvVar("STRATA_ADMIN_AUTH_PARAMS", "`strata admin`, `strata top`",
           "default of --auth-params: Pulsar's authParams (token:<jwt>, file:///path, basic JSON, or "
           "tlsCertFile:..,tlsKeyFile:..)"),
    EnvVar("STRATA_ADMIN_AUTH_BASIC", "`strata admin`, `strata top`",
           "default of --auth-basic: user:password for HTTP basic authentication"),
    EnvVar("STRATA_ADMIN_TLS_TRUST_CERT", "`strata admin`, `strata top`",
           "default of --tls-trust-cert: CA file an https:// broker is verified against (unset: the system's CAs)"),
    EnvVar("STRATA_ADMIN_TLS_CERT", "`strata admin`, `strata top`",
           "default of --tls-cert: client certificate for mTLS (the role is its CN)"),
    EnvVar("STRATA_ADMIN_TLS_KEY", "`strata admin`, `strata top`", "default of --tls-key: key of that certificate"),
    # --- analytics: fallbacks of the Spark source's and sink's options ---
    EnvVar("STRATA_METADATA_URL", "`strata analytics`, the Spark source",
           "fallback of the metadataUrl option: the cluster's metadata store (sqlite:///... or postgresql://...)"),
    EnvVar("STRATA_SERVICE_URL", "`strata analytics`, the Spark sink",
           "fallback of the service.url option: pulsar:// or pulsar+ssl:// URL the sink produces to"),
    EnvVar("STRATA_AUTH_TOKEN", "the Spark source and sink",
           "fallback of the token option: the role's token (any form auth.keys.read_source reads)"),
    EnvVar("STRATA_CLIENT_TLS_TRUST_CERTS_FILE", "the Spark source and sink",
           "fallback of tls.trustCertsFilePath: CA file for an https:// admin URL and a pulsar+ssl:// service URL "
           "(unset: the system's CAs)"),
    # --- debugging and measurement ---
    EnvVar("STRATA_TRACEMALLOC", "a broker process",
           "frames of allocation tracing; SIGUSR1 writes the top allocation sites (unset or 0: off; "
           "`strata perf topics --tracemalloc` sets it)"),
    EnvVar("STRATA_TRACEMALLOC_OUT", "a broker process",
           "file the allocation diffs are appended to (unset: the log)"),
    EnvVar("STRATA_PURE_PYTHON", "every process (common.compiled)",
           "`1`: the modules `make setup` compiles with mypyc (scripts/compile_hot.py) run from their .py "
           "instead (unset: the compiled build where it exists); CI runs their tests both ways"),
    EnvVar("STRATA_BENCH_COMMIT", "`make bench` (bench.run)",
           "the Strata commit a benchmark run records (unset: git's HEAD; set it for a run from an exported tree)"),
    # --- the test suite ---
    EnvVar("STRATA_SEED", "the tests", "seed of the randomized tests; a failure prints the one to rerun with "
           "(unset: a fresh seed)"),
    EnvVar("STRATA_HYPOTHESIS_EXAMPLES", "the tests", "examples of the cursor model's property test (unset: 150)"),
    EnvVar("STRATA_CONSOLE_DOC_SHOTS", "the console's browser tests",
           "`1`: save the pictures of docs/console.md into docs/img/console (unset: no pictures written)"),
)

ENV_VARS_BY_NAME: dict[str, EnvVar] = {v.name: v for v in ENV_VARS}

# Settings variables that clients also read by themselves, as fallbacks of their own options.
SETTINGS_READ_BY_CLIENTS = (
    "The Spark source and sink and `strata analytics` also take `STRATA_OFFLOAD_S3_ENDPOINT`, "
    "`STRATA_OFFLOAD_S3_REGION`, `STRATA_OFFLOAD_S3_BUCKET` and `STRATA_OFFLOAD_S3_PREFIX` as fallbacks of "
    "their S3 options, and the Spark source's executors read ledgers with the bookie-link settings of "
    "their environment (`STRATA_BOOKIE_AUTH_SECRET`, `STRATA_BOOKIE_TLS_ENABLED`, the TLS files)."
)
