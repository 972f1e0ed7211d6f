# Builds the two images of toolhooks from one source tree:
#   docker build --target controller -t toolhooks/controller:dev .
#   docker build --target gateway    -t toolhooks/gateway:dev .
# Both binaries are static (CGO_ENABLED=0) and run as UID 65532 on a
# read-only root filesystem; the Helm chart and config/default pass only args.
# Override BASE_IMAGE to build from another registry, e.g. docker.io/library/golang:1.26
ARG BASE_IMAGE=golang:1.26
# The gateway's shell tool runs `/bin/sh -c`, so its base needs a shell and
# whatever commands your agents' allow-lists name (git, go, ...), and node for
# JavaScript plugins: extend it.
ARG GATEWAY_BASE_IMAGE=debian:13-slim

FROM ${BASE_IMAGE} AS builder
ARG TARGETOS
ARG TARGETARCH
WORKDIR /workspace
# Download modules in their own layer so source changes reuse it.
COPY go.mod go.sum ./
RUN go mod download
# Copy the Go source (.dockerignore keeps bin/ and friends out).
COPY . .
# GOARCH has no default so the binaries match the platform being built for.
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} go build -trimpath -o /out/manager ./cmd/main.go && \
    CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} go build -trimpath -o /out/gateway ./cmd/gateway && \
    CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} go build -trimpath -ldflags=-s -o /out/toolhooks-sandbox ./cmd/toolhooks-sandbox

# The gateway: /gateway, with a shell for the shell tool, non-root.
FROM ${GATEWAY_BASE_IMAGE} AS gateway
RUN groupadd --gid 65532 nonroot && \
    useradd --uid 65532 --gid 65532 --home-dir /home/nonroot --create-home --shell /usr/sbin/nologin nonroot && \
    mkdir -p /workspace && chown 65532:65532 /workspace
COPY --from=builder /out/gateway /gateway
# The supervisor of the programs tools start, found beside the gateway: it
# starts in a fraction of the gateway's time.
COPY --from=builder /out/toolhooks-sandbox /toolhooks-sandbox
USER 65532:65532
WORKDIR /workspace
ENTRYPOINT ["/gateway"]

# The controller: /manager on distroless, non-root. Last, so a plain
# `docker build .` builds the controller as before.
FROM gcr.io/distroless/static:nonroot AS controller
WORKDIR /
COPY --from=builder /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
