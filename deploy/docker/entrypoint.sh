#!/usr/bin/env bash
# The image's entrypoint (run under tini, PID 1). What it does depends on the first argument:
#
#   spark-submit ...  the default command: the job runs in this container (local mode unless
#                     --master or DEDUP_SPARK__MASTER says otherwise), stopping gracefully
#   driver ...        Spark on Kubernetes, the driver pod (spark-submit / the spark-operator
#                     give these arguments; the contract of Spark's own image entrypoint)
#   executor          Spark on Kubernetes, an executor pod (settings in SPARK_* variables)
#   anything else     run as given, e.g. `dedup run --engine kafka ...` or `bash`
#
# Graceful stop. spark-submit's JVM starts the Python driver as its child. A SIGTERM to that
# JVM kills the Python driver at once: measured with PySpark 4.0.1, the driver's own SIGTERM
# handler never runs and spark-submit exits 143, cutting off the running micro-batch. The
# service stops cleanly only when the signal reaches the Python driver, which lets the batch
# finish, stops the query and exits 0; the JVM then follows. So SIGTERM and SIGINT are
# forwarded to the driver process, and to the JVM only while no driver has started yet.
set -uo pipefail

# The application file: the first *.py argument that is not the value of an option.
application_file() {
  local skip=0 arg
  for arg in "$@"; do
    if [ "$skip" = 1 ]; then skip=0; continue; fi
    case "$arg" in
      --py-files|--files|--jars|--archives|--conf|-c|--properties-file|--class|--name) skip=1 ;;
      *.py) basename "${arg#local://}"; return ;;
    esac
  done
}

# The Python driver: the JVM's child whose command line holds the application file.
driver_pid() {
  [ -n "$app" ] || return 0
  pgrep -P "$child" -f -- "$app" 2>/dev/null | head -n 1
}

forward() {
  local target
  if [ -z "$child" ]; then pending=$1; return; fi  # not started yet: forwarded once it is
  target=$(driver_pid)
  kill -s "$1" "${target:-$child}" 2>/dev/null || true
}

# Run spark-submit as a child, forward SIGTERM/SIGINT to the Python driver, exit with its status.
run_spark_submit() {
  app=$(application_file "$@") child="" pending=""
  trap 'forward TERM' TERM
  trap 'forward INT' INT
  "$@" &
  child=$!
  [ -z "$pending" ] || forward "$pending"
  while kill -0 "$child" 2>/dev/null; do
    wait "$child"
  done
  wait "$child"
  exit $?
}

case "${1:-}" in
  driver)
    shift
    run_spark_submit "${SPARK_HOME:?the Spark installation (the pyspark package)}/bin/spark-submit" \
      --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS:?set by Spark on Kubernetes}" \
      --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=$SPARK_DRIVER_BIND_ADDRESS" \
      --deploy-mode client "$@"
    ;;
  executor)
    shift
    if [ -z "${JAVA_HOME:-}" ]; then
      JAVA_HOME=$(java -XshowSettings:properties -version 2>&1 >/dev/null | awk '/java.home/ {print $3}')
    fi
    executor_java_opts=()
    for v in "${!SPARK_JAVA_OPT_@}"; do executor_java_opts+=("${!v}"); done
    classpath="${SPARK_CLASSPATH:+$SPARK_CLASSPATH:}${SPARK_HOME:?the Spark installation}/jars/*"
    [ -n "${SPARK_EXTRA_CLASSPATH:-}" ] && classpath="$classpath:$SPARK_EXTRA_CLASSPATH"
    [ -n "${HADOOP_CONF_DIR:-}" ] && classpath="$HADOOP_CONF_DIR:$classpath"
    classpath="${SPARK_CONF_DIR:-$SPARK_HOME/conf}:$classpath"
    exec "$JAVA_HOME/bin/java" "${executor_java_opts[@]}" \
      -Xms"$SPARK_EXECUTOR_MEMORY" -Xmx"$SPARK_EXECUTOR_MEMORY" \
      -cp "$classpath:${SPARK_DIST_CLASSPATH:-}:$PWD" \
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
      --driver-url "$SPARK_DRIVER_URL" \
      --executor-id "$SPARK_EXECUTOR_ID" \
      --cores "$SPARK_EXECUTOR_CORES" \
      --app-id "$SPARK_APPLICATION_ID" \
      --hostname "$SPARK_EXECUTOR_POD_IP" \
      --resourceProfileId "$SPARK_RESOURCE_PROFILE_ID" \
      --podName "$SPARK_EXECUTOR_POD_NAME"
    ;;
  spark-submit|*/spark-submit)
    run_spark_submit "$@"
    ;;
  "")
    echo "entrypoint: no command given" >&2
    exit 2
    ;;
  *)
    exec "$@"
    ;;
esac
