# bash completion for viewlowerctl (installed as share/bash-completion/completions/viewlowerctl).
# Commands, their flags and the flags' fixed values, as `viewlowerctl COMMAND --help` lists them;
# files for GRAPH, TENSOR, --inputs and -o.
_viewlowerctl() {
  local cur prev words cword
  if declare -F _init_completion >/dev/null; then
    _init_completion || return
  else
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    words=("${COMP_WORDS[@]}")
    cword=$COMP_CWORD
  fi
  local commands="validate lower explain verify run view-copy ping stats version worker"
  local lower_flags="--keep-view-copy --no-fold --no-param-layouts --plan --plan-alignment --policy"
  local cmd="" i
  for ((i = 1; i < cword; i++)); do
    case ${words[i]} in
      --socket | --timeout-ms) ((i++)) ;;
      -*) ;;
      *) cmd=${words[i]}; break ;;
    esac
  done
  case $prev in
    --socket | --inputs | -o)
      COMPREPLY=($(compgen -f -- "$cur")); compopt -o filenames 2>/dev/null; return ;;
    --timeout-ms | --seed | --size | --out-dim-order | --plan-alignment) COMPREPLY=(); return ;;
    --policy) COMPREPLY=($(compgen -W "safe legacy" -- "$cur")); return ;;
    --encoding) COMPREPLY=($(compgen -W "values base64" -- "$cur")); return ;;
    --only) COMPREPLY=($(compgen -W "replaced kept merged removed relaid" -- "$cur")); return ;;
    --format)
      if [[ $cmd == stats ]]; then
        COMPREPLY=($(compgen -W "json openmetrics prometheus" -- "$cur"))
      else
        COMPREPLY=($(compgen -W "text json dot" -- "$cur"))
      fi
      return ;;
  esac
  local flags
  case $cmd in
    "") flags="--socket --local --timeout-ms --help --version"
        if [[ $cur != -* ]]; then COMPREPLY=($(compgen -W "$commands" -- "$cur")); return; fi ;;
    validate) flags="--help" ;;
    lower) flags="-o $lower_flags --help" ;;
    explain) flags="$lower_flags --format --only --help" ;;
    verify) flags="--inputs --seed $lower_flags --help" ;;
    run) flags="--inputs -o --encoding --help" ;;
    view-copy) flags="--size --out-dim-order -o --encoding --help" ;;
    stats) flags="--format --help" ;;
    ping | version) flags="--help" ;;
    worker) flags="--persistent_worker --help" ;;
  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
  else
    case $cmd in
      ping | stats | version) COMPREPLY=() ;;
      *) COMPREPLY=($(compgen -f -- "$cur")); compopt -o filenames 2>/dev/null ;;
    esac
  fi
}
complete -F _viewlowerctl viewlowerctl
