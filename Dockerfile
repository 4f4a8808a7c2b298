# Herald: a multi-stage image. The build stage runs `npm run build` (tsc, then esbuild bundles
# dist/main.js and dist/cli/herald.js), so it installs the dev dependencies; the runtime stage holds
# only production dependencies and dist/ (the bundles need neither tool), runs as a non-root
# user, and lets node be PID 1 (Herald handles SIGTERM/SIGINT itself and drains within
# HERALD_SHUTDOWN_MS).
# Every RUN and CMD here is exercised by test/deploy/dockerfile.test.ts in a clean directory.

FROM node:24-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
RUN npm ci --no-audit --no-fund --ignore-scripts
RUN npm run build

FROM node:24-slim AS runtime
# Inside a memory limit Node sizes V8's young generation from the limit, about 2 MB in 256 MiB,
# and every request pays for collections (3-4x the CPU). 16 MB semi-spaces keep reads and writes
# at their unlimited cost with a peak of ~150 MB (docs/operations.md, "Memory").
ENV NODE_ENV=production PORT=3000 HERALD_DATA_DIR=/data NODE_OPTIONS=--max-semi-space-size=16
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund --ignore-scripts && npm cache clean --force
COPY --from=build /app/dist ./dist
RUN mkdir -p /data && chown node:node /data
USER node
EXPOSE 3000
# node itself probes, so the image needs no curl.
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
CMD ["node", "dist/main.js"]
