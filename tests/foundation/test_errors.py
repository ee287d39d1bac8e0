from common import errors
from common.errors import CODE_TO_ERROR, PulsarServerError, StrataError, error_from_code


def test_codes_are_unique_and_complete():
    classes = [StrataError] + errors._all_subclasses(StrataError)
    assert len({c.code for c in classes}) == len(classes)
    for cls in classes:
        assert CODE_TO_ERROR[cls.code] is cls


def test_server_errors_are_pulsar_values():
    values = {v for k, v in vars(PulsarServerError).items() if not k.startswith("_")}
    assert values == set(range(26))
    for cls in CODE_TO_ERROR.values():
        assert cls.server_error is None or cls.server_error in values


def test_round_trip_by_code():
    err = error_from_code(errors.LedgerFenced.code, "fenced by recovery")
    assert isinstance(err, errors.LedgerFenced)
    assert not err.retriable
    assert "fenced by recovery" in str(err)
    assert isinstance(error_from_code(99999, "x"), StrataError)


def test_retriable_flags():
    assert errors.MetadataUnavailable.retriable
    assert not errors.BadVersion.retriable
    assert errors.ServiceNotReady.server_error == PulsarServerError.ServiceNotReady
