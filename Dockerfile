# syntax=docker/dockerfile:1
# The reference convoy controller: `python -m convoy`, the same entry point the suite runs as a
# host process on the local provider (conformance/install/host.py). Flags come from the
# Deployment's args (conformance/resources/manifests/controller/deployment.yaml).
#
#   docker build -t convoy-controller:dev .
#
# Base: the official python:3.11-slim image (Python 3.11.15 on Debian trixie), pinned by the
# digest of its multi-platform image index as recorded by the Docker official images' own record,
# docker-library/repo-info, file repos/python/remote/3.11-slim.md at commit
# 2477d553d2fdfa57b4ec11f63c8376eca8b7a253 ("$ docker pull python@sha256:90744cff...").
# Bump the digest, not the tag, to take base image fixes. A host that cannot pull it builds on
# a base of its own (conformance.kindhost builds one from Debian's packages, with the
# dependencies as wheels that pip finds without an index): --build-arg CONVOY_CONTROLLER_BASE.
ARG CONVOY_CONTROLLER_BASE=python:3.11-slim@sha256:90744cff8f32887f075c47d747a173ff333e9e98801667af93c357fa9f5e28ff
FROM ${CONVOY_CONTROLLER_BASE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/tmp

# The package from this repository (convoy, the API names it shares with the suite, and the
# suite's modules it ships with). pip compiles the bytecode at install time, so nothing is
# written under /usr at run time.
WORKDIR /tmp/src
COPY pyproject.toml README.md ./
COPY conformance/ conformance/
COPY convoy/ convoy/
COPY convoyapi/ convoyapi/
COPY mutants/ mutants/
RUN pip install --no-cache-dir --root-user-action=ignore . \
    && cd / \
    && rm -rf /tmp/src

# Non-root, numeric (so that runAsNonRoot can verify it), no home directory, no shell login.
# Read-only root filesystem friendly: the controller writes only temporary files, under /tmp,
# which the Deployment mounts as an emptyDir.
USER 65532:65532
WORKDIR /tmp
EXPOSE 8080 8081 8443
ENTRYPOINT ["python", "-m", "convoy"]
