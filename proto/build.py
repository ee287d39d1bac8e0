"""Generate Python modules from the .proto files in this folder with grpcio-tools.

Run by `make setup` (and `make proto`) whenever a .proto is newer than its generated module.
Generated files are not committed: they are made by the grpcio-tools that matches the installed
protobuf runtime, so they can never be stale or built for another runtime version.

protoc writes an enum value named after a Python keyword (`Schema.Type.None`) into the `.pyi`
stubs as `None: ...`, which is a syntax error for mypy; `fix_stub` comments those lines out
(at run time the value is still there: `Schema.Type.Value("None")`).
"""

from __future__ import annotations

import keyword
import re
import sys
from pathlib import Path

from grpc_tools import protoc

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# proto files that define gRPC services get *_pb2_grpc.py too.
SERVICES = {"bookie.proto"}
# `    None: _ClassVar[Schema.Type]` / `None: Schema.Type`: a stub member named after a keyword.
_KEYWORD_MEMBER = re.compile(r"^(\s*)(\w+): (.*)$")


def fix_stub(text: str) -> str:
    """`text` with every `<keyword>: <type>` line commented out (mypy cannot parse them)."""
    lines = []
    for line in text.splitlines(keepends=True):
        match = _KEYWORD_MEMBER.match(line)
        if match and keyword.iskeyword(match.group(2)):
            indent, name, rest = match.groups()
            line = f"{indent}# {name}: {rest}  (a Python keyword: not valid in a stub)\n"
        lines.append(line)
    return "".join(lines)


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
        stub = HERE / f"{proto.stem}_pb2.pyi"
        stub.write_text(fix_stub(stub.read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(build())
