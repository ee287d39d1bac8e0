"""common.varint against the protobuf runtime's own encoding of a uint64 field."""

from hypothesis import given
from hypothesis import strategies as st

from common.varint import encode_varint
from proto import pulsar_api_pb2 as pb


@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_encode_varint_is_protobufs(value: int) -> None:
    # MessageIdData.ledgerId is field 1, uint64: tag 0x08 then the varint
    assert pb.MessageIdData(ledgerId=value, entryId=0).SerializeToString()[1:-2] == encode_varint(value)
