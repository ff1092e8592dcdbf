# bash completion for hcasim (installed to share/bash-completion/completions/hcasim).
# Options come from `hcasim --help`, presets from `hcasim --list-presets`, --set keys from
# `hcasim --help-config`; the workload names are listed here (hcasim_install_test checks them
# against the program).

_hcasim_workloads="write_lat send_lat read_lat atomic_lat write_bw send_bw read_bw atomic_rate
ud_send_lat ud_send_bw uc_write_bw mcast_bw srq_bw ud_srq_bw mr_scale qp_scale dma_read_bw
dma_write_bw attack_suite rd_send_lat rd_send_bw msg_rate incast alltoall permutation uniform_random bisection hotspot"

# The long options of `hcasim [SUBCOMMAND] --help`: the first --name of each option line.
_hcasim_options() {
    "$@" --help 2>/dev/null | awk '/^  -/ { if (match($0, /--[a-z][a-z-]*/)) print substr($0, RSTART, RLENGTH) }'
}

_hcasim() {
    local cur prev prog="${COMP_WORDS[0]}"
    cur="${COMP_WORDS[COMP_CWORD]}"
    prev="${COMP_WORDS[COMP_CWORD - 1]}"
    local sub=""
    [ "${COMP_CWORD}" -gt 1 ] && sub="${COMP_WORDS[1]}"
    case "$prev" in
    -w | --workload)
        mapfile -t COMPREPLY < <(compgen -W "$_hcasim_workloads" -- "$cur")
        return ;;
    -c | --config)
        mapfile -t COMPREPLY < <(compgen -W "$("$prog" --list-presets 2>/dev/null | cut -d' ' -f1)" -- "$cur")
        mapfile -t -O "${#COMPREPLY[@]}" COMPREPLY < <(compgen -f -X '!*.ini' -- "$cur")
        mapfile -t -O "${#COMPREPLY[@]}" COMPREPLY < <(compgen -d -- "$cur")
        return ;;
    -s | --set)
        compopt -o nospace 2>/dev/null
        mapfile -t COMPREPLY < <(compgen -W "$("$prog" --help-config 2>/dev/null | awk '/^  [a-z]/ {print $1 "="}')" -- "$cur")
        return ;;
    --atomic)
        mapfile -t COMPREPLY < <(compgen -W "fetch_add cmp_swap" -- "$cur")
        return ;;
    -m | --mtu)
        mapfile -t COMPREPLY < <(compgen -W "256 512 1024 2048 4096" -- "$cur")
        return ;;
    --sweep)
        # size, qps, threads or any configuration key (--help-config)
        compopt -o nospace 2>/dev/null
        mapfile -t COMPREPLY < <(compgen -W "size= qps= threads= $("$prog" --help-config 2>/dev/null | awk '/^  [a-z]/ {print $1 "="}')" -- "$cur")
        return ;;
    -j | --jobs)
        mapfile -t COMPREPLY < <(compgen -W "1 2 4 8 $(nproc 2>/dev/null)" -- "$cur")
        return ;;
    --sweep-index)  # a point's index, from 0
        mapfile -t COMPREPLY < <(compgen -W "0" -- "$cur")
        return ;;
    --stats-json | --record | --timeline | --waves | --dump-topology | --report | --pcap)
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        return ;;
    esac
    if [ "${COMP_CWORD}" -eq 1 ] && [[ "$cur" != -* ]]; then
        mapfile -t COMPREPLY < <(compgen -W "serve replay compare sweep-merge" -- "$cur")
        return
    fi
    case "$sub" in
    sweep-merge)  # OUT.json POINT.json...
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        return ;;
    serve | replay | compare)
        [[ "$cur" == -* ]] &&
            mapfile -t COMPREPLY < <(compgen -W "$(_hcasim_options "$prog" "$sub")" -- "$cur")
        [[ "$cur" != -* ]] && mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        return ;;
    esac
    mapfile -t COMPREPLY < <(compgen -W "$(_hcasim_options "$prog")" -- "$cur")
}
complete -F _hcasim hcasim
