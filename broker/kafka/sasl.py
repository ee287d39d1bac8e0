"""TEMP placeholder until the admin branch lands."""
from wire.kafka.errors import ErrorCode


async def handshake(conn, req):
    return {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": []}

authenticate = handshake
