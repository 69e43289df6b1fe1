#!/usr/bin/python3
"""torch_oracle.py - an outside oracle for viewlower's view_copy kernel: PyTorch.

For channels-last (and a few other) tensors, PyTorch computes reshape / flatten / permute and
viewlowerctl --local view-copy computes the same view_copy from the tensor's *physical* bytes
(sent as base64 "data" with the tensor's dim_order). Every element must agree exactly.

usage: torch_oracle.py PATH/TO/viewlowerctl
Exits 0 when every case agrees, 1 on the first disagreement (with the case named).
"""
import base64
import json
import subprocess
import sys

import torch

DTYPES = {
    torch.float32: "float32",
    torch.float16: "float16",
    torch.int64: "int64",
    torch.uint8: "uint8",
    torch.int16: "int16",
}


def storage_bytes(t, order):
    """t's own storage, which must be laid out in `order`: PyTorch's layout is the ground truth."""
    p = t.permute(*order)
    if not p.is_contiguous():
        raise AssertionError("tensor of strides %s is not in dim order %s" % (t.stride(), order))
    return p.numpy().tobytes()


def dim_order_of(t):
    """Dims by descending stride (ties: ascending dim), the order viewlower spells layouts in."""
    return sorted(range(t.dim()), key=lambda d: (-t.stride()[d], d))


def tensor_json(t, order):
    return {
        "dtype": DTYPES[t.dtype],
        "shape": list(t.shape),
        "dim_order": order,
        "data": base64.b64encode(storage_bytes(t, order)).decode("ascii"),
    }


def view_copy(ctl, t, order, size, out_order=None, encoding="values"):
    cmd = [ctl, "--local", "view-copy", "-", "--size", ",".join(str(s) for s in size),
           "--encoding", encoding]
    if out_order is not None:
        cmd += ["--out-dim-order", ",".join(str(d) for d in out_order)]
    res = subprocess.run(cmd, input=json.dumps(tensor_json(t, order)).encode(),
                         capture_output=True, timeout=120)
    if res.returncode != 0:
        raise RuntimeError("viewlowerctl failed (%d): %s" % (res.returncode, res.stderr.decode()))
    return json.loads(res.stdout)


def distinct(shape, dtype):
    """Distinct values where the dtype allows (a seeded permutation), exactly representable."""
    n = 1
    for s in shape:
        n *= s
    gen = torch.Generator().manual_seed(n * 7919 + len(shape))
    vals = torch.randperm(max(n, 1), generator=gen)[:n]
    if dtype == torch.float16:
        vals = vals % 2048
    elif dtype == torch.uint8:
        vals = vals % 256
    return vals.to(dtype).reshape(shape)


def check_values(name, got, want):
    want_list = [float(v) for v in want.flatten().tolist()]
    got_list = [float(v) for v in got["values"]]
    if list(got["shape"]) != list(want.shape):
        fail(name, "shape %s, PyTorch %s" % (got["shape"], list(want.shape)))
    for k, (g, w) in enumerate(zip(got_list, want_list)):
        if g != w:
            fail(name, "element %d is %r, PyTorch has %r" % (k, g, w))
    if len(got_list) != len(want_list):
        fail(name, "%d values, PyTorch %d" % (len(got_list), len(want_list)))


def fail(name, why):
    print("MISMATCH %s: %s" % (name, why))
    sys.exit(1)


def reshape_cases(ctl):
    cases = [
        ("cl_f32_reshape", (2, 3, 4, 5), torch.float32, torch.channels_last, (2, 3, -1)),
        ("cl_f32_flatten", (2, 8, 3, 3), torch.float32, torch.channels_last, (2, -1)),
        ("cl_f32_one_channel", (2, 1, 3, 4), torch.float32, torch.channels_last, (2, 12)),
        ("cl_u8_rgb", (1, 3, 8, 8), torch.uint8, torch.channels_last, (1, 3, 64)),
        ("cl_f16", (2, 5, 3, 2), torch.float16, torch.channels_last, (2, 5, 6)),
        ("cl_i16_to_4d", (2, 6, 2, 2), torch.int16, torch.channels_last, (2, 3, 2, 4)),
        ("cl3d_i64", (1, 4, 2, 3, 5), torch.int64, torch.channels_last_3d, (1, 4, -1)),
        ("cl3d_f32_flatten", (2, 16, 2, 7, 7), torch.float32, torch.channels_last_3d, (2, -1)),
        ("cl_f32_large", (2, 37, 19, 23), torch.float32, torch.channels_last, (2, 37, -1)),
        ("cl_empty", (0, 3, 2, 2), torch.float32, torch.channels_last, (0, 3, 4)),
    ]
    for name, shape, dtype, fmt, size in cases:
        x = distinct(shape, dtype).contiguous(memory_format=fmt)
        want = x.reshape(size)
        got = view_copy(ctl, x, dim_order_of(x), size)
        check_values(name, got, want)
        print("ok %s" % name)


def permute_case(ctl):
    # The storage of a channels-last NCHW tensor is an NHWC tensor: view_copy of that to
    # (N, H*W, C) is PyTorch's x.permute(0, 2, 3, 1).reshape(N, H*W, C) (patch tokens).
    x = distinct((2, 5, 4, 3), torch.float32).contiguous(memory_format=torch.channels_last)
    nhwc = x.permute(0, 2, 3, 1)
    want = nhwc.reshape(2, 12, 5)
    got = view_copy(ctl, nhwc.contiguous(), [0, 1, 2, 3], (2, 12, 5))
    check_values("permute_tokens", got, want)
    print("ok permute_tokens")


def out_layout_case(ctl):
    # A contiguous input viewed into a channels-last output: the output's physical bytes must be
    # PyTorch's channels-last storage.
    x = distinct((2, 60), torch.float32)
    want = x.reshape(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    got = view_copy(ctl, x, [0, 1], (2, 3, 4, 5), out_order=[0, 2, 3, 1], encoding="base64")
    if got["dim_order"] != [0, 2, 3, 1]:
        fail("out_channels_last", "dim_order %s" % got["dim_order"])
    if base64.b64decode(got["data"]) != storage_bytes(want, [0, 2, 3, 1]):
        fail("out_channels_last", "physical bytes differ from PyTorch's channels-last storage")
    print("ok out_channels_last")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 64
    ctl = sys.argv[1]
    reshape_cases(ctl)
    permute_case(ctl)
    out_layout_case(ctl)
    print("all cases agree with PyTorch %s" % torch.__version__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
