# agentry: a release build in a Rust image, run as a non-root user in a slim image.

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock build.rs ./
COPY src ./src
COPY benches ./benches
COPY migrations ./migrations
COPY config ./config
RUN cargo build --release --locked --bin agentry

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /var/lib/agentry --shell /usr/sbin/nologin agentry \
    && mkdir -p /var/lib/agentry \
    && chown agentry:agentry /var/lib/agentry
COPY --from=build /src/target/release/agentry /usr/local/bin/agentry
# The configuration and the migrations (also embedded in the binary) ship with the image.
COPY config /etc/agentry
COPY migrations /usr/share/agentry/migrations
USER agentry
WORKDIR /var/lib/agentry
ENV AGENTRY_CONFIG=/etc/agentry/docker.toml
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD curl -fsS http://127.0.0.1:8080/readyz || exit 1
ENTRYPOINT ["agentry"]
CMD ["serve"]
