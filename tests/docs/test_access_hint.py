#!/usr/bin/python3
"""test_access_hint.py VIEWLOWERCTL VIEWLOWERD - a user the socket or the daemon keeps out is
told to join the group viewlower: EACCES on connect (socket mode 0600) and -32006 (mode 0666,
uid not admitted), each exit 3 with one error line. Needs root (to run the client as uid
65534); exit 77 (skipped) otherwise."""
import os
import subprocess
import sys
import tempfile
import time

CTL, DAEMON = sys.argv[1:3]
HINT = (" (join the group viewlower: sudo usermod -aG viewlower $USER, then log in again; "
        "see /usr/share/doc/viewlower/deployment.md)\n")


def as_nobody(*args):
    def drop():
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
    p = subprocess.run([CTL, *args], capture_output=True, text=True, timeout=60, preexec_fn=drop)
    return p.returncode, p.stdout, p.stderr


def main():
    if os.geteuid() != 0:
        print("skipped: needs root to run the client as another uid")
        return 77
    tmp = tempfile.mkdtemp(prefix="vl-access-")
    os.chmod(tmp, 0o755)
    sock = os.path.join(tmp, "s")
    d = subprocess.Popen([DAEMON, "--socket", sock, "--socket-mode", "0600", "--log-level",
                          "error"])
    failures = 0
    try:
        for _ in range(600):
            if subprocess.run([CTL, "--socket", sock, "ping"], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        rc, out, err = as_nobody("--socket", sock, "ping")
        want = f"viewlowerctl: cannot connect to {sock}: Permission denied" + HINT
        if (rc, out, err) != (3, "", want):
            print(f"FAIL EACCES: {rc} {out!r} {err!r}")
            failures += 1
        os.chmod(sock, 0o666)
        rc, out, err = as_nobody("--socket", sock, "ping")
        want = "viewlowerctl: uid 65534 is not permitted to use this daemon" + HINT
        if (rc, out, err) != (3, "", want):
            print(f"FAIL -32006: {rc} {out!r} {err!r}")
            failures += 1
        # a refusal of another kind gets no hint
        rc, out, err = as_nobody("--socket", os.path.join(tmp, "none"), "ping")
        if rc != 3 or "join the group" in err:
            print(f"FAIL no socket: {rc} {err!r}")
            failures += 1
    finally:
        d.terminate()
        d.wait(60)
    print(f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
