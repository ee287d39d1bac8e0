"""Orphans, both ways: S3 objects no ledger record names, and ledger records naming a missing object.

    report = find_orphans("postgresql://strata@127.0.0.1:5432/strata",
                          S3Target(endpoint, bucket, access_key=..., secret_key=...))
    report.orphans, report.missing, report.pending, report.ignored

Where offloaded ledgers are recorded. A managed ledger's record lives in the metadata store at
`/managed-ledgers/<encoded name>` (ledger/ml_metadata.py): its `ledgers` list, where a ledger
whose offload completed carries `cold` (a ColdCopy whose `key` is its object), and its
`deleting` list, the ledgers trimmed whose deletion (bookie copy, then object) is not known to
be done. Object keys follow offload/keys.py: `{prefix}/{tenant}/{namespace}/{topic}/ledger-
{id:020d}.parquet`, with `partition-{i}/` before the file for a partition.

How each object is judged:
- named by some record's `cold.key`: fine;
- the object of a ledger in its managed ledger's `deleting` list: pending (trimmed, deletion
  recorded as a to-do, the owner finishes it), not an orphan;
- the object of a listed ledger without `cold` while the record has an `offload.before` request
  (ledger/ml_offload.py): pending (an offload under way: the upload completes before `cold` is
  set by a later compare-and-set);
- Iceberg table files (`{prefix}/{tenant}/{namespace}/{topic}!iceberg/...`: metadata.json,
  manifest lists, manifests; offload/iceberg.py) and leftovers of the brokers' start-up access
  probe (`{prefix}/_probe/...`, offload/s3.py): ignored, legitimately without a ledger record.
  The Iceberg tables' data files are the ledger objects themselves, judged above;
- anything else in the bucket: an orphan (the bucket is the cluster's own).
Incomplete multipart uploads are not objects (nothing can read them); each is reported pending.

Each record's `cold.key` that is not an object in the bucket is missing. What must hold: the
comparison (`compare`) is a pure function of the records and the listing, so it is tested on
its own; the listing covers the whole bucket (every page), never a sample.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ledger.ml_metadata import ML_ROOT, ManagedLedgerMetadata
from ledger.ml_offload import BEFORE_PROPERTY
from offload import keys

PROBE_FOLDER = "_probe/"
ICEBERG_SUFFIX = "!iceberg"


@dataclass(frozen=True)
class S3Target:
    """Where the cluster's cold tier is: as `offload_s3_*` say (prefix without slashes)."""

    endpoint: str                   # "" = AWS's own endpoint for the region
    bucket: str
    prefix: str = "strata"
    access_key: str | None = None   # None: boto3's credential chain
    secret_key: str | None = None
    region: str = "us-east-1"


@dataclass
class OrphanReport:
    orphans: list[str] = field(default_factory=list)                    # keys no record names
    missing: list[tuple[str, int, str]] = field(default_factory=list)   # (managed ledger, ledger id, key)
    pending: list[tuple[str, str]] = field(default_factory=list)        # (key, why) being deleted/offloaded
    ignored: list[str] = field(default_factory=list)                    # Iceberg files, probe leftovers

    def to_json(self) -> dict[str, Any]:
        return {"orphans": self.orphans, "missing": [list(m) for m in self.missing],
                "pending": [list(p) for p in self.pending], "ignored": self.ignored}


def find_orphans(metadata_url: str, s3: S3Target) -> OrphanReport:
    """Read every managed ledger record at `metadata_url` and list the whole bucket; compare."""
    records = read_records(metadata_url)
    objects, uploads = list_bucket(s3)
    return compare(records, objects, uploads, s3.prefix)


def read_records(metadata_url: str) -> dict[str, ManagedLedgerMetadata]:
    """Every managed ledger's record, by name (opens and closes a session of its own)."""
    import metadata  # the store opens a session: only when asked

    store = metadata.open_store(metadata_url)
    try:
        out: dict[str, ManagedLedgerMetadata] = {}
        for encoded in store.children(ML_ROOT):
            got = store.get(f"{ML_ROOT}/{encoded}")
            if got is not None:
                out[urllib.parse.unquote(encoded)] = ManagedLedgerMetadata.from_json(got.value, got.version)
        return out
    finally:
        store.close()


def list_bucket(s3: S3Target) -> tuple[list[str], list[str]]:
    """(every object key, every incomplete multipart upload's key) in the bucket, all pages."""
    import boto3
    import botocore.config

    from offload.s3 import translate

    kwargs: dict[str, Any] = {"region_name": s3.region, "config": botocore.config.Config(
        signature_version="s3v4", s3={"addressing_style": "path" if s3.endpoint else "auto"})}
    if s3.endpoint:
        kwargs["endpoint_url"] = s3.endpoint
    if s3.access_key is not None:
        kwargs.update(aws_access_key_id=s3.access_key, aws_secret_access_key=s3.secret_key)
    client = boto3.session.Session().client("s3", **kwargs)
    try:
        objects = [str(item["Key"]) for page in client.get_paginator("list_objects_v2").paginate(Bucket=s3.bucket)
                   for item in page.get("Contents", [])]
        uploads = [str(u["Key"]) for page in client.get_paginator("list_multipart_uploads").paginate(
            Bucket=s3.bucket) for u in page.get("Uploads", [])]
    except Exception as exc:  # botocore's errors become the cold tier's, as everywhere
        raise translate(exc, bucket=s3.bucket, op="list") from exc
    finally:
        client.close()
    return objects, uploads


def compare(records: dict[str, ManagedLedgerMetadata], objects: Iterable[str], uploads: Iterable[str],
            prefix: str) -> OrphanReport:
    """Judge each object against the records (module docstring), and each record's key against
    the objects."""
    report = OrphanReport()
    present = set(objects)
    named: set[str] = set()
    folders: dict[str, ManagedLedgerMetadata] = {}
    for name, record in sorted(records.items()):
        folders[keys.topic_prefix(prefix, name)] = record
        for ledger in record.ledgers:
            if ledger.cold is None:
                continue
            named.add(ledger.cold.key)
            if ledger.cold.key not in present:
                report.missing.append((name, ledger.ledger_id, ledger.cold.key))
    for key in sorted(present - named):
        if _ignored(key, prefix):
            report.ignored.append(key)
            continue
        why = _pending(key, folders)
        if why is None:
            report.orphans.append(key)
        else:
            report.pending.append((key, why))
    report.pending.extend((key, "incomplete multipart upload") for key in sorted(uploads))
    return report


def _ignored(key: str, prefix: str) -> bool:
    root = f"{prefix}/" if prefix else ""
    if not key.startswith(root):
        return False
    rest = key[len(root):]
    return rest.startswith(PROBE_FOLDER) or any(part.endswith(ICEBERG_SUFFIX) for part in rest.split("/")[:-1])


def _pending(key: str, folders: dict[str, ManagedLedgerMetadata]) -> str | None:
    ledger_id = keys.ledger_id_of(key)
    folder, _, _ = key.rpartition("/")
    record = folders.get(folder + "/")
    if ledger_id is None or record is None:
        return None
    if ledger_id in record.deleting:
        return "trimmed: deletion pending"
    listed = any(ledger.ledger_id == ledger_id and ledger.cold is None for ledger in record.ledgers)
    if listed and BEFORE_PROPERTY in record.properties:
        return "offload under way"
    return None
