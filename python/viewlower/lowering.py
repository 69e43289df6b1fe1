"""Lowering a graph through viewlowerd (Client) or in-process through `viewlowerctl --local`.

`viewlowerctl` is found, in this order: the path given (`--viewlowerctl`), `$VIEWLOWERCTL`, the
build tree next to the package (`<source>/build/client/viewlowerctl`), the installed binary next
to the package's prefix (`<prefix>/bin/viewlowerctl`), then `PATH`.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any, Dict, List, Optional

from .client import Client, dumps
from .errors import EXIT_INVALID, RemoteError, TransportError, UsageError, ViewlowerError


def find_viewlowerctl(given: Optional[str] = None) -> str:
    if given:
        return given
    env = os.environ.get("VIEWLOWERCTL")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.path.join(here, "..", "..", "build", "client", "viewlowerctl")]
    prefix = here
    for _ in range(5):  # <prefix>/lib/python3/dist-packages/viewlower → <prefix>
        prefix = os.path.dirname(prefix)
        candidates.append(os.path.join(prefix, "bin", "viewlowerctl"))
    for c in candidates:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return os.path.normpath(c)
    found = shutil.which("viewlowerctl")
    if found:
        return found
    raise UsageError("viewlowerctl not found: give --viewlowerctl PATH or set VIEWLOWERCTL "
                     "(needed by --local)")


def options_of(policy: Optional[str] = None, fold: bool = True, remove_view_copy: bool = True,
               param_layouts: bool = True, plan: bool = False,
               plan_alignment: Optional[int] = None) -> Dict[str, Any]:
    """The lowering options that differ from the defaults (docs/format.md §3, "Options":
    `param_layouts` true, `plan` false)."""
    opts: Dict[str, Any] = {}
    if not remove_view_copy:
        opts["remove_view_copy"] = False
    if policy is not None and policy != "safe":
        opts["policy"] = policy
    if not fold:
        opts["fold"] = False
    if not param_layouts:
        opts["param_layouts"] = False
    if plan:
        opts["plan"] = True
        if plan_alignment is not None:
            opts["plan_alignment"] = plan_alignment
    return opts


def _ctl_flags(opts: Dict[str, Any]) -> List[str]:
    flags = []
    if opts.get("remove_view_copy") is False:
        flags.append("--keep-view-copy")
    if opts.get("fold") is False:
        flags.append("--no-fold")
    if opts.get("param_layouts") is False:
        flags.append("--no-param-layouts")
    if opts.get("plan"):
        flags.append("--plan")
        if "plan_alignment" in opts:
            flags += ["--plan-alignment", str(opts["plan_alignment"])]
    if "policy" in opts:
        flags += ["--policy", opts["policy"]]
    return flags


class Lowerer:
    """lower(graph) → {"graph", "report"}, through the daemon or `viewlowerctl --local`."""

    def __init__(self, local: bool = False, socket: Optional[str] = None,
                 viewlowerctl: Optional[str] = None, timeout: Optional[float] = 120.0):
        self.local = local
        self.socket = socket
        self.timeout = timeout
        self.ctl = find_viewlowerctl(viewlowerctl) if local else None
        self._client: Optional[Client] = None

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def lower(self, graph: Any, opts: Dict[str, Any]) -> dict:
        text = graph if isinstance(graph, str) else dumps(graph)
        if self.local:
            return self._lower_local(text, opts)
        if self._client is None:
            self._client = Client(self.socket, timeout=self.timeout)
        try:
            return self._client.lower(text, **opts)
        except RemoteError as e:
            raise _relative_to_graph(e)

    def lower_many(self, texts: List[str], opts: Dict[str, Any]) -> List[Any]:
        """Every graph lowered; through the daemon they are pipelined on one connection.
        Each entry is a result or the RemoteError of that graph."""
        if self.local:
            out: List[Any] = []
            for t in texts:
                try:
                    out.append(self._lower_local(t, opts))
                except ViewlowerError as e:
                    out.append(e)
            return out
        if self._client is None:
            self._client = Client(self.socket, timeout=self.timeout)
        c = self._client
        ids = [c.send("lower", {"graph": _raw(t), "options": opts}) for t in texts]
        results: List[Any] = []
        for rid in ids:
            try:
                results.append(c.receive(rid))
            except RemoteError as e:
                results.append(_relative_to_graph(e))
        return results

    def _lower_local(self, text: str, opts: Dict[str, Any]) -> dict:
        cmd = [self.ctl, "--local", "lower", "-"] + _ctl_flags(opts)
        try:
            p = subprocess.run(cmd, input=text.encode(), capture_output=True,
                               timeout=self.timeout)
        except subprocess.TimeoutExpired:
            raise TransportError(f"{self.ctl} --local lower timed out")
        except OSError as e:
            raise UsageError(f"{self.ctl}: {e.strerror or e}")
        if p.returncode != 0:
            line = p.stderr.decode(errors="replace").strip().splitlines()
            msg = line[-1] if line else f"exit {p.returncode}"
            if msg.startswith("viewlowerctl: -: "):  # the graph went in on standard input
                msg = msg[len("viewlowerctl: -: "):]
            err = ViewlowerError(msg, kind="viewlowerctl")
            err.exit_code = p.returncode if p.returncode in (2, 3, 4, 64) else EXIT_INVALID
            raise err
        return json.loads(p.stdout)


def _relative_to_graph(e: RemoteError) -> RemoteError:
    """The error's pointer relative to the graph file, as viewlowerctl prints it."""
    if e.path and (e.path == "/graph" or e.path.startswith("/graph/")):
        e.path = e.path[len("/graph"):]
    return e


def _raw(text: str) -> Any:
    from .client import RawJSON
    return RawJSON(text)
