#!/usr/bin/env bash
# A single-node Ceph cluster serving S3 through radosgw, for tests and benches (issue 19):
# mon + mgr + one OSD on memstore (bytes in the OSD's memory) + radosgw, all state under DIR,
# loopback only, on free ports, with cephx keyrings (radosgw with auth = none cannot
# authenticate to the monitor). Needs Debian's ceph-mon ceph-mgr ceph-osd radosgw ceph-common.
#
#   scripts/ceph/start.sh DIR     prints one JSON line: endpoint, keys, pids, dir
#   scripts/ceph/stop.sh DIR      stops every daemon started here (by pid) and keeps DIR
#
# CEPH_MEMSTORE_BYTES (default 2 GiB) is the OSD's capacity; memstore holds all of it in RAM.
set -euo pipefail

if [ $# -ne 1 ]; then echo "usage: $0 DIR" >&2; exit 2; fi
mkdir -p "$1"
dir="$(cd "$1" && pwd)"
here="$(cd "$(dirname "$0")" && pwd)"
memstore_bytes="${CEPH_MEMSTORE_BYTES:-2147483648}"

for tool in ceph ceph-authtool monmaptool ceph-mon ceph-mgr ceph-osd radosgw radosgw-admin; do
  command -v "$tool" >/dev/null || { echo "ceph: $tool not installed (apt-get install ceph-mon ceph-mgr ceph-osd radosgw ceph-common)" >&2; exit 3; }
done

# Any failure from here on stops what was started, so a failed start leaves no process behind.
started=""
step="setup"
on_exit() {
  local status=$?
  if [ "$status" -ne 0 ]; then echo "ceph: start failed at step \"$step\" (exit $status); logs in $dir/log" >&2; fi
  if [ "$status" -ne 0 ] && [ -n "$started" ]; then
    "$here/stop.sh" "$dir" >&2 || true
  fi
}
trap on_exit EXIT

# Free loopback ports, chosen by the kernel (python3 comes with ceph-common).
read -r mon_v2_port mon_v1_port rgw_port < <(/usr/bin/python3 -c '
import socket
socks = [socket.socket() for _ in range(3)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])
for s in socks: s.close()')

mkdir -p "$dir/run" "$dir/log" "$dir/mon.a" "$dir/mgr.x" "$dir/osd.0"
conf="$dir/ceph.conf"
keyring="$dir/keyring"
fsid="$(uuidgen)"

cat >"$conf" <<EOF
[global]
fsid = $fsid
mon host = [v2:127.0.0.1:$mon_v2_port,v1:127.0.0.1:$mon_v1_port]
public network = 127.0.0.0/8
public addr = 127.0.0.1
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
keyring = $keyring
run dir = $dir/run
admin socket = $dir/run/\$name.asok
pid file = $dir/run/\$name.pid
log file = $dir/log/\$name.log
log to stderr = false
err to stderr = true
crash dir = $dir/crash
# One OSD: pools of size 1, placement across OSDs (not hosts), few placement groups.
osd pool default size = 1
osd pool default min size = 1
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
osd crush chooseleaf type = 0
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
mon max pg per osd = 1000
mon warn on insecure global id reclaim allowed = false

[mon]
mon data = $dir/\$name
mon cluster log file = $dir/log/cluster.log
mon data avail warn = 1
mon data avail crit = 0

[mgr]
mgr data = $dir/\$name
mgr initial modules = iostat

[osd]
osd data = $dir/\$name
osd objectstore = memstore
memstore device bytes = $memstore_bytes
osd memory target = 939524096
osd max object size = 134217728

[client.rgw.x]
rgw frontends = beast endpoint=127.0.0.1:$rgw_port
rgw data = $dir/rgw
# Deleted objects' tails go to rgw's garbage collector; reclaim them within seconds, not hours,
# so memstore's memory comes back during long benches.
rgw gc obj min wait = 10
rgw gc processor period = 10
rgw thread pool size = 128
EOF

ceph_admin() { ceph -c "$conf" --connect-timeout 20 "$@"; }

# Keys: mon., client.admin, mgr.x and client.rgw.x go into the monitor's initial keyring with
# their caps (imported at mkfs); osd.0's key is registered with `ceph osd new` below.
step="keyrings"
ceph-authtool --create-keyring "$keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
ceph-authtool "$keyring" --gen-key -n client.admin \
  --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' --cap mds 'allow *' >/dev/null
ceph-authtool "$keyring" --gen-key -n mgr.x \
  --cap mon 'allow profile mgr' --cap osd 'allow *' --cap mds 'allow *' >/dev/null
ceph-authtool "$keyring" --gen-key -n client.rgw.x \
  --cap mon 'allow rw' --cap osd 'allow rwx' --cap mgr 'allow rw' >/dev/null

step="monitor"
monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$mon_v2_port,v1:127.0.0.1:$mon_v1_port]" \
  "$dir/monmap" >/dev/null
ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap" --keyring "$keyring"
started=1
ceph-mon -c "$conf" -i a >>"$dir/log/mon.a.out" 2>&1
ceph_admin mon stat >/dev/null

step="manager"
ceph-mgr -c "$conf" -i x >>"$dir/log/mgr.x.out" 2>&1

step="osd"
osd_uuid="$(uuidgen)"
osd_secret="$(ceph-authtool --gen-print-key)"
osd_id="$(printf '{"cephx_secret": "%s"}' "$osd_secret" | ceph_admin osd new "$osd_uuid" -i -)"
ceph-authtool "$keyring" -n "osd.$osd_id" --add-key "$osd_secret" >/dev/null
ceph-osd -c "$conf" -i "$osd_id" --mkfs --osd-uuid "$osd_uuid" 2>"$dir/log/osd-mkfs.log"
ceph-osd -c "$conf" -i "$osd_id" >>"$dir/log/osd.$osd_id.out" 2>&1

step="s3 user"
# The S3 user. radosgw-admin creates the zone's pools as needed; keys are random per cluster;
# the timeout: it waits forever for a monitor that is gone.
access_key="$(/usr/bin/python3 -c 'import secrets,string; print("".join(secrets.choice(string.ascii_uppercase + string.digits) for _ in range(20)))')"
secret_key="$(/usr/bin/python3 -c 'import secrets; print(secrets.token_urlsafe(30))')"
timeout 60 radosgw-admin -c "$conf" user create --uid svc-test --display-name "svc test" \
  --access-key "$access_key" --secret-key "$secret_key" >"$dir/log/user-create.json"

step="radosgw"
radosgw -c "$conf" -n client.rgw.x >>"$dir/log/rgw.x.out" 2>&1

# Ready when radosgw answers HTTP (it listens once it has its zone and pools); python3 comes
# with ceph-common, curl may not be installed.
endpoint="http://127.0.0.1:$rgw_port"
/usr/bin/python3 - "$endpoint" <<'PY' || { echo "ceph: radosgw did not answer on $endpoint within 60 s" >&2; exit 4; }
import sys, time, urllib.error, urllib.request
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    try:
        urllib.request.urlopen(sys.argv[1], timeout=1)
        sys.exit(0)
    except urllib.error.HTTPError:
        sys.exit(0)  # any HTTP answer means it serves
    except OSError:
        time.sleep(0.1)
sys.exit(1)
PY

pid_of() { cat "$dir/run/$1.pid"; }
printf '{"endpoint":"%s","accessKeyId":"%s","secretAccessKey":"%s","pids":{"mon":%s,"mgr":%s,"osd":%s,"rgw":%s},"dir":"%s"}\n' \
  "$endpoint" "$access_key" "$secret_key" \
  "$(pid_of mon.a)" "$(pid_of mgr.x)" "$(pid_of "osd.$osd_id")" "$(pid_of client.rgw.x)" "$dir"
