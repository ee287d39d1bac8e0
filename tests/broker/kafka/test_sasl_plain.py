"""SASL/PLAIN parsing for the Kafka listener (broker.kafka.sasl): pure, no broker."""

import pytest

from broker.kafka.sasl import PLAIN_BYTES_MAX, parse_plain, split_password, split_username


def test_empty_authzid_and_authzid_equal_to_the_username_are_accepted():
    # librdkafka and kafkajs send an empty authzid; kafka-python and aiokafka the username
    assert parse_plain(b"\0public/default\0token:abc").username == "public/default"
    plain = parse_plain(b"public\0public\0token:abc")
    assert (plain.username, plain.password) == ("public", "token:abc")


@pytest.mark.parametrize("message", [b"public\0token:abc", b"a\0b\0c\0d", b"\0\0token:x", b"\0user\0",
                                     b"other\0user\0token:x", b"\0us\xffer\0token:x",
                                     b"\0u\0" + b"x" * PLAIN_BYTES_MAX])
def test_malformed_messages_are_refused(message):
    with pytest.raises(ValueError):
        parse_plain(message)


def test_errors_and_repr_never_show_the_password():
    with pytest.raises(ValueError) as refused:
        parse_plain(b"other\0user\0token:s3cret")
    assert "s3cret" not in str(refused.value)
    assert "s3cret" not in repr(parse_plain(b"\0user\0token:s3cret"))
    with pytest.raises(ValueError) as refused:
        split_password("s3cret")
    assert "s3cret" not in str(refused.value)


def test_the_password_names_the_method_before_the_first_colon():
    assert split_password("token:eyJ.a:b") == ("token", b"eyJ.a:b")
    for bad in ("token", ":abc", "token:"):
        with pytest.raises(ValueError):
            split_password(bad)


def test_the_username_is_a_tenant_or_a_namespace():
    assert split_username("public") == ("public", None)
    assert split_username("public/default") == ("public", "default")
    for bad in ("a/b/c", "/ns", "t/", ""):
        with pytest.raises(ValueError):
            split_username(bad)
