#!/usr/bin/python3
"""compare.py - the figures of scripts/bench.sh in one run: viewlower-bench's copy cases next to
PyTorch (copy_ on 1 thread and on all threads) and NumPy (copyto) on the same cases, the
lowering figures, and the daemon against in-process and plain-socket baselines.

Usage: compare.py BUILD_DIR [--quick] [--level L]

For each copy case, viewlower-bench measures ours, memcpy and the naive loop (interleaved
rounds, bench/bench.c) and right after it this script measures the same copy in PyTorch and
NumPy (interleaved rounds, each sample a batch moving >= 4 MiB, one untimed call first), so the
columns of a case are taken within seconds of each other. A library without the case's dtype
gets null. Then viewlowerd is started on a temporary socket, with the --worker-nice of the
shipped unit (systemd/viewlowerd.service), so the daemon measured is the one a system runs:
viewlower-bench --daemon measures the in-process and blob figures, viewlower-load the socket
rate of small lowers. The figures carry the flag as "worker_nice".

Prints one JSON object: viewlower-bench's (docs/kernels.md, Benchmark), each copy entry with torch_gbps, torch_all_gbps,
numpy_gbps (medians; *_best_gbps from the fastest sample) and their ratios to memcpy, plus
"daemon": {lower_small_rps_socket (clients corked), lower_small_rps_socket_uncorked,
lower_small_rps_inprocess, blob_64mib_roundtrip_gbps,
socket_echo_gbps, ...}.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
except ImportError:  # the columns are null without it
    np = None
try:
    import torch
except ImportError:
    torch = None

TORCH_DTYPES = {} if torch is None else {
    "uint8": torch.uint8, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32,
    "int64": torch.int64, "float16": torch.float16, "bfloat16": torch.bfloat16,
    "float32": torch.float32, "float64": torch.float64, "bool": torch.bool,
}
NUMPY_DTYPES = {} if np is None else {
    "uint8": np.uint8, "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
    "float16": np.float16, "float32": np.float32, "float64": np.float64, "bool": np.bool_,
}
SAMPLE_BYTES = 4 << 20


def inverse(order):
    inv = [0] * len(order)
    for pos, dim in enumerate(order):
        inv[dim] = pos
    return inv


def torch_pair(case):
    """(src, dst view, op) in PyTorch for one case, or None."""
    dt = TORCH_DTYPES.get(case["dtype"])
    if dt is None:
        return None
    shape, order = case["shape"], case["in_dim_order"]
    oshape, oorder = case["out_shape"], case["out_dim_order"]
    n = 1
    for s in shape:
        n *= s
    phys = torch.arange(n, dtype=torch.int64).remainder(251).to(dt)
    src = phys.reshape([shape[d] for d in order]).permute(inverse(order))
    dst = torch.empty([oshape[d] for d in oorder], dtype=dt).permute(inverse(oorder))
    dst.fill_(1)
    if list(oshape) != list(shape):
        if not dst.is_contiguous():
            return None
        dst = dst.view(shape)
    return lambda: dst.copy_(src)


def numpy_pair(case):
    dt = NUMPY_DTYPES.get(case["dtype"])
    if dt is None:
        return None
    shape, order = case["shape"], case["in_dim_order"]
    oshape, oorder = case["out_shape"], case["out_dim_order"]
    n = 1
    for s in shape:
        n *= s
    phys = (np.arange(n, dtype=np.int64) % 251).astype(dt)
    src = phys.reshape([shape[d] for d in order]).transpose(inverse(order))
    dst = np.ones([oshape[d] for d in oorder], dtype=dt).transpose(inverse(oorder))
    if list(oshape) != list(shape):
        if not dst.flags["C_CONTIGUOUS"]:
            return None
        dst = dst.reshape(shape)  # a view of the contiguous output
    return lambda: np.copyto(dst, src)


def measure(methods, nbytes, rounds):
    """Seconds per call, {name: (median, min)}, methods sampled in rotating order."""
    batch = max(1, SAMPLE_BYTES // max(nbytes, 1))
    names = [m for m in methods if methods[m] is not None]
    samples = {m: [] for m in names}
    for m in names:
        methods[m][1]()
    for r in range(rounds):
        for j in range(len(names)):
            m = names[(j + r) % len(names)]
            setup, fn = methods[m]
            setup()
            t0 = time.perf_counter()
            for _ in range(batch):
                fn()
            samples[m].append((time.perf_counter() - t0) / batch)
    out = {}
    for m in names:
        v = sorted(samples[m])
        med = v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
        out[m] = (med, v[0])
    return out


def library_columns(case, quick):
    nbytes = case["bytes"]
    rounds = 7 if quick else (21 if nbytes > (8 << 20) else 41)
    all_threads = os.cpu_count() or 1
    methods = {"torch": None, "torch_all": None, "numpy": None}
    if torch is not None:
        op = torch_pair(case)
        if op is not None:
            methods["torch"] = (lambda: torch.set_num_threads(1), op)
            methods["torch_all"] = (lambda: torch.set_num_threads(all_threads), op)
    if np is not None:
        op = numpy_pair(case)
        if op is not None:
            methods["numpy"] = (lambda: None, op)
    times = measure(methods, nbytes, rounds)
    for m in ("torch", "torch_all", "numpy"):
        if m in times:
            med, best = times[m]
            case[m + "_gbps"] = nbytes / med / 1e9
            case[m + "_best_gbps"] = nbytes / best / 1e9
            case[m + "_vs_memcpy"] = case[m + "_gbps"] / case["memcpy_gbps"]
        else:
            case[m + "_gbps"] = None
    if torch is not None:
        torch.set_num_threads(all_threads)
    case["library_repeats"] = rounds
    return case


def run_json(args):
    out = subprocess.run(args, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out)


def unit_worker_nice():
    """The --worker-nice=N of the shipped unit's ExecStart (0 when it sets none)."""
    unit = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "systemd",
                        "viewlowerd.service")
    with open(unit, encoding="utf-8") as f:
        for line in f:
            if line.startswith("ExecStart="):
                for arg in line.split():
                    if arg.startswith("--worker-nice="):
                        return int(arg.split("=", 1)[1])
    return 0


def daemon_figures(build, quick, bench_args):
    tmp = tempfile.mkdtemp(prefix="viewlower-bench-")
    sock = os.path.join(tmp, "viewlower.sock")
    nice = unit_worker_nice()
    daemon = subprocess.Popen([os.path.join(build, "daemon", "viewlowerd"), "--socket", sock,
                               "--log-level", "warn", "--worker-nice", str(nice)])
    try:
        for _ in range(200):
            if os.path.exists(sock):
                break
            time.sleep(0.02)
        figures = run_json(bench_args + ["--no-copy", "--no-lower", "--daemon", sock])["daemon"]
        clients = 16
        load_args = [os.path.join(build, "tools", "viewlower-load"), "--socket", sock,
                     "--clients", str(clients), "--pipeline", "4", "--kinds", "lower",
                     "--duration-ms", "1000" if quick else "3000", "--timeout-ms", "60000"]
        load = run_json(load_args)
        # the same clients each writing every request alone (no vl_client_cork), side by side
        uncorked = run_json(load_args + ["--no-cork"])
        figures["worker_nice"] = nice
        figures["lower_small_rps_socket"] = load["requests_per_s"]
        figures["socket_clients"] = clients
        figures["lower_small_rps_socket_uncorked"] = uncorked["requests_per_s"]
        figures["socket_unexpected"] = sum(r["unexpected"] + r["lost"] + r["transport_errors"]
                                           for r in (load, uncorked))
        inproc = figures["lower_small_rps_inprocess"]
        figures["socket_vs_inprocess"] = (load["requests_per_s"] / inproc) if inproc > 0 else None
        blob, echo = figures.get("blob_64mib_roundtrip_gbps"), figures.get("socket_echo_gbps")
        figures["blob_vs_echo"] = blob / echo if blob and echo else None
        tblob = figures.get("blob_64mib_transposed_roundtrip_gbps")
        figures["blob_transposed_vs_echo"] = tblob / echo if tblob and echo else None
        return figures
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv):
    if not argv or argv[0].startswith("-"):
        sys.stderr.write(__doc__)
        return 64
    build, rest = argv[0], argv[1:]
    quick = "--quick" in rest
    bench = [os.path.join(build, "bench", "viewlower-bench")]
    bench_args = bench + rest
    names = subprocess.run(bench + ["--list-copy-cases"], check=True, stdout=subprocess.PIPE,
                           text=True).stdout.split()
    root = None
    copies = []
    for name in names:
        one = run_json(bench_args + ["--copy-case", name])
        root = root or {"copy_level": one["copy_level"]}
        copies.extend(library_columns(c, quick) for c in one["copy"])
    rest_json = run_json(bench_args + ["--no-copy", "--split-copy"])  # lowering, the split copy
    root["copy"] = copies
    root["split_copy"] = rest_json["split_copy"]
    root["lower"] = rest_json["lower"]
    root["daemon"] = daemon_figures(build, quick, bench_args)
    root["libraries"] = {
        "torch": None if torch is None else torch.__version__,
        "torch_threads_all": os.cpu_count(),
        "numpy": None if np is None else np.__version__,
    }
    json.dump(root, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
