"""The generated protobuf and gRPC modules, with a clear error when absent.

They are generated from protos/convstate/v1/convstate.proto by
clients/python/generate and are not part of the source tree.
"""

from __future__ import annotations

try:
    from convstate.v1 import convstate_pb2 as pb
    from convstate.v1 import convstate_pb2_grpc as pb_grpc
except ImportError as error:  # pragma: no cover - depends on the set-up
    raise ImportError(
        "convstate_client needs the generated modules convstate.v1.convstate_pb2 and "
        "convstate_pb2_grpc: run clients/python/generate and put its output directory "
        "(default clients/python/build/gen) on PYTHONPATH"
    ) from error

__all__ = ["pb", "pb_grpc"]
