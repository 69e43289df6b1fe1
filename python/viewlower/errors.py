"""Errors of the front end, each carrying the wire error's code, message, kind and JSON pointer,
and the exit code viewlowerctl gives the same failure (viewlowerctl(1), EXIT STATUS)."""
from __future__ import annotations

from typing import Any, Optional

EXIT_OK = 0
EXIT_MISMATCH = 1
EXIT_INVALID = 2
EXIT_UNREACHABLE = 3
EXIT_SERVER = 4
EXIT_USAGE = 64

#: JSON-RPC error codes (docs/protocol.md, "Errors") and the exit code viewlowerctl maps each to.
CODE_EXIT = {
    -32700: EXIT_UNREACHABLE,  # parse error: we broke the protocol
    -32600: EXIT_UNREACHABLE,  # invalid request
    -32601: EXIT_UNREACHABLE,  # unknown method
    -32602: EXIT_INVALID,      # invalid params
    -32001: EXIT_INVALID,      # invalid graph
    -32002: EXIT_INVALID,      # invalid tensor
    -32003: EXIT_INVALID,      # kernel error
    -32004: EXIT_INVALID,      # too large
    -32005: EXIT_SERVER,       # overloaded
    -32006: EXIT_UNREACHABLE,  # not permitted
    -32007: EXIT_SERVER,       # shutting down
}


class ViewlowerError(Exception):
    """Base of every error the package raises on purpose.

    `code` is the JSON-RPC code (None when the error did not come from the service), `kind` and
    `path` are the error's `data.kind` and `data.path` (a JSON pointer relative to the request's
    params, or to the graph for export errors), `data` the whole `data` object."""

    exit_code = EXIT_INVALID

    def __init__(self, message: str, code: Optional[int] = None, kind: Optional[str] = None,
                 path: Optional[str] = None, data: Any = None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.kind = kind
        self.path = path
        self.data = data

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class RemoteError(ViewlowerError):
    """The service answered with a JSON-RPC error."""

    @property
    def exit_code(self) -> int:  # type: ignore[override]
        return CODE_EXIT.get(self.code, EXIT_SERVER)


class TransportError(ViewlowerError):
    """The daemon cannot be reached, broke the framing, or did not answer in time (exit 3)."""

    exit_code = EXIT_UNREACHABLE


class CallTimeout(TransportError, TimeoutError):
    """No response arrived before the call's deadline."""


class ExportError(ViewlowerError):
    """A model, op or argument that the graph format cannot carry; `path` names the node."""

    exit_code = EXIT_INVALID


class UsageError(ViewlowerError):
    exit_code = EXIT_USAGE
