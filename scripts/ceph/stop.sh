#!/usr/bin/env bash
# Stops the daemons scripts/ceph/start.sh started under DIR: each by the pid in its pid file,
# SIGTERM first, SIGKILL after 10 s, then up to 5 s for the kernel to take it down (at most 30 s
# in all). Exits 0 when none is left running; DIR is kept.
set -uo pipefail

if [ $# -ne 1 ]; then echo "usage: $0 DIR" >&2; exit 2; fi
run="$1/run"
[ -d "$run" ] || exit 0

# Whether PID runs (a zombie does not: an exited daemon stays one until its parent, often
# pid 1 here, reaps it, and kill -0 still succeeds on it). Bash alone, no process per check.
running() {
  local stat
  { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
  stat="${stat##*) }" # the state follows the command name, which may hold spaces and ')'
  stat="${stat%% *}"
  [ -n "$stat" ] && [ "$stat" != Z ] && [ "$stat" != X ]
}

# Waits up to $1 seconds, by the clock, until none of the other arguments runs; those still
# running are left in `alive`. (The wait was once a count of 100 rounds of 0.1 s; each round
# spawned a process per pid, and on a busy machine "10 s" lasted 40 to 50 s, past the 30 s the
# test helper gives this script.)
alive=()
wait_gone() {
  local until_us=$((${EPOCHREALTIME/[.,]/} + $1 * 1000000)) pid
  shift
  while :; do
    alive=()
    for pid in "$@"; do running "$pid" && alive+=("$pid"); done
    [ ${#alive[@]} -eq 0 ] && return 0
    [ "${EPOCHREALTIME/[.,]/}" -ge "$until_us" ] && return 1
    sleep 0.1
  done
}

# Pids from the pid files matching GLOB whose process still runs a Ceph daemon binary
# (a stale pid may have been reused by something else).
live_pids() {
  local pid_file pid
  for pid_file in "$run"/$1.pid; do
    [ -e "$pid_file" ] || continue
    pid="$(cat "$pid_file")"
    if [ -n "$pid" ] && running "$pid" && grep -qaE '(ceph-(mon|mgr|osd)|radosgw)' "/proc/$pid/cmdline" 2>/dev/null; then
      echo "$pid"
    fi
  done
}

stop_pids() {
  local pid
  [ $# -eq 0 ] && return 0
  kill -TERM "$@" 2>/dev/null
  wait_gone 10 "$@" && return 0
  for pid in "${alive[@]}"; do echo "ceph: pid $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)) still running 10 s after SIGTERM: killed" >&2; done
  kill -KILL "${alive[@]}" 2>/dev/null
  # A killed daemon is gone once the kernel has freed its memory (the OSD's memstore: GiBs).
  wait_gone 5 "${alive[@]}" && return 0
  for pid in "${alive[@]}"; do echo "ceph: pid $pid still running" >&2; done
  return 1
}

# The monitor last: an OSD stopping without one waits 5 s to report itself down. The monitor is
# stopped even when another daemon could not be.
mapfile -t others < <(live_pids 'client.*'; live_pids 'osd.*'; live_pids 'mgr.*')
mapfile -t monitors < <(live_pids 'mon.*')
status=0
stop_pids "${others[@]}" || status=1
stop_pids "${monitors[@]}" || status=1
exit "$status"
