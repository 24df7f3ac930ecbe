# syntax=docker/dockerfile:1.7
# The mysql-cdc image: cdc-server and cdcctl, with a Java runtime for PySpark.
#
#   docker build -t mysql-cdc:0.1.0 .
#   docker run --rm mysql-cdc:0.1.0 cdc-server --etcd etcd:2379 --addr 0.0.0.0:8300
#   docker run --rm -e CDC_SERVER=host:8300 mysql-cdc:0.1.0 cdcctl capture list
#
# The same image runs Spark executor pods (k8s:// master): Spark starts it with
# the single argument "executor", which the entry point turns into an executor JVM.
#
# Debian bookworm is pinned: it ships openjdk-17 (later releases moved on to 21).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/cdc
ENV PATH=/opt/cdc/bin:$PATH
WORKDIR /src
# Dependencies first, from pyproject.toml alone, so a source change reuses this layer.
COPY pyproject.toml README.md ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt
COPY proto ./proto
COPY scripts/gen-proto.sh ./scripts/gen-proto.sh
COPY cdc ./cdc
COPY capture ./capture
COPY owner ./owner
COPY processor ./processor
COPY sparkjobs ./sparkjobs
# The stubs are generated exactly as in development: scripts/gen-proto.sh runs
# .venv/bin/python, so .venv points at the image's venv.
RUN ln -s /opt/cdc .venv \
    && bash scripts/gen-proto.sh \
    && pip install --no-deps . \
    && cd / && python -c "import capture.main, cdc.cli.main, cdc.api.gen.cdc.v1.admin_pb2_grpc"

FROM ${PYTHON_IMAGE} AS runtime
ARG CDC_UID=10001
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless tini \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid ${CDC_UID} cdc \
    && useradd --system --uid ${CDC_UID} --gid cdc --home-dir /home/cdc --create-home \
        --shell /usr/sbin/nologin cdc
COPY --from=build /opt/cdc /opt/cdc
ENV PATH=/opt/cdc/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    SPARK_HOME=/opt/cdc/lib/python3.11/site-packages/pyspark \
    CDC_HEALTH_ADDR=127.0.0.1:8300

# "executor": a Spark executor pod (what Spark's own image entry point does);
# anything else runs as given (cdc-server, cdcctl, python ...).
COPY --chmod=0755 <<'EOF' /usr/local/bin/cdc-entrypoint
#!/bin/bash
set -eo pipefail
if [ "${1:-}" != "executor" ]; then
  exec "$@"
fi
mapfile -t java_opts < <(env | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n | sed 's/[^=]*=\(.*\)/\1/')
exec java "${java_opts[@]}" \
  -Xms"${SPARK_EXECUTOR_MEMORY}" -Xmx"${SPARK_EXECUTOR_MEMORY}" \
  -cp "${SPARK_HOME}/jars/*${SPARK_CLASSPATH:+:$SPARK_CLASSPATH}" \
  org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
  --driver-url "${SPARK_DRIVER_URL}" \
  --executor-id "${SPARK_EXECUTOR_ID}" \
  --cores "${SPARK_EXECUTOR_CORES}" \
  --app-id "${SPARK_APPLICATION_ID}" \
  --hostname "${SPARK_EXECUTOR_POD_IP}" \
  --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID}" \
  --podName "${SPARK_EXECUTOR_POD_NAME}"
EOF

USER ${CDC_UID}:${CDC_UID}
WORKDIR /home/cdc
# Admin gRPC API and Prometheus metrics (the chart's ports.admin and ports.metrics).
EXPOSE 8300 8301
# The gRPC health service of the admin API (python -m cdc.api.health, as the chart's
# probes). Over TLS it uses the same CDC_TLS_* variables as cdcctl; Docker wants 0 or 1.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD python -m cdc.api.health "$CDC_HEALTH_ADDR" --timeout 4 \
        ${CDC_TLS_CA:+--tls-ca "$CDC_TLS_CA"} \
        ${CDC_TLS_CERT:+--tls-cert "$CDC_TLS_CERT"} ${CDC_TLS_KEY:+--tls-key "$CDC_TLS_KEY"} \
        || exit 1
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/cdc-entrypoint"]
CMD ["cdc-server", "--help"]
