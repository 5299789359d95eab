# kproxy-doctor as a container image, to run it as a Kubernetes Job (with a ServiceAccount bound to
# deploy/rbac/kproxy-doctor-read.yaml; in a Pod the API client uses the ServiceAccount's token):
#   docker build -t kproxy-doctor .
#   docker run --rm kproxy-doctor svc web -n shop --snapshot /app/examples/broken-cluster
# The build stage installs the locked tools (no install scripts: the bundle uses no native module) and builds the
# bundle; the image holds what the npm package holds (the bundle needs no node_modules) on a distroless Node.js, as a
# non-root user. test/e2e/container-image.test.ts checks both stages' files and the entrypoint without Docker.
FROM node:20-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json ./
COPY scripts ./scripts
COPY src ./src
RUN npm run build

FROM gcr.io/distroless/nodejs20-debian12:nonroot
WORKDIR /app
COPY package.json ./
COPY bin ./bin
COPY examples ./examples
COPY --from=build /src/dist/bundle ./dist/bundle
ENTRYPOINT ["/nodejs/bin/node", "/app/bin/run.js"]
CMD ["--help"]
