"""TEMP placeholder until the admin branch lands."""
from wire.kafka.errors import ErrorCode


async def _unsupported(conn, req):
    return {"error_code": ErrorCode.INVALID_REQUEST}

create_topics = delete_topics = describe_configs = alter_configs = create_partitions = _unsupported
incremental_alter_configs = _unsupported
