"""One error tree for all of Strata.

Every error Strata raises on purpose is a `StrataError`. Each concrete class carries:

- `code`: a numeric code, unique across the whole tree. Codes are grouped by component:
      1-99     generic / config / limits
      100-199  metadata store
      200-299  bookie (storage node); these travel in the bookie gRPC responses
      300-399  ledger client and managed ledger
      400-499  cursor
      500-599  broker / Pulsar protocol
      600-699  cold tier (offload to S3)
      700-799  analytics (the Spark data source and sink, Iceberg tables)
      800-899  cluster (ownership, lookup, listeners)
      900-999  security (authentication, authorization, TLS, internal links)
      1000-1099 admin REST API clients (admin_client/: the broker's HTTP answers, translated)
      1100-1199 Kafka wire codec (wire/kafka/); `kafka_code` is the Kafka error code sent to clients
- `retriable`: whether the same call may succeed if simply tried again later.
- `server_error`: the Pulsar `ServerError` value (docs/protocol.md §5) the broker sends when this
  error reaches a client; `None` means "UnknownError".

The code -> class map (`CODE_TO_ERROR`) is built once, at import, and refuses duplicates.
All error classes live in this one file so the map is complete at import.
Foreign exceptions (grpc, SQLAlchemy, botocore) are translated into this tree in the adapter
that calls the foreign library, never deeper.
"""

from __future__ import annotations


class PulsarServerError:
    """Pulsar's ServerError enum values (docs/protocol.md §5), as plain ints so common/ needs no proto."""

    UnknownError = 0
    MetadataError = 1
    PersistenceError = 2
    AuthenticationError = 3
    AuthorizationError = 4
    ConsumerBusy = 5
    ServiceNotReady = 6
    ProducerBlockedQuotaExceededError = 7
    ProducerBlockedQuotaExceededException = 8
    ChecksumError = 9
    UnsupportedVersionError = 10
    TopicNotFound = 11
    SubscriptionNotFound = 12
    ConsumerNotFound = 13
    TooManyRequests = 14
    TopicTerminatedError = 15
    ProducerBusy = 16
    InvalidTopicName = 17
    IncompatibleSchema = 18
    ConsumerAssignError = 19
    TransactionCoordinatorNotFound = 20
    InvalidTxnStatus = 21
    NotAllowedError = 22
    TransactionConflict = 23
    TransactionNotFound = 24
    ProducerFenced = 25


class StrataError(Exception):
    """Base of every deliberate Strata error."""

    code: int = 1
    retriable: bool = False
    server_error: int | None = None

    def __init__(self, message: str = "", **details: object) -> None:
        super().__init__(message or self.__class__.__name__)
        self.message = message or self.__class__.__name__
        self.details = details

    def __str__(self) -> str:
        if not self.details:
            return self.message
        extra = ", ".join(f"{k}={v!r}" for k, v in sorted(self.details.items()))
        return f"{self.message} ({extra})"


# --- generic (1-99) -------------------------------------------------------------------------

class InvariantViolation(StrataError):
    """An internal invariant failed: a bug, never a user error. Never caught to continue."""
    code = 2


class ConfigError(StrataError):
    """A setting is unknown, of the wrong type or out of its bounds."""
    code = 3


class LimitExceeded(StrataError):
    """A named limit (size, count, queue length) was hit; backpressure, not silent growth."""
    code = 4
    retriable = True
    server_error = PulsarServerError.TooManyRequests


class InvalidArgument(StrataError):
    """A caller passed a malformed value (bad name, wrong type, out of range)."""
    code = 5
    server_error = PulsarServerError.NotAllowedError


class BadRequestBody(InvalidArgument):
    """An admin request body or value of the wrong type (e.g. not a JSON integer): HTTP 400,
    where other invalid arguments get 412."""
    code = 8


class ConfirmationRefused(InvalidArgument):
    """A destructive command (`strata admin`) was not confirmed: no `--yes`, and no terminal to ask."""
    code = 9


class TimeoutExpired(StrataError):
    """A bounded wait ran out."""
    code = 6
    retriable = True
    server_error = PulsarServerError.ServiceNotReady


class ShuttingDown(StrataError):
    """The component is closing and takes no new work."""
    code = 7
    retriable = True
    server_error = PulsarServerError.ServiceNotReady


# --- metadata store (100-199) ---------------------------------------------------------------

class MetadataError(StrataError):
    code = 100
    server_error = PulsarServerError.MetadataError


class NotFound(MetadataError):
    code = 101


class AlreadyExists(MetadataError):
    code = 102


class BadVersion(MetadataError):
    """Compare-and-set lost: the stored version is not the expected one."""
    code = 103


class InvalidPath(MetadataError):
    code = 104


class ValueTooLarge(MetadataError):
    code = 105


class MetadataUnavailable(MetadataError):
    """The database cannot be reached or answered with an operational error."""
    code = 106
    retriable = True


class SessionExpired(MetadataError):
    """This store's session lease ran out; its ephemeral keys are gone."""
    code = 107
    retriable = True


class LeaseLost(MetadataError):
    """This store's lease has lapsed by its own clock (no renewal for lease - margin): writes are
    refused until a renewal succeeds, so a stalled owner never writes past its lease."""
    code = 109
    retriable = True
    server_error = PulsarServerError.ServiceNotReady


class NotEmpty(MetadataError):
    """Delete of a path that still has children."""
    code = 108


class NamespaceNotFound(NotFound):
    """The namespace was never created (or was deleted). The binary protocol answers Pulsar's
    MetadataError "Policies not found for <t>/<ns> namespace"; the admin API 404 `rest_reason`."""
    code = 110
    rest_reason = "Namespace does not exist"

    def __init__(self, tenant: str, namespace: str) -> None:
        super().__init__(f"Policies not found for {tenant}/{namespace} namespace")


class TenantNotFound(NotFound):
    code = 111
    rest_reason = "Tenant does not exist"

    def __init__(self, tenant: str) -> None:
        super().__init__("Tenant does not exist", tenant=tenant)


# --- bookie (200-299) -----------------------------------------------------------------------

class BookieError(StrataError):
    code = 200
    retriable = True
    server_error = PulsarServerError.PersistenceError


class LedgerFenced(BookieError):
    """The ledger is fenced on this bookie: a recoverer took over, adds are refused."""
    code = 201
    retriable = False


class NoSuchLedger(BookieError):
    code = 202
    retriable = False


class NoSuchEntry(BookieError):
    code = 203
    retriable = False


class EntryTooLarge(BookieError):
    code = 204
    retriable = False


class DiskFull(BookieError):
    """The bookie ran out of disk and turned read-only."""
    code = 205


class ReadOnly(BookieError):
    """The bookie is read-only (disk full, or by operator); it still serves reads."""
    code = 206


class ChecksumMismatch(BookieError):
    """Stored or transmitted bytes do not match their CRC32C."""
    code = 207


class BookieUnavailable(BookieError):
    """A bookie could not be reached (connection refused, deadline exceeded)."""
    code = 208


class BadRequest(BookieError):
    """A malformed bookie request (bad ids, missing fields)."""
    code = 209
    retriable = False


# --- ledger client / managed ledger (300-399) ------------------------------------------------

class LedgerError(StrataError):
    code = 300
    retriable = True
    server_error = PulsarServerError.PersistenceError


class NotEnoughBookies(LedgerError):
    """Fewer writable bookies than the ensemble or ack quorum needs."""
    code = 301


class LedgerClosed(LedgerError):
    code = 302
    retriable = False


class AddOutcomeUnknown(LedgerError):
    """The add may or may not be stored (writer was fenced or timed out mid-add)."""
    code = 303


class ManagedLedgerFenced(LedgerError):
    """Another owner opened this managed ledger; this instance may no longer append."""
    code = 304
    retriable = False
    server_error = PulsarServerError.ServiceNotReady


class ManagedLedgerClosed(LedgerError):
    code = 305
    retriable = True
    server_error = PulsarServerError.ServiceNotReady


class InvalidPosition(LedgerError):
    code = 306
    retriable = False


class IllegalTransition(LedgerError):
    """A state change an explicit state machine forbids (a bug in the caller)."""
    code = 307
    retriable = False


class OffloadInProgress(LedgerError):
    """An offload of this managed ledger is already running (admin API: 409)."""
    code = 308
    retriable = True


class OffloadConflict(LedgerError):
    """The ledger being offloaded changed under the offload: trimmed, or recorded by another
    owner. Not retried; the offload of the other ledgers goes on."""
    code = 309
    retriable = False


class OffloadNotConfigured(LedgerError):
    """This broker has no cold tier (offload_driver is empty, or `--no-s3`)."""
    code = 310
    retriable = False


class TopicTerminated(LedgerError):
    """The managed ledger (its topic) was terminated: it takes no appends, ever (Pulsar's
    ManagedLedgerTerminatedException / TopicTerminatedException). The client raises
    `pulsar.TopicTerminated`."""
    code = 311
    retriable = False
    server_error = PulsarServerError.TopicTerminatedError


class OffsetOutOfRange(LedgerError):
    """A Kafka offset below the managed ledger's log start offset (trimmed) or past its end
    offset (not written yet); details: offset, start, end. Kafka's OFFSET_OUT_OF_RANGE: the
    client resets to the start or the end (`ledger.view`)."""
    code = 312
    retriable = False


# --- cursor (400-499) -----------------------------------------------------------------------

class CursorError(StrataError):
    code = 400
    server_error = PulsarServerError.MetadataError


class CursorStateTooLarge(CursorError):
    """The persisted ack state exceeds `cursor_state_bytes_max`; never silently kept in memory only."""
    code = 401


class CursorNotFound(CursorError):
    code = 402
    server_error = PulsarServerError.SubscriptionNotFound


class InvalidRetention(CursorError):
    code = 403
    server_error = PulsarServerError.NotAllowedError


class CursorClosed(CursorError):
    """The cursor was closed (its subscription deleted or its topic unloaded); it takes no acks."""
    code = 404
    retriable = True
    server_error = PulsarServerError.ServiceNotReady


class CursorFenced(CursorError):
    """Another owner (a broker that took the topic over) holds this cursor: this instance stops
    persisting and refuses every change, so it never overwrites the new owner's state."""
    code = 405
    server_error = PulsarServerError.ServiceNotReady


# --- broker / protocol (500-599) ------------------------------------------------------------

class BrokerError(StrataError):
    code = 500
    server_error = PulsarServerError.UnknownError


class MalformedFrame(BrokerError):
    """A frame that cannot be parsed; the connection is closed."""
    code = 501


class FrameTooLarge(BrokerError):
    code = 502


class ChecksumError(BrokerError):
    code = 504
    server_error = PulsarServerError.ChecksumError


class InvalidTopicName(BrokerError):
    code = 505
    server_error = PulsarServerError.InvalidTopicName


class TopicNotFound(BrokerError):
    code = 506
    server_error = PulsarServerError.TopicNotFound


class ConsumerBusy(BrokerError):
    code = 507
    server_error = PulsarServerError.ConsumerBusy


class ProducerBusy(BrokerError):
    code = 508
    server_error = PulsarServerError.ProducerBusy


class ConsumerAssignError(BrokerError):
    code = 509
    server_error = PulsarServerError.ConsumerAssignError


class SubscriptionNotFound(BrokerError):
    code = 510
    retriable = True
    server_error = PulsarServerError.SubscriptionNotFound


class ServiceNotReady(BrokerError):
    code = 511
    retriable = True
    server_error = PulsarServerError.ServiceNotReady


class NotAllowed(BrokerError):
    code = 512
    server_error = PulsarServerError.NotAllowedError


class ConsumerNotFound(BrokerError):
    code = 513
    retriable = True
    server_error = PulsarServerError.ConsumerNotFound


class MessageTooLarge(BrokerError):
    code = 514
    server_error = PulsarServerError.NotAllowedError


class NotOnNonPersistent(NotAllowed):
    """An operation that needs stored messages (seek, last message id, read_compacted, terminate,
    offload, compaction, cursor moves) on a `non-persistent://` topic, which stores none."""
    code = 595


class TooManyTopics(NotAllowed):
    """maxTopicsPerNamespace reached (`broker.limits.topic_count`). Pulsar refuses with a
    RestException: 412 with this text over REST, and, mapping to no ServerError, UnknownError
    on the binary protocol."""
    code = 596
    server_error = PulsarServerError.UnknownError
    rest_reason = "Exceed maximum number of topics in namespace."


class MalformedPayload(BrokerError):
    """A message payload that cannot be decoded (batch layout, compression); only clients and
    tools open payloads, the broker never does."""
    code = 540


class SchemaError(BrokerError):
    """The schema registry (`broker.schemas`) refused a schema."""
    code = 560
    server_error = PulsarServerError.IncompatibleSchema


class IncompatibleSchema(SchemaError):
    """A schema the topic's compatibility strategy refuses (or a producer without a schema on a
    topic that enforces one); nothing was changed. Admin: 409."""
    code = 561


class InvalidSchemaData(SchemaError):
    """A schema definition that does not parse (a malformed Avro/JSON record, a broken KeyValue
    or Protobuf-native descriptor) or is too large. Admin: 422."""
    code = 562


class UnknownSchemaType(SchemaError):
    """A schema type Pulsar does not define. Admin: 400."""
    code = 563


class CompactionError(BrokerError):
    """Topic compaction failed (`broker.compaction`); the previous compacted view stays."""
    code = 570
    retriable = True


class CompactionInProgress(CompactionError):
    """A compaction of this topic is already running (admin API: 409)."""
    code = 571


class CompactionTooManyKeys(CompactionError):
    """The topic holds more distinct keys than `compaction_keys_max`: not compacted."""
    code = 572
    retriable = False


class ProducerFenced(BrokerError):
    """An exclusive producer (`broker.topics.access_modes`) cannot have the topic: another one holds it,
    or the topic epoch moved past the producer's; the client stops retrying."""
    code = 580
    server_error = PulsarServerError.ProducerFenced


class BacklogQuotaExceeded(BrokerError):
    """The topic's backlog is over its quota (`broker.retention.backlog_quota`): no producer is created."""
    code = 581


class ProducerBlockedQuotaExceededError(BacklogQuotaExceeded):
    """Quota policy producer_request_hold: the client keeps its sends pending and retries."""
    code = 582
    server_error = PulsarServerError.ProducerBlockedQuotaExceededError


class ProducerBlockedQuotaExceededException(BacklogQuotaExceeded):
    """Quota policy producer_exception: the client fails its pending sends."""
    code = 583
    server_error = PulsarServerError.ProducerBlockedQuotaExceededException


class InvalidTopicsPattern(BrokerError):
    """A topics pattern (GET_TOPICS_OF_NAMESPACE, WATCH_TOPIC_LIST) that does not compile or names
    an unknown domain; Pulsar answers a failed listing as MetadataError."""
    code = 590
    server_error = PulsarServerError.MetadataError


class TooManyTopicListWatchers(BrokerError):
    """A connection asked for more topic-list watchers than `broker_topic_list_watchers_per_connection_max`."""
    code = 591
    server_error = PulsarServerError.NotAllowedError


# --- cold tier (600-699) ----------------------------------------------------------------------
# botocore's errors are translated into these in `offload/`, never deeper.

class ColdTierError(StrataError):
    code = 600
    retriable = True
    server_error = PulsarServerError.PersistenceError


class ColdTierUnavailable(ColdTierError):
    """S3 could not be reached, timed out, or answered 5xx: try again later."""
    code = 601


class ColdTierAccessDenied(ColdTierError):
    """S3 refused the credentials (unknown key, bad signature, 403)."""
    code = 602
    retriable = False


class ColdTierBucketMissing(ColdTierError):
    code = 603
    retriable = False


class ColdObjectMissing(ColdTierError):
    """An offloaded ledger's object is not in S3 (deleted behind our back)."""
    code = 604
    retriable = False


class ColdObjectCorrupt(ColdTierError):
    """An object that is truncated, does not parse, or whose rebuilt entries fail their
    checksum: nothing from it is delivered."""
    code = 605
    retriable = False


# --- analytics (700-799) ----------------------------------------------------------------------
# Raised by `analytics/` (the Spark source and sink) and the Iceberg registration, before any
# work starts where the input is wrong.

class AnalyticsError(StrataError):
    code = 700


class BadSourceOption(AnalyticsError):
    """An option of the Spark source or sink that is unknown, missing, malformed or conflicting
    (both topic and topics, endingOffsets before startingOffsets, offsets JSON that does not parse)."""
    code = 701


class DataLost(AnalyticsError):
    """Messages a query asked for are gone (retention removed their ledger, or the ledger or
    its object is missing) and failOnDataLoss is true."""
    code = 702


class SinkNotExactlyOnce(AnalyticsError):
    """The exactly-once sink's target topic does not have deduplication enabled."""
    code = 703


class IcebergCatalogError(AnalyticsError):
    """The Iceberg catalog refused or failed a commit (registering or removing an offloaded
    ledger's file): retried by the offload that needs it."""
    code = 704
    retriable = True


class SinkSendFailed(AnalyticsError):
    """A sink task could not store its rows (a send failed or timed out, or a send raced a
    previous attempt's write still in flight): the task fails and Spark retries it, and the
    broker's deduplication keeps the retry from storing anything twice."""
    code = 705
    retriable = True


# --- cluster: ownership, lookup, brokers (800-899) ---------------------------------------------

class ClusterError(StrataError):
    code = 800


class BundleNotOwned(ClusterError):
    """This broker does not own the topic's bundle (the client looks up again)."""
    code = 801
    retriable = True
    server_error = PulsarServerError.ServiceNotReady


class InvalidBundle(ClusterError):
    """A bundle range or count that is malformed, out of range, or names no bundle."""
    code = 802
    server_error = PulsarServerError.MetadataError


class NoOwner(ClusterError):
    """No live broker owns, or can own, the bundle right now."""
    code = 803
    retriable = True
    server_error = PulsarServerError.ServiceNotReady


class BrokerAddressInUse(ClusterError):
    """Another live broker is registered under this broker's advertised address."""
    code = 804


class OwnedElsewhere(ClusterError):
    """The bundle is owned by another broker; details carry its `http_url` and `native_url`."""
    code = 805
    retriable = True
    server_error = PulsarServerError.ServiceNotReady


class UnknownListener(ClusterError):
    """A lookup named an advertised listener the owning broker does not have (`broker.cluster.listeners`);
    Pulsar's message "the broker do not have <name> listener". Answered NotAllowedError, which the
    official client does not retry (Pulsar's ServiceNotReady is retried until the operation times out)."""
    code = 806
    server_error = PulsarServerError.NotAllowedError


# --- security (900-999): auth/, broker.security.authorization, bookie links -------------------------------
# 900-909 shared; 910-919 auth providers and tokens; 920-929 binary protocol; 930-939 authorization;
# 940-949 admin HTTP; 950-959 internal links; 960-979 set-up, standalone, analytics.

class SecurityError(StrataError):
    """Base of authentication, authorization and TLS errors."""
    code = 900


class AuthenticationFailed(SecurityError):
    """Credentials missing, malformed, wrong or expired. The message says which, never echoing a secret.
    Pulsar answers AuthenticationError and closes the connection; HTTP 401."""
    code = 901
    server_error = PulsarServerError.AuthenticationError


class AuthorizationDenied(SecurityError):
    """An authenticated role may not do this. The message names the action and the topic or namespace as
    asked, and says nothing of whether it exists. Pulsar's AuthorizationError; HTTP 403."""
    code = 902
    server_error = PulsarServerError.AuthorizationError


class TokenExpired(AuthenticationFailed):
    """A token's `exp` (plus the allowed clock skew) has passed."""
    code = 903


class KeyMaterialError(SecurityError):
    """A key, certificate, token or htpasswd source cannot be read or parsed (file:///, data:, env:)."""
    code = 904


class SourceAccessDenied(AuthorizationDenied):
    """The Spark source (analytics.authorization) may not read a topic: the cluster enforces authorization
    and the query has no credentials, or the broker says the role may not consume it. Raised on the driver
    before any partition runs; the same message whether the topic exists or not."""
    code = 970


class AuthenticationBusy(SecurityError):
    """Too many slow verifications (bcrypt) already queued; the peer may try again (auth.service's bound).
    Pulsar's ServiceNotReady, which clients retry; HTTP 503."""
    code = 910
    retriable = True
    server_error = PulsarServerError.ServiceNotReady


class InvalidDuration(SecurityError):
    """A duration such as a token's expiry is not <number><unit> with a known unit (s, m, h, d, w, y)."""
    code = 911


# --- admin REST API clients (1000-1099): admin_client/ ----------------------------------------------
# The client side of the broker's admin HTTP API. An error status becomes the class of its status
# (AdminNotFound for 404, ...), so callers catch what they mean instead of comparing numbers.

class AdminError(StrataError):
    """The admin API call did not give an answer to use (the base of the classes below)."""
    code = 1000


class AdminHttpError(AdminError):
    """The broker answered an error status. `status`, `reason` (the `reason` of Pulsar's error body,
    else the HTTP reason phrase), `body` (the answer's bytes, capped), `headers` (names as the broker
    sent them) and `url` (the last one asked, after redirects). Statuses without a class of their own
    land here."""
    code = 1001

    def __init__(self, message: str = "", *, status: int = 0, reason: str = "", body: bytes = b"",
                 headers: dict[str, str] | None = None, url: str = "", **details: object) -> None:
        super().__init__(message or f"HTTP {status}: {reason}", **details)
        self.status = status
        self.reason = reason
        self.body = body
        self.headers = headers or {}
        self.url = url


class AdminBadRequest(AdminHttpError):
    """400: the request's body or value is malformed."""
    code = 1002


class AdminUnauthorized(AdminHttpError):
    """401: no credentials, or ones the broker does not accept."""
    code = 1003


class AdminForbidden(AdminHttpError):
    """403: the role the credentials prove may not do this."""
    code = 1004


class AdminNotFound(AdminHttpError):
    """404: no such tenant, namespace, topic, subscription, ... (or no such route)."""
    code = 1005


class AdminConflict(AdminHttpError):
    """409: it exists already, or the state does not allow it now (e.g. a subscription with consumers)."""
    code = 1006


class AdminPreconditionFailed(AdminHttpError):
    """412: a value Pulsar's admin API refuses (a bad name or an out-of-range policy, ...)."""
    code = 1007


class AdminServerError(AdminHttpError):
    """5xx: the broker failed or is not ready (503 while it starts or sheds load); may pass later."""
    code = 1008
    retriable = True


class AdminRedirectError(AdminHttpError):
    """A redirect that was not followed: more hops than the client allows, or no usable Location."""
    code = 1009


class AdminRedirectRefused(AdminRedirectError):
    """A redirect from https:// to plain http:// while the request carries credentials: refused, so
    the secret never travels in clear."""
    code = 1010


class AdminUnreachable(AdminError):
    """No answer: the broker could not be reached, the TLS handshake or certificate check failed, or
    the connection broke. `cause` is the underlying exception (`ssl.SSLCertVerificationError` when the
    broker's certificate failed the check)."""
    code = 1020
    retriable = True

    def __init__(self, message: str = "", *, cause: BaseException | None = None, **details: object) -> None:
        super().__init__(message, **details)
        self.cause = cause


class AdminTimedOut(AdminUnreachable):
    """The broker did not answer within the call's bound."""
    code = 1021


class AdminAnswerTooLarge(AdminError):
    """The answer is larger than the client reads (`answer_bytes_max`): refused instead of filling memory."""
    code = 1022


class AdminBadAnswer(AdminError):
    """A 2xx answer that is not what the call expects (not JSON where JSON was asked for)."""
    code = 1023


# --- Kafka wire codec (1100-1199) -------------------------------------------------------------
# Raised by wire/kafka/ (re-exported by wire.kafka.errors). `code` is Strata's (unique in this tree);
# `kafka_code` is the Kafka protocol error code a broker answers with (wire.kafka.errors.ErrorCode).

class KafkaCodecError(StrataError):
    """Kafka bytes that cannot be decoded (or a value that cannot be encoded).

    When the request header was readable, `api_key`, `api_version` and `correlation_id` say which
    request failed, so the broker can still answer it; each is None when it was not read."""
    code = 1100
    kafka_code: int = -1  # UNKNOWN_SERVER_ERROR

    def __init__(self, message: str = "", *, api_key: int | None = None, api_version: int | None = None,
                 correlation_id: int | None = None, **details: object) -> None:
        super().__init__(message, **details)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


class KafkaUnsupportedVersion(KafkaCodecError):
    """A known API at a version the codec's tables do not hold."""
    code = 1101
    kafka_code = 35  # UNSUPPORTED_VERSION


class KafkaUnknownApi(KafkaCodecError):
    """An api key the codec does not know (Kafka cannot parse the header: INVALID_REQUEST)."""
    code = 1102
    kafka_code = 42  # INVALID_REQUEST


class KafkaMalformedRequest(KafkaCodecError):
    """Truncated or garbage bytes, a negative length, a length past the end or past a limit."""
    code = 1103
    kafka_code = 42  # INVALID_REQUEST


class KafkaMalformedResponse(KafkaCodecError):
    """A response frame (read by a client: tests, the load generator) that does not decode."""
    code = 1104


class KafkaCorruptRecord(KafkaCodecError):
    """A record batch whose CRC does not match, or whose bytes do not parse (or decompress)."""
    code = 1105
    kafka_code = 2  # CORRUPT_MESSAGE


class KafkaInvalidRecord(KafkaCodecError):
    """A record batch that parses but breaks a rule (records count, offset deltas)."""
    code = 1106
    kafka_code = 87  # INVALID_RECORD


class KafkaUnsupportedMessageFormat(KafkaCodecError):
    """A message set of magic 0 or 1: only record batch v2 (magic 2) is supported."""
    code = 1107
    kafka_code = 43  # UNSUPPORTED_FOR_MESSAGE_FORMAT


class KafkaUnsupportedCompression(KafkaCodecError):
    """A compression codec other than none, gzip, snappy, lz4, zstd."""
    code = 1108
    kafka_code = 76  # UNSUPPORTED_COMPRESSION_TYPE


def _all_subclasses(cls: type[StrataError]) -> list[type[StrataError]]:
    out: list[type[StrataError]] = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_all_subclasses(sub))
    return out


def _build_code_map() -> dict[int, type[StrataError]]:
    table: dict[int, type[StrataError]] = {StrataError.code: StrataError}
    for cls in _all_subclasses(StrataError):
        if "code" not in cls.__dict__:
            raise TypeError(f"{cls.__name__} must declare its own code")
        if cls.code in table:
            raise TypeError(f"duplicate error code {cls.code}: {table[cls.code].__name__} and {cls.__name__}")
        table[cls.code] = cls
    return table


CODE_TO_ERROR: dict[int, type[StrataError]] = _build_code_map()


def error_from_code(code: int, message: str = "") -> StrataError:
    """Rebuild an error received over the wire (e.g. from a bookie response)."""
    cls = CODE_TO_ERROR.get(code, StrataError)
    return cls(message)
