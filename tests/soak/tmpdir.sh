# tmpdir.sh - sourced by soak.sh and valgrind.sh: a fresh temporary directory in $dir (prefix
# $1), and on exit the daemon in $pid (if one is still running) killed and the directory gone.
dir=$(mktemp -d "/tmp/$1.XXXXXX")
pid=
cleanup() {
  [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
