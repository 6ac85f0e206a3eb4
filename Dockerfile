# syntax=docker/dockerfile:1
# HyperFleet images, one target per binary, each a static Go binary on distroless (non-root, no shell):
#
#   docker build --target manager           -t ghcr.io/hyperfleet-io/hyperfleet:dev .     (the default)
#   docker build --target bootstrap-service -t ghcr.io/hyperfleet-io/hyperfleet-bootstrap-service:dev .
#   docker build --target agent             -t ghcr.io/hyperfleet-io/hyperfleet-agent:dev .
#   docker build --target console           -t ghcr.io/hyperfleet-io/hyperfleet-console:dev .
#
# Multi-arch: docker buildx build --platform linux/amd64,linux/arm64 --target manager ...
# The Go toolchain cross-compiles on the build platform, so no emulation is needed.

ARG GO_VERSION=1.26
ARG RUNTIME_IMAGE=gcr.io/distroless/static:nonroot

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS builder
WORKDIR /src
ENV CGO_ENABLED=0
# Dependencies first: this layer survives source changes.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY controllers/ controllers/
COPY pkg/ pkg/

FROM builder AS build-manager
ARG TARGETOS TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags "-s -w" -o /out/manager ./cmd/manager

FROM builder AS build-bootstrap-service
ARG TARGETOS TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags "-s -w" -o /out/bootstrap-service ./cmd/bootstrap-service

FROM builder AS build-agent
ARG TARGETOS TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags "-s -w" -o /out/hyperfleet-agent ./cmd/hyperfleet-agent

FROM builder AS build-console
ARG TARGETOS TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags "-s -w" -o /out/console ./cmd/console

# The in-VM agent, for copying into VM templates (docker create + docker cp, or a multi-stage build of
# the template image). It runs inside the VM, not in Kubernetes.
FROM ${RUNTIME_IMAGE} AS agent
COPY --from=build-agent /out/hyperfleet-agent /hyperfleet-agent
USER 65532:65532
ENTRYPOINT ["/hyperfleet-agent"]

FROM ${RUNTIME_IMAGE} AS bootstrap-service
LABEL org.opencontainers.image.title="HyperFleet bootstrap service" \
      org.opencontainers.image.source="https://github.com/hyperfleet-io/hyperfleet" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build-bootstrap-service /out/bootstrap-service /bootstrap-service
USER 65532:65532
EXPOSE 8443 8081
ENTRYPOINT ["/bootstrap-service"]

FROM ${RUNTIME_IMAGE} AS console
LABEL org.opencontainers.image.title="HyperFleet console" \
      org.opencontainers.image.source="https://github.com/hyperfleet-io/hyperfleet" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build-console /out/console /console
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/console"]

# Last, so a plain `docker build .` (make docker-build) produces the manager.
FROM ${RUNTIME_IMAGE} AS manager
LABEL org.opencontainers.image.title="HyperFleet manager" \
      org.opencontainers.image.source="https://github.com/hyperfleet-io/hyperfleet" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build-manager /out/manager /manager
USER 65532:65532
EXPOSE 8080 8081 9090
ENTRYPOINT ["/manager"]
