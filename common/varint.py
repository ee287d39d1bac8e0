"""Protobuf's base-128 varint, for the few places that hand-encode protobuf bytes on a hot path
(the bookie client's add requests, the offload format's message ids, the perf tools' batches,
the Kafka front end's batch members), and Kafka's unsigned varints.

What must hold: `encode_varint(n)` equals what protobuf writes for a uint64 field's value n
(n >= 0); the tests check it against the protobuf runtime.
"""


def encode_varint(value: int) -> bytes:
    """Protobuf base-128 varint of a non-negative int (also Kafka's unsigned varint, LEB128)."""
    if value < 0x80:
        return _ONE_BYTE[value]
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_ONE_BYTE = [bytes([i]) for i in range(0x80)]    # values below 0x80 are one byte: made once
