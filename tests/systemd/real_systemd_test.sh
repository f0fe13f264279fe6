#!/usr/bin/env bash
# minferd under a real systemd and a real journald, with user-mode copies of
# systemd/minferd.socket and systemd/minferd.service. It proves:
#   1. socket activation: the socket listens (root:root 0660 here) and the
#      service is not running until the first connection starts it;
#   2. READY=1 only after load and warm-up: while the model loads (a 3 s
#      --debug-load-delay-ms) systemd shows the service "activating" and
#      /health answers 503; "active" comes at least the load delay after the
#      start, and from then on /health answers 200;
#   3. a completion over the socket succeeds (the reference greedy text);
#   4. journald holds its request line: PRIORITY=6 (info), REQUEST_ID (the
#      X-Request-Id), PROMPT_TOKENS, GEN_TOKENS, TTFT_MS, TOKENS_PER_S,
#      FINISH_REASON, BACKEND, found with `journalctl --user-unit minferd.service`;
#   5. a wedged engine (--debug-stall-engine-after-tokens) turns /health 503
#      "stalled", logs at PRIORITY=3, stops the watchdog pings; systemd kills
#      the service ("Failed with result 'watchdog'"), restarts it
#      (Restart=on-failure), and the new process serves the same text again;
#   6. `systemctl --user stop` drains: a stream in flight completes
#      ([DONE], finish_reason "length"), the daemon logs its SIGTERM drain,
#      exits 0 (Result=success) and is not restarted.
#
# How (the recipe of issue 7): as root, in a private mount namespace
# (unshare -m): a tmpfs on /run (so /run/systemd is empty and ours), a cgroup2
# view of our own (a cgroup of ours, <slice>/user@0.service, named so that
# journald attributes the units' lines to them; systemd never touches the
# host's other cgroups), systemd-journald (volatile storage in that /run) and
# `systemd --user`. The user-mode units are the shipped ones without User=,
# Group=, SupplementaryGroups=, SocketUser=, SocketGroup= and the device lines
# (no user minfer, no GPU here), with a drop-in that shortens WatchdogSec= to
# 10 s and RestartSec= to 2 s and disables core files; every other setting,
# the whole sandbox included, is as shipped.
#
# Skips (exit 77) with the reason where it cannot run: not root, unshare or
# mounts not permitted, a tool missing. Bounded: an inner timeout of 240 s;
# every wait has its own deadline; it takes about 40 s.
#
# usage: real_systemd_test.sh MINFERD UNIT_SOURCE_DIR MODEL
set -euo pipefail

minferd=$1
unit_src=$2
model=$3

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

# ---------------------------------------------------------------------------
# Outside: preconditions, then this script again in a private mount namespace.
if [ -z "${MINFER_SD_TEST_SLICE:-}" ]; then
  [ "$(id -u)" -eq 0 ] || skip "needs root (unshare -m, mounts, cgroups, a second journald)"
  for tool in unshare curl jq systemctl journalctl findmnt; do
    command -v "$tool" >/dev/null || skip "$tool is not installed"
  done
  for bin in systemd systemd-journald; do
    [ -x "/lib/systemd/$bin" ] || skip "/lib/systemd/$bin is not installed (Debian package systemd)"
  done
  unshare -m true 2>/dev/null || skip "unshare -m is not permitted here (no CAP_SYS_ADMIN, or seccomp/AppArmor forbids it)"
  slice=minfer-test-$$.slice
  rc=0
  MINFER_SD_TEST_SLICE=$slice timeout --kill-after=10 240 unshare -m --propagation private bash "$0" "$@" || rc=$?
  # The inner run cleans up after itself; if the timeout killed it, end what
  # it left in its own cgroup (all started by it) and remove the cgroup.
  cg2=$(findmnt -n -t cgroup2 -o TARGET | head -n 1)
  if [ -n "$cg2" ] && [ -d "$cg2/$slice" ]; then
    echo "cleaning up $cg2/$slice"
    [ -e "$cg2/$slice/cgroup.kill" ] && echo 1 >"$cg2/$slice/cgroup.kill"
    for _ in $(seq 50); do grep -q 'populated 0' "$cg2/$slice/cgroup.events" && break; sleep 0.1; done
    find "$cg2/$slice" -depth -type d -exec rmdir {} + 2>/dev/null || true
  fi
  [ "$rc" -eq 124 ] && fail "timed out after 240 s"
  exit "$rc"
fi

# ---------------------------------------------------------------------------
# Inside the private mount namespace.
slice=$MINFER_SD_TEST_SLICE
mount -t tmpfs -o mode=0755 tmpfs /run || skip "cannot mount a tmpfs on /run in a private namespace"
if [ "$(stat -f -c %T /sys/fs/cgroup)" != cgroup2fs ]; then
  # A cgroup v1 or hybrid host: look at the v2 hierarchy only, so that systemd
  # runs in unified mode and never sees (or moves anything in) the v1 ones.
  mount -t cgroup2 cgroup2 /sys/fs/cgroup || skip "cannot mount cgroup2 (kernel without cgroup v2?)"
fi
orig_cgroup=$(sed -n 's/^0:://p' /proc/self/cgroup)
cg=/sys/fs/cgroup/$slice/user@0.service
mkdir -p "$cg" 2>/dev/null || skip "cannot create a cgroup under /sys/fs/cgroup (read-only cgroup file system?)"
echo $$ >"$cg/cgroup.procs" || skip "cannot move this test into its own cgroup"

test_dir=/run/minfer-test
mkdir -p "$test_dir"
journald_pid=""
manager_pid=""
log() { echo "[$(date +%T)] $*"; }

cleanup() {
  set +e
  if [ -n "$manager_pid" ]; then
    kill -TERM "$manager_pid" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$manager_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$manager_pid" 2>/dev/null
  fi
  if [ -n "$journald_pid" ]; then
    kill -TERM "$journald_pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$journald_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$journald_pid" 2>/dev/null
  fi
  echo $$ >"/sys/fs/cgroup$orig_cgroup/cgroup.procs" 2>/dev/null
  if [ -d "/sys/fs/cgroup/$slice" ]; then
    # What is left in our cgroup was started by this test.
    [ -e "/sys/fs/cgroup/$slice/cgroup.kill" ] && echo 1 >"/sys/fs/cgroup/$slice/cgroup.kill"
    for _ in $(seq 50); do grep -q 'populated 0' "/sys/fs/cgroup/$slice/cgroup.events" && break; sleep 0.1; done
    find "/sys/fs/cgroup/$slice" -depth -type d -exec rmdir {} + 2>/dev/null
  fi
}
trap cleanup EXIT

dump() {
  echo "---- systemctl --user status ----"
  systemctl --user status --no-pager --full minferd.socket minferd.service 2>&1 | tail -40 || true
  echo "---- journal (last 80 lines) ----"
  journalctl -D /run/log/journal --no-pager -n 80 -o short-monotonic 2>&1 || true
  echo "---- systemd --user ----"
  cat "$test_dir/manager.log" 2>/dev/null | tail -20
}
die() { echo "FAIL: $*"; dump; exit 1; }

# Waits up to $1 seconds for the command after it to succeed.
wait_for() {
  local limit=$1
  shift
  local end=$((SECONDS + limit))
  until "$@"; do
    [ "$SECONDS" -lt "$end" ] || return 1
    sleep 0.2
  done
}

# ---- what PID 1 would have made in /run/systemd --------------------------------
mkdir -p /run/systemd/system /run/systemd/journal /run/systemd/journald.conf.d /run/log
# The inaccessible nodes that ProtectHome=, ProtectKernelTunables= and
# ProtectKernelLogs= mount over what they hide (PID 1 makes them at boot).
inacc=/run/systemd/inaccessible
mkdir -m 0755 "$inacc"
: >"$inacc/reg" && chmod 0000 "$inacc/reg"
mkdir -m 0000 "$inacc/dir"
mkfifo -m 0000 "$inacc/fifo"
mknod -m 0000 "$inacc/chr" c 0 0
mknod -m 0000 "$inacc/blk" b 0 0

# ---- journald ---------------------------------------------------------------
cat >/run/systemd/journald.conf.d/minfer-test.conf <<'EOF'
[Journal]
Storage=volatile
ReadKMsg=no
ForwardToSyslog=no
ForwardToWall=no
ForwardToConsole=no
EOF
/lib/systemd/systemd-journald >"$test_dir/journald.log" 2>&1 &
journald_pid=$!
wait_for 30 test -S /run/systemd/journal/socket || { cat "$test_dir/journald.log"; skip "systemd-journald did not start here"; }
jctl() { journalctl -D /run/log/journal --no-pager "$@"; }

# ---- the units, user-mode copies -------------------------------------------
export XDG_RUNTIME_DIR=$test_dir/xdg-runtime XDG_CONFIG_HOME=$test_dir/config XDG_STATE_HOME=$test_dir/state \
       XDG_CACHE_HOME=$test_dir/cache XDG_DATA_HOME=$test_dir/data HOME=$test_dir/home
mkdir -p -m 0700 "$XDG_RUNTIME_DIR"
mkdir -p "$HOME" "$XDG_CONFIG_HOME/systemd/user/minferd.service.d"
units=$XDG_CONFIG_HOME/systemd/user
# The binary and the model inside the private /run: ProtectHome= hides /root
# and /home, where a checkout may live.
mkdir -p "$test_dir/bin"
cp "$minferd" "$test_dir/bin/minferd"
cp "$model" "$test_dir/model.gguf"
sock=/run/minfer/minferd.sock
conf=$test_dir/minferd.conf
stall_after=16
echo "debug-stall-engine-after-tokens = $stall_after" >"$conf"

# The socket's ExecStartPre=-/usr/bin/nvidia-modprobe stays where that helper
# is missing (the "-" must make that harmless) and goes where it exists (it
# would load the NVIDIA modules on this host).
modprobe_line='^ExecStartPre=-/usr/bin/nvidia-modprobe '
[ -e /usr/bin/nvidia-modprobe ] || modprobe_line='^$never'
sed -e '/^SocketUser=/d' -e '/^SocketGroup=/d' -e "/$modprobe_line/d" "$unit_src/minferd.socket" >"$units/minferd.socket"
sed -e '/^User=/d' -e '/^Group=/d' -e '/^SupplementaryGroups=/d' -e '/^DevicePolicy=/d' -e '/^DeviceAllow=/d' \
    -e "s|^ExecStart=/usr/sbin/minferd\$|ExecStart=$test_dir/bin/minferd --config $conf --model $test_dir/model.gguf --ctx-size 256 --threads 1 --debug-load-delay-ms 3000 --debug-token-delay-ms 20|" \
    "$unit_src/minferd.service" >"$units/minferd.service"
grep -q "^ExecStart=$test_dir/bin/minferd " "$units/minferd.service" || fail "the service's ExecStart= is not /usr/sbin/minferd"
cat >"$units/minferd.service.d/test.conf" <<'EOF'
[Service]
WatchdogSec=10s
RestartSec=2s
LimitCORE=0
EOF
load_delay_us=3000000

# ---- systemd --user ---------------------------------------------------------
SYSTEMD_LOG_TARGET=journal /lib/systemd/systemd --user >"$test_dir/manager.log" 2>&1 &
manager_pid=$!
manager_up() { case "$(systemctl --user is-system-running 2>/dev/null)" in running | degraded) return 0 ;; *) return 1 ;; esac; }
wait_for 60 manager_up || { cat "$test_dir/manager.log"; skip "systemd --user did not come up here"; }
log "systemd $(systemctl --version | sed -n '1s/systemd \([0-9]*\).*/\1/p') --user running (pid $manager_pid) in cgroup $slice"

show() { systemctl --user show -p "$2" --value "$1"; }
health_code() { curl -s -o "$test_dir/health.json" -w '%{http_code}' --max-time 10 --unix-socket "$sock" http://minferd/health || true; }
complete() {  # max_tokens -> body in $test_dir/complete.json, headers in complete.head; prints the status
  curl -sS -D "$test_dir/complete.head" -o "$test_dir/complete.json" -w '%{http_code}' --max-time 120 \
    --unix-socket "$sock" http://minferd/v1/completions -H 'Content-Type: application/json' \
    -d "{\"prompt\": \"Once upon a time\", \"max_tokens\": $1, \"temperature\": 0}"
}
expected_text=", there was a little girl"  # stories260K, greedy, 8 tokens (tests/daemon agree)

# ---- 1. socket activation ----------------------------------------------------
systemctl --user start minferd.socket || die "minferd.socket did not start"
[ "$(show minferd.socket ActiveState)" = active ] || die "minferd.socket is $(show minferd.socket ActiveState)"
[ -S "$sock" ] || die "no socket at $sock"
[ "$(stat -c %a "$sock")" = 660 ] || die "$sock has mode $(stat -c %a "$sock"), not 660"
[ "$(show minferd.service ActiveState)" = inactive ] || die "minferd.service runs before any connection"
[ "$(show minferd.service MainPID)" = 0 ] || die "minferd.service has a process before any connection"
log "1. minferd.socket listens on $sock (mode 660); minferd.service inactive"

curl -s -o "$test_dir/first.json" -w '%{http_code}' --max-time 120 --unix-socket "$sock" http://minferd/health \
  >"$test_dir/first.code" 2>/dev/null &
first_curl=$!
service_started() { [ "$(show minferd.service ActiveState)" != inactive ]; }
wait_for 60 service_started || die "the first connection did not start minferd.service"
log "1. the first connection started minferd.service ($(show minferd.service ActiveState))"

# ---- 2. READY=1 only after load and warm-up ------------------------------------
seen_activating_503=0
end=$((SECONDS + 120))
while :; do
  state=$(show minferd.service ActiveState)
  code=$(health_code)
  case "$state" in
    activating)
      if [ "$code" = 503 ] && grep -qE '"phase":"(loading|warming_up)"' "$test_dir/health.json"; then seen_activating_503=1; fi
      ;;
    active)
      [ "$code" = 200 ] || die "systemd shows minferd active (READY=1) while /health answers $code: $(cat "$test_dir/health.json")"
      break
      ;;
    *) die "minferd.service went $state while starting" ;;
  esac
  [ "$SECONDS" -lt "$end" ] || die "minferd.service did not become active within 120 s"
  sleep 0.2
done
[ "$seen_activating_503" = 1 ] || die "never saw the service activating while /health said loading or warming up"
started=$(show minferd.service ExecMainStartTimestampMonotonic)
ready=$(show minferd.service ActiveEnterTimestampMonotonic)
[ $((ready - started)) -ge "$load_delay_us" ] ||
  die "READY=1 came $(((ready - started) / 1000)) ms after the start, before the ${load_delay_us} us load delay ended"
status_text=$(show minferd.service StatusText)
[[ "$status_text" == "ready: "*" on cpu"* ]] || die "STATUS= is '$status_text'"
pid1=$(show minferd.service MainPID)
wait "$first_curl" || die "the first connection got no answer (curl exit $?)"
first_code=$(cat "$test_dir/first.code")
[ "$first_code" = 200 ] || [ "$first_code" = 503 ] || die "the first connection got HTTP $first_code"
jctl _PID="$pid1" -o cat | grep -q "serving on socket fd 3 from systemd" || die "minferd did not serve the socket systemd passed"
jctl _PID="$pid1" -o cat | grep -q "^warm-up generated [0-9]* tokens" || die "no warm-up line from minferd"
log "2. activating with /health 503 while loading; READY=1 $(((ready - started) / 1000)) ms after start (load delay 3000 ms); STATUS=$status_text"
log "2. the first connection was answered ($first_code) by pid $pid1, on the socket systemd passed"

# ---- 3. a query over the socket ----------------------------------------------
code=$(complete 8) || die "curl failed"
[ "$code" = 200 ] || die "POST /v1/completions: $code $(cat "$test_dir/complete.json")"
text=$(jq -r '.choices[0].text' "$test_dir/complete.json")
[ "$text" = "$expected_text" ] || die "completion text '$text', expected '$expected_text'"
[ "$(jq -r '.choices[0].finish_reason' "$test_dir/complete.json")" = length ] || die "finish_reason: $(cat "$test_dir/complete.json")"
[ "$(jq -r '.usage.completion_tokens' "$test_dir/complete.json")" = 8 ] || die "completion_tokens: $(cat "$test_dir/complete.json")"
prompt_tokens=$(jq -r '.usage.prompt_tokens' "$test_dir/complete.json")
request_id=$(sed -n 's/^[Xx]-[Rr]equest-[Ii]d: *\([0-9A-Za-z-]*\).*/\1/p' "$test_dir/complete.head")
[ -n "$request_id" ] || die "no X-Request-Id: $(cat "$test_dir/complete.head")"
log "3. POST /v1/completions: 200, '$text', request $request_id"

# ---- 4. the request line in journald -------------------------------------------
# As the README says to look it up (`journalctl -u minferd REQUEST_ID=...`):
# the unit and the field match combine to exactly this request's line.
request_entry() {
  jctl --user-unit minferd.service REQUEST_ID="$request_id" -o json | jq -c . >"$test_dir/entry.json"
  [ -s "$test_dir/entry.json" ]
}
wait_for 30 request_entry || die "no journal entry with REQUEST_ID=$request_id for minferd.service"
[ "$(wc -l <"$test_dir/entry.json")" = 1 ] || die "more than one journal line for request $request_id"
entry=$(cat "$test_dir/entry.json")
check_field() { [ "$(jq -r ".$1" <<<"$entry")" = "$2" ] || die "journal field $1=$(jq -r ".$1" <<<"$entry"), expected $2: $entry"; }
check_field PRIORITY 6
check_field SYSLOG_IDENTIFIER minferd
check_field _PID "$pid1"
check_field HTTP_STATUS 200
check_field HTTP_PATH /v1/completions
check_field PROMPT_TOKENS "$prompt_tokens"
check_field GEN_TOKENS 8
check_field FINISH_REASON length
check_field BACKEND cpu
for f in TTFT_MS TOKENS_PER_S; do
  jq -e ".$f | tonumber > 0" <<<"$entry" >/dev/null || die "journal field $f is not a positive number: $entry"
done
log "4. journald: $(jq -c '{PRIORITY, REQUEST_ID, PROMPT_TOKENS, GEN_TOKENS, TTFT_MS, TOKENS_PER_S, FINISH_REASON, BACKEND}' <<<"$entry")"

# ---- 5. a wedged engine: watchdog, kill, restart ---------------------------------
# 8 tokens are generated; this request stalls the engine at token $stall_after.
curl -s -o /dev/null -w '%{http_code}' --max-time 120 --unix-socket "$sock" http://minferd/v1/completions \
  -d '{"prompt": "Once upon a time", "max_tokens": 32, "temperature": 0}' >"$test_dir/stalled.code" 2>/dev/null &
stalled_curl=$!
stalled() { [ "$(health_code)" = 503 ] && grep -q stalled "$test_dir/health.json"; }
wait_for 60 stalled || die "/health never reported the engine stalled: $(cat "$test_dir/health.json")"
log "5. engine stalled: /health 503 $(jq -c '{status, phase, reason}' "$test_dir/health.json" 2>/dev/null || cat "$test_dir/health.json")"
# The next start must not stall again: the configuration file loses the hook
# (the running process read it long ago).
: >"$conf"
restarted() { [ "$(show minferd.service NRestarts)" = 1 ]; }
wait_for 90 restarted || die "systemd did not restart minferd.service (NRestarts=$(show minferd.service NRestarts))"
pid_active() { [ "$(show minferd.service ActiveState)" = active ] && [ "$(show minferd.service MainPID)" != "$pid1" ]; }
wait_for 120 pid_active || die "the restarted minferd.service did not become active"
pid2=$(show minferd.service MainPID)
wait "$stalled_curl" || true
[ "$(cat "$test_dir/stalled.code")" != 200 ] || die "the stalled request was answered 200"
manager_lines=$(jctl -o json | jq -r 'select(.USER_UNIT == "minferd.service") | .MESSAGE')
grep -q "Watchdog timeout" <<<"$manager_lines" || die "systemd logged no watchdog timeout for minferd.service"
grep -q "Failed with result 'watchdog'" <<<"$manager_lines" || die "systemd did not fail minferd.service for the watchdog"
jctl _PID="$pid1" -o json | jq -e 'select(.PRIORITY == "3" and (.MESSAGE | startswith("engine stalled")))' >/dev/null ||
  die "minferd logged no 'engine stalled' line at priority 3 (err)"
code=$(complete 8) || die "curl failed after the restart"
[ "$code" = 200 ] || die "after the restart: POST /v1/completions $code $(cat "$test_dir/complete.json")"
text=$(jq -r '.choices[0].text' "$test_dir/complete.json")
[ "$text" = "$expected_text" ] || die "after the restart the completion is '$text', expected '$expected_text'"
log "5. watchdog: '$(grep -m1 "Watchdog timeout" <<<"$manager_lines")'; restarted as pid $pid2 (NRestarts=1), serving '$text' again"

# ---- 6. systemctl stop drains ---------------------------------------------------
curl -sN --max-time 120 --unix-socket "$sock" http://minferd/v1/completions \
  -d '{"prompt": "Once upon a time", "max_tokens": 48, "temperature": 0, "stream": true}' >"$test_dir/stream.out" 2>/dev/null &
stream_curl=$!
wait_for 60 grep -q '^data: {' "$test_dir/stream.out" || die "the stream did not start"
systemctl --user stop minferd.service || die "systemctl --user stop failed"
wait "$stream_curl" || die "the stream in flight broke off (curl exit $?): $(tail -3 "$test_dir/stream.out")"
[ "$(grep '^data: ' "$test_dir/stream.out" | tail -n 1)" = "data: [DONE]" ] || die "the stream did not end with [DONE]: $(tail -3 "$test_dir/stream.out")"
last=$(grep '^data: {' "$test_dir/stream.out" | tail -n 1 | sed 's/^data: //')
[ "$(jq -r '.choices[0].finish_reason' <<<"$last")" = length ] || die "the drained stream ended with: $last"
[ "$(show minferd.service Result)" = success ] || die "stop: Result=$(show minferd.service Result)"
[ "$(show minferd.service ExecMainStatus)" = 0 ] || die "stop: minferd exited with status $(show minferd.service ExecMainStatus)"
jctl _PID="$pid2" -o cat | grep -q "^signal SIGTERM: shutting down" || die "minferd logged no SIGTERM drain"
jctl _PID="$pid2" -o cat | grep -q "^minferd stopped" || die "minferd did not log 'minferd stopped'"
sleep 3  # longer than RestartSec=2s: a clean stop is not restarted
[ "$(show minferd.service ActiveState)" = inactive ] || die "after a clean stop minferd.service is $(show minferd.service ActiveState)"
[ "$(show minferd.service NRestarts)" = 1 ] || die "a clean stop was restarted"
[ "$(show minferd.socket ActiveState)" = active ] || die "minferd.socket stopped with the service"
log "6. stop: the stream in flight finished ($(grep -c '^data: {' "$test_dir/stream.out") chunks, finish_reason length, [DONE]); exit 0, Result=success, not restarted; the socket still listens"

echo "PASS: socket activation, READY after load and warm-up, a query, the journald request line, watchdog kill and restart, draining stop"
