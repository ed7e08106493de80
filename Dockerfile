# Bolide image: the NameServer, the broker and the CLI as static binaries
# on a distroless base (no shell, no package manager), run as an
# unprivileged user. One image serves every role; the command picks it:
#
#   docker build -t bolide:dev --build-arg VERSION=$(git describe --always) .
#   docker run --rm bolide:dev bolide-broker --version
#
# docker-compose.yml runs a NameServer, a master and a slave from it.

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/bolide-mq/bolide/cmd/internal/daemon.Version=${VERSION}" \
      -o /out/ ./cmd/bolide-nameserver ./cmd/bolide-broker ./cmd/bolide \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/bolide-nameserver /out/bolide-broker /out/bolide /usr/local/bin/
# The store; a named volume mounted here starts out owned by the user.
COPY --from=build --chown=65532:65532 /out/data /var/lib/bolide
USER 65532:65532
WORKDIR /var/lib/bolide
VOLUME ["/var/lib/bolide"]
# 9876 NameServer, 10911 broker (10912 HA, 10913 admin with the defaults).
EXPOSE 9876 10911 10912 10913
CMD ["bolide-nameserver", "--listen", "0.0.0.0:9876", "--admin-listen", "0.0.0.0:9878", "--gossip", "off", "--log-format", "json"]
