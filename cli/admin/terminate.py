"""`strata admin topics terminate TOPIC [-y]` and `topics partitioned-terminate TOPIC [-y]`.

Thin clients of `POST .../{topic}/terminate` and `POST .../{topic}/terminate/partitions`
(`broker.admin.terminate`). Terminating cannot be undone (the topic takes no message again), so
both ask first unless `-y/--yes`. They show the last message id (per partition), or with
`-o json` the broker's JSON.
"""

from __future__ import annotations

import argparse

from cli.admin.commands import Groups, command, destructive, topic_path
from cli.admin.console import AdminConsole

_COLUMNS = ("partition", "ledgerId", "entryId", "partitionIndex")


def add_parsers(groups: Groups) -> None:
    topics = groups["topics"]
    destructive(command(topics, "terminate", run_terminate,
                        help="terminate a topic: no more messages, ever; prints its last message id")
                ).add_argument("topic")
    destructive(command(topics, "partitioned-terminate", run_partitioned,
                        help="terminate every partition of a partitioned topic")).add_argument("topic")


def run_terminate(args: argparse.Namespace, client: AdminConsole) -> int:
    path = topic_path(args.topic)    # a bad name is refused before asking
    client.confirm(f"Terminate {args.topic}? It will take no more messages, ever.")
    answer = client.call("POST", path + "/terminate")
    client.show(answer)
    return 0


def run_partitioned(args: argparse.Namespace, client: AdminConsole) -> int:
    path = topic_path(args.topic)
    client.confirm(f"Terminate every partition of {args.topic}? They will take no more messages, ever.")
    answer = client.call("POST", path + "/terminate/partitions")
    if client.output == "json" or not isinstance(answer, dict):
        client.show(answer)
        return 0
    rows = [{"partition": int(index), **(mid if isinstance(mid, dict) else {"ledgerId": mid})}
            for index, mid in sorted(answer.items(), key=lambda kv: int(kv[0]))]
    client.show(rows, columns=_COLUMNS)
    return 0
