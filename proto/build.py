"""Generate Python modules from the .proto files in this folder with grpcio-tools.

Run by `make setup` (and `make proto`) whenever a .proto is newer than its generated module.
Generated files are not committed: they are made by the grpcio-tools that matches the installed
protobuf runtime, so they can never be stale or built for another runtime version.
"""

from __future__ import annotations

import sys
from pathlib import Path

from grpc_tools import protoc

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# proto files that define gRPC services get *_pb2_grpc.py too.
SERVICES = {"bookie.proto"}


def build() -> int:
    protos = sorted(HERE.glob("*.proto"))
    include = Path(protoc.__file__).resolve().parent / "_proto"
    for proto in protos:
        args = ["protoc", f"-I{ROOT}", f"-I{include}", f"--python_out={ROOT}", f"--pyi_out={ROOT}"]
        if proto.name in SERVICES:
            args.append(f"--grpc_python_out={ROOT}")
        args.append(str(proto.relative_to(ROOT)))
        rc = protoc.main(args)
        if rc != 0:
            print(f"protoc failed on {proto.name}", file=sys.stderr)
            return rc
    return 0


if __name__ == "__main__":
    sys.exit(build())
