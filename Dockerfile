# Sluice container: `docker build -t sluice .` then `docker run --rm -e KAFKA_BROKERS=host:9092 sluice serve`.
# Build stage: compile TypeScript and fetch the default model (Maven resolves its jar), then drop dev deps.
FROM node:20-bookworm AS build
RUN apt-get update \
  && apt-get install -y --no-install-recommends openjdk-17-jre-headless maven \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
# --ignore-scripts: `prepare` would build before the sources are copied; onnxruntime-node's CPU
# binaries ship inside its npm package, so no install script is needed.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY . .
RUN npm run build \
  && SLUICE_MODELS_DIR=/app/models node bin/sluice.js model fetch \
  && npm prune --omit=dev

# Runtime stage: Node only (no JDK); the model is baked in.
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production \
    SLUICE_MODELS_DIR=/app/models \
    SLUICE_OBSERVABILITY__METRICS_HOST=0.0.0.0
COPY --from=build /app/package.json ./
COPY --from=build /app/bin ./bin
COPY --from=build /app/dist ./dist
COPY --from=build /app/schemas ./schemas
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/models ./models
USER node
EXPOSE 9464
ENTRYPOINT ["node", "bin/sluice.js"]
CMD ["serve"]
