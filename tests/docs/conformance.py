#!/usr/bin/python3
"""conformance.py VIEWLOWERD DOC.md... - the docs, run against a real daemon.

Every example of docs/protocol.md and docs/format.md is a fenced block whose info string names
what it is (the convention is stated in protocol.md, "Examples in these pages"):

  ```json request [ATTR...]     the JSON text of one request frame (```text request: any bytes)
  ```json response [ATTR...]    the response the request before it gets
  ```json graph name=N          a graph: `validate` must accept it (kept as N)
  ```json report graph=N        the report of `lower` of graph N
  ```json lowered-node graph=N  a node of `lower` of graph N (matched by its name)
  ```json spec                  a tensor spec: valid as a placeholder's val
  ```json tensor                a tensor: view_copy to its own shape returns its values
  ```sh daemon                  (unused by this test; shown to readers)

Request attributes: payload=HEX (the frame's binary payload), zeros=N (N zero bytes of
payload), magic=TEXT (four bytes instead of VLW1), declare=J,P (a bare header declaring J JSON
and P payload bytes, nothing after it), as=nobody (sent by uid 65534), flags="..." (to a daemon
started with these extra flags), hold (one more connection is kept open while it is sent).
Response attributes: closes (the daemon closes the connection after it), payload=HEX.

A response matches when it is equal to the documented JSON, where the string "…" stands for
any value and a member "…": "…" for any further members. Besides the examples, every statement
of an error code (a paragraph, list item or table row naming −32xxx) must have an example
answering that code in the same section, and every row of protocol.md's error table (code,
kinds) an example per kind; the exceptions (kinds no request can provoke on demand) are listed
below with the reason. Last, the docs are self-contained: README.md, docs/*.md and the man
pages name no file outside the repository (no SPEC sections), and their links resolve.
Exit 0 when all hold, 1 with one line per failure.
"""
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vlwire  # noqa: E402

ANY = "…"
# (code, kind) rows of the error table that no request can provoke on demand: the daemon's own
# failure (an allocation failing, a bug) and the drain after SIGTERM, which answers only
# requests still queued when --drain-timeout-ms passes (the lifecycle integration tests cover
# it with a real daemon under load).
UNPROVOKABLE = {(-32603, "internal"), (-32603, "out_of_memory"), (-32007, "shutting_down")}
UNPROVOKABLE_CODES = {code for code, _ in UNPROVOKABLE}

FENCE = re.compile(r"^[ \t]*```([a-z]+)[ \t]+([a-z-]+)([^\n]*)\n(.*?)^[ \t]*```[ \t]*$",
                   re.S | re.M)
CODE = re.compile(r"[−-](32\d\d\d)")


def attrs_of(text):
    out = {}
    for tok in shlex.split(text):
        k, _, v = tok.partition("=")
        out[k] = v if _ else True
    return out


def shape(doc, got, where):
    """'' when got has doc's members (all of them, unless doc has "…": "…") with values of the
    same JSON type, recursively; numbers are not compared."""
    if isinstance(doc, dict):
        if not isinstance(got, dict):
            return f"{where}: documented an object, got {json.dumps(got)[:80]}"
        for k, v in doc.items():
            if k == ANY:
                continue
            if k not in got:
                return f"{where}/{k}: documented, missing in the response"
            m = shape(v, got[k], f"{where}/{k}")
            if m:
                return m
        more = sorted(set(got) - set(doc))
        if more and doc.get(ANY) != ANY:
            return f"{where}: the response has undocumented members {more}"
        return ""
    numeric = (int, float)
    if isinstance(doc, numeric) and not isinstance(doc, bool):
        ok = isinstance(got, numeric) and not isinstance(got, bool)
    else:
        ok = type(doc) is type(got)
    return "" if ok else f"{where}: documented a {type(doc).__name__}, got {json.dumps(got)}"


def match(doc, got, where):
    """'' when got matches doc, else where it differs."""
    if doc == ANY:
        return ""
    if isinstance(doc, dict):
        if not isinstance(got, dict):
            return f"{where}: documented an object, got {json.dumps(got)[:120]}"
        extra_ok = doc.get(ANY) == ANY
        for k, v in doc.items():
            if k == ANY:
                continue
            if k not in got:
                return f"{where}/{k}: documented, missing in the response"
            m = match(v, got[k], f"{where}/{k}")
            if m:
                return m
        if not extra_ok:
            more = sorted(set(got) - set(doc))
            if more:
                return f"{where}: the response has undocumented members {more}"
        return ""
    if isinstance(doc, list):
        if not isinstance(got, list) or len(got) != len(doc):
            return f"{where}: documented {json.dumps(doc)[:120]}, got {json.dumps(got)[:120]}"
        for i, (a, b) in enumerate(zip(doc, got)):
            m = match(a, b, f"{where}/{i}")
            if m:
                return m
        return ""
    if type(doc) is not type(got) or doc != got:
        return f"{where}: documented {json.dumps(doc)}, got {json.dumps(got)[:200]}"
    return ""


class Daemons:
    """One real viewlowerd per distinct flag set, each on a socket in a temporary directory."""

    def __init__(self, binary, tmp):
        self.binary, self.tmp, self.procs = binary, tmp, {}

    def socket_for(self, flags):
        if flags not in self.procs:
            path = os.path.join(self.tmp, f"d{len(self.procs)}.sock")
            log = open(os.path.join(self.tmp, f"d{len(self.procs)}.log"), "wb")
            p = subprocess.Popen([self.binary, "--socket", path, "--socket-mode", "0666",
                                  "--log-level", "warn"] + shlex.split(flags),
                                 stdout=log, stderr=log)
            for _ in range(600):  # up to 60 s on a loaded machine
                if os.path.exists(path):
                    try:
                        r, _, _ = vlwire.exchange(path, b'{"jsonrpc":"2.0","id":0,"method":"ping"}')
                        if r and "result" in r:
                            break
                    except OSError:
                        pass
                if p.poll() is not None:
                    raise RuntimeError(f"viewlowerd {flags} exited with {p.returncode}")
                time.sleep(0.1)
            self.procs[flags] = (p, path)
        return self.procs[flags][1]

    def stop(self):
        for p, _ in self.procs.values():
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def send_as_nobody(path, body, payload, magic, close_wait):
    """exchange() from a child running as uid/gid 65534; its answer comes back over a pipe."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            r = vlwire.exchange(path, body, payload, magic, close_wait=close_wait)
            os.write(wfd, json.dumps([r[0], r[1].hex(), r[2]]).encode())
        finally:
            os._exit(0)
    os.close(wfd)
    data = b""
    while True:
        chunk = os.read(rfd, 65536)
        if not chunk:
            break
        data += chunk
    os.close(rfd)
    os.waitpid(pid, 0)
    resp, hexpay, closed = json.loads(data)
    return resp, bytes.fromhex(hexpay), closed


def send_declared(path, jlen, plen, close_wait):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(path)
    s.sendall(b"VLW1" + jlen.to_bytes(4, "big") + plen.to_bytes(8, "big"))
    head = vlwire._read_exact(s, 16)
    resp = json.loads(vlwire._read_exact(s, int.from_bytes(head[4:8], "big")))
    s.settimeout(close_wait)
    try:
        closed = s.recv(1) == b""
    except socket.timeout:
        closed = False
    s.close()
    return resp, b"", closed


def run_request(daemons, a, text, closes=False):
    path = daemons.socket_for(a.get("flags", ""))
    body = text.rstrip("\n").encode()
    wait = 30 if closes else 0.5
    payload = bytes.fromhex(a["payload"]) if "payload" in a else b""
    if "zeros" in a:
        payload = bytes(int(a["zeros"]))
    magic = a.get("magic", "VLW1").encode()
    held = None
    for _ in range(600 if "hold" in a else 0):
        # a connection admitted (its ping answered) and kept open; until the daemon has seen
        # an earlier connection close, it may be the one refused, so retry
        held = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        held.settimeout(60)
        held.connect(path)
        held.sendall(vlwire.frame(b'{"jsonrpc":"2.0","id":0,"method":"ping"}'))
        head = vlwire._read_exact(held, 16)
        if len(head) == 16 and b"pong" in vlwire._read_exact(held, int.from_bytes(head[4:8], "big")):
            break
        held.close()
        held = None
        time.sleep(0.1)
    try:
        if "declare" in a:
            j, p = (int(x) for x in a["declare"].split(","))
            return send_declared(path, j, p, wait)
        if a.get("as") == "nobody":
            return send_as_nobody(path, body, payload, magic, wait)
        return vlwire.exchange(path, body, payload, magic, close_wait=wait)
    finally:
        if held is not None:
            held.close()


def rpc(daemons, method, params):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    return vlwire.exchange(daemons.socket_for(""), body)[0]


def sections(md):
    """[(heading, text)] split at ## headings."""
    parts = re.split(r"^(## .*)$", md, flags=re.M)
    out = [("(top)", parts[0])]
    for i in range(1, len(parts), 2):
        out.append((parts[i], parts[i + 1]))
    return out


def statements(text):
    """Paragraphs, list items and table rows outside fenced blocks."""
    text = re.sub(r"^[ \t]*```.*?^[ \t]*```[ \t]*$", "", text, flags=re.S | re.M)
    for para in re.split(r"\n[ \t]*\n", text):
        lines = para.split("\n")
        if lines and lines[0].lstrip().startswith("|"):
            yield from (ln for ln in lines if ln.strip())
            continue
        item = []
        for ln in lines:
            if re.match(r"^\s*[-*] ", ln) and item:
                yield " ".join(item)
                item = []
            item.append(ln.strip())
        if item:
            yield " ".join(item)


def check_doc(daemons, path, failures, seen_errors):
    md = open(path, encoding="utf-8").read()
    name = os.path.basename(path)
    lowered = {}
    n_examples = 0
    # graphs by name, from the whole page: a block may name a graph shown after it
    graphs = {attrs_of(m.group(3)).get("name", ""): json.loads(m.group(4))
              for m in FENCE.finditer(md) if m.group(2) == "graph"}
    for heading, text in sections(md):
        pending = None  # the request block awaiting its response
        answered_codes = set()
        for m in FENCE.finditer(text):
            lang, role, attr_text, body = m.group(1), m.group(2), m.group(3), m.group(4)
            a = attrs_of(attr_text)
            line = md[: md.find(m.group(0))].count("\n") + 1
            where = f"{name}:{line}"
            try:
                if role == "request":
                    pending = (a, body, where)
                elif role == "response":
                    if pending is None:
                        failures.append(f"{where}: a response block with no request before it")
                        continue
                    ra, rbody, rwhere = pending
                    pending = None
                    if ra.get("as") == "nobody" and os.geteuid() != 0:
                        print(f"SKIP {rwhere}: another uid needs root")
                        continue
                    n_examples += 1
                    doc = json.loads(body)
                    got, got_payload, closed = run_request(daemons, ra, rbody,
                                                           bool(a.get("closes")))
                    if got is None:
                        failures.append(f"{rwhere}: no response (connection closed)")
                        continue
                    diff = match(doc, got, "")
                    if diff:
                        failures.append(f"{rwhere}: {diff}")
                    if "payload" in a and got_payload != bytes.fromhex(a["payload"]):
                        failures.append(f"{where}: response payload {got_payload.hex()}, "
                                        f"documented {a['payload']}")
                    if "payload" not in a and got_payload:
                        failures.append(f"{where}: undocumented response payload")
                    if bool(a.get("closes")) != closed:
                        failures.append(f"{where}: the connection was {'' if closed else 'not '}"
                                        "closed after the response, "
                                        f"{'documented' if a.get('closes') else 'not documented'}")
                    err = doc.get("error") if isinstance(doc, dict) else None
                    if isinstance(err, dict):
                        code = err.get("code")
                        kind = err.get("data", {}).get("kind")
                        answered_codes.add(code)
                        seen_errors.add((code, kind))
                elif role == "graph":
                    n_examples += 1
                    g = json.loads(body)
                    r = rpc(daemons, "validate", {"graph": g})
                    if "result" not in r:
                        failures.append(f"{where}: validate refuses the graph: {r.get('error')}")
                elif role in ("report", "lowered-node"):
                    n_examples += 1
                    gname = a.get("graph", "")
                    if gname not in graphs:
                        failures.append(f"{where}: no graph named {gname!r} before it")
                        continue
                    if gname not in lowered:
                        lowered[gname] = rpc(daemons, "lower", {"graph": graphs[gname]})["result"]
                    doc = json.loads(body)
                    if role == "report":
                        got = lowered[gname]["report"]
                    else:
                        got = next((n for n in lowered[gname]["graph"]["nodes"]
                                    if n["name"] == doc.get("name")), None)
                    diff = match(doc, got, "")
                    if diff:
                        failures.append(f"{where}: {diff}")
                elif role == "stats":
                    n_examples += 1
                    diff = shape(json.loads(body), rpc(daemons, "stats", {})["result"], "")
                    if diff:
                        failures.append(f"{where}: {diff}")
                elif role == "client" and lang == "python":
                    n_examples += 1
                    m2 = re.search(r'^print\(call\("([^"]+)".*#\s*(.*)$', body, re.M)
                    if m2 is None:
                        failures.append(f"{where}: no print(call(PATH, ...))  # OUTPUT line")
                        continue
                    code = body.replace(m2.group(1), daemons.socket_for(""))
                    p = subprocess.run([sys.executable, "-c", code], capture_output=True,
                                       text=True, timeout=60)
                    if p.returncode != 0 or p.stdout.strip() != m2.group(2).strip():
                        failures.append(f"{where}: the client prints {p.stdout.strip()!r} "
                                        f"{p.stderr[-200:]}, documented {m2.group(2)!r}")
                elif role == "spec":
                    n_examples += 1
                    spec = json.loads(body)
                    g = {"format": "viewlower.graph", "version": 1, "nodes": [
                        {"name": "x", "op": "placeholder", "val": spec},
                        {"name": "out", "op": "output", "args": ["x"]}]}
                    r = rpc(daemons, "validate", {"graph": g})
                    if "result" not in r:
                        failures.append(f"{where}: the spec is refused: {r.get('error')}")
                elif role == "tensor":
                    n_examples += 1
                    t = json.loads(body)
                    r = rpc(daemons, "view_copy", {"input": t, "size": t["shape"]})
                    if "result" not in r or r["result"]["output"].get("values") != t.get("values"):
                        failures.append(f"{where}: view_copy of the tensor gives {r}")
            except (ValueError, KeyError, TypeError) as e:
                failures.append(f"{where}: {type(e).__name__}: {e}")
        if pending is not None:
            failures.append(f"{pending[2]}: a request block with no response after it")
        for st in statements(text):
            for code in {int("-" + c) for c in CODE.findall(st)}:
                if code not in answered_codes and code not in UNPROVOKABLE_CODES:
                    failures.append(f"{name} {heading}: states error {code} with no example "
                                    f"answering it in the section: {st[:100]}")
    return md, n_examples


def error_table(md):
    """{(code, kind)} from the rows of protocol.md's error table."""
    rows = set()
    for ln in md.splitlines():
        m = re.match(r"^\|\s*[−-](32\d\d\d)\s*\|([^|]*)\|", ln)
        if m:
            for kind in re.findall(r"`([a-z_]+)`", m.group(2)):
                rows.add((-int(m.group(1)), kind))
    return rows


def self_contained(doc_paths, failures):
    """The docs name no file outside the repository: no SPEC sections, no absolute paths into
    a checkout, and every relative link and `docs/….md` mention resolves in the tree."""
    docs_dir = os.path.dirname(os.path.abspath(doc_paths[0]))
    root = os.path.dirname(docs_dir)
    pages = sorted(os.path.join(docs_dir, f) for f in os.listdir(docs_dir) if f.endswith(".md"))
    pages += [os.path.join(root, "README.md")]
    pages += [os.path.join(root, "man", f) for f in ("viewlowerctl.1", "viewlowerd.8")]
    for page in pages:
        text = open(page, encoding="utf-8").read()
        rel = os.path.relpath(page, root)
        for m in re.finditer(r"SPEC ?§|SPEC\.md|/work/", text):
            line = text[: m.start()].count("\n") + 1
            failures.append(f"{rel}:{line}: names a file outside the repository ({m.group(0)})")
        for m in re.finditer(r"\]\(([^)#\s]+)", text):
            target = m.group(1)
            if re.match(r"[a-z]+:", target):
                continue
            if not os.path.exists(os.path.join(os.path.dirname(page), target)):
                failures.append(f"{rel}: link to {target}, which is not in the tree")
        for m in re.finditer(r"(?<![\w/.])(docs/[\w.-]+\.md)", text):
            if not os.path.exists(os.path.join(root, m.group(1))):
                failures.append(f"{rel}: names {m.group(1)}, which is not in the tree")


def main():
    if len(sys.argv) < 3:
        print(__doc__.split("\n")[1], file=sys.stderr)
        return 64
    failures, seen = [], set()
    tmp = tempfile.mkdtemp(prefix="vl-docs-")
    os.chmod(tmp, 0o755)  # uid 65534 must reach the socket to be refused by credentials
    daemons = Daemons(sys.argv[1], tmp)
    table = set()
    total = 0
    try:
        for path in sys.argv[2:]:
            md, n = check_doc(daemons, path, failures, seen)
            total += n
            table |= error_table(md) if path.endswith("protocol.md") else set()
    finally:
        daemons.stop()
    self_contained(sys.argv[2:], failures)
    for code, kind in sorted(table - seen - UNPROVOKABLE):
        failures.append(f"error table: {code} {kind} has no example")
    for code, kind in sorted(seen - table):
        failures.append(f"an example answers {code} {kind}, which the error table does not list")
    for code, kind in sorted(UNPROVOKABLE - table if table else set()):
        failures.append(f"the test exempts {code} {kind}, which the error table does not list")
    for f in failures:
        print("FAIL", f)
    print(f"{total} examples, {len(table)} error kinds in the table, "
          f"{len(seen)} answered by examples, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
