#!/usr/bin/env bash
# oldrender.sh SCRIPT RAW OUT: render the raw file RAW with the report code
# of SCRIPT, a scripts/bench from before the report moved to Go, and write
# OUT as that script's write_out did (OUT must not exist). It fills the
# script's arrays (R, WHY, OPL, TRIPS, ...) from RAW the way the run filled
# them, then calls its write_out, so the text comes from the old renderer
# itself; the FUSE request counts go through its trace_stop on a fake trace.
#
#   git show 0165963:scripts/bench >/tmp/bench-old
#   sudo testdata/oldshell/oldrender.sh /tmp/bench-old edge.raw.tsv edge.md
#
# Run it as root with fusermount3, bindfs, git and go installed: the old
# script checks for them before anything else.
#
# shellcheck disable=SC2004,SC2034,SC2154,SC2317 # the arrays and functions are the sourced script's
set -euo pipefail
script=$1 raw=$2 out=$3
[[ ! -e $out ]] || {
	echo "oldrender: $out exists" >&2
	exit 1
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# rows: RAW's rows, the tabs made \x1f so that read keeps empty fields.
rows() { tail -n +2 "$raw" | tr '\t' '\037'; }

unesc() {
	local v=${1//\\\\/$'\x01'}
	v=${v//\\t/$'\t'}
	v=${v//\\n/$'\n'}
	REPLY=${v//$'\x01'/\\}
}

declare -A M=()
while IFS=$'\037' read -r step w t rep metric value unit; do
	[[ $step == meta && -z $t ]] || continue
	unesc "$value"
	M[$metric]=$REPLY
done < <(rows)

# The old script, without its call to main and reading the machine's facts
# from files made from RAW.
sed -e '$d' -e "s|/proc/cpuinfo|$work/cpuinfo|; s|/proc/meminfo|$work/meminfo|" "$script" >"$work/bench"
grep -q '^main "\$@"$' "$script" || {
	echo "oldrender: $script does not end in main \"\$@\"" >&2
	exit 1
}
printf 'model name\t: %s\n' "${M[cpu]}" >"$work/cpuinfo"
printf 'MemTotal:       %s kB\n' "${M[mem_kb]}" >"$work/meminfo"

gap_ms=$(awk -v g="${M[ft_gap]:-1.100}" 'BEGIN { printf "%d", g * 1000 + 0.5 }')
only=none
[[ ${M[bridge]:-} == run ]] && only=""

(
	export BENCH_DIR=$work/dir BENCH_OUT=$out BENCH_SCALE=${M[scale]} BENCH_REPS=${M[reps]} \
		BENCH_COLD_REPS=${M[cold_reps]} BENCH_FT_REPS=${M[ft_reps]} BENCH_GAP_MS=$gap_ms \
		BENCH_TARGETS=${M[targets]} BENCH_ONLY=$only ROOTFS_BASE_LABEL=${M[base_label]:-}
	[[ -n ${M[rootfs_bin]:-} ]] && export ROOTFS_BIN=${M[rootfs_bin]}
	[[ -n ${M[mount_args]:-} ]] && export ROOTFS_MOUNT_ARGS=${M[mount_args]}
	mkdir -p "$BENCH_DIR"
	# shellcheck disable=SC1091
	source "$work/bench"
	set +e

	for k in n_walk:N_WALK n_bigdir:N_BIGDIR n_small:N_SMALL seq_mb:SEQ_MB n_4k:N_4K n_repo:N_REPO n_nm:N_NM n_nmrepo:N_NMREPO; do
		v=${k#*:}
		[[ ${M[${k%%:*}]} == "${!v}" ]] || {
			echo "oldrender: ${k%%:*}=${M[${k%%:*}]} but scale ${M[scale]} gives ${!v}" >&2
			exit 1
		}
	done

	nproc() { echo "${M[cpus]}"; }
	uname() { echo "${M[kernel]}"; }
	findmnt() { if [[ $* == *FSTYPE* ]]; then echo "${M[tree_fs]}"; else echo "${M[tree_source]}"; fi; }
	go() { echo "go version ${M[go_version]} linux/amd64"; }
	bindfs() { echo "bindfs ${M[bindfs_version]}"; }
	git() { echo "${M[git_version]}"; }
	END_TIME=$(command date -u -d "${M[date]}" +%s)
	LOAD_END=${M[load_end]}
	LOAD0=${M[load_start]}
	COMMIT=${M[commit]}
	PT_ARGS=${M[pt_args]}
	WB_ARGS=${M[wb_args]}
	NOFILE=${M[nofile]}
	NOFILE_NOTE=${M[nofile_note]}
	read -ra FT_TARGETS <<<"${M[ft_targets]:-}"
	read -ra TRIP_TARGETS <<<"${M[trip_targets]:-}"
	BRIDGE_NOTE=${M[bridge_note]:-}
	# run_first's labels.
	for t in "${FT_TARGETS[@]}"; do
		[[ $t == run-base ]] && FT_LABEL[$t]="rootfs run, ${ROOTFS_BASE_LABEL:-ROOTFS_BASE_BIN}"
	done
	if [[ ${M[run_strict]:-} == yes ]]; then
		FT_LABEL[run]="rootfs run (kernel path)"
		FT_LABEL[run-strict]="rootfs run --strict"
	else
		FT_LABEL[run]="rootfs run (FUSE path: no --strict yet)"
	fi
	FT_LABEL[run-bind]="rootfs run --bind"

	declare -A TR=() # TR[step|w|t] = "(FUSE_X)" lines of a fake trace
	declare -A NOTFUSE=()
	while IFS=$'\037' read -r step w t rep metric value unit; do
		unesc "$value"
		value=$REPLY
		case $step in
		meta) [[ $metric == down ]] && DOWN[$t]=$value ;;
		warm | cold | first | again)
			if ((rep == 0)); then
				# ft_once native W's warm-up, after which run_first
				# emptied these lists.
				if [[ $step == first && $w != ft_start ]]; then
					[[ $metric == fail ]] && WHY[$w|first|native]=$value
					R[$w|first|native]=""
					R[$w|again|native]=""
					R[ft_start|first|native]=""
				fi
				continue
			fi
			if [[ $metric == time ]]; then
				R[$w|$step|$t]+="$value "
			else
				R[$w|$step|$t]+="fail "
				[[ $step == again ]] || WHY[$w|$step|$t]=$value
			fi
			;;
		oplat) OPL[$w|$t]+="$value " ;;
		mem)
			case $metric in
			VmHWM) MEM[$t]=$value ;;
			VmRSS | fds) MEM[$t]+=" $value" ;;
			esac
			;;
		bridge) BR[$t|$metric]+="$value " ;;
		trips | fttrips)
			TR[$step|$w|$t]+=""
			case $metric in
			FUSE_*) TR[$step|$w|$t]+=$(for ((i = 0; i < value; i++)); do printf '(%s)\n' "$metric"; done) ;;
			lost) TR[$step|$w|$t]+=$'\nCPU:1 [LOST 3 EVENTS]' ;;
			not_fuse) NOTFUSE[$w|$t]=1 ;;
			esac
			TR[$step|$w|$t]+=$'\n'
			;;
		esac
	done < <(rows)

	TRACE=$work/trace
	mkdir -p "$TRACE/events/fuse/fuse_request_send"
	for k in "${!TR[@]}"; do
		IFS='|' read -r step w t <<<"$k"
		printf '%s' "${TR[$k]}" >"$TRACE/trace"
		if [[ $step == trips ]]; then
			TRIPS[$w|$t]=$(trace_stop)
		elif [[ -n ${NOTFUSE[$w|$t]:-} ]]; then
			FTTRIPS[$w|$t]="not a FUSE mount"
		else
			FTTRIPS[$w|$t]=$(trace_stop)
			[[ -n ${FTTRIPS[$w|$t]} ]] || FTTRIPS[$w|$t]=none
		fi
	done
	TRACE=""
	write_out
)
