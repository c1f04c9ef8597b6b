# typed-eval's CLI and server. Not built by CI (these machines have no Docker
# engine); it follows the install steps of docs/scheduling.md: `npm pack`, then
# `npm install -g` of the tarball.
#
#   docker build -t typed-eval .
#   docker run --rm -v typed-eval-models:/models -v "$PWD:/state" typed-eval run data.jsonl --job support-triage
#   # serve needs an accounts file (/state/accounts.json by default): create one in a volume, once; the key prints once
#   docker run --rm -v typed-eval-state:/state typed-eval keys create --account dev
#   docker run --rm -p 8787:8787 -v typed-eval-models:/models -v typed-eval-state:/state typed-eval serve --host 0.0.0.0
#
# Keep tini as PID 1 when scheduling the image: it forwards SIGTERM to
# typed-eval and reaps zombies. Set args only (the ENTRYPOINT stays), or a
# command that starts with /usr/bin/tini -- and execs typed-eval
# (examples/schedulers/kubernetes.yaml); a command without it makes Node or a
# shell PID 1, and a shell does not pass SIGTERM on.
#
# The bundled jobs ship in the package: --job support-triage names one.
#
# Debian, not Alpine: llama.cpp's prebuilt binaries need glibc. Node 24: the line `make` uses (22 and 26 pass too).
FROM node:24-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm install --no-audit --no-fund
COPY . .
# prepack compiles dist/; the tarball holds compiled JavaScript, jobs and examples only.
RUN npm pack

FROM node:24-bookworm-slim
# tini as PID 1: signals reach the runner (SIGTERM stops it cleanly, exit 143) and zombies are reaped.
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/typed-eval-*.tgz /tmp/
# Production dependencies only.
RUN npm install -g --omit=dev --no-audit --no-fund /tmp/typed-eval-*.tgz \
 && rm /tmp/typed-eval-*.tgz \
 && npm cache clean --force
RUN useradd --create-home --uid 10001 typed-eval \
 && mkdir -p /models /state \
 && chown typed-eval:typed-eval /models /state
USER typed-eval
# Model weights survive the container; /state holds journals (resume) and outputs.
ENV TYPED_EVAL_MODELS_DIR=/models
VOLUME ["/models", "/state"]
WORKDIR /state
EXPOSE 8787
ENTRYPOINT ["/usr/bin/tini", "--", "typed-eval"]
CMD ["--help"]
