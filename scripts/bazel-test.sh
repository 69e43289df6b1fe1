#!/usr/bin/env bash
# The Bazel stage: builds and tests examples/bazel offline with Debian's bazel-bootstrap (4.2),
# and checks what docs/build-systems.md promises:
#   cold_build        every graph lowered (two exported from PyTorch models by the front end);
#                     the lowering actions ran in the worker
#   one_worker        one `viewlowerctl worker` process served every lowering action (its log)
#   same_as_cli       each target's lowered graph + report is `viewlowerctl --local lower`'s
#                     result with the target's options, byte for byte
#   noop_build        a second build runs no action
#   cache_hit         after `bazel clean`, every action of the build is a cache hit (disk cache)
#   verify_tests      `bazel test //...`: every viewlower_verify test passes
#   no_worker         with workers off, the lowering actions run one process each, and every
#                     output has the same bytes
#   worker_again      the same lowering actions run again in the worker (for the timings)
# Each check prints {"check":NAME,"ok":true|false,...}; timings follow as {"bazel_timings":...}
# (measured side by side in one run; noisy on a shared machine); the last line is
# "bazel: N passed, N failed". Bazel's output root and caches live in a temporary directory and
# the server is shut down at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
if ! command -v bazel >/dev/null; then
  echo "bazel-test: no bazel on PATH (scripts/install-deps.sh installs bazel-bootstrap)" >&2
  exit 1
fi
echo "== bazel (bazel-bootstrap $(dpkg-query -W -f='${Version}' bazel-bootstrap 2>/dev/null ||
  echo '?'), examples/bazel, offline)"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vl-bazel.XXXXXX")
bz() { (cd "$repo/examples/bazel" && bazel --output_user_root="$tmp/root" --max_idle_secs=900 "$@"); }
cleanup() {
  bz shutdown >/dev/null 2>&1 || true
  chmod -R u+w "$tmp" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
flags=(--symlink_prefix="$tmp/out/" --color=no --curses=no)
passed=0
failed=0

check() { # NAME OK [extra JSON members]
  local ok=$2
  [[ $ok == true ]] && passed=$((passed + 1)) || failed=$((failed + 1))
  echo "{\"check\":\"$1\",\"ok\":$ok${3:+,$3}}"
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# Runs bazel ARGS with its output in $tmp/NAME.log; sets rc and ms; the log's tail on failure.
run() {
  local name=$1 t0
  shift
  t0=$(now_ms)
  rc=0
  bz "$@" >"$tmp/$name.log" 2>&1 || rc=$?
  ms=$(($(now_ms) - t0))
  if ((rc != 0)); then
    echo "bazel-test: bazel $* exited $rc:" >&2
    tail -40 "$tmp/$name.log" >&2
  fi
}
# The "N processes: ..." summary line of a run, e.g. "55 processes: 16 internal, 39 worker.".
processes() { sed -n 's/^INFO: \([0-9]* process.*\)\.$/\1/p' "$tmp/$1.log" | tail -1; }
# How many processes of a kind the summary counts ("worker", "remote cache hit", ...).
count() { processes "$1" | grep -o "[0-9]* $2" | grep -o '^[0-9]*' || echo 0; }
# The 32 lowering actions of //bench in a JSON profile (all ready at once, when viewlowerctl is
# linked): "MEDIAN SPAN_PER_ACTION" in ms. The median is of each action's own duration (for the
# multiplexed worker it includes waiting for a free slot in the worker); the span is first start
# to last end over all of them, divided by their number.
action_ms() {
  (grep '"name":"Lowering [^"]* into bench/' "$1" 2>/dev/null || true) | sed 's/.*"ts":\([0-9]*\),"dur":\([0-9]*\).*/\1 \2/' | sort -k2 -n |
    awk '{ts[NR] = $1; d[NR] = $2; e = $1 + $2; if (NR == 1 || $1 < lo) lo = $1; if (e > hi) hi = e}
      END {if (NR) printf "%.1f %.1f", d[int((NR + 1) / 2)] / 1000, (hi - lo) / NR / 1000}'
}
# The Bazel build must be the CMake build's version.
want=$(sed -n 's/^project(viewlower VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
have=$(sed -n 's/^VL_VERSION = "\(.*\)"$/\1/p' bazel/version.bzl)
check version "$([[ -n $want && $want == "$have" ]] && echo true || echo false)" \
  "\"cmake\":\"$want\",\"bazel\":\"$have\""

targets=(//... @viewlower//:viewlowerctl)
run cold build "${flags[@]}" --disk_cache="$tmp/cache" "${targets[@]}"
cold_ms=$ms
lowerings=$( (bz query 'kind(viewlower_lower, //...)' 2>/dev/null || true) | wc -l)
workers=$(count cold worker)
check cold_build "$([[ $rc == 0 && $lowerings -gt 0 && $workers == "$lowerings" ]] && echo true ||
  echo false)" "\"lowering_actions\":$lowerings,\"processes\":\"$(processes cold)\""

# The worker's log: one file per worker process, one line per request it served.
logs=$(bz info output_base 2>/dev/null || true)/bazel-workers
nlogs=$( (find "$logs" -name '*ViewlowerLower*.log' 2>/dev/null || true) | wc -l)
served=$( (cat "$logs"/*ViewlowerLower*.log 2>/dev/null || true) | grep -c '^viewlowerctl worker (pid' || true)
pids=$( (cat "$logs"/*ViewlowerLower*.log 2>/dev/null || true) |
  sed -n 's/^viewlowerctl worker (pid \([0-9]*\)).*/\1/p' | sort -u | wc -l)
check one_worker "$([[ $nlogs == 1 && $pids == 1 && $served == "$lowerings" ]] && echo true ||
  echo false)" "\"worker_logs\":$nlogs,\"worker_pids\":$pids,\"requests_served\":$served"

# Byte for byte what the CLI prints: {"graph":G,"report":R} from G and R, for every
# viewlower_lower target of the workspace, with the options its attributes give.
lower_targets() { # "PACKAGE|NAME|GRAPH LABEL|CLI FLAGS", one line per target
  (bz query --output=build 'kind(viewlower_lower, //...)' 2>/dev/null || true) | awk '
    /^# \// { p = $2; sub(/.*examples\/bazel\/?/, "", p); sub(/\/?BUILD\.bazel:.*/, "", p) }
    /^  name = / { n = $3; gsub(/[",]/, "", n); f = "" }
    /^  graph = / { g = $3; gsub(/[",]/, "", g) }
    /^  remove_view_copy = False/ { f = f " --keep-view-copy" }
    /^  fold = False/ { f = f " --no-fold" }
    /^  policy = / { v = $3; gsub(/[",]/, "", v); f = f " --policy " v }
    /^\)/ { print p "|" n "|" g "|" f }'
}
graph_path() { # a graph label of the workspace -> the file
  case $1 in
    @viewlower//:*) echo "$repo/${1#@viewlower//:}" ;;
    //:*) if [[ -f examples/bazel/${1#//:} ]]; then echo "examples/bazel/${1#//:}"; else
      echo "$tmp/out/bin/${1#//:}.json"; fi ;;
  esac
}
ctl="$tmp/out/bin/external/viewlower/viewlowerctl"
same=true
compared=0
while IFS="|" read -r pkg name label target_opts; do
  out="$tmp/out/bin/${pkg:+$pkg/}$name" g=$(graph_path "$label")
  read -ra opt <<<"$target_opts"
  compared=$((compared + 1))
  if [[ ! -f $out.json || ! -f $out.report.json || ! -f $g ]] ||
    ! cmp -s <(printf '{"graph":%s,"report":%s}\n' "$(cat "$out.json")" "$(cat "$out.report.json")") \
      <("$ctl" --local lower "$g" "${opt[@]}"); then
    echo "bazel-test: $out.json/.report.json differ from viewlowerctl --local lower $g ${opt[*]}" >&2
    same=false
  fi
done < <(lower_targets)
[[ $compared == "$lowerings" ]] || same=false
check same_as_cli "$same" "\"targets\":$compared"
(find "$tmp/out/bin/" -maxdepth 2 -name '*.json' | sort | xargs -r sha256sum || true) >"$tmp/worker.sums"

run noop build "${flags[@]}" --disk_cache="$tmp/cache" "${targets[@]}"
noop_ms=$ms
check noop_build "$([[ $rc == 0 && $(processes noop) =~ ^[01]\ process.*(internal)?$ &&
  ! $(processes noop) =~ worker|sandbox|local ]] && echo true || echo false)" \
  "\"processes\":\"$(processes noop)\""

bz clean >/dev/null 2>&1
run cached build "${flags[@]}" --disk_cache="$tmp/cache" "${targets[@]}"
cached_ms=$ms
hits=$(count cached "remote cache hit")
check cache_hit "$([[ $rc == 0 && $hits -gt $lowerings && ! $(processes cached) =~ worker|sandbox|local ]] &&
  echo true || echo false)" "\"cache_hits\":$hits,\"processes\":\"$(processes cached)\""

run test test "${flags[@]}" --disk_cache="$tmp/cache" //...
ntests=$( (bz query 'tests(//...)' 2>/dev/null || true) | wc -l)
passing=$(sed -n 's/^Executed [0-9]* out of [0-9]* tests\{0,1\}: \([0-9]*\) tests\{0,1\} pass.*/\1/p' \
  "$tmp/test.log")
check verify_tests "$([[ $rc == 0 && $ntests -gt 0 && $passing == "$ntests" ]] && echo true ||
  echo false)" "\"tests\":$ntests,\"passing\":${passing:-0}"

# Lowering alone, with workers off and on: after `bazel clean` every other action comes from the
# disk cache, and the lowering actions are never cached (+no-cache), so they all run.
lower_again=(--disk_cache="$tmp/cache" --modify_execution_info=ViewlowerLower=+no-cache)
bz clean >/dev/null 2>&1
run noworker build "${flags[@]}" "${lower_again[@]}" --strategy=ViewlowerLower=processwrapper-sandbox \
  --profile="$tmp/noworker.profile.json" "${targets[@]}"
noworker_ms=$ms
(find "$tmp/out/bin/" -maxdepth 2 -name '*.json' | sort | xargs -r sha256sum || true) >"$tmp/noworker.sums"
check no_worker "$([[ $rc == 0 && $(count noworker worker) == 0 &&
  $(count noworker processwrapper-sandbox) == "$lowerings" ]] &&
  cmp -s "$tmp/worker.sums" "$tmp/noworker.sums" && echo true || echo false)" \
  "\"processes\":\"$(processes noworker)\""
bz clean >/dev/null 2>&1
run workeragain build "${flags[@]}" "${lower_again[@]}" --profile="$tmp/worker.profile.json" \
  "${targets[@]}"
worker_ms=$ms
check worker_again "$([[ $rc == 0 && $(count workeragain worker) == "$lowerings" ]] && echo true ||
  echo false)" "\"processes\":\"$(processes workeragain)\""

read -r w_med w_span <<<"$(action_ms "$tmp/worker.profile.json")"
read -r s_med s_span <<<"$(action_ms "$tmp/noworker.profile.json")"
printf '{"bazel_timings":{"cold_build_ms":%s,"noop_build_ms":%s,"cached_build_after_clean_ms":%s,%s}}\n' \
  "$cold_ms" "$noop_ms" "$cached_ms" \
  "$(printf '"lowering_only_build_ms":{"worker":%s,"no_worker":%s},"lowering_actions":%s,' \
    "$worker_ms" "$noworker_ms" "$lowerings")$(printf '"bench_lower_action_ms":{"worker":{"median":%s,"span_per_action":%s},' \
    "${w_med:-0}" "${w_span:-0}")$(printf '"no_worker":{"median":%s,"span_per_action":%s}}' \
    "${s_med:-0}" "${s_span:-0}")"
echo "bazel: $passed passed, $failed failed"
((failed == 0))
