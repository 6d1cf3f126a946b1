# syntax=docker/dockerfile:1
# prunewarden serve as a container (docs/ci.md): built in one stage, run from a copy of its
# virtual environment in a second without pip's caches or the source tree. Runs as an unprivileged
# user and writes only to its two volumes, so it runs with a read-only root filesystem
# (docker run --read-only; readOnlyRootFilesystem in deploy/).
ARG PYTHON_IMAGE=python:3.12-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY engine engine
COPY schemas schemas
COPY policies policies
# The wheel carries the schemas and the bundled policy as package data; pip compiles every
# module here, so nothing needs to write bytecode at run time. The extras are those of the paths
# docs/ci.md documents for the image: serve, and bundle for signed bundles (serve --bundle).
RUN python -m venv /opt/prunewarden \
    && /opt/prunewarden/bin/pip install --no-cache-dir ".[serve,bundle]"

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="prunewarden" \
      org.opencontainers.image.description="prunewarden serve: the policy decision point for self-editing context windows" \
      org.opencontainers.image.licenses="MIT"
ENV PATH=/opt/prunewarden/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PRUNEWARDEN_URL=unix:/run/prunewarden/pdp.sock
RUN groupadd --system --gid 10001 prunewarden \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin prunewarden \
    && install -d -o 10001 -g 10001 -m 0750 /var/lib/prunewarden /run/prunewarden
COPY --from=build /opt/prunewarden /opt/prunewarden
COPY --chmod=0755 tools/container_probe.py /usr/local/bin/prunewarden-probe
USER 10001:10001
WORKDIR /var/lib/prunewarden
# The audit log and session store (keep it: a restarted server resumes every chain and halt),
# and the socket the agent connects to (share it with the agent's container).
VOLUME ["/var/lib/prunewarden", "/run/prunewarden"]
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
    CMD ["prunewarden-probe", "/healthz"]
ENTRYPOINT ["prunewarden"]
# The bundled default policy until --policy names one (mount it read-only, e.g. from a
# ConfigMap: the server reloads it when it changes).
CMD ["serve", "--audit-log=/var/lib/prunewarden/audit.jsonl", "--listen=unix:/run/prunewarden/pdp.sock"]
