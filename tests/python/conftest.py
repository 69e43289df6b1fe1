"""Fixtures of the Python front end's tests: a real viewlowerd on a temporary socket (from the
CMake build, or $VIEWLOWERD), viewlowerctl for --local ($VIEWLOWERCTL), and a session cache of
built models and exported graphs, so that each model is built and traced once per layout."""
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))

import viewlower  # noqa: E402

try:
    import torch
    torch.set_num_threads(1)  # as `check` does: one op order, runs comparable bit for bit
except ImportError:
    pass


def _binary(env: str, rel: str) -> str:
    path = os.environ.get(env) or os.path.join(ROOT, "build", rel)
    if not os.access(path, os.X_OK):
        pytest.skip(f"{path} not built (set {env})")
    return path


def pytest_configure(config):
    config.addinivalue_line("markers", "zoo: a torchvision model of the zoo (slow)")


def pytest_collection_modifyitems(config, items):
    """Zoo tests grouped by model (each model is built and traced once, see test_zoo)."""
    mod = sys.modules.get("test_zoo")
    order = list(getattr(mod, "ZOO", {}))

    def key(item):
        params = getattr(getattr(item, "callspec", None), "params", {})
        name = params.get("name")
        if item.module is not mod or name not in order:
            return (0, 0)
        return (1, order.index(name))

    items[:] = [it for _, it in sorted(enumerate(items), key=lambda p: (key(p[1]), p[0]))]


def pytest_terminal_summary(terminalreporter):
    """The zoo's figures, one row per exported graph that was checked."""
    mod = sys.modules.get("test_zoo")
    rows = getattr(mod, "SUMMARIES", {}) if mod else {}
    if not rows:
        return
    w = terminalreporter
    w.section("viewlower zoo")
    plans = getattr(mod, "PLANS", {})
    w.line(f"{'graph':40} {'nodes':>6} {'layout':>6} {'repl':>5} {'kept':>5} {'merged':>6} "
           f"{'dead':>5} {'bytes saved':>12} {'bytes copied':>13} {'relaid':>6} "
           f"{'arena':>10} {'lower bnd':>10} {'naive':>10}")
    for name, s in rows.items():
        p = plans.get(name, {})
        w.line(f"{name:40} {s.nodes:6} {s.layout_copies:6} {s.replaced:5} {s.kept:5} "
               f"{s.merged:6} {s.removed_dead:5} {s.bytes_saved:12} {s.bytes_copied:13} "
               f"{s.params_relaid if s.params_relaid is not None else '-':>6} "
               f"{p.get('arena_bytes', '-'):>10} {p.get('lower_bound_bytes', '-'):>10} "
               f"{p.get('naive_bytes', '-'):>10}")


@pytest.fixture(scope="session")
def viewlowerctl():
    return _binary("VIEWLOWERCTL", "client/viewlowerctl")


@contextlib.contextmanager
def _viewlowerd(*args: str):
    """A viewlowerd started with args on a temporary socket, whose path this yields once it
    answers a ping; stopped with SIGTERM afterwards, and its exit status must be 0."""
    exe = _binary("VIEWLOWERD", "daemon/viewlowerd")
    d = tempfile.mkdtemp(prefix="vl-py-")
    sock = os.path.join(d, "vl.sock")
    proc = subprocess.Popen([exe, "--socket", sock, "--log-level", "warn", *args],
                            stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with viewlower.Client(sock, timeout=5) as c:
                    c.ping()
                break
            except viewlower.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"viewlowerd did not come up (status {proc.poll()})")
                time.sleep(0.05)
        yield sock
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
        shutil.rmtree(d, ignore_errors=True)
        assert rc == 0, f"viewlowerd exited with {rc}"


@pytest.fixture(scope="session")
def daemon():
    """The socket path of a viewlowerd started for this session."""
    with _viewlowerd("--workers", "2") as sock:
        yield sock


@pytest.fixture
def start_daemon():
    """_viewlowerd, for a test that needs a daemon with options of its own."""
    return _viewlowerd


@pytest.fixture(scope="session")
def lowerer(daemon):
    from viewlower.lowering import Lowerer
    low = Lowerer(socket=daemon, timeout=300)
    yield low
    low.close()
