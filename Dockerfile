# syntax=docker/dockerfile:1
# The informant image: the `informant` binary on a distroless base, nothing else.
#
#   docker build -t informant:0.1.0 .
#   docker run --rm -i --read-only informant:0.1.0 validate --config /dev/stdin < config/samples/minimal.yaml
#
# It runs as the distroless non-root user (65532) and writes nothing to its filesystem, so it
# runs with a read-only root filesystem (the Helm chart mounts an emptyDir on /tmp all the same).

# The toolchain the test suite runs on (the crate's rust-version is the minimum); Debian 12
# (bookworm), the glibc the run stage's base has.
ARG RUST_IMAGE=rust:1.95-bookworm
# glibc, libgcc, CA certificates and a non-root user; no shell, no package manager.
ARG BASE_IMAGE=gcr.io/distroless/cc-debian12:nonroot

FROM ${RUST_IMAGE} AS build
WORKDIR /src
# Only what the binary is built from: the manifest, the lock file, the sources, the bench
# sources and the examples the manifest declares (cargo checks that declared targets exist),
# and the files the sources include (`include_str!`: the demo's hook). tests/cli/dockerfile.rs fails when a source
# includes a file outside src/ that is not copied here or is kept out by .dockerignore.
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY benches ./benches
COPY examples/configmap_secret.rs examples/cache_tree.rs examples/faults.rs examples/record_events.rs ./examples/
COPY examples/cronjob_controller.rs ./examples/
COPY examples/hooks/cronjob.py ./examples/hooks/cronjob.py
COPY docs/hooks-v1.schema.json ./docs/hooks-v1.schema.json
COPY README.md ./README.md
COPY docs/manager.md ./docs/manager.md
# The registry and target directories are BuildKit caches: a rebuild after a source change
# recompiles the crate, not its dependencies. Symbols are stripped (28 MB -> 21 MB on x86_64;
# panics still print their message and location, without a symbolized backtrace).
ENV CARGO_PROFILE_RELEASE_STRIP=symbols
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin informant \
    && install -D -m 0755 target/release/informant /out/informant

FROM ${BASE_IMAGE}
COPY --from=build /out/informant /informant
# distroless's nonroot user; numeric, so `runAsNonRoot` can verify it without /etc/passwd.
USER 65532:65532
# The manager's defaults: /metrics on 8080, /healthz and /readyz on 8081.
EXPOSE 8080 8081
# No init: informant is PID 1 and reaps the orphans its hooks leave itself (a child subreaper;
# docs/hooks.md, "Hook processes"), so that it does so in images built FROM this one too.
ENTRYPOINT ["/informant"]
CMD ["--help"]
