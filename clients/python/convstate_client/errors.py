"""The exceptions the client raises."""

from __future__ import annotations

import grpc


class ConvStateError(Exception):
    """A call to the service failed.

    Attributes:
        code: the gRPC status code (``grpc.StatusCode``), e.g. NOT_FOUND.
        details: the service's message, e.g. ``items[1].content: not valid UTF-8``.
        method: the RPC that failed, e.g. ``AppendTurn``.
        attempts: how many times the call was sent (more than one only for
            calls that are safe to repeat and failed with UNAVAILABLE).
    """

    def __init__(self, code: grpc.StatusCode, details: str, method: str, attempts: int = 1):
        self.code = code
        self.details = details
        self.method = method
        self.attempts = attempts
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        super().__init__(f"{method}: {code.name}: {details}{tries}")

    @property
    def retryable(self) -> bool:
        """True for UNAVAILABLE: the service asks to try again later."""
        return self.code == grpc.StatusCode.UNAVAILABLE


class ConfigurationError(ValueError):
    """The client's settings (arguments or environment) are unusable."""
