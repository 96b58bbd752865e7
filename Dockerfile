# colocd: the co-location sidecar. Build: docker build -t colocd .
# go-nvml needs cgo at build time; at run time libnvidia-ml.so.1 comes from
# the host through the NVIDIA container toolkit (without it, gpu.backend
# auto falls back to a simulated GPU and says so).
# Both base images are pinned by digest (the multi-platform index, as
# docker-library/repo-info lists it): the tag says what it is, the digest is
# what is pulled. To move to a newer build of the same tag:
#   docker buildx imagetools inspect golang:1.26.8-bookworm   # Digest: sha256:...
# and a test (deploy/deploy_test.go) checks that every FROM stays pinned.
FROM golang:1.26.8-bookworm@sha256:f4191582e1522dfc5980a6bdc0309a756f9697f3e7d0f199c7e26fc82ab324fd AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=0.0.0-dev
RUN CGO_ENABLED=1 CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations" go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/colocd ./cmd/colocd

FROM debian:bookworm-slim@sha256:abd67ffcfa541b485a3dff59865ab629aa048a6c613e639d36e7456b0b229241
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /var/lib/colocd colocd \
 && mkdir -p /var/lib/colocd /etc/colocd \
 && chown colocd /var/lib/colocd
COPY --from=build /out/colocd /usr/local/bin/colocd
COPY configs/colocd.yaml /etc/colocd/colocd.yaml
USER colocd
EXPOSE 4222 9464
# Alive when /healthz answers; the image has no curl, so colocd asks itself.
# Point --url at telemetry.http when the config moves it.
HEALTHCHECK --interval=10s --timeout=3s --retries=3 \
  CMD ["colocd", "probe", "--url", "http://127.0.0.1:9464/healthz"]
ENTRYPOINT ["colocd"]
CMD ["serve", "--config", "/etc/colocd/colocd.yaml"]
