#!/usr/bin/env bash
# Install what deploy/local/services needs to run a real Kafka broker, redis-server and HDFS
# on loopback ports. Idempotent, non-interactive, quiet on success.
#
#   * redis-server, from Debian's packages, if not on PATH. The system service is NOT
#     started (policy-rc.d denies it during the install) and stays disabled: tests start
#     their own redis-server on a free port.
#   * promtool and prometheus (Debian's package prometheus, whose system service is likewise
#     never started), for the deploy tests' checks of the Prometheus config and rules, and the
#     integration test's own Prometheus (deploy/local/services/prometheus.py, a free port).
#   * java (17+) and mvn, from Debian's packages, only if missing.
#   * jar sets from Maven Central, each into .cache/jars/<set>/ when missing or when its
#     pom changed (stamp = sha256 of the pom + jar count):
#       kafka-broker  <- deploy/local/jars/kafka-broker/pom.xml  (Kafka 4.1.1 broker, KRaft)
#       spark-kafka   <- deploy/local/jars/spark-kafka/pom.xml   (spark-sql-kafka for pyspark 4.2.0)
#       hadoop-hdfs   <- deploy/local/jars/hadoop-hdfs/pom.xml   (HDFS NameNode + DataNode, Hadoop 3.5.0)
#
# Usage: scripts/bootstrap-services.sh [--force]     (--force re-fetches the jars)
# Env:   BOOTSTRAP_SKIP_REDIS=1 / BOOTSTRAP_SKIP_PROMTOOL=1 / BOOTSTRAP_SKIP_JARS=1 to skip a part.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JARS_ROOT="$ROOT/.cache/jars"
JAR_SETS=(kafka-broker spark-kafka hadoop-hdfs)
FORCE=0
[[ "${1:-}" == "--force" ]] && FORCE=1

export DEBIAN_FRONTEND=noninteractive

die() { echo "bootstrap-services: ERROR: $*" >&2; exit 1; }

as_root() {
  if [[ $(id -u) -eq 0 ]]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"
  else die "need root (or passwordless sudo) to run: $*"
  fi
}

APT_UPDATED=0
apt_install() {
  local log="$JARS_ROOT/../apt-install.log"
  mkdir -p "$(dirname "$log")"
  if [[ $APT_UPDATED -eq 0 ]]; then
    as_root apt-get update -q >"$log" 2>&1 || { tail -20 "$log" >&2; die "apt-get update failed"; }
    APT_UPDATED=1
  fi
  as_root apt-get install -y -q --no-install-recommends "$@" >>"$log" 2>&1 \
    || { tail -30 "$log" >&2; die "apt-get install $* failed (log: $log)"; }
}

# ------------------------------------------------- Debian packages whose service must not run
# install_without_service PACKAGE SERVICE: install PACKAGE with its system SERVICE never
# started (policy-rc.d denies starts during the install, the standard Debian mechanism,
# unless a policy-rc.d already exists) and left disabled: the tests start their own
# processes on free ports.
install_without_service() {
  local package=$1 service=$2
  POLICY=/usr/sbin/policy-rc.d
  CREATED_POLICY=0
  if [[ ! -e $POLICY ]]; then
    as_root sh -c "printf '#!/bin/sh\nexit 101\n' > $POLICY && chmod 755 $POLICY"
    CREATED_POLICY=1
  fi
  trap '[[ $CREATED_POLICY -eq 1 ]] && as_root rm -f '"$POLICY"'' EXIT
  apt_install "$package"
  if [[ $CREATED_POLICY -eq 1 ]]; then as_root rm -f "$POLICY"; CREATED_POLICY=0; fi
  trap - EXIT
  # Belt and braces: make sure no system service keeps running / starts at boot.
  if command -v systemctl >/dev/null 2>&1 && [[ -d /run/systemd/system ]]; then
    as_root systemctl disable --now "$service" >/dev/null 2>&1 || true
  else
    as_root /etc/init.d/"$service" stop >/dev/null 2>&1 || true
    as_root update-rc.d "$service" disable >/dev/null 2>&1 || true
  fi
}

# redis-server: the tests' Redis (deploy/local/services/redis.py)
have_redis() { command -v redis-server >/dev/null 2>&1 || [[ -x /usr/bin/redis-server ]]; }
if [[ "${BOOTSTRAP_SKIP_REDIS:-0}" != 1 ]] && ! have_redis; then
  install_without_service redis-server redis-server
  have_redis || die "redis-server still not found after installing the package"
fi

# promtool and prometheus (package prometheus): tests/deploy checks the Prometheus config and alert
# rules with promtool; tests/adapters/metrics starts its own prometheus
if [[ "${BOOTSTRAP_SKIP_PROMTOOL:-0}" != 1 ]] && ! { command -v promtool && command -v prometheus; } >/dev/null 2>&1; then
  install_without_service prometheus prometheus
  command -v promtool >/dev/null 2>&1 || die "promtool still not found after installing prometheus"
fi

# ------------------------------------------------------------------ java + maven
java_major() {
  local java="java"
  [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]] && java="$JAVA_HOME/bin/java"
  command -v "$java" >/dev/null 2>&1 || { echo 0; return; }
  "$java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\)[."].*/\1/p' | head -1
}

if [[ "${BOOTSTRAP_SKIP_JARS:-0}" != 1 ]]; then
  if [[ "$(java_major)" -lt 17 ]]; then
    apt_install openjdk-17-jre-headless
    [[ "$(java_major)" -ge 17 ]] || die "Java 17+ needed for Kafka 4 (found: $(java_major))"
  fi
  command -v mvn >/dev/null 2>&1 || apt_install maven

  # ---------------------------------------------------------------- jar sets
  mkdir -p "$JARS_ROOT"
  exec 9>"$JARS_ROOT/.lock"
  flock -w 600 9 || die "timed out waiting for $JARS_ROOT/.lock"

  for set in "${JAR_SETS[@]}"; do
    pom="$ROOT/deploy/local/jars/$set/pom.xml"
    out="$JARS_ROOT/$set"
    stamp="$out/.stamp"
    [[ -f "$pom" ]] || die "missing $pom"
    want="$(sha256sum "$pom" | cut -d' ' -f1)"
    if [[ $FORCE -eq 0 && -f "$stamp" ]]; then
      read -r have_hash have_count <"$stamp" || true
      count=$(find "$out" -maxdepth 1 -name '*.jar' | wc -l)
      [[ "$have_hash" == "$want" && "$count" -gt 0 && "$count" == "$have_count" ]] && continue
    fi
    tmp="$out.tmp.$$"
    log="$JARS_ROOT/$set.mvn.log"
    rm -rf "$tmp"
    fetch() {
      mvn -B -q "$@" -f "$pom" dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$tmp" </dev/null >"$log" 2>&1
    }
    # second try with -U: Maven caches "not found" answers in ~/.m2 for a day
    if ! fetch && ! { rm -rf "$tmp"; fetch -U; }; then
      rm -rf "$tmp"
      sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -m 3 '^\[ERROR\] .' >&2 || tail -30 "$log" >&2
      die "mvn could not fetch the '$set' jars (full log: $log)"
    fi
    count=$(find "$tmp" -maxdepth 1 -name '*.jar' | wc -l)
    [[ "$count" -gt 0 ]] || { rm -rf "$tmp"; die "mvn fetched no jars for '$set' (log: $log)"; }
    echo "$want $count" >"$tmp/.stamp"
    rm -rf "$out"
    mv "$tmp" "$out"
  done
fi
