"""Namespace bundles: the hash ranges of topic names that brokers own (Pulsar's bundles).

A namespace's hash space 0x00000000–0xffffffff is cut at sorted `boundaries` into bundles: each
is `[lo, hi)`, except the last, which also holds `hi` = 0xffffffff. A topic belongs to the bundle
holding the CRC32 of its full name (`persistent://t/ns/topic[-partition-N]`, UTF-8, unsigned),
as Pulsar hashes it, so every partition is placed on its own. A bundle is named by its range,
`0x40000000_0x80000000`, as in Pulsar's admin paths and ownership keys.

The boundaries are stored at `/admin/local-policies/<t>/<ns>` as `{"bundles": {"boundaries": [hex,
...], "numBundles": N}}` (Pulsar keeps split bundles in its LocalPolicies). A namespace gets
the count given at creation (`create_bundles`, from `broker.records.tenancy`); `load_bundles` gives an
existing namespace that has none (created by a broker that stopped in between) `default_count`
equal ones, and raises NamespaceNotFound for a namespace that does not exist: nothing here
creates a namespace. A split (`split_range`, range_equally_divide) replaces one bundle by
its two halves with a compare-and-set on that key, so two splits never both win.

What must hold: boundaries start at 0, end at 0xffffffff and strictly increase; every hash falls
in exactly one bundle; a count is within 1..BUNDLES_MAX (else InvalidBundle).
"""

from __future__ import annotations

import itertools
import json
import zlib
from dataclasses import dataclass

from broker.records.policies import namespace_path
from common.errors import AlreadyExists, InvalidBundle, NamespaceNotFound, NotFound
from metadata.api import AsyncStore

LOCAL_POLICIES_ROOT = "/admin/local-policies"
HASH_MAX = 0xFFFFFFFF
BUNDLES_MAX = 128          # Pulsar's loadBalancerNamespaceMaximumBundles
FULL_RANGE_KEY = "0x00000000_0xffffffff"


def topic_hash(full_name: str) -> int:
    """CRC32 of the full topic name (unsigned), as Pulsar's bundle factory computes it."""
    return zlib.crc32(full_name.encode()) & HASH_MAX


@dataclass(frozen=True, order=True)
class BundleRange:
    lo: int
    hi: int

    @property
    def key(self) -> str:
        return f"0x{self.lo:08x}_0x{self.hi:08x}"

    def holds(self, hash_value: int) -> bool:
        return self.lo <= hash_value < self.hi or (self.hi == HASH_MAX and hash_value == HASH_MAX)

    def __str__(self) -> str:
        return self.key


def parse_bundle(text: str) -> BundleRange:
    """`0xLLLLLLLL_0xHHHHHHHH` -> BundleRange; InvalidBundle for anything else."""
    lo_text, sep, hi_text = text.partition("_") if isinstance(text, str) else ("", "", "")
    try:
        if not sep or not lo_text.lower().startswith("0x") or not hi_text.lower().startswith("0x"):
            raise ValueError
        lo, hi = int(lo_text, 16), int(hi_text, 16)
    except ValueError:
        raise InvalidBundle("a bundle is written 0xLLLLLLLL_0xHHHHHHHH", bundle=str(text)[:40]) from None
    if not 0 <= lo < hi <= HASH_MAX:
        raise InvalidBundle("a bundle range needs 0 <= lo < hi <= 0xffffffff", bundle=text)
    return BundleRange(lo, hi)


def equal_boundaries(count: int) -> list[int]:
    """`count` equal bundles over the whole hash space (Pulsar's split of 2^32)."""
    check_count(count)
    step = (HASH_MAX + 1) // count
    return [i * step for i in range(count)] + [HASH_MAX]


def check_count(count: object) -> int:
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= BUNDLES_MAX:
        raise InvalidBundle(f"a namespace has 1..{BUNDLES_MAX} bundles", count=count)
    return count


@dataclass(frozen=True)
class NamespaceBundles:
    tenant: str
    namespace: str
    boundaries: tuple[int, ...]
    version: int = 0       # the stored key's version (0: not stored yet)

    def __post_init__(self) -> None:
        b = self.boundaries
        if len(b) < 2 or b[0] != 0 or b[-1] != HASH_MAX or any(x >= y for x, y in itertools.pairwise(b)):
            raise InvalidBundle("bundle boundaries must run from 0x00000000 to 0xffffffff, increasing",
                                namespace=f"{self.tenant}/{self.namespace}")
        check_count(len(b) - 1)

    @property
    def ranges(self) -> list[BundleRange]:
        return [BundleRange(lo, hi) for lo, hi in itertools.pairwise(self.boundaries)]

    def find(self, full_topic_name: str) -> BundleRange:
        """The bundle holding this topic's hash."""
        h = topic_hash(full_topic_name)
        for bundle in self.ranges:
            if bundle.holds(h):
                return bundle
        raise InvalidBundle("no bundle holds the hash", hash=h)   # unreachable: boundaries cover all

    def get(self, bundle: BundleRange) -> BundleRange:
        """`bundle` itself if it is one of this namespace's bundles, else InvalidBundle."""
        if bundle not in self.ranges:
            raise InvalidBundle("no such bundle in the namespace", bundle=bundle.key,
                                namespace=f"{self.tenant}/{self.namespace}")
        return bundle

    def split(self, bundle: BundleRange) -> tuple[NamespaceBundles, tuple[BundleRange, BundleRange]]:
        """range_equally_divide: cut `bundle` in the middle of its range."""
        self.get(bundle)
        if bundle.hi - bundle.lo < 2:
            raise InvalidBundle("bundle too small to split", bundle=bundle.key)
        if len(self.boundaries) - 1 >= BUNDLES_MAX:
            raise InvalidBundle(f"the namespace already has {BUNDLES_MAX} bundles", bundle=bundle.key)
        middle = bundle.lo + (bundle.hi - bundle.lo) // 2
        boundaries = tuple(sorted((*self.boundaries, middle)))
        halves = (BundleRange(bundle.lo, middle), BundleRange(middle, bundle.hi))
        return NamespaceBundles(self.tenant, self.namespace, boundaries, self.version), halves

    def to_json(self) -> dict:
        return {"boundaries": [f"0x{b:08x}" for b in self.boundaries], "numBundles": len(self.boundaries) - 1}


def bundles_path(tenant: str, namespace: str) -> str:
    return f"{LOCAL_POLICIES_ROOT}/{tenant}/{namespace}"


def _decode(tenant: str, namespace: str, raw: bytes, version: int) -> NamespaceBundles:
    data = json.loads(raw.decode())
    boundaries = tuple(int(b, 16) for b in data["bundles"]["boundaries"])
    return NamespaceBundles(tenant, namespace, boundaries, version)


def _encode(bundles: NamespaceBundles) -> bytes:
    return json.dumps({"bundles": bundles.to_json()}).encode()


async def load_bundles(astore: AsyncStore, tenant: str, namespace: str, default_count: int) -> NamespaceBundles:
    """The namespace's bundles (`default_count` equal ones stored if an existing namespace has
    none); NamespaceNotFound if the namespace does not exist."""
    path = bundles_path(tenant, namespace)
    found = await astore.get(path)
    if found is not None:
        return _decode(tenant, namespace, found.value, found.version)
    if await astore.get(namespace_path(tenant, namespace)) is None:
        raise NamespaceNotFound(tenant, namespace)
    try:
        return await create_bundles(astore, tenant, namespace, default_count)
    except AlreadyExists:   # another broker created them first
        found = await astore.get(path)
        if found is None:
            raise NotFound("namespace bundles vanished", namespace=f"{tenant}/{namespace}") from None
        return _decode(tenant, namespace, found.value, found.version)


async def create_bundles(astore: AsyncStore, tenant: str, namespace: str, count: int,
                         boundaries: list[int] | None = None) -> NamespaceBundles:
    """Store the namespace's bundles (AlreadyExists if it has them)."""
    bundles = NamespaceBundles(tenant, namespace, tuple(boundaries or equal_boundaries(count)))
    version = await astore.create(bundles_path(tenant, namespace), _encode(bundles))
    return NamespaceBundles(tenant, namespace, bundles.boundaries, version)


async def store_split(astore: AsyncStore, split: NamespaceBundles) -> NamespaceBundles:
    """Write split boundaries by compare-and-set against the version they were read at
    (BadVersion if the namespace's bundles changed meanwhile)."""
    version = await astore.put(bundles_path(split.tenant, split.namespace), _encode(split),
                               expected_version=split.version)
    return NamespaceBundles(split.tenant, split.namespace, split.boundaries, version)


async def delete_bundles(astore: AsyncStore, tenant: str, namespace: str) -> None:
    try:
        await astore.delete(bundles_path(tenant, namespace))
    except NotFound:
        pass
