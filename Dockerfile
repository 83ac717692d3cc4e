# ragscope in a container: `ragscope serve` on 0.0.0.0:3210 with API keys,
# the e5 model fetched at image build time (needs network then; or mount a
# directory holding e5-small-q4.bin over /usr/local/share/ragscope/models),
# the data directory and the embedding cache in the volume /var/lib/ragscope.
#
#   docker build -t ragscope .
#   docker run -d --name ragscope -p 3210:3210 -v ragscope-data:/var/lib/ragscope ragscope
#   docker logs ragscope        # the admin API key, printed once on first start
#
# Written for docs/operations.md#install; not built or run where it was
# written (no Docker daemon there).

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p ragscope \
    && strip target/release/ragscope \
    && target/release/ragscope --version

FROM debian:bookworm-slim
# No packages needed: the binary links only glibc and libgcc_s (both in
# the slim image; SQLite is bundled) and carries its own TLS roots.
RUN useradd --system --user-group --uid 10001 --home-dir /var/lib/ragscope \
        --shell /usr/sbin/nologin ragscope \
    && install -d -o ragscope -g ragscope -m 0700 /var/lib/ragscope
COPY --from=build /src/target/release/ragscope /usr/local/bin/ragscope
# The model, checked by sha256, readable by every user; the path is named
# so that the server refuses to start without the dense path's model
# rather than silently running without it.
RUN ragscope models fetch --dir /usr/local/share/ragscope/models
ENV RAGSCOPE_EMBEDDER__MODEL_PATH=/usr/local/share/ragscope/models/e5-small-q4.bin \
    RAGSCOPE_EMBEDDER__KIND=e5 \
    RAGSCOPE_DATA_DIR=/var/lib/ragscope/data \
    RAGSCOPE_EMBEDDER__CACHE_DIR=/var/lib/ragscope/cache \
    HOME=/var/lib/ragscope
USER ragscope
WORKDIR /var/lib/ragscope
VOLUME ["/var/lib/ragscope"]
EXPOSE 3210
# Beyond loopback the server needs API keys (--open is refused there); it
# speaks plain HTTP: put a TLS-terminating proxy in front. /healthz and
# /readyz answer for orchestrators (the image has no curl for a HEALTHCHECK).
ENTRYPOINT ["ragscope"]
CMD ["serve", "--addr", "0.0.0.0:3210"]
