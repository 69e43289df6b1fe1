#!/usr/bin/python3
"""test_explain.py VIEWLOWERCTL VIEWLOWERD DOT EXAMPLES_DIR - `viewlowerctl explain --format
text|json|dot` and `--only`, through a real viewlowerd and with --local (which must agree).

The dot output of the examples is rendered by Graphviz's `dot` (it must parse, and the SVG must
hold every node); the JSON is checked value by value against the decisions of those graphs.
The relaid-parameter and memory-plan parts of the report are checked with the real library
(both modes), and a stand-in server on a socket gives reports with a field missing or
mistyped, which explain must name by its pointer."""
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET

CTL, DAEMON, DOT, EX = sys.argv[1:5]
EX = os.path.join(EX, "graphs")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL", what)


def run(*args, stdin=None):
    p = subprocess.run([CTL, *args], input=stdin, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def both(sock, *args):
    """The same command --local and through the daemon: must print the same bytes."""
    local = run("--local", *args)
    remote = run("--socket", sock, *args)
    check(local == remote, f"{args}: --local and the daemon differ:\n{local}\n{remote}")
    return local


def render(dot_text, what):
    p = subprocess.run([DOT, "-Tsvg"], input=dot_text, capture_output=True, text=True,
                       timeout=120)
    check(p.returncode == 0 and p.stderr == "", f"{what}: dot -Tsvg failed: {p.stderr}")
    if p.returncode != 0:
        return None
    root = ET.fromstring(p.stdout)  # the SVG is XML: it must parse
    # the texts drawn: each node's label lines (its name first)
    return [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]


def nodes_by_name(doc):
    return {n["name"]: n for n in doc["nodes"]}


def test_examples(sock):
    # channel_shuffle: groups and shuffled replaced, swapped kept (reorders), packed removed.
    rc, out, err = both(sock, "explain", os.path.join(EX, "channel_shuffle.json"),
                        "--format", "json")
    check(rc == 0 and err == "", f"channel_shuffle json: rc {rc} {err}")
    doc = json.loads(out)
    n = nodes_by_name(doc)
    check(doc["graph"] == "channel_shuffle", "graph name")
    check([k for k in n] == ["x", "act", "groups", "swapped", "packed", "shuffled", "y", "out"],
          f"node order {list(n)}")
    want = {"groups": "replaced", "swapped": "kept", "packed": "removed", "shuffled": "replaced"}
    got = {k: v["decision"] for k, v in n.items() if "decision" in v}
    check(got == want, f"decisions {got}")
    check(n["swapped"]["reasons"] == ["reorders"] and n["swapped"]["base"] == "act",
          f"swapped {n['swapped']}")
    check(all(n[k]["nbytes"] == 128 for k in ("x", "act", "groups", "swapped", "packed")),
          "nbytes 128 (1x8x2x2 float32)")
    check("nbytes" not in n["out"], "the output node has no bytes")
    check(n["groups"]["alias_of"] == "act" and n["shuffled"]["alias_of"] == "swapped",
          "alias_of from the lowered graph")
    alias = sorted((e["from"], e["to"]) for e in doc["edges"] if e["kind"] == "alias")
    check(alias == [("groups", "act"), ("shuffled", "swapped")], f"alias edges {alias}")
    data = [(e["from"], e["to"]) for e in doc["edges"] if e["kind"] == "data"]
    check(data == [("x", "act"), ("act", "groups"), ("groups", "swapped"), ("swapped", "packed"),
                   ("packed", "shuffled"), ("shuffled", "y"), ("y", "out")], f"data {data}")
    check("decisions" not in doc["report"] and doc["report"]["bytes_copied"] == 128 and
          doc["report"]["bytes_saved"] == 384, f"report {doc['report']}")

    # --only kept: swapped, with its neighbours as context
    rc, out, _ = both(sock, "explain", os.path.join(EX, "channel_shuffle.json"),
                      "--format", "json", "--only", "kept")
    doc = json.loads(out)
    ctx = {x["name"]: x.get("context", False) for x in doc["nodes"]}
    check(ctx == {"groups": True, "swapped": False, "packed": True, "shuffled": True},
          f"--only kept nodes {ctx}")
    check(sorted((e["from"], e["to"], e["kind"]) for e in doc["edges"]) ==
          [("groups", "swapped", "data"), ("shuffled", "swapped", "alias"),
           ("swapped", "packed", "data")], f"--only kept edges {doc['edges']}")

    # patch_tokens: one clone replaced, flat and tokens removed, nothing copied
    rc, out, _ = both(sock, "explain", os.path.join(EX, "patch_tokens.json"), "--format", "json")
    doc = json.loads(out)
    got = {x["name"]: x["decision"] for x in doc["nodes"] if "decision" in x}
    check(got == {"tokens_c": "replaced", "flat": "removed", "tokens": "removed"},
          f"patch_tokens decisions {got}")
    check(doc["report"]["bytes_copied"] == 0 and doc["report"]["bytes_saved"] == 3072,
          f"patch_tokens report {doc['report']}")

    for name in ("patch_tokens", "channel_shuffle"):
        rc, out, err = both(sock, "explain", os.path.join(EX, name + ".json"), "--format", "dot")
        check(rc == 0 and out.startswith(f'digraph "{name}" {{'), f"{name} dot: {rc} {err}")
        titles = render(out, name) or []
        graph = json.load(open(os.path.join(EX, name + ".json")))
        for node in graph["nodes"]:
            check(node["name"] in titles, f"{name}: node {node['name']} not in the SVG")
        # the pictures of docs/pictures (README) are this output, rendered
        pic = os.path.join(os.path.dirname(EX), "..", "docs", "pictures", name)
        check(open(pic + ".dot").read() == out, f"docs/pictures/{name}.dot is stale: "
              f"viewlowerctl --local explain examples/graphs/{name}.json --format dot")
        svg_texts = [t.text for t in ET.parse(pic + ".svg").getroot().iter(
            "{http://www.w3.org/2000/svg}text")]
        check(svg_texts == titles, f"docs/pictures/{name}.svg is not the rendering of its .dot")
    rc, out, _ = both(sock, "explain", os.path.join(EX, "channel_shuffle.json"), "--format", "dot")
    check('  n3 [label="swapped\\ntranspose_copy\\nkept: reorders\\ncopies 128 B", '
          'fillcolor="#ffcdd2"];' in out, "swapped's dot line")
    check('  n2 -> n1 [style=dashed, color="#2e7d32", constraint=false, '
          'label="alias of"];' in out, "the alias edge of groups")

    # text --only: the rows of one decision, no totals; removed: the dead line alone
    rc, out, _ = both(sock, "explain", os.path.join(EX, "channel_shuffle.json"), "--only", "kept")
    check(out.splitlines()[:2] == ["NODE     BASE  DECISION  REASONS",
                                   "swapped  act   kept      reorders"] and
          "layout-only" not in out, f"text --only kept:\n{out}")
    rc, out, _ = both(sock, "explain", os.path.join(EX, "channel_shuffle.json"),
                      "--only", "removed")
    check(out == "removed as dead: packed\n", f"text --only removed: {out!r}")

    # usage errors (64) before anything is read
    for args, msg in ((("--format", "svg"), "--format svg: use text, json or dot"),
                      (("--only", "dead"), "--only dead: use replaced, kept, merged, removed or "
                                           "relaid")):
        rc, out, err = run("--local", "explain", "/nonexistent.json", *args)
        check(rc == 64 and msg in err and out == "", f"{args}: {rc} {err}")


def test_traced_graph(sock):
    """Swin-T as traced (tests/data): the JSON's decisions agree with the report's counters
    (52 weights relaid),
    every merged copy has its strided read, every replaced node its alias edge."""
    path = os.path.join(os.path.dirname(EX), "..", "tests", "data", "swin_t_edge.json")
    rc, out, err = both(sock, "explain", path, "--format", "json")
    doc = json.loads(out)
    r = doc["report"]
    count = {}
    for n in doc["nodes"]:
        count[n.get("decision")] = count.get(n.get("decision"), 0) + 1
    check((count.get("replaced"), count.get("kept"), count.get("merged"), count.get("removed"),
           count.get("relaid")) ==
          (r["replaced"], r["kept"], r["merged"], r["removed_dead"], r["params_relaid"]) ==
          (371, 90, 12, 199, 52), f"swin_t decisions {count} against the report {r}")
    reads = {e["from"] for e in doc["edges"] if e["kind"] == "reads"}
    aliases = {e["from"] for e in doc["edges"] if e["kind"] == "alias"}
    merged = {n["name"] for n in doc["nodes"] if n.get("decision") == "merged"}
    replaced = {n["name"] for n in doc["nodes"] if n.get("decision") == "replaced"}
    check(reads == merged, f"strided reads {sorted(reads ^ merged)[:5]}")
    check(replaced <= aliases, f"replaced without an alias edge {sorted(replaced - aliases)[:5]}")
    rc, out, err = both(sock, "explain", path, "--format", "dot")
    render(out, "swin_t")


REAL_LINEAR = {"format": "viewlower.graph", "version": 1, "name": "linear", "nodes": [
    {"name": "x", "op": "placeholder", "val": {"dtype": "float32", "shape": [2, 4]}},
    {"name": "p_w", "op": "placeholder", "kind": "parameter",
     "val": {"dtype": "float32", "shape": [3, 4]}},
    {"name": "w_t", "op": "call_function", "target": "aten.t_copy.default", "args": ["p_w"],
     "val": {"dtype": "float32", "shape": [4, 3]}},
    {"name": "y", "op": "call_function", "target": "aten.mm.default", "args": ["x", "w_t"],
     "val": {"dtype": "float32", "shape": [2, 3]}},
    {"name": "p_e", "op": "placeholder", "kind": "parameter",
     "val": {"dtype": "float32", "shape": [3, 2]}},
    {"name": "e_t", "op": "call_function", "target": "aten.t_copy.default", "args": ["p_e"],
     "val": {"dtype": "float32", "shape": [2, 3]}},
    {"name": "z", "op": "call_function", "target": "aten.add.Tensor", "args": ["y", "e_t"],
     "val": {"dtype": "float32", "shape": [2, 3]}},
    {"name": "u", "op": "call_function", "target": "aten.relu.default", "args": ["p_e"],
     "val": {"dtype": "float32", "shape": [3, 2]}},
    {"name": "out", "op": "output", "args": ["z", "u"]}]}

REAL_TEXT = """NODE  BASE  DECISION  REASONS
w_t   p_w   replaced  -
  [t_copy] aliases p_w: every element keeps its memory offset and nothing writes
  the storage while the view is read; saves 48 bytes
e_t   p_e   kept      reorders
  [t_copy] no strided alias of p_e puts every element where e_t's declared
  dim_order [0,1] wants it

PARAM  DIM_ORDER  WAS    BYTES         ALIASED
p_w    [1,0]      [0,1]  48            1

parameters that keep their declared layout although a reader copies:
  p_e keeps its declared layout: u reads it with an op that is not layout-only

2 layout-only nodes: 1 replaced, 1 kept, 0 merged, 0 removed as dead
0 of them view_copy; 0 bases normalized; 48 bytes saved, 24 bytes still copied
1 parameter relaid (stored in the dim order their readers want)
"""


def test_relaid_real(sock, tmp):
    """A weight read through t_copy is relaid (p_w); one also read by relu keeps its layout
    (p_e): the library's own report, in every format."""
    path = os.path.join(tmp, "linear.json")
    json.dump(REAL_LINEAR, open(path, "w"))
    rc, out, err = both(sock, "explain", path)
    check(rc == 0 and out == REAL_TEXT, f"relaid text:\n{out}{err}")
    rc, out, _ = both(sock, "explain", path, "--only", "relaid")
    check(out == REAL_TEXT.split("\n\n")[1] + "\n\n" + REAL_TEXT.split("\n\n")[2] + "\n",
          f"--only relaid:\n{out!r}")
    rc, out, _ = both(sock, "explain", path, "--format", "json")
    n = nodes_by_name(json.loads(out))
    check(n["p_w"].get("decision") == "relaid" and n["p_w"]["dim_order"] == [1, 0] and
          n["p_w"]["was"] == [0, 1] and n["p_w"]["aliased"] == 1 and n["p_w"]["nbytes"] == 48,
          f"p_w {n['p_w']}")
    check("decision" not in n["p_e"] and n["p_e"]["not_relaid"]["blockers"] ==
          [{"node": "u", "reason": "read_by_op"}], f"p_e {n['p_e']}")
    check(n["w_t"]["alias_of"] == "p_w" and n["e_t"]["decision"] == "kept", "w_t, e_t")
    rc, out, _ = both(sock, "explain", path, "--format", "dot")
    check('  n1 [label="p_w\\nrelaid [1,0] (was [0,1])\\n48 B", shape=ellipse, '
          'fillcolor="#bbdefb"];' in out, f"p_w in dot:\n{out}")
    check('  n4 [label="p_e\\nkeeps its layout", shape=ellipse];' in out, f"p_e in dot:\n{out}")
    render(out, "relaid")
    # with the memory plan (format.md section 9): its figures after the totals, mem_offset on
    # the planned nodes (x, y, e_t, z, u: the user input and every computed buffer)
    rc, out, err = both(sock, "explain", path, "--plan")
    check(rc == 0 and out == REAL_TEXT + "memory plan: arena 96 bytes for 5 buffers (lower bound "
          "96 bytes, one buffer each\n  160 bytes), offsets aligned to 16\n", f"plan text:\n{out}")
    rc, out, _ = both(sock, "explain", path, "--plan", "--format", "json")
    doc = json.loads(out)
    offsets = {n["name"]: n["mem_offset"] for n in doc["nodes"] if "mem_offset" in n}
    check(offsets == {"x": 0, "y": 32, "e_t": 0, "z": 64, "u": 0}, f"mem_offsets {offsets}")
    check(doc["report"]["plan"] == {"arena_bytes": 96, "lower_bound_bytes": 96,
                                    "naive_bytes": 160, "planned": 5, "alignment": 16},
          f"plan {doc['report'].get('plan')}")
    rc, out, _ = both(sock, "explain", path, "--plan", "--format", "dot")
    check('  n3 [label="y\\nmm\\narena @32"];' in out and
          "memory plan: arena 96 bytes (lower bound 96, one buffer each 160)" in out,
          f"plan in dot:\n{out}")
    render(out, "plan")
    rc, out, _ = both(sock, "explain", path, "--no-param-layouts", "--format", "json")
    n = nodes_by_name(json.loads(out))
    check(n["w_t"]["decision"] == "kept" and "decision" not in n["p_w"],
          f"--no-param-layouts: {n['w_t']}")


def test_odd_names(sock, tmp):
    """Quotes, backslashes and control characters in names: dot still parses."""
    g = {"format": "viewlower.graph", "version": 1, "name": 'we"ird\\', "nodes": [
        {"name": 'x"1', "op": "placeholder", "val": {"dtype": "float32", "shape": [2, 3]}},
        {"name": "v\\\n", "op": "call_function", "target": "aten.view_copy.default",
         "args": ['x"1', [6]], "val": {"dtype": "float32", "shape": [6]}},
        {"name": "r", "op": "call_function", "target": "aten.relu.default", "args": ["v\\\n"],
         "val": {"dtype": "float32", "shape": [6]}},
        {"name": "out", "op": "output", "args": ["r"]}]}
    path = os.path.join(tmp, "odd.json")
    json.dump(g, open(path, "w"))
    rc, out, err = both(sock, "explain", path, "--format", "dot")
    titles = render(out, "odd names") or []
    check('x"1' in titles and "v\\?" in titles, f"odd names in the SVG: {titles}")


# ---- a stand-in server for reports with param_layouts and plan (docs/format.md §3, §9) ----

def serve_once(path, result):
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)

    def loop():
        conn, _ = srv.accept()
        head = b""
        while len(head) < 16:
            head += conn.recv(16 - len(head))
        jlen, plen = struct.unpack(">IQ", head[4:])
        body = b""
        while len(body) < jlen + plen:
            body += conn.recv(jlen + plen - len(body))
        req = json.loads(body[:jlen])
        resp = json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": result}).encode()
        conn.sendall(b"VLW1" + struct.pack(">IQ", len(resp), 0) + resp)
        conn.close()
        srv.close()

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    return t


GRAPH = {"format": "viewlower.graph", "version": 1, "name": "linear", "nodes": [
    {"name": "x", "op": "placeholder", "val": {"dtype": "float32", "shape": [2, 4]}},
    {"name": "p_w", "op": "placeholder", "kind": "parameter",
     "val": {"dtype": "float32", "shape": [3, 4]}},
    {"name": "w_t", "op": "call_function", "target": "aten.t_copy.default", "args": ["p_w"],
     "val": {"dtype": "float32", "shape": [4, 3]}},
    {"name": "y", "op": "call_function", "target": "aten.mm.default", "args": ["x", "w_t"],
     "val": {"dtype": "float32", "shape": [2, 3]}},
    {"name": "out", "op": "output", "args": ["y"]}]}
LOWERED = json.loads(json.dumps(GRAPH))
LOWERED["nodes"][1]["val"]["dim_order"] = [1, 0]
LOWERED["nodes"][2].update({"target": "memory.view", "args": ["p_w", [4, 3]], "alias_of": "p_w"})
LOWERED["nodes"][0]["mem_offset"] = 0
LOWERED["nodes"][3]["mem_offset"] = 32
REPORT = {"view_copy_nodes": 0, "layout_copy_nodes": 1, "replaced": 1, "kept": 0, "merged": 0,
          "removed_dead": 0, "normalized": 0, "bytes_saved": 48, "bytes_copied": 0,
          "params_relaid": 1,
          "param_layouts": [{"node": "p_w", "dim_order": [1, 0], "was": [0, 1], "nbytes": 48,
                             "aliased": 1}],
          "plan": {"arena_bytes": 64, "lower_bound_bytes": 56, "naive_bytes": 64, "planned": 2,
                   "alignment": 16},
          "decisions": [{"node": "w_t", "target": "aten.t_copy.default", "base": "p_w",
                         "decision": "replaced", "reasons": [],
                         "message": "aliases p_w: every element keeps its memory offset"}]}

TEXT = """NODE  BASE  DECISION  REASONS
w_t   p_w   replaced  -
  [t_copy] aliases p_w: every element keeps its memory offset

PARAM  DIM_ORDER  WAS    BYTES         ALIASED
p_w    [1,0]      [0,1]  48            1

1 layout-only nodes: 1 replaced, 0 kept, 0 merged, 0 removed as dead
0 of them view_copy; 0 bases normalized; 48 bytes saved, 0 bytes still copied
1 parameter relaid (stored in the dim order their readers want)
memory plan: arena 64 bytes for 2 buffers (lower bound 56 bytes, one buffer each
  64 bytes), offsets aligned to 16
"""


def test_relaid_and_plan(tmp):
    gpath = os.path.join(tmp, "linear.json")
    json.dump(GRAPH, open(gpath, "w"))
    result = {"graph": LOWERED, "report": REPORT}

    def ask(*args):
        sock = os.path.join(tmp, f"stand-in-{time.monotonic_ns()}.sock")
        t = serve_once(sock, result)
        r = run("--socket", sock, "explain", gpath, *args)
        t.join(30)
        return r

    rc, out, err = ask()
    check(rc == 0 and out == TEXT, f"relaid/plan text:\n{out}\n{err}")
    rc, out, _ = ask("--only", "relaid")
    check(out == "PARAM  DIM_ORDER  WAS    BYTES         ALIASED\n"
                 "p_w    [1,0]      [0,1]  48            1\n", f"--only relaid:\n{out}")
    rc, out, _ = ask("--format", "json")
    n = nodes_by_name(json.loads(out))
    check(n["p_w"]["decision"] == "relaid" and n["p_w"]["dim_order"] == [1, 0] and
          n["p_w"]["was"] == [0, 1] and n["p_w"]["aliased"] == 1 and n["p_w"]["nbytes"] == 48,
          f"relaid node {n['p_w']}")
    check(n["x"]["mem_offset"] == 0 and n["y"]["mem_offset"] == 32 and "mem_offset" not in n["w_t"],
          "mem_offset from the lowered graph")
    rc, out, _ = ask("--format", "dot")
    check('  n1 [label="p_w\\nrelaid [1,0] (was [0,1])\\n48 B", shape=ellipse, '
          'fillcolor="#bbdefb"];' in out, f"relaid dot node:\n{out}")
    check("memory plan: arena 64 bytes (lower bound 56, one buffer each 64)" in out, "plan label")
    render(out, "relaid/plan")
    # a report whose plan lacks a figure is named by its pointer (exit 3)
    broken = json.loads(json.dumps(REPORT))
    del broken["plan"]["lower_bound_bytes"]
    result = {"graph": LOWERED, "report": broken}
    rc, out, err = ask()
    check(rc == 3 and out == "" and err == "viewlowerctl: the lower result has no "
          "/report/plan/lower_bound_bytes (a whole number)\n", f"broken plan: {rc} {err}")
    broken = json.loads(json.dumps(REPORT))
    broken["param_layouts"][0]["was"] = [0, 17]
    result = {"graph": LOWERED, "report": broken}
    rc, out, err = ask()
    check(rc == 3 and err == "viewlowerctl: the lower result has no "
          "/report/param_layouts/0/was (dims 0 to 15)\n", f"broken param_layouts: {rc} {err}")


def main():
    tmp = tempfile.mkdtemp(prefix="vl-explain-")
    sock = os.path.join(tmp, "d.sock")
    d = subprocess.Popen([DAEMON, "--socket", sock, "--log-level", "warn"])
    try:
        for _ in range(600):
            if run("--socket", sock, "ping")[0] == 0:
                break
            time.sleep(0.1)
        test_examples(sock)
        test_odd_names(sock, tmp)
        test_traced_graph(sock)
        test_relaid_real(sock, tmp)
        test_relaid_and_plan(tmp)
    finally:
        d.terminate()
        d.wait(60)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
