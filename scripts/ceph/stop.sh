#!/usr/bin/env bash
# Stops the daemons scripts/ceph/start.sh started under DIR: each by the pid in its pid file,
# SIGTERM first, SIGKILL after 10 s. Exits 0 when none is left running; DIR is kept.
set -uo pipefail

if [ $# -ne 1 ]; then echo "usage: $0 DIR" >&2; exit 2; fi
run="$1/run"
[ -d "$run" ] || exit 0

# Whether PID runs (a zombie does not: an exited daemon stays one until its parent, often
# pid 1 here, reaps it, and kill -0 still succeeds on it).
running() {
  local state
  state="$(sed -E 's/^.*\) ([A-Za-z]).*$/\1/' "/proc/$1/stat" 2>/dev/null)" || return 1
  [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
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
  local pids=("$@") alive pid
  [ ${#pids[@]} -eq 0 ] && return 0
  kill -TERM "${pids[@]}" 2>/dev/null
  for _ in $(seq 1 100); do
    alive=()
    for pid in "${pids[@]}"; do running "$pid" && alive+=("$pid"); done
    [ ${#alive[@]} -eq 0 ] && return 0
    sleep 0.1
  done
  kill -KILL "${alive[@]}" 2>/dev/null
  sleep 0.2
  for pid in "${alive[@]}"; do
    if running "$pid"; then echo "ceph: pid $pid still running" >&2; return 1; fi
  done
}

# The monitor last: an OSD stopping without one waits 5 s to report itself down.
mapfile -t others < <(live_pids 'client.*'; live_pids 'osd.*'; live_pids 'mgr.*')
mapfile -t monitors < <(live_pids 'mon.*')
stop_pids "${others[@]}" && stop_pids "${monitors[@]}"
