#!/usr/bin/python3
"""test_completion.py VIEWLOWERCTL SRC_DIR - the bash and zsh completions of viewlowerctl offer
exactly the commands and, per command, exactly the flags `viewlowerctl COMMAND --help` lists,
and the fixed values of --format, --only, --policy and --encoding. bash: the function is
called as bash-completion calls it; zsh (when installed): the file parses (zsh -n) and names
every flag."""
import os
import re
import shutil
import subprocess
import sys

CTL, SRC = sys.argv[1:3]
BASH = os.path.join(SRC, "client", "completion", "viewlowerctl.bash")
ZSH = os.path.join(SRC, "client", "completion", "_viewlowerctl")
COMMANDS = ["validate", "lower", "explain", "verify", "run", "view-copy", "ping", "stats",
            "version", "worker"]
failures = []


def complete(line):
    """COMPREPLY for the command line `line` (the cursor at its end)."""
    words = line.split(" ")
    script = (f"source {BASH}\n"
              f"COMP_WORDS=({' '.join(repr(w) for w in words)})\n"
              f"COMP_CWORD={len(words) - 1}\n"
              "_viewlowerctl\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n")
    p = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], capture_output=True,
                       text=True, timeout=60)
    if p.returncode != 0:
        failures.append(f"{line!r}: bash: {p.stderr}")
    return sorted(x for x in p.stdout.split("\n") if x)


def help_flags(cmd):
    """The flags of the usage lines and of the lines that describe one flag each."""
    lines = subprocess.run([CTL, cmd, "--help"], capture_output=True, text=True).stdout.split("\n")
    usage = [lines[0]] + [ln for ln in lines[1:] if re.match(r"^ {8,}\[", ln)]
    text = " ".join(usage + [ln for ln in lines if re.match(r"^  -", ln)])
    return sorted(set(re.findall(r"(?<![\w-])(--[a-z_][a-z_-]*|-o)\b", text)) | {"--help"})


def check(got, want, what):
    if got != want:
        failures.append(f"{what}: completion {got}, expected {want}")


def main():
    check(complete("viewlowerctl "), sorted(COMMANDS), "commands")
    check(complete("viewlowerctl --local ex"), ["explain"], "after a global flag")
    check(complete("viewlowerctl -"), sorted(["--socket", "--local", "--timeout-ms", "--help",
                                              "--version"]), "global flags")
    for cmd in COMMANDS:
        if cmd == "worker":
            continue  # its flags are those of the commands it runs
        check(complete(f"viewlowerctl {cmd} -"), help_flags(cmd), f"{cmd} flags")
    check(complete("viewlowerctl explain g.json --format "), ["dot", "json", "text"],
          "explain --format")
    check(complete("viewlowerctl stats --format "), ["json", "openmetrics", "prometheus"],
          "stats --format")
    check(complete("viewlowerctl explain g.json --only "),
          ["kept", "merged", "relaid", "removed", "replaced"], "--only")
    check(complete("viewlowerctl lower g.json --policy "), ["legacy", "safe"], "--policy")
    check(complete("viewlowerctl run g.json --encoding "), ["base64", "values"], "--encoding")
    check(complete(f"viewlowerctl validate {SRC}/examples/graphs/patch_to"),
          [f"{SRC}/examples/graphs/patch_tokens.json",
           f"{SRC}/examples/graphs/patch_tokens_skip_dim_order.json"], "files")
    if shutil.which("zsh"):
        p = subprocess.run(["zsh", "-n", ZSH], capture_output=True, text=True)
        if p.returncode != 0:
            failures.append(f"zsh -n: {p.stderr}")
        text = open(ZSH).read()
        for cmd in COMMANDS:
            if f"'{cmd}:" not in text:
                failures.append(f"zsh: command {cmd} missing")
            for flag in help_flags(cmd) if cmd != "worker" else []:
                if f"'{flag}[" not in text and f"{flag}[" not in text:
                    failures.append(f"zsh: {cmd} flag {flag} missing")
    else:
        print("zsh not installed: only the bash completion is run")
    for f in failures:
        print("FAIL", f)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
