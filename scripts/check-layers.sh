#!/usr/bin/env bash
# Fails when an #include runs against the layering of the tree (docs/architecture.md):
#   core:  base -> layout -> graph -> plan -> lower -> exec -> wire   (src/<layer>/, include/viewlower/)
#   above: daemon/ and client/ may include the core, never each other; the core includes neither.
# A file may include headers of its own layer or of a layer below it. Public headers belong to
# the layer of the module that defines them (table below). Usage: scripts/check-layers.sh [ROOT]
set -euo pipefail
root=${1:-$(dirname "$0")/..}
cd "$root"

declare -A rank=([base]=0 [layout]=1 [graph]=2 [plan]=3 [lower]=4 [exec]=5 [wire]=6 [daemon]=7 [client]=7)
# Public header -> layer of the module behind it.
declare -A public=(
  [export.h]=base [status.h]=base [buf.h]=base
  [dtype.h]=layout [tensor.h]=layout [layout.h]=layout
  [graph.h]=graph [tensor_json.h]=graph
  [plan.h]=plan
  [lower.h]=lower
  [copy.h]=exec [interp.h]=exec
  [frame.h]=wire [service.h]=wire
  [client.h]=client
)

layer_of_file() { # path -> layer, or empty for files outside the layered tree
  case $1 in
    src/*/*) local l=${1#src/}; echo "${l%%/*}" ;;
    include/viewlower/*) echo "${public[${1##*/}]:-?}" ;;
    daemon/*) echo daemon ;;
    client/*) echo client ;;
  esac
}

layer_of_include() { # include text, including file's dir -> layer, or empty for the same dir
  local inc=$1 dir=$2
  case $inc in
    viewlower/*) echo "${public[${inc#viewlower/}]:-?}" ;;
    */*) local l=${inc%%/*}; [[ -n ${rank[$l]:-} ]] && echo "$l" || echo "?" ;;
    *) [[ $dir == src/* ]] && echo "?" || echo "" ;; # a bare name: the including file's own folder
  esac
}

fail=0
while IFS= read -r f; do
  own=$(layer_of_file "$f")
  [[ -z $own ]] && continue
  if [[ $own == "?" ]]; then
    echo "$f: public header not in the layer table of scripts/check-layers.sh"; fail=1; continue
  fi
  while IFS=: read -r line inc; do
    target=$(layer_of_include "$inc" "$f")
    [[ -z $target ]] && continue
    if [[ $target == "?" ]]; then
      echo "$f:$line: #include \"$inc\" names no layer (use \"<layer>/<file>.h\" or \"viewlower/<file>.h\")"
      fail=1
    elif ((rank[$target] > rank[$own])) || { [[ $own != "$target" ]] && ((rank[$target] == rank[$own])); }; then
      echo "$f:$line: #include \"$inc\": layer $own may not include layer $target"
      fail=1
    fi
  done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
           sed 's/^\([0-9]*\):[^"]*"\([^"]*\)".*/\1:\2/')
done < <(git ls-files 'src/*.c' 'src/*.h' 'include/viewlower/*.h' 'daemon/*.c' 'daemon/*.h' 'client/*.c' 'client/*.h')

if ((fail)); then
  echo "check-layers: includes run against the layering (see docs/architecture.md)"
  exit 1
fi
echo "check-layers: ok"
