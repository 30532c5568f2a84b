# syntax=docker/dockerfile:1
# The daemon's image: `spotfolio daemon` with the aws, gcp and postgres extras,
# installed from the hashed lockfile (requirements/image.txt), run as uid 1000.
#
#   docker build -t spotfolio:dev .
#   docker run --rm spotfolio:dev --version
#   docker run -v $PWD/daemon.yaml:/run/spotfolio/config.yaml:ro spotfolio:dev
#
# The default process is `spotfolio daemon --config /run/spotfolio/config.yaml
# --log-format json` (ENTRYPOINT spotfolio + CMD, so `docker run IMAGE
# --version` answers too). The Terraform modules replace the entrypoint with
# one that writes the configuration there first (terraform/modules/*/README.md).
#
# BASE: pinned by digest (the multi-arch index, amd64 and arm64); the release
# workflow (.github/workflows/release.yml) checks that it lists both. Where no
# image registry is reachable, .ci/image builds a Debian bookworm base with
# mmdebstrap and passes it as --build-arg BASE=... (python3 and python3-venv
# are all this file needs from a base).
ARG BASE=docker.io/library/python:3.11-slim-bookworm@sha256:2e32f7d302adc1c37428355c1e646897c0c53f4fd60b6a551245fb90ee129f91

FROM ${BASE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1
COPY requirements/image.txt requirements/build.txt /src/requirements/
# Every dependency by hash, none resolved at build time (--no-deps: the lock
# is complete); the wheel is built without build isolation from build.txt.
# The optional secret pip_cert: a CA bundle for a TLS-intercepting proxy in
# front of PyPI (.ci/image passes the host's); absent on the public CI.
RUN --mount=type=secret,id=pip_cert \
    if [ -s /run/secrets/pip_cert ]; then export PIP_CERT=/run/secrets/pip_cert; fi \
 && python3 -m venv /opt/spotfolio \
 && /opt/spotfolio/bin/pip install --quiet --require-hashes --no-deps -r /src/requirements/image.txt \
 && python3 -m venv /opt/build \
 && /opt/build/bin/pip install --quiet --require-hashes --no-deps -r /src/requirements/build.txt
COPY pyproject.toml README.md LICENSE /src/
COPY markets /src/markets
COPY policies /src/policies
COPY broker /src/broker
RUN /opt/build/bin/pip wheel --quiet --no-deps --no-build-isolation --wheel-dir /src/dist /src \
 && /opt/spotfolio/bin/pip install --quiet --no-deps /src/dist/spotfolio-*.whl \
 && /opt/spotfolio/bin/spotfolio --version

FROM ${BASE}
# uid:gid 1000:1000, the Terraform modules' container_user default; its home
# and scratch (/run/spotfolio) is a tmpfs or task volume under a read-only root.
RUN groupadd --gid 1000 spotfolio \
 && useradd --uid 1000 --gid 1000 --home-dir /run/spotfolio --no-create-home \
      --shell /usr/sbin/nologin spotfolio \
 && install -d -o 1000 -g 1000 -m 0700 /run/spotfolio /var/lib/spotfolio
COPY --from=build /opt/spotfolio /opt/spotfolio
ENV PATH=/opt/spotfolio/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    HOME=/run/spotfolio TMPDIR=/run/spotfolio MPLCONFIGDIR=/run/spotfolio \
    HEALTHCHECK_URL=http://127.0.0.1:9108/readyz
LABEL org.opencontainers.image.title="spotfolio" \
      org.opencontainers.image.description="Cost-aware capacity broker for GPU fleets" \
      org.opencontainers.image.licenses="Apache-2.0"
USER 1000:1000
WORKDIR /run/spotfolio
# A Fargate bind mount of a path the image lacks starts root-owned.
VOLUME ["/run/spotfolio"]
EXPOSE 9108
# Healthy while the daemon is ready: /readyz on its metrics port (9108, the
# config's default; set HEALTHCHECK_URL for another port) answers 200 while
# it holds the lease, its market is fresh and its notice queue is read, 503
# with the reason otherwise. The same check as the AWS module's task definition.
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
  CMD ["python3", "-c", "import os, urllib.request; urllib.request.urlopen(os.environ['HEALTHCHECK_URL'], timeout=3)"]
ENTRYPOINT ["spotfolio"]
CMD ["daemon", "--config", "/run/spotfolio/config.yaml", "--log-format", "json"]
