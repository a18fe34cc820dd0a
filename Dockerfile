# syntax=docker/dockerfile:1
# postfach's container image, as the Kubernetes manifests name it
# (deploy/kubernetes: postfach:0.1.0). Two stages: the release build of the
# `postfach` binary, then a runtime with no shell and no package manager
# (distroless, glibc and CA certificates only) that runs it as a non-root
# user. The console is compiled into the binary; the default configuration
# and the reference model are inside, a database directory the user owns.
#
#   docker build -t postfach:0.1.0 .
#   docker run --rm -p 7820:7820 -e POSTFACH_TOKEN=change-me postfach:0.1.0 \
#     run /etc/postfach/model/auftrag-ausfuehrung.bpmn --listen 0.0.0.0:7820 \
#     --insecure-plaintext

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin postfach \
    && mkdir -p /out/var/lib/postfach

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/postfach /usr/local/bin/postfach
COPY postfach.toml /etc/postfach/postfach.toml
COPY bpmn/auftrag-ausfuehrung.bpmn /etc/postfach/model/auftrag-ausfuehrung.bpmn
COPY --from=build --chown=65532:65532 /out/var/lib/postfach /var/lib/postfach
USER 65532:65532
WORKDIR /var/lib/postfach
ENV POSTFACH_DB=/var/lib/postfach/postfach.redb
EXPOSE 7820
ENTRYPOINT ["/usr/local/bin/postfach"]
CMD ["--help"]
