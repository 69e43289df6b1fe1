"""viewlower's Python front end (README, "Lower a torchvision model"): export torch models to
graph JSON, lower them, and check the lowering by replaying it in torch with real aliases.

`viewlower.Client` speaks the wire protocol (standard library only); `viewlower.export`,
`viewlower.replay` and `viewlower.check` need torch and are imported on use.
"""
from .client import Client, RawJSON, default_socket, dumps
from .errors import (CallTimeout, ExportError, RemoteError, TransportError, UsageError,
                     ViewlowerError)

__all__ = ["Client", "RawJSON", "default_socket", "dumps", "ViewlowerError", "RemoteError",
           "TransportError", "CallTimeout", "ExportError", "UsageError"]
__version__ = "0.3.0"
