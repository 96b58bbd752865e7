# colocd: the co-location sidecar. Build: docker build -t colocd .
# go-nvml needs cgo at build time; at run time libnvidia-ml.so.1 comes from
# the host through the NVIDIA container toolkit (without it, gpu.backend
# auto falls back to a simulated GPU and says so).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=0.0.0-dev
RUN CGO_ENABLED=1 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/colocd ./cmd/colocd

FROM debian:bookworm-slim
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
ENTRYPOINT ["colocd"]
CMD ["serve", "--config", "/etc/colocd/colocd.yaml"]
