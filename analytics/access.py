"""How the Spark source and sink reach a Strata cluster: the metadata store, the admin HTTP API,
the Pulsar service URL and the S3 cold tier, from the query's options or the environment.

    access = ClusterAccess.from_options(options)      # options first, then STRATA_* / AWS_* env
    access.s3_filesystem()                            # pyarrow's S3 for the offloaded objects

Options (case-insensitive, as Spark passes them), each with its environment fallback:
- `metadataUrl` (`STRATA_METADATA_URL`): the cluster's metadata store, `sqlite:///abs/metadata.db`
  or `postgresql://user@host:port/db`. The source reads the topic's ledger list from it.
- `admin.url` (`STRATA_ADMIN_URL`): the broker's admin HTTP. Optional for reads: when given, the
  snapshot's end of an open ledger is the broker's last confirmed entry (exact); without it,
  the bookies' LAC, which trails the newest entry until the next add.
- `service.url` (`STRATA_SERVICE_URL`): `pulsar://host:port`, for the sink.
- `s3.endpoint`, `s3.region`, `s3.bucket`, `s3.prefix` (`STRATA_OFFLOAD_S3_ENDPOINT`,
  `..._REGION`, `..._BUCKET`, `..._PREFIX`), `s3.accessKey`, `s3.secretKey` (`AWS_ACCESS_KEY_ID`,
  `AWS_SECRET_ACCESS_KEY`).

- credentials, as StreamNative's pulsar-spark connector names them:
  `pulsar.client.authPluginClassName` (`org.apache.pulsar.client.impl.auth.AuthenticationToken`
  or `token`; `...AuthenticationBasic` or `basic`; `...AuthenticationTls` or `tls`) with
  `pulsar.client.authParams`, read as Pulsar's Java client reads them (`auth.params`; token:
  `token:<jwt>`, `file:///path`, `{"token": ...}` or the token itself; basic:
  `{"userId": u, "password": p}`; tls: `tlsCertFile:/p,tlsKeyFile:/p` or its JSON form), or the
  short `token` option (`STRATA_AUTH_TOKEN`), any form `auth.keys.read_source` reads. Sent to the admin API
  (`Authorization` header, or the client certificate) and, by the sink, to the broker.
- `tls.trustCertsFilePath` or `pulsar.client.tlsTrustCertsFilePath`
  (`STRATA_CLIENT_TLS_TRUST_CERTS_FILE`): the CA file an https:// admin.url and a pulsar+ssl://
  service.url are verified against (default: the system's trust store).

What must hold: a ClusterAccess is plain data (picklable), resolved once on the driver and
shipped inside every partition, so executors never depend on the driver's environment. Secrets
(the token, the basic password, the S3 secret key) are read on the driver, travel in the pickled
object, and appear in no repr, log line or error message.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from auth import params as auth_params
from common.errors import BadSourceOption, InvalidArgument, KeyMaterialError
from common.redact import redact_url

ACCESS_OPTIONS = ("metadataurl", "admin.url", "service.url", "s3.endpoint", "s3.region", "s3.bucket",
                  "s3.prefix", "s3.accesskey", "s3.secretkey", "token", "pulsar.client.authpluginclassname",
                  "pulsar.client.authparams", "tls.trustcertsfilepath", "pulsar.client.tlstrustcertsfilepath")


def lowered(options: Mapping[str, str]) -> dict[str, str]:
    """Options with lower-case names (Spark's are case-insensitive; Pulsar's connector lower-cases too)."""
    return {str(k).lower(): str(v) for k, v in options.items()}


@dataclass(frozen=True)
class ClusterAccess:
    metadata_url: str
    admin_url: str
    service_url: str
    s3_endpoint: str
    s3_region: str
    s3_bucket: str
    s3_prefix: str
    s3_access_key: str
    s3_secret_key: str = field(repr=False)
    auth_method: str = ""                           # "", "token", "basic" or "tls"
    auth_secret: str = field(default="", repr=False)   # the token, or "user:password"
    tls_trust_file: str = ""                        # "" = the system's trust store
    tls_cert_file: str = ""                         # auth_method "tls": the client certificate
    tls_key_file: str = ""

    @classmethod
    def from_options(cls, options: Mapping[str, str], env: Mapping[str, str] | None = None) -> ClusterAccess:
        opts = lowered(options)
        env = os.environ if env is None else env

        def pick(option: str, variable: str, default: str = "") -> str:
            return opts.get(option) or env.get(variable) or default

        access = cls(
            metadata_url=pick("metadataurl", "STRATA_METADATA_URL"),
            admin_url=pick("admin.url", "STRATA_ADMIN_URL").rstrip("/"),
            service_url=pick("service.url", "STRATA_SERVICE_URL"),
            s3_endpoint=pick("s3.endpoint", "STRATA_OFFLOAD_S3_ENDPOINT"),
            s3_region=pick("s3.region", "STRATA_OFFLOAD_S3_REGION", "us-east-1"),
            s3_bucket=pick("s3.bucket", "STRATA_OFFLOAD_S3_BUCKET", "strata-offload"),
            s3_prefix=pick("s3.prefix", "STRATA_OFFLOAD_S3_PREFIX", "strata").strip("/"),
            s3_access_key=pick("s3.accesskey", "AWS_ACCESS_KEY_ID"),
            s3_secret_key=pick("s3.secretkey", "AWS_SECRET_ACCESS_KEY"),
            tls_trust_file=opts.get("tls.trustcertsfilepath") or opts.get("pulsar.client.tlstrustcertsfilepath")
            or env.get("STRATA_CLIENT_TLS_TRUST_CERTS_FILE", ""),
            **credentials(opts, env),
        )
        for name, value in (("admin.url", access.admin_url), ("s3.endpoint", access.s3_endpoint)):
            if value and not value.startswith(("http://", "https://")):
                raise BadSourceOption(f"{name} must be an http:// or https:// URL", value=redact_url(value))
        if access.service_url and not access.service_url.startswith(("pulsar://", "pulsar+ssl://")):
            raise BadSourceOption("service.url must be a pulsar:// URL", value=redact_url(access.service_url))
        return access

    @property
    def has_credentials(self) -> bool:
        return bool(self.auth_method)

    def require_metadata(self) -> str:
        if not self.metadata_url:
            raise BadSourceOption("metadataUrl is not set (option metadataUrl or STRATA_METADATA_URL): "
                                  "the source reads the topic's ledgers from the cluster's metadata store")
        return self.metadata_url

    def s3_filesystem(self) -> Any:
        """pyarrow's S3 filesystem for the cold tier (native reads, ranged, retried by pyarrow)."""
        from pyarrow import fs

        kwargs: dict[str, Any] = {"region": self.s3_region, "connect_timeout": 5, "request_timeout": 30}
        if self.s3_endpoint:
            scheme, _, host = self.s3_endpoint.partition("://")
            kwargs.update(endpoint_override=host, scheme=scheme)
        if self.s3_access_key:
            kwargs.update(access_key=self.s3_access_key, secret_key=self.s3_secret_key)
        return fs.S3FileSystem(**kwargs)

    def object_path(self, key: str) -> str:
        """`bucket/key`, as pyarrow's S3 filesystem names an object."""
        return f"{self.s3_bucket}/{key}"


def credentials(opts: Mapping[str, str], env: Mapping[str, str]) -> dict[str, str]:
    """The ClusterAccess credential fields of lower-cased options (else STRATA_AUTH_TOKEN), secrets
    read now (on the driver). pulsar.client.authParams are parsed by `auth.params` (Pulsar's Java
    client's rule, the one StreamNative's connector follows). BadSourceOption for an unknown plugin
    or malformed params; the message never holds the params, which may be a secret."""
    plugin = opts.get("pulsar.client.authpluginclassname", "").strip()
    params = opts.get("pulsar.client.authparams", "")
    if plugin and opts.get("token"):
        raise BadSourceOption("set either token or pulsar.client.authPluginClassName, not both")
    if not plugin:
        if params:
            raise BadSourceOption("pulsar.client.authParams needs pulsar.client.authPluginClassName")
        token = opts.get("token") or env.get("STRATA_AUTH_TOKEN", "")
        return {"auth_method": "token", "auth_secret": _token(token)} if token else {}
    if plugin.lower() not in auth_params.PLUGINS:
        raise BadSourceOption("unsupported pulsar.client.authPluginClassName", plugin=plugin,
                              known=auth_params.KNOWN_PLUGINS)
    try:
        parsed = auth_params.parse(plugin, params)
        if parsed.method == auth_params.TOKEN:
            return {"auth_method": "token", "auth_secret": parsed.read_token()}
    except (InvalidArgument, KeyMaterialError) as exc:
        raise BadSourceOption(f"pulsar.client.authParams: {exc}") from None
    if parsed.method == auth_params.BASIC:
        return {"auth_method": "basic", "auth_secret": f"{parsed.user}:{parsed.password}"}
    return {"auth_method": "tls", "tls_cert_file": parsed.cert_file, "tls_key_file": parsed.key_file}


def _token(option: str) -> str:
    """The short `token` option (or STRATA_AUTH_TOKEN): any form `auth.keys.read_source` reads, also
    after a `token:` prefix or as a JSON object's "token"."""
    from auth.keys import read_source

    spec = option.strip()
    if spec.startswith("token:"):
        spec = spec[len("token:"):]
    elif (doc := auth_params.json_object(spec)) is not None:
        spec = str(doc.get("token") or "")
    if not spec:
        raise BadSourceOption("the token credential is empty")
    try:
        token = read_source(spec, what="token").decode().strip()
    except (KeyMaterialError, UnicodeDecodeError) as exc:
        raise BadSourceOption(f"the token cannot be read: {exc}") from None
    if not token:
        raise BadSourceOption("the token credential is empty")
    return token
